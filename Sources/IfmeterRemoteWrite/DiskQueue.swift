import IfmeterCore
import IfmeterSystem
import Synchronization

/// Samples waiting to be sent, on disk, oldest first (docs/metrics.md,
/// "Remote write"; what it does against damage and other users:
/// docs/hardening.md, "The remote write queue").
///
/// A folder of segments, `NNNNNNNNNNNNNNNNNNNN.seg` (20 digits), each a
/// 32-byte header (magic `IFQS`, version, its own sequence number, the
/// queue's identity, CRC-32) and a run of records appended and
/// fdatasync()ed one at a time. A record is a 28-byte header (magic `IFQ3`,
/// payload length, sample count, the index of its first sample, a CRC-32
/// of those and one of the payload; little-endian) and its payload: for
/// remote write, one push's WriteRequest `timeseries` entries as a snappy
/// block (the queue itself does not look inside). Sample indices run on
/// across records and segments; `head` holds the next one, so a record
/// lost anywhere (a cut, a flipped bit, a segment gone) is a gap between
/// indices: counted, never silent.
///
/// `ack` (written atomically) names the segment, offset and sample index of
/// the first record not yet sent and, while a request is in flight, the
/// segment and end of that request: a batch posted once is posted again
/// with the same bounds (after a failed try or a restart), so a copy the
/// receiver already has is never joined to newer records it would refuse
/// with it.
///
/// Opening reads every segment in bounded pieces: a damaged record is
/// skipped (its neighbours are found again by their magic and CRCs), the
/// segment is renamed `NNN.damaged` and read the same way until what is
/// left in it is sent, then set aside as `NNN.damaged.corrupt-TIME`.
/// Anything that is not a segment this queue wrote (another user's file, a
/// FIFO, a link, a name out of range, another queue's header) is set aside
/// without being read, as `NAME.corrupt-TIME`, and never posted.
///
/// Bounded: past `maxBytes` of unsent records the oldest go (whole segments
/// while there are several), counted in `droppedFull`.
package final class DiskQueue: Sendable {
    struct Record: Sendable {
        var offset: Int64
        var length: Int64
        var samples: UInt64
        var index: UInt64
    }

    struct Segment: Sendable {
        var sequence: UInt64
        /// Its file's name: `NNN.seg`, or `NNN.damaged` once damage was found.
        var name: String
        var size: Int64
        /// The records not yet sent.
        var records: [Record]
        var damaged: Bool { name.hasSuffix(DiskQueue.damagedSuffix) }
    }

    struct State: Sendable {
        var segments: [Segment] = []
        var ackSequence: UInt64 = 1
        var ackOffset: Int64 = 0
        /// The index of the first sample not yet sent (nor dropped).
        var ackIndex: UInt64 = 0
        /// The index the next record's first sample gets.
        var nextIndex: UInt64 = 0
        /// Samples below this index that are missing were counted lost
        /// already (at an earlier start): not counted again.
        var lossCountedThrough: UInt64 = 0
        /// `ack` is on disk: the first record queued writes one, so that a
        /// queue of records without one is known to have lost it.
        var ackOnDisk = false
        var active: OwnFile?
        var head: OwnFile?
        var droppedFull: UInt64 = 0
        var droppedCorrupt: UInt64 = 0
        /// The segment and end of the batch posted and not yet acknowledged.
        var inFlight: (sequence: UInt64, end: Int64)?
        /// Records up to here may have been posted already (the `ack` that
        /// would say was damaged): a refused copy is a duplicate.
        var maybeSentThrough: (sequence: UInt64, end: Int64)?

        /// Whether segment `sequence` still has unsent records before `end`.
        func holdsUnsent(_ sequence: UInt64, before end: Int64) -> Bool {
            segments.contains { $0.sequence == sequence && $0.records.first.map { $0.offset < end } == true }
        }
    }

    /// Where a record ends: its segment and the offset after it.
    package struct Position: Sendable, Equatable {
        package let sequence: UInt64
        package let end: Int64
    }

    /// Consecutive records of one segment.
    package struct Batch: Sendable {
        /// Each record's payload, oldest first.
        package var payloads: [[UInt8]]
        /// The payloads joined.
        package var payload: [UInt8] { Array(payloads.joined()) }
        package var samples: UInt64
        /// Posted before (a failed try, a kill before its `ack`, or an `ack`
        /// found damaged): the receiver may have it already.
        package var resent: Bool
        let sequence: UInt64
        let end: Int64
    }

    package static let segmentHeaderBytes = 32
    package static let headerBytes = 28
    static let segmentMagic: [UInt8] = Array("IFQS".utf8)
    static let magic: [UInt8] = Array("IFQ3".utf8)
    static let headMagic: [UInt8] = Array("IFQH".utf8)
    static let version: UInt32 = 3
    /// Sequence numbers stay below this: one more is always a valid one,
    /// whatever name a file in the folder has.
    static let sequenceLimit: UInt64 = 1 << 62
    static let segmentSuffix = ".seg"
    static let damagedSuffix = ".damaged"
    static let asideMark = ".corrupt-"

    package let folder: String
    package let maxBytes: Int64
    /// The queue's identity (a hash of its receiver's URL): a segment of
    /// another queue, copied or moved here, is not posted to this receiver.
    package let identity: UInt64
    let segmentBytes: Int64
    /// What opening found and did (damage, files set aside, samples lost),
    /// one line each, for the caller's log.
    package let openingNotes: [String]
    private let state = Mutex(State())
    private let clock: @Sendable () -> Double

    /// Opens (creating) the queue in `folder`, keeping every whole record.
    /// The folder must be one no other user controls (`OwnFolder`); one
    /// that is not is refused, never adopted.
    package init(folder: String, maxBytes: Int64, identity: UInt64 = 0, wallClock: @escaping @Sendable () -> Double = { wallClock() })
        throws(SystemError)
    {
        self.folder = folder
        self.maxBytes = maxBytes
        self.identity = identity
        self.clock = wallClock
        segmentBytes = max(16 * 1024, min(4 * 1024 * 1024, maxBytes / 16))
        try OwnFolder.make(folder)
        AtomicFile.removeLeftovers(of: folder + "/ack")
        var opening = DiskQueueOpening(folder: folder, identity: identity, largestSegment: Self.largestSegment(maxBytes), now: wallClock())
        var s = try opening.open()
        s.ackOnDisk = pathExists(folder + "/ack") || opening.rewriteAck
        openingNotes = opening.notes
        state.withLock { $0 = s }
        if opening.rewriteAck { try state.withLock { (s: inout State) throws(SystemError) in try writeAck(s) } }
        // The first release's records, queued again in this format; then
        // its files go.
        for record in opening.legacy { try append(payload: record.payload, samples: record.samples) }
        for name in opening.legacyFiles { try OwnFolder.remove(name, in: folder) }
    }

    /// The largest segment file a queue of this bound writes: its header, a
    /// full segment and one more record of the whole bound (with room for
    /// a bound raised since). Anything larger is set aside unread.
    static func largestSegment(_ maxBytes: Int64) -> Int64 {
        Int64(segmentHeaderBytes) + 4 * 1024 * 1024 + Int64(headerBytes) + max(2 * maxBytes, 256 * 1024 * 1024)
    }

    static func name(_ sequence: UInt64, suffix: String = segmentSuffix) -> String {
        let digits = String(sequence)
        return String(repeating: "0", count: max(0, 20 - digits.count)) + digits + suffix
    }

    func path(_ segment: Segment) -> String { folder + "/" + segment.name }

    // MARK: bytes

    static func u32(_ b: [UInt8], _ at: Int) -> UInt32 {
        UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24
    }

    static func u64(_ b: [UInt8], _ at: Int) -> UInt64 { UInt64(u32(b, at)) | UInt64(u32(b, at + 4)) << 32 }

    static func put32(_ v: UInt32, _ out: inout [UInt8]) {
        for shift in [0, 8, 16, 24] as [UInt32] { out.append(UInt8(truncatingIfNeeded: v >> shift)) }
    }

    static func put64(_ v: UInt64, _ out: inout [UInt8]) {
        put32(UInt32(truncatingIfNeeded: v), &out)
        put32(UInt32(truncatingIfNeeded: v >> 32), &out)
    }

    /// A segment's header.
    static func segmentHeader(sequence: UInt64, identity: UInt64) -> [UInt8] {
        var out = segmentMagic
        put32(version, &out)
        put64(sequence, &out)
        put64(identity, &out)
        put32(0, &out)
        put32(CRC32.of(out[...]), &out)
        return out
    }

    /// A record's bytes: header and payload.
    package static func record(payload: [UInt8], samples: UInt32, index: UInt64) -> [UInt8] {
        var out = magic
        put32(UInt32(payload.count), &out)
        put32(samples, &out)
        put64(index, &out)
        put32(CRC32.of(out[4...]), &out)
        put32(CRC32.of(payload[...]), &out)
        return out + payload
    }

    /// A record header's fields, when its magic and CRC hold.
    static func parseHeader(_ b: [UInt8], at: Int = 0) -> (length: Int64, samples: UInt64, index: UInt64)? {
        guard b.count >= at + headerBytes, Array(b[at..<at + 4]) == magic, CRC32.of(b[at + 4..<at + 20]) == u32(b, at + 20) else {
            return nil
        }
        return (Int64(u32(b, at + 4)), UInt64(u32(b, at + 8)), u64(b, at + 12))
    }

    // MARK: counts

    /// Unsent bytes and samples, and the samples dropped for room and lost
    /// to damage.
    package var counts: (bytes: UInt64, samples: UInt64, droppedFull: UInt64, droppedCorrupt: UInt64) {
        state.withLock { s in
            var bytes: Int64 = 0
            var samples: UInt64 = 0
            for segment in s.segments {
                for r in segment.records {
                    bytes += r.length
                    samples += r.samples
                }
            }
            return (UInt64(bytes), samples, s.droppedFull, s.droppedCorrupt)
        }
    }

    /// Whether no record waits.
    package var isEmpty: Bool { state.withLock { s in s.segments.allSatisfy { $0.records.isEmpty } } }

    // MARK: appending

    /// Appends one record and syncs it; then drops the oldest records
    /// while the unsent ones are over the bound. Returns where it ends.
    @discardableResult
    package func append(payload: [UInt8], samples: UInt32) throws(SystemError) -> Position {
        try state.withLock { (s: inout State) throws(SystemError) -> Position in
            let bytes = Self.record(payload: payload, samples: samples, index: s.nextIndex)
            if s.active == nil || (s.segments.last?.size ?? 0) + Int64(bytes.count) > segmentBytes {
                try startSegment(&s)
            }
            guard let active = s.active else { throw SystemError(call: "append(\(folder))", message: "no segment open") }
            let last = s.segments.count - 1
            let offset = s.segments[last].size
            do throws(SystemError) {
                try active.writeSynced(bytes)
            } catch {
                // Nothing half written stays before the next record.
                try? active.truncate(to: offset)
                throw error
            }
            s.segments[last].size += Int64(bytes.count)
            s.segments[last].records.append(Record(offset: offset, length: Int64(bytes.count), samples: UInt64(samples), index: s.nextIndex))
            s.nextIndex += UInt64(samples)
            // The record is queued: what follows only helps a later start
            // count losses (head) or skip what the bound dropped (ack), so
            // a failure here costs no sample; the next append says a full
            // disk.
            try? writeHead(&s)
            let position = Position(sequence: s.segments[last].sequence, end: offset + Int64(bytes.count))
            try? enforceBound(&s)
            return position
        }
    }

    /// A new segment after the last one (or the acknowledged point), made
    /// exclusively: a name taken meanwhile is set aside first.
    private func startSegment(_ s: inout State) throws(SystemError) {
        s.active = nil
        let sequence = (s.segments.last?.sequence ?? s.ackSequence - 1) + 1
        guard sequence < Self.sequenceLimit else {
            throw SystemError(call: "append(\(folder))", message: "the segment numbers ran out (\(sequence)); move the queue folder away")
        }
        let name = Self.name(sequence)
        if let status = FileStatus(folder + "/" + name) {
            _ = try? setAside(name, status: status, now: clock())
        }
        let file = try OwnFile(folder + "/" + name, .create)
        do throws(SystemError) {
            try file.writeSynced(Self.segmentHeader(sequence: sequence, identity: identity))
            try OwnFolder.sync(folder)
        } catch {
            try? OwnFolder.remove(name, in: folder)
            throw error
        }
        s.active = file
        s.segments.append(Segment(sequence: sequence, name: name, size: Int64(Self.segmentHeaderBytes), records: []))
        if s.segments.count == 1 {
            (s.ackSequence, s.ackOffset) = (sequence, Int64(Self.segmentHeaderBytes))
            s.ackIndex = s.nextIndex
        }
        if !s.ackOnDisk {
            try writeAck(s)
            s.ackOnDisk = true
        }
    }

    /// `head`: the index the next record gets (magic, index, CRC), written
    /// in place and synced after each record.
    private func writeHead(_ s: inout State) throws(SystemError) {
        if s.head == nil { s.head = try OwnFile(folder + "/head", .update) }
        var bytes = Self.headMagic
        Self.put64(s.nextIndex, &bytes)
        Self.put32(CRC32.of(bytes[...]), &bytes)
        try s.head?.writeSynced(bytes, at: 0)
    }

    /// Renames a file that is not (or no longer) a live segment to
    /// `NAME.corrupt-TIME`: kept for whoever looks into it, never read.
    @discardableResult
    func setAside(_ name: String, status: FileStatus?, now: Double) throws(SystemError) -> String {
        try Self.setAside(name, in: folder, now: now)
    }

    static func setAside(_ name: String, in folder: String, now: Double) throws(SystemError) -> String {
        let stamp = String(Int64(now.isFinite ? now.rounded(.down) : 0))
        var target = name + asideMark + stamp
        var n = 1
        while pathExists(folder + "/" + target) {
            target = name + asideMark + stamp + "-" + String(n)
            n += 1
        }
        try OwnFolder.rename(name, to: target, in: folder)
        return target
    }

    private func enforceBound(_ s: inout State) throws(SystemError) {
        func unsent() -> Int64 { s.segments.reduce(0) { $0 + $1.records.reduce(0) { $0 + $1.length } } }
        var total = unsent()
        var moved = false
        while total > maxBytes, !s.segments.isEmpty {
            if s.segments.count > 1 {
                let oldest = s.segments.removeFirst()
                if s.inFlight?.sequence == oldest.sequence { s.inFlight = nil }
                for r in oldest.records {
                    s.droppedFull += r.samples
                    total -= r.length
                }
                retire(oldest)
                s.ackIndex = Self.firstIndex(s)
                (s.ackSequence, s.ackOffset) = (s.segments[0].sequence, s.segments[0].records.first?.offset ?? s.segments[0].size)
            } else if !s.segments[0].records.isEmpty {
                let r = s.segments[0].records.removeFirst()
                s.droppedFull += r.samples
                total -= r.length
                (s.ackSequence, s.ackOffset) = (s.segments[0].sequence, r.offset + r.length)
                s.ackIndex = Self.firstIndex(s)
            } else {
                break
            }
            moved = true
        }
        if moved { try writeAck(s) }
    }

    /// The index of the first unsent sample: the first record's, else the
    /// next one to be queued.
    static func firstIndex(_ s: State) -> UInt64 {
        s.segments.lazy.compactMap { $0.records.first?.index }.first ?? s.nextIndex
    }

    /// A segment with nothing left to send goes; a damaged one is set aside.
    private func retire(_ segment: Segment) {
        if segment.damaged {
            _ = try? setAside(segment.name, status: nil, now: clock())
        } else {
            try? OwnFolder.remove(segment.name, in: folder)
        }
    }

    /// `ack`: version, acknowledged segment, offset and sample index, the
    /// request in flight (0 0 for none), the index below which losses were
    /// counted, and a CRC of the line.
    private func writeAck(_ s: State) throws(SystemError) {
        let flying = s.inFlight.map { "\($0.sequence) \($0.end)" } ?? "0 0"
        let line = "\(Self.version) \(s.ackSequence) \(s.ackOffset) \(s.ackIndex) \(flying) \(s.lossCountedThrough)"
        let crc = String(CRC32.of(Array(line.utf8)[...]), radix: 16)
        try AtomicFile.write(Array("\(line) \(crc)\n".utf8), to: folder + "/ack")
    }

    // MARK: sending

    /// The oldest unsent records of one segment, up to about `maxBytes` and
    /// `maxRecords` (at least one record); the batch in flight again when
    /// there is one.
    package func peek(maxBytes: Int, maxRecords: Int = .max, maxSamples: UInt64 = .max) -> Batch? {
        let picked = state.withLock { s -> (Segment, [Record], Bool)? in
            guard let segment = s.segments.first(where: { !$0.records.isEmpty }) else { return nil }
            if let flying = s.inFlight, flying.sequence == segment.sequence, segment.records[0].offset < flying.end {
                return (segment, segment.records.filter { $0.offset < flying.end }, true)
            }
            var records: [Record] = []
            var bytes: Int64 = 0
            var samples: UInt64 = 0
            for r in segment.records {
                if !records.isEmpty && (bytes + r.length > Int64(maxBytes) || records.count >= maxRecords || samples + r.samples > maxSamples) {
                    break
                }
                // A batch stays on one side of what may have been posted.
                if let maybe = s.maybeSentThrough, maybe.sequence == segment.sequence, let first = records.first,
                    (first.offset < maybe.end) != (r.offset < maybe.end)
                {
                    break
                }
                records.append(r)
                bytes += r.length
                samples += r.samples
            }
            let maybeSent = s.maybeSentThrough.map {
                segment.sequence < $0.sequence || (segment.sequence == $0.sequence && records[0].offset < $0.end)
            }
            return (segment, records, maybeSent ?? false)
        }
        guard let (segment, records, resent) = picked, let first = records.first, let last = records.last else { return nil }
        let end = last.offset + last.length
        // Read again through a checked open: a file replaced meanwhile is
        // not posted.
        guard let file = try? OwnFile(path(segment), .read), let raw = try? file.read(at: first.offset, count: Int(end - first.offset)),
            raw.count == Int(end - first.offset)
        else {
            // Dropped for room meanwhile: the next peek finds what is left.
            return nil
        }
        var payloads: [[UInt8]] = []
        payloads.reserveCapacity(records.count)
        var samples: UInt64 = 0
        for r in records {
            let at = Int(r.offset - first.offset)
            // What was read is what was checked at open, or this is no batch.
            guard let header = Self.parseHeader(raw, at: at), header.index == r.index else { return nil }
            let payload = Array(raw[at + Self.headerBytes..<Int(r.offset - first.offset + r.length)])
            guard CRC32.of(payload[...]) == Self.u32(raw, at + 24) else { return nil }
            payloads.append(payload)
            samples += r.samples
        }
        return Batch(payloads: payloads, samples: samples, resent: resent, sequence: segment.sequence, end: end)
    }

    /// Takes back `samples` counted dropped for room: they were in a request
    /// that reached the receiver after all (posted before the bound dropped
    /// their copy on disk).
    package func delivered(droppedSamples samples: UInt64) {
        state.withLock { $0.droppedFull -= min($0.droppedFull, samples) }
    }

    /// Records that `batch` is about to be posted (synced), unless it was
    /// already: until it is acknowledged, `peek` gives it again with the
    /// same bounds, in this process or after a restart.
    package func markInFlight(_ batch: Batch) throws(SystemError) {
        guard !batch.resent else { return }
        try markInFlight(Position(sequence: batch.sequence, end: batch.end))
    }

    /// Records that the unsent records of `position`'s segment up to it
    /// were posted; nothing when they are gone.
    package func markInFlight(_ position: Position) throws(SystemError) {
        try state.withLock { (s: inout State) throws(SystemError) in
            guard s.holdsUnsent(position.sequence, before: position.end) else { return }
            s.inFlight = (position.sequence, position.end)
            try writeAck(s)
        }
    }

    /// Marks a batch sent (or refused): its records are not read again, and
    /// a segment left with none is deleted. False when the bound dropped
    /// them first.
    @discardableResult
    package func commit(_ batch: Batch) throws(SystemError) -> Bool { try commit(through: Position(sequence: batch.sequence, end: batch.end)) }

    /// Marks the unsent records of `position`'s segment up to it sent (or
    /// refused). False when none was left (the bound dropped them).
    @discardableResult
    package func commit(through position: Position) throws(SystemError) -> Bool {
        try state.withLock { (s: inout State) throws(SystemError) -> Bool in
            guard let index = s.segments.firstIndex(where: { $0.sequence == position.sequence }) else { return false }
            let before = s.segments[index].records.count
            s.segments[index].records.removeAll { $0.offset < position.end }
            guard s.segments[index].records.count < before else { return false }
            (s.ackSequence, s.ackOffset) = (position.sequence, position.end)
            s.inFlight = nil
            // Whole segments behind the acknowledged point go.
            while let first = s.segments.first, first.records.isEmpty, s.segments.count > 1 || first.damaged {
                retire(first)
                s.segments.removeFirst()
                // A damaged last segment went: the next one is numbered after it.
                let next = s.segments.first
                (s.ackSequence, s.ackOffset) = (next?.sequence ?? first.sequence + 1, next.map { $0.records.first?.offset ?? $0.size } ?? 0)
            }
            s.ackIndex = Self.firstIndex(s)
            try writeAck(s)
            return true
        }
    }
}

/// CRC-32 (IEEE 802.3, zlib's).
enum CRC32 {
    static let table: [UInt32] = (0..<256).map { n -> UInt32 in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func of(_ parts: ArraySlice<UInt8>...) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for part in parts { crc = update(crc, part) }
        return crc ^ 0xFFFF_FFFF
    }

    /// Feeds `bytes` to a running CRC (start at 0xFFFFFFFF; the result is
    /// the running value XOR 0xFFFFFFFF).
    static func update(_ running: UInt32, _ bytes: ArraySlice<UInt8>) -> UInt32 {
        var crc = running
        for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        return crc
    }
}
