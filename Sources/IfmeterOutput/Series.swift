import IfmeterCore
import IfmeterModel

/// What a family's samples are, as the exposition types them.
package enum SeriesKind: Sendable, Hashable {
    case counter, gauge, info

    var text: String {
        switch self {
        case .counter: "counter"
        case .gauge: "gauge"
        case .info: "info"
        }
    }
}

/// A sample's value as the exposition has it: counters and most gauges are
/// whole numbers (written as digits), the rest doubles (written as Swift's
/// shortest form that reads back to the same double, `NaN`, `+Inf`, `-Inf`).
package enum SeriesValue: Sendable, Hashable {
    case unsigned(UInt64)
    case signed(Int64)
    case double(Double)

    /// The value as remote write sends it: what parsing its text gives
    /// (every NaN reads back as the one `Double.nan`).
    @inline(__always)
    package var double: Double {
        switch self {
        case .unsigned(let v): Double(v)
        case .signed(let v): Double(v)
        case .double(let v): v.isNaN ? .nan : v
        }
    }

    /// A double as the exposition writes it.
    static func text(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value < 0 ? "-Inf" : "+Inf" }
        return value.description
    }
}

/// Takes an exposition's series in order, as its renderers walk them
/// (`ExpositionInput.visitSeries`): each family's metadata, then each
/// sample as a series, one call for its name, one per label (in the order
/// the exposition writes them: by name) and one for its value.
///
/// The text and OpenMetrics renderers are visitors that write the format;
/// remote write's encoder is one that encodes the series. Label values are
/// as the exposition shows them: a control or invisible character in an
/// interface name is already the text the outputs show (`\x1b`); the
/// format's own escapes (backslash, quote, newline) are the writer's.
package protocol SeriesVisitor {
    /// Whether OpenMetrics' `_created` series are visited (the text format
    /// and remote write have none).
    var visitsCreated: Bool { get }
    /// A family's metadata; `name` is the family without `_total` (or
    /// `_info`), `unit` OpenMetrics' unit.
    mutating func family(_ name: String, _ kind: SeriesKind, unit: String?, help: String)
    /// A series begins: its metric name is `name` followed by `suffix`.
    mutating func beginSeries(_ name: String, suffix: String)
    /// One of its labels.
    mutating func label(_ name: String, _ value: String)
    /// Its value: the series is whole.
    mutating func endSeries(_ value: SeriesValue)
}

extension SeriesVisitor {
    package var visitsCreated: Bool { false }
    package mutating func family(_ name: String, _ kind: SeriesKind, unit: String?, help: String) {}
}

/// Where remote write takes its series from: the series a text scrape
/// gets (`visitSeries`, under whatever lock keeps them whole), and a place
/// to show remote write's own status among them.
package protocol SeriesSource: Sendable {
    /// Visits the latest series, in the order the text exposition has them,
    /// leaving out the series of each interface `keeping` refuses (remote
    /// write's interfaces gone since their final value was pushed).
    func visitSeries(_ visitor: inout some SeriesVisitor, keeping: (ExpositionRow) -> Bool)
    /// Sets what the exposition shows of the remote write receivers.
    func setRemoteWrite(_ statuses: [RemoteWriteStatus])
}

extension SeriesSource {
    /// Every series, in the text exposition's order.
    package func visitSeries(_ visitor: inout some SeriesVisitor) { visitSeries(&visitor, keeping: { _ in true }) }
}

extension ExpositionInput {
    /// Visits every series of the text exposition (no `_created`, unless
    /// the visitor asks for them), in its order, but those of the
    /// interfaces `keeping` refuses.
    package func visitSeries(_ visitor: inout some SeriesVisitor, keeping: (ExpositionRow) -> Bool = { _ in true }) {
        var writer = ExpositionWriter(visitor: consume visitor)
        // `keeping` is asked once per row: it may remember what it said.
        let kept = interfaces.filter(keeping)
        if kept.count == interfaces.count {
            writer.write(self)
        } else {
            var input = self
            input.interfaces = kept
            writer.write(input)
        }
        visitor = writer.visitor
    }
}

/// A series, whole: what a `SeriesCollector` keeps (for tests and small
/// outputs; remote write encodes as it visits).
package struct CollectedSeries: Sendable, Hashable {
    package struct Label: Sendable, Hashable {
        package var name: String
        package var value: String
        package init(_ name: String, _ value: String) {
            self.name = name
            self.value = value
        }
    }

    package var name: String
    /// In the exposition's order.
    package var labels: [Label]
    package var value: SeriesValue

    package init(name: String, labels: [Label], value: SeriesValue) {
        self.name = name
        self.labels = labels
        self.value = value
    }
}

/// Keeps every series visited, in order.
package struct SeriesCollector: SeriesVisitor {
    package private(set) var series: [CollectedSeries] = []
    private var current = CollectedSeries(name: "", labels: [], value: .unsigned(0))

    package init() {}

    package mutating func beginSeries(_ name: String, suffix: String) {
        current = CollectedSeries(name: name + suffix, labels: [], value: .unsigned(0))
    }

    package mutating func label(_ name: String, _ value: String) {
        current.labels.append(CollectedSeries.Label(name, value))
    }

    package mutating func endSeries(_ value: SeriesValue) {
        current.value = value
        series.append(current)
    }
}
