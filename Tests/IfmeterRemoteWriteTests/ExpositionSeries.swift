import IfmeterOutput
import IfmeterRemoteWrite

/// The series of a Prometheus text exposition (0.0.4), as remote write
/// sends them: the same names and labels a scrape gets, `__name__` among
/// the labels, sorted by name. What remote write read before it took typed
/// series (issue 32): now the tests' reference, that the series visited
/// are those of the text.
public struct ExpositionSeries: Sendable, Equatable {
    public var labels: [Label]
    public var value: Double

    public struct Label: Sendable, Equatable {
        public var name: String
        public var value: String
        public init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(labels: [Label], value: Double) {
        self.labels = labels
        self.value = value
    }

    /// Every sample line of `text`; comments and lines it cannot read are
    /// skipped (ifmeter's renderer writes none of the latter).
    public static func parse(_ text: [UInt8]) -> [ExpositionSeries] {
        var result: [ExpositionSeries] = []
        var start = 0
        while start < text.count {
            var end = start
            while end < text.count && text[end] != UInt8(ascii: "\n") { end += 1 }
            if end > start && text[start] != UInt8(ascii: "#"), let series = parseLine(text[start..<end]) {
                result.append(series)
            }
            start = end + 1
        }
        return result
    }

    static func parseLine(_ line: ArraySlice<UInt8>) -> ExpositionSeries? {
        var i = line.startIndex
        let end = line.endIndex
        while i < end && line[i] != UInt8(ascii: "{") && line[i] != UInt8(ascii: " ") { i += 1 }
        let name = String(decoding: line[line.startIndex..<i], as: UTF8.self)
        guard !name.isEmpty else { return nil }
        var labels = [Label("__name__", name)]
        if i < end && line[i] == UInt8(ascii: "{") {
            i += 1
            while i < end && line[i] != UInt8(ascii: "}") {
                if line[i] == UInt8(ascii: ",") || line[i] == UInt8(ascii: " ") {
                    i += 1
                    continue
                }
                let nameStart = i
                while i < end && line[i] != UInt8(ascii: "=") { i += 1 }
                guard i + 1 < end, line[i + 1] == UInt8(ascii: "\"") else { return nil }
                let labelName = String(decoding: line[nameStart..<i], as: UTF8.self)
                i += 2
                var value: [UInt8] = []
                while i < end && line[i] != UInt8(ascii: "\"") {
                    if line[i] == UInt8(ascii: "\\"), i + 1 < end {
                        i += 1
                        value.append(line[i] == UInt8(ascii: "n") ? UInt8(ascii: "\n") : line[i])
                    } else {
                        value.append(line[i])
                    }
                    i += 1
                }
                guard i < end else { return nil }
                i += 1
                labels.append(Label(labelName, String(decoding: value, as: UTF8.self)))
            }
            guard i < end else { return nil }
            i += 1
        }
        while i < end && line[i] == UInt8(ascii: " ") { i += 1 }
        var valueEnd = i
        while valueEnd < end && line[valueEnd] != UInt8(ascii: " ") { valueEnd += 1 }
        guard let value = parseValue(String(decoding: line[i..<valueEnd], as: UTF8.self)) else { return nil }
        labels.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        return ExpositionSeries(labels: labels, value: value)
    }

    static func parseValue(_ text: String) -> Double? {
        switch text {
        case "+Inf", "Inf": return .infinity
        case "-Inf": return -.infinity
        case "NaN": return .nan
        default: return Double(text)
        }
    }
}

extension ExpositionSeries {
    /// This series to a visitor, as an exposition would hand it.
    func visit(_ visitor: inout some SeriesVisitor) {
        visitor.beginSeries(labels.first { $0.name == "__name__" }?.value ?? "", suffix: "")
        for label in labels where label.name != "__name__" { visitor.label(label.name, label.value) }
        visitor.endSeries(.double(value))
    }
}

extension SeriesEncoder {
    /// The series of a text exposition's lines, encoded (the encoder's tests
    /// write their series as text).
    mutating func encode(_ text: [UInt8], timestampMs: Int64) -> ([UInt8], UInt32) {
        let series = ExpositionSeries.parse(text)
        return encode(timestampMs: timestampMs) { encoder in
            for s in series { s.visit(&encoder) }
        }
    }
}
