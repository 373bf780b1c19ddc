/// What a series of readings is keyed by: the namespace and the name
/// (trace v1.1). Names are compared and ordered as exact sequences of
/// Unicode code points, with no normalization: `"tun\u{e9}"` and
/// `"tune\u{301}"` are two interfaces. (Swift's `==` on strings is
/// canonical equivalence, which would merge them.)
public struct SeriesKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Empty for the recorder's own namespace.
    public var netns: String
    public var name: String

    public init(netns: String = "", name: String) {
        self.netns = netns
        self.name = name
    }

    public static func == (a: SeriesKey, b: SeriesKey) -> Bool {
        ExactText.equal(a.name, b.name) && ExactText.equal(a.netns, b.netns)
    }

    public func hash(into hasher: inout Hasher) {
        ExactText.hash(name, into: &hasher)
        ExactText.hash(netns, into: &hasher)
    }

    /// The own namespace first, then by namespace, then by name; code point
    /// order (which is UTF-8 byte order).
    public static func < (a: SeriesKey, b: SeriesKey) -> Bool {
        if !ExactText.equal(a.netns, b.netns) { return ExactText.less(a.netns, b.netns) }
        return ExactText.less(a.name, b.name)
    }

    /// `NAME`, or `NS/NAME` for another namespace's interface.
    public var description: String { netns.isEmpty ? name : netns + "/" + name }
}

/// Text compared as bytes: code point equality and order, no normalization.
public enum ExactText {
    @inline(__always)
    public static func equal(_ a: String, _ b: String) -> Bool {
        // The same representation is the same text: a small string holds
        // its bytes in these 16 bytes, a large one its storage, which does
        // not change while shared. Samplers hand the same name over and
        // over, so this is the common case.
        if unsafeBitCast(a, to: (UInt64, UInt64).self) == unsafeBitCast(b, to: (UInt64, UInt64).self) { return true }
        guard a.utf8.count == b.utf8.count else { return false }
        let compared: Bool?? = a.utf8.withContiguousStorageIfAvailable { x in
            b.utf8.withContiguousStorageIfAvailable { y in x.elementsEqual(y) }
        }
        if let compared, let compared { return compared }
        return a.utf8.elementsEqual(b.utf8)
    }

    @inline(__always)
    public static func less(_ a: String, _ b: String) -> Bool {
        a.utf8.lexicographicallyPrecedes(b.utf8)
    }

    @inline(__always)
    public static func hash(_ s: String, into hasher: inout Hasher) {
        hasher.combine(s.utf8.count)
        let done: Void? = s.utf8.withContiguousStorageIfAvailable { hasher.combine(bytes: UnsafeRawBufferPointer($0)) }
        if done == nil {
            for byte in s.utf8 { hasher.combine(byte) }
        }
    }
}

/// A value that names its series: the totals views keep such values in key
/// order and find them by their own keys, with no array of keys beside.
public protocol SeriesKeyed {
    var key: SeriesKey { get }
}
