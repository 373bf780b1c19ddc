/// The counters ifmeter reads from an interface. The first four are required
/// everywhere (trace v1); the others are optional extras that follow the same
/// delta rules.
public enum CounterKey: Int, CaseIterable, Sendable, Hashable {
    case rxBytes, txBytes, rxPackets, txPackets
    case rxErrors, txErrors, rxDropped, txDropped

    /// The four counters every sample and event must carry.
    public static let required: [CounterKey] = [.rxBytes, .txBytes, .rxPackets, .txPackets]
    /// Counters a source may add.
    public static let extras: [CounterKey] = [.rxErrors, .txErrors, .rxDropped, .txDropped]

    /// The key used in traces and JSON reports (`rx_bytes`, ...).
    public var jsonKey: String {
        switch self {
        case .rxBytes: "rx_bytes"
        case .txBytes: "tx_bytes"
        case .rxPackets: "rx_packets"
        case .txPackets: "tx_packets"
        case .rxErrors: "rx_errors"
        case .txErrors: "tx_errors"
        case .rxDropped: "rx_dropped"
        case .txDropped: "tx_dropped"
        }
    }

    /// Byte counters are bounded by the byte-rate ceiling; every other counter
    /// counts packets and is bounded by a fortieth of it (trace v1, rule 5).
    public var countsBytes: Bool { self == .rxBytes || self == .txBytes }

    public init?(jsonKey: String) {
        guard let key = CounterKey.allCases.first(where: { $0.jsonKey == jsonKey }) else { return nil }
        self = key
    }
}

/// A set of unsigned 64-bit counters, some of which may be absent.
/// Stored inline (no heap allocation), because samplers build thousands of
/// these per sample.
public struct Counters: Sendable, Hashable {
    @usableFromInline var v0: UInt64 = 0, v1: UInt64 = 0, v2: UInt64 = 0, v3: UInt64 = 0
    @usableFromInline var v4: UInt64 = 0, v5: UInt64 = 0, v6: UInt64 = 0, v7: UInt64 = 0
    @usableFromInline var present: UInt8 = 0

    /// No counter present.
    public init() {}

    /// The four required counters, and optionally the extras.
    public init(
        rxBytes: UInt64, txBytes: UInt64, rxPackets: UInt64, txPackets: UInt64,
        rxErrors: UInt64? = nil, txErrors: UInt64? = nil,
        rxDropped: UInt64? = nil, txDropped: UInt64? = nil
    ) {
        v0 = rxBytes; v1 = txBytes; v2 = rxPackets; v3 = txPackets
        present = 0b1111
        self[.rxErrors] = rxErrors
        self[.txErrors] = txErrors
        self[.rxDropped] = rxDropped
        self[.txDropped] = txDropped
    }

    /// All eight counters present, in `CounterKey` order; the fastest way to
    /// build a full set (samplers build thousands per sample).
    @inlinable
    public init(
        all rxBytes: UInt64, _ txBytes: UInt64, _ rxPackets: UInt64, _ txPackets: UInt64,
        _ rxErrors: UInt64, _ txErrors: UInt64, _ rxDropped: UInt64, _ txDropped: UInt64
    ) {
        v0 = rxBytes; v1 = txBytes; v2 = rxPackets; v3 = txPackets
        v4 = rxErrors; v5 = txErrors; v6 = rxDropped; v7 = txDropped
        present = 0xFF
    }

    /// All four required counters at zero.
    public static let zero = Counters(rxBytes: 0, txBytes: 0, rxPackets: 0, txPackets: 0)

    public subscript(key: CounterKey) -> UInt64? {
        get { present & (1 << UInt8(key.rawValue)) != 0 ? value(key) : nil }
        set {
            let bit: UInt8 = 1 << UInt8(key.rawValue)
            if let newValue {
                setValue(newValue, key)
                present |= bit
            } else {
                setValue(0, key)
                present &= ~bit
            }
        }
    }

    /// The value, or zero when absent.
    @inline(__always)
    public func value(_ key: CounterKey) -> UInt64 {
        switch key {
        case .rxBytes: v0
        case .txBytes: v1
        case .rxPackets: v2
        case .txPackets: v3
        case .rxErrors: v4
        case .txErrors: v5
        case .rxDropped: v6
        case .txDropped: v7
        }
    }

    @inline(__always)
    private mutating func setValue(_ value: UInt64, _ key: CounterKey) {
        switch key {
        case .rxBytes: v0 = value
        case .txBytes: v1 = value
        case .rxPackets: v2 = value
        case .txPackets: v3 = value
        case .rxErrors: v4 = value
        case .txErrors: v5 = value
        case .rxDropped: v6 = value
        case .txDropped: v7 = value
        }
    }

    /// The keys present, in `CounterKey` order.
    public var keys: [CounterKey] { CounterKey.allCases.filter { self[$0] != nil } }

    public var hasRequired: Bool { CounterKey.required.allSatisfy { self[$0] != nil } }

    /// Adds `other` into `self`, key by key, saturating at 2^64-1. A key present
    /// in either operand is present in the result.
    public mutating func add(_ other: Counters) {
        _ = addSaturating(other)
    }

    /// `add`, and whether any counter stopped at 2^64-1 (its total is then
    /// a lower bound: trace v1.1).
    @discardableResult
    public mutating func addSaturating(_ other: Counters) -> Bool {
        var saturated = false
        // Over all keys with a presence test, not `keys`: no array per call.
        for key in CounterKey.allCases where other.has(key) {
            let (sum, overflow) = value(key).addingReportingOverflow(other.value(key))
            self[key] = overflow ? UInt64.max : sum
            if overflow { saturated = true }
        }
        return saturated
    }

    /// Whether `key` is present.
    @inline(__always)
    public func has(_ key: CounterKey) -> Bool { present & (1 << UInt8(key.rawValue)) != 0 }

    public var rxBytes: UInt64 { value(.rxBytes) }
    public var txBytes: UInt64 { value(.txBytes) }
    public var rxPackets: UInt64 { value(.rxPackets) }
    public var txPackets: UInt64 { value(.txPackets) }
}

/// How many bits a source's counters have. 32-bit counters wrap at 2^32.
public enum CounterWidth: Int, Sendable, Hashable {
    case bits32 = 32
    case bits64 = 64

    /// 2^width as a double; 2^64 for 64-bit counters.
    var modulus: Double { self == .bits32 ? 4_294_967_296 : 18_446_744_073_709_551_616 }
}

/// A set of counter keys, as a bit mask: which counters a deletion's final
/// reading under-reports (trace v1.1 `lower_bound`).
public struct CounterKeySet: Sendable, Hashable, Sequence, ExpressibleByArrayLiteral {
    public private(set) var bits: UInt8

    public init() { bits = 0 }

    public init(arrayLiteral keys: CounterKey...) {
        bits = 0
        for key in keys { insert(key) }
    }

    public init(_ keys: some Sequence<CounterKey>) {
        bits = 0
        for key in keys { insert(key) }
    }

    public mutating func insert(_ key: CounterKey) { bits |= 1 << UInt8(key.rawValue) }
    public mutating func remove(_ key: CounterKey) { bits &= ~(1 << UInt8(key.rawValue)) }
    public func contains(_ key: CounterKey) -> Bool { bits & (1 << UInt8(key.rawValue)) != 0 }
    public var isEmpty: Bool { bits == 0 }

    public func makeIterator() -> IndexingIterator<[CounterKey]> {
        CounterKey.allCases.filter(contains).makeIterator()
    }
}
