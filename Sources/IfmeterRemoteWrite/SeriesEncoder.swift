import IfmeterCore
import IfmeterOutput

/// Turns the series of an exposition, as they are visited (a
/// `SeriesSource`), into WriteRequest `timeseries` entries, keeping each
/// series' encoded labels from one push to the next: a series' name and
/// labels (the key: their bytes, each length-prefixed) are looked up, and
/// only a series not seen in the previous push is given the external
/// labels, relabeled (`write_relabel_configs`) and sorted. The output is
/// byte for byte what encoding every series afresh gives, and what parsing
/// the text exposition's lines gave before.
///
/// A series in the last push and not in this one has ended (an interface
/// forgotten, a probe, plan or tunnel gone): this push carries its stale
/// marker (Remote-Write 1.0: the NaN 0x7ff0000000000002), stamped with
/// this push's time, after its last sample.
package struct SeriesEncoder: Sendable, SeriesVisitor {
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

    /// The push being encoded: its entries, their count, and the key of
    /// the series being visited (its name, then each label's name and
    /// value, each as a varint length and its bytes).
    private var out = ProtobufWriter()
    private var count: UInt32 = 0
    private var key: [UInt8] = []
    /// The size of the last push's entries.
    private var lastBytes = 0

    package init(externalLabels: [(String, String)], relabel: [RelabelRule] = []) {
        self.externalLabels = externalLabels
        self.relabel = relabel
    }

    /// Prometheus' staleness marker: a NaN no arithmetic makes.
    package static let staleMarker = Double(bitPattern: 0x7ff0_0000_0000_0002)

    /// The entries of every series `visit` hands the encoder (as a
    /// `SeriesVisitor`: `source.visitSeries(&$0)`), stamped `timestampMs`,
    /// and how many.
    package mutating func encode(timestampMs: Int64, _ visit: (inout SeriesEncoder) -> Void) -> ([UInt8], UInt32) {
        pushes &+= 1
        out = ProtobufWriter()
        out.bytes.reserveCapacity(lastBytes + lastBytes / 8 + 4096)
        count = 0
        self.timestampMs = timestampMs
        visit(&self)
        var result = out
        out = ProtobufWriter()
        // Series in the last push and not in this one: their stale markers.
        count += appendStaleMarkers(to: &result, lastSeen: pushes &- 1, timestampMs: timestampMs)
        // Series gone for a push are forgotten, once they are half.
        if entries.count > 2 * Int(count) + 64 { forget(before: pushes) }
        lastBytes = result.bytes.count
        return (result.bytes, count)
    }

    /// The push's stamp, while it is visited.
    private var timestampMs: Int64 = 0

    package mutating func beginSeries(_ name: String, suffix: String) {
        key.removeAll(keepingCapacity: true)
        var name = name, suffix = suffix
        appendVarint(UInt64(name.utf8.count + suffix.utf8.count))
        name.withUTF8 { key.append(contentsOf: $0) }
        suffix.withUTF8 { key.append(contentsOf: $0) }
    }

    package mutating func label(_ name: String, _ value: String) {
        var name = name, value = value
        name.withUTF8 {
            appendVarint(UInt64($0.count))
            key.append(contentsOf: $0)
        }
        value.withUTF8 {
            appendVarint(UInt64($0.count))
            key.append(contentsOf: $0)
        }
    }

    package mutating func endSeries(_ value: SeriesValue) {
        let push = pushes
        let hash = FNV1a.hash(key)
        var found = Int(index[hash] ?? -1)
        while found >= 0 {
            let e = entries[found]
            if Int(e.keyLength) == key.count, arena[e.start..<e.start + key.count].elementsEqual(key) { break }
            found = Int(e.next)
        }
        if found < 0 {
            found = add(key: key, labels: encodeLabels(Self.labels(key)), hash: hash, push: push)
        }
        entries[found].push = push
        let e = entries[found]
        // Dropped by a relabel rule: seen, never sent.
        guard e.labelsLength >= 0 else { return }
        let from = e.start + Int(e.keyLength)
        arena.withUnsafeBufferPointer { a in
            RemoteWriteEncoding.appendTimeSeries(
                to: &out, labelFields: UnsafeBufferPointer(rebasing: a[from..<from + Int(e.labelsLength)]), value: value.double,
                timestampMs: timestampMs)
        }
        count += 1
    }

    private mutating func appendVarint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            key.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        key.append(UInt8(v))
    }

    /// A key's name and labels, `__name__` first, sorted by name (as
    /// parsing the series' text line gave them).
    static func labels(_ key: [UInt8]) -> [(String, String)] {
        var at = 0
        func string() -> String {
            var length = 0, shift = 0
            while at < key.count {
                let byte = key[at]
                at += 1
                length |= Int(byte & 0x7F) << shift
                if byte & 0x80 == 0 { break }
                shift += 7
            }
            defer { at += length }
            return String(decoding: key[at..<at + length], as: UTF8.self)
        }
        var labels = [("__name__", string())]
        while at < key.count {
            let name = string()
            labels.append((name, string()))
        }
        labels.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
        return labels
    }

    /// Stale markers for every series of the last push, stamped
    /// `timestampMs`: what a stopping serve sends, so that the receiver's
    /// instant queries end its series at once instead of 5 minutes later.
    package mutating func encodeEnd(timestampMs: Int64) -> ([UInt8], UInt32) {
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
    package var kept: Int { entries.count }

    /// The label fields of a series: its own labels and the external ones
    /// it does not have, relabeled, sorted by name; nil when a relabel rule
    /// drops it (or leaves it without a name).
    func encodeLabels(_ own: [(String, String)]) -> [UInt8]? {
        var labels = own
        // External labels never replace a series' own (as Prometheus's).
        for (name, value) in externalLabels where !labels.contains(where: { $0.0 == name }) { labels.append((name, value)) }
        if !relabel.isEmpty {
            guard let relabeled = RelabelRule.apply(relabel, to: labels), relabeled.contains(where: { $0.0 == "__name__" }) else { return nil }
            labels = relabeled
        }
        labels.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
        return RemoteWriteEncoding.labelFields(labels)
    }
}
