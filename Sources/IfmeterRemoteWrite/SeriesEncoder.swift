import IfmeterCore

/// Turns a text exposition into WriteRequest `timeseries` entries, keeping
/// each series' encoded labels from one push to the next: a series' line
/// up to its value (its name and labels, as the renderer writes them) is
/// looked up, and only a series not seen in the previous push is parsed
/// (`ExpositionSeries`), given the external labels, relabeled
/// (`write_relabel_configs`) and sorted. The output is byte for byte what
/// parsing every line gives.
///
/// A series in the last push and not in this one has ended (an interface
/// forgotten, a probe, plan or tunnel gone): this push carries its stale
/// marker (Remote-Write 1.0: the NaN 0x7ff0000000000002), stamped with
/// this push's time, after its last sample.
public struct SeriesEncoder: Sendable {
    /// A series: its key and then its TimeSeries label fields (tag 1,
    /// length, Label, in order) in `arena`; no allocation of its own.
    struct Entry: Sendable {
        var start: Int
        var keyLength: Int32
        var labelsLength: Int32
        /// The last push that had this series.
        var push: Int32
        /// The next entry with the same hash, or -1.
        var next: Int32
    }

    let externalLabels: [(String, String)]
    let relabel: [RelabelRule]
    private var entries: [Entry] = []
    private var arena: [UInt8] = []
    /// A hash of the key to its first entry.
    private var index: [UInt64: Int32] = [:]
    private var pushes: Int32 = 0
    /// The size of the last text encoded.
    public private(set) var lastTextBytes = 0

    public init(externalLabels: [(String, String)], relabel: [RelabelRule] = []) {
        self.externalLabels = externalLabels
        self.relabel = relabel
    }

    /// Prometheus' staleness marker: a NaN no arithmetic makes.
    public static let staleMarker = Double(bitPattern: 0x7ff0_0000_0000_0002)

    /// The entries of every sample line of `text`, stamped `timestampMs`,
    /// and how many.
    public mutating func encode(_ text: [UInt8], timestampMs: Int64) -> ([UInt8], UInt32) {
        var out = ProtobufWriter()
        out.bytes.reserveCapacity(text.count + text.count / 4)
        pushes &+= 1
        lastTextBytes = text.count
        let push = pushes
        var count: UInt32 = 0
        text.withUnsafeBufferPointer { buffer in
            let n = buffer.count
            var start = 0
            while start < n {
                var end = start
                while end < n && buffer[end] != UInt8(ascii: "\n") { end += 1 }
                defer { start = end + 1 }
                guard end > start, buffer[start] != UInt8(ascii: "#") else { continue }
                // The key: the name, and the labels to their closing brace
                // (spaces between labels, and a quoted value holding spaces
                // or braces, are part of it).
                var keyEnd = start
                var quoted = false
                var braces = false
                scan: while keyEnd < end {
                    let byte = buffer[keyEnd]
                    if quoted {
                        if byte == UInt8(ascii: "\\") {
                            keyEnd += 1
                        } else if byte == UInt8(ascii: "\"") {
                            quoted = false
                        }
                    } else if byte == UInt8(ascii: "\"") {
                        quoted = true
                    } else if byte == UInt8(ascii: "{") {
                        braces = true
                    } else if byte == UInt8(ascii: " ") && !braces {
                        break scan
                    } else if byte == UInt8(ascii: "}") {
                        keyEnd += 1
                        break scan
                    }
                    keyEnd += 1
                }
                var valueStart = min(keyEnd, end)
                while valueStart < end && buffer[valueStart] == UInt8(ascii: " ") { valueStart += 1 }
                var valueEnd = valueStart
                while valueEnd < end && buffer[valueEnd] != UInt8(ascii: " ") { valueEnd += 1 }
                let key = UnsafeBufferPointer(rebasing: buffer[start..<min(keyEnd, end)])
                guard !key.isEmpty, let value = Self.value(UnsafeBufferPointer(rebasing: buffer[valueStart..<valueEnd])) else { continue }
                let hash = FNV1a.hash(key)
                var found = Int(index[hash] ?? -1)
                while found >= 0 {
                    let e = entries[found]
                    if Int(e.keyLength) == key.count, arena[e.start..<e.start + key.count].elementsEqual(key) { break }
                    found = Int(e.next)
                }
                if found < 0 {
                    guard let series = ExpositionSeries.parseLine(text[start..<end]) else { continue }
                    found = add(key: key, labels: encodeLabels(series.labels), hash: hash, push: push)
                }
                entries[found].push = push
                let e = entries[found]
                // Dropped by a relabel rule: seen, never sent.
                guard e.labelsLength >= 0 else { continue }
                let from = e.start + Int(e.keyLength)
                arena.withUnsafeBufferPointer { a in
                    RemoteWriteEncoding.appendTimeSeries(
                        to: &out, labelFields: UnsafeBufferPointer(rebasing: a[from..<from + Int(e.labelsLength)]), value: value,
                        timestampMs: timestampMs)
                }
                count += 1
            }
        }
        // Series in the last push and not in this one: their stale markers.
        count += appendStaleMarkers(to: &out, lastSeen: push &- 1, timestampMs: timestampMs)
        // Series gone for a push are forgotten, once they are half.
        if entries.count > 2 * Int(count) + 64 { forget(before: push) }
        return (out.bytes, count)
    }

    /// Stale markers for every series of the last push, stamped
    /// `timestampMs`: what a stopping serve sends, so that the receiver's
    /// instant queries end its series at once instead of 5 minutes later.
    public mutating func encodeEnd(timestampMs: Int64) -> ([UInt8], UInt32) {
        var out = ProtobufWriter()
        let count = appendStaleMarkers(to: &out, lastSeen: pushes, timestampMs: timestampMs)
        pushes &+= 1
        return (out.bytes, count)
    }

    private func appendStaleMarkers(to out: inout ProtobufWriter, lastSeen: Int32, timestampMs: Int64) -> UInt32 {
        var count: UInt32 = 0
        arena.withUnsafeBufferPointer { a in
            for e in entries where e.push == lastSeen && e.labelsLength >= 0 {
                let from = e.start + Int(e.keyLength)
                RemoteWriteEncoding.appendTimeSeries(
                    to: &out, labelFields: UnsafeBufferPointer(rebasing: a[from..<from + Int(e.labelsLength)]), value: Self.staleMarker,
                    timestampMs: timestampMs)
                count += 1
            }
        }
        return count
    }

    /// `labels` nil: a series a relabel rule drops (kept, so it is not
    /// parsed again, and never sent).
    private mutating func add(key: some Collection<UInt8>, labels: [UInt8]?, hash: UInt64, push: Int32) -> Int {
        let entry = Entry(
            start: arena.count, keyLength: Int32(key.count), labelsLength: labels.map { Int32($0.count) } ?? -1, push: push,
            next: index[hash] ?? -1)
        arena.append(contentsOf: key)
        if let labels { arena.append(contentsOf: labels) }
        entries.append(entry)
        index[hash] = Int32(entries.count - 1)
        return entries.count - 1
    }

    /// Keeps only the entries seen in push `push` or later.
    private mutating func forget(before push: Int32) {
        let old = entries, oldArena = arena
        entries.removeAll(keepingCapacity: true)
        arena.removeAll(keepingCapacity: true)
        index.removeAll(keepingCapacity: true)
        for e in old where e.push >= push {
            let key = oldArena[e.start..<e.start + Int(e.keyLength)]
            let hash = FNV1a.hash(key)
            let labels = e.labelsLength < 0 ? nil : Array(oldArena[e.start + Int(e.keyLength)..<e.start + Int(e.keyLength) + Int(e.labelsLength)])
            _ = add(key: key, labels: labels, hash: hash, push: e.push)
        }
    }

    /// How many series' labels are kept (for tests).
    public var kept: Int { entries.count }

    /// The label fields of a series: its own labels and the external ones
    /// it does not have, relabeled, sorted by name; nil when a relabel rule
    /// drops it (or leaves it without a name).
    func encodeLabels(_ own: [ExpositionSeries.Label]) -> [UInt8]? {
        var labels = own.map { ($0.name, $0.value) }
        // External labels never replace a series' own (as Prometheus's).
        for (name, value) in externalLabels where !labels.contains(where: { $0.0 == name }) { labels.append((name, value)) }
        if !relabel.isEmpty {
            guard let relabeled = RelabelRule.apply(relabel, to: labels), relabeled.contains(where: { $0.0 == "__name__" }) else { return nil }
            labels = relabeled
        }
        labels.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
        return RemoteWriteEncoding.labelFields(labels)
    }

    /// A sample value: digits read directly (counters and gauges are mostly
    /// whole numbers), anything else as `ExpositionSeries` reads it.
    static func value(_ text: UnsafeBufferPointer<UInt8>) -> Double? {
        guard !text.isEmpty else { return nil }
        if text.count <= 18, text.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            var n: UInt64 = 0
            for byte in text { n = n * 10 + UInt64(byte - UInt8(ascii: "0")) }
            return Double(n)
        }
        return ExpositionSeries.parseValue(String(decoding: text, as: UTF8.self))
    }
}
