import CIfmeterRemoteWrite
import IfmeterCore
import IfmeterSystem
import Synchronization

/// Samples waiting to be sent, on disk, oldest first (docs/metrics.md,
/// "Remote write").
///
/// A folder of segments, `NNNNNNNNNNNNNNNNNNNN.seg`, each a run of records
/// appended and fdatasync()ed one at a time. A record is a 16-byte header
/// (magic `IFQ2`, payload length, sample count, CRC-32 of count and
/// payload; little-endian) and its payload: for remote write, one push's
/// WriteRequest `timeseries` entries as a snappy block (the queue itself
/// does not look inside). `ack` (written atomically) names the segment and offset
/// of the first record not yet sent and, while a request is in flight, the
/// segment and end of that request: a batch posted once is posted again with
/// the same bounds (after a failed try or a restart), so a copy the receiver
/// already has is never joined to newer records it would refuse with it. Opening reads every segment and cuts
/// each at its first record that is short or fails its CRC: a record half
/// written when ifmeter was killed is never read back as data.
///
/// Bounded: past `maxBytes` of unsent records the oldest go (whole segments
/// while there are several), counted in `droppedFull`.
public final class DiskQueue: Sendable {
    struct Record: Sendable {
        var offset: Int64
        var length: Int64
        var samples: UInt64
    }

    struct Segment: Sendable {
        var sequence: UInt64
        var size: Int64
        /// The records not yet sent.
        var records: [Record]
    }

    struct State: Sendable {
        var segments: [Segment] = []
        var ackSequence: UInt64 = 1
        var ackOffset: Int64 = 0
        var activeFD: Int32 = -1
        var droppedFull: UInt64 = 0
        /// The segment and end of the batch posted and not yet acknowledged.
        var inFlight: (sequence: UInt64, end: Int64)?

        /// Whether segment `sequence` still has unsent records before `end`.
        func holdsUnsent(_ sequence: UInt64, before end: Int64) -> Bool {
            segments.contains { $0.sequence == sequence && $0.records.first.map { $0.offset < end } == true }
        }
    }

    /// Where a record ends: its segment and the offset after it.
    public struct Position: Sendable, Equatable {
        public let sequence: UInt64
        public let end: Int64
    }

    /// Consecutive records of one segment.
    public struct Batch: Sendable {
        /// Each record's payload, oldest first.
        public var payloads: [[UInt8]]
        /// The payloads joined.
        public var payload: [UInt8] { Array(payloads.joined()) }
        public var samples: UInt64
        /// Posted before (a failed try, or a kill before its `ack`): the
        /// receiver may have it already.
        public var resent: Bool
        let sequence: UInt64
        let end: Int64
    }

    public static let headerBytes = 16
    static let magic: [UInt8] = Array("IFQ2".utf8)

    public let folder: String
    public let maxBytes: Int64
    let segmentBytes: Int64
    private let state = Mutex(State())

    /// Opens (creating) the queue in `folder`, keeping every whole record.
    public init(folder: String, maxBytes: Int64) throws(SystemError) {
        self.folder = folder
        self.maxBytes = maxBytes
        segmentBytes = max(16 * 1024, min(4 * 1024 * 1024, maxBytes / 16))
        guard cifm_rw_mkdir(folder) == 0 else { throw .system("mkdir \(folder)", code: cifm_rw_errno()) }
        var s = State()
        var ackKnown = false
        if let text = readSmallFile(folder + "/ack") {
            let parts = text.split(whereSeparator: { $0 == " " || $0 == "\n" })
            if parts.count == 2 || parts.count == 4, let sequence = UInt64(parts[0]), let offset = Int64(parts[1]) {
                s.ackSequence = sequence
                s.ackOffset = offset
                ackKnown = true
                if parts.count == 4, let flying = UInt64(parts[2]), let end = Int64(parts[3]) { s.inFlight = (flying, end) }
            }
        }
        let sequences = listDirectory(folder).compactMap { name -> UInt64? in
            guard name.hasSuffix(".seg") else { return nil }
            return UInt64(name.dropLast(4))
        }.sorted()
        if !ackKnown, let first = sequences.first { s.ackSequence = first }
        for sequence in sequences {
            let path = Self.path(folder, sequence)
            if sequence < s.ackSequence {
                _ = cifm_rw_unlink(path)
                continue
            }
            let (records, valid, size) = try Self.scan(path)
            if valid < size, cifm_rw_truncate(path, valid) != 0 {
                throw .system("truncate \(path)", code: cifm_rw_errno())
            }
            let from = sequence == s.ackSequence ? s.ackOffset : 0
            s.segments.append(Segment(sequence: sequence, size: valid, records: records.filter { $0.offset >= from }))
        }
        if s.segments.isEmpty, ackKnown { s.ackOffset = 0 }
        // A request in flight whose records are gone (sent, or dropped for
        // room) is no longer one: a new segment may take its number.
        if let flying = s.inFlight, !s.holdsUnsent(flying.sequence, before: flying.end) { s.inFlight = nil }
        state.withLock { $0 = s }
    }

    deinit {
        state.withLock { if $0.activeFD >= 0 { _ = cifm_rw_close($0.activeFD) } }
    }

    static func path(_ folder: String, _ sequence: UInt64) -> String {
        let digits = String(sequence)
        return folder + "/" + String(repeating: "0", count: max(0, 20 - digits.count)) + digits + ".seg"
    }

    /// A segment's whole records, where they end, and its size.
    static func scan(_ path: String) throws(SystemError) -> ([Record], Int64, Int64) {
        let size = cifm_rw_file_size(path)
        guard size >= 0 else { throw .system("stat \(path)", code: cifm_rw_errno()) }
        var bytes = [UInt8](repeating: 0, count: Int(size))
        let got = bytes.withUnsafeMutableBytes { cifm_rw_read(path, 0, $0.baseAddress, $0.count) }
        guard got >= 0 else { throw .system("read \(path)", code: cifm_rw_errno()) }
        var records: [Record] = []
        var at = 0
        let end = Int(got)
        while at + headerBytes <= end {
            guard Array(bytes[at..<at + 4]) == magic else { break }
            let length = Int(Self.u32(bytes, at + 4))
            let samples = Self.u32(bytes, at + 8)
            let crc = Self.u32(bytes, at + 12)
            guard at + headerBytes + length <= end, CRC32.of(bytes[at + 8..<at + 12], bytes[at + headerBytes..<at + headerBytes + length]) == crc
            else {
                break
            }
            records.append(Record(offset: Int64(at), length: Int64(headerBytes + length), samples: UInt64(samples)))
            at += headerBytes + length
        }
        return (records, Int64(at), Int64(size))
    }

    static func u32(_ b: [UInt8], _ at: Int) -> UInt32 {
        UInt32(b[at]) | UInt32(b[at + 1]) << 8 | UInt32(b[at + 2]) << 16 | UInt32(b[at + 3]) << 24
    }

    static func put32(_ v: UInt32, _ out: inout [UInt8]) {
        for shift in [0, 8, 16, 24] as [UInt32] { out.append(UInt8(truncatingIfNeeded: v >> shift)) }
    }

    /// The record's bytes: header and payload.
    public static func record(payload: [UInt8], samples: UInt32) -> [UInt8] {
        var out = magic
        put32(UInt32(payload.count), &out)
        var count: [UInt8] = []
        put32(samples, &count)
        out += count
        put32(CRC32.of(count[...], payload[...]), &out)
        return out + payload
    }

    /// Unsent bytes and samples, and the samples dropped for room.
    public var counts: (bytes: UInt64, samples: UInt64, droppedFull: UInt64) {
        state.withLock { s in
            var bytes: Int64 = 0
            var samples: UInt64 = 0
            for segment in s.segments {
                for r in segment.records {
                    bytes += r.length
                    samples += r.samples
                }
            }
            return (UInt64(bytes), samples, s.droppedFull)
        }
    }

    /// Appends one record and syncs it; then drops the oldest records
    /// while the unsent ones are over the bound. Returns where it ends.
    @discardableResult
    public func append(payload: [UInt8], samples: UInt32) throws(SystemError) -> Position {
        let bytes = Self.record(payload: payload, samples: samples)
        return try state.withLock { (s: inout State) throws(SystemError) -> Position in
            if s.activeFD < 0 || (s.segments.last?.size ?? 0) + Int64(bytes.count) > segmentBytes {
                if s.activeFD >= 0 { _ = cifm_rw_close(s.activeFD) }
                s.activeFD = -1
                let sequence = (s.segments.last?.sequence ?? s.ackSequence - 1) + 1
                let path = Self.path(folder, sequence)
                let fd = cifm_rw_open_append(path)
                guard fd >= 0 else { throw .system("open \(path)", code: cifm_rw_errno()) }
                _ = cifm_rw_sync_dir(folder)
                s.activeFD = fd
                let size = max(0, cifm_rw_file_size(path))
                s.segments.append(Segment(sequence: sequence, size: size, records: []))
                if s.segments.count == 1 { (s.ackSequence, s.ackOffset) = (sequence, size) }
            }
            let last = s.segments.count - 1
            let offset = s.segments[last].size
            let rc = bytes.withUnsafeBytes { cifm_rw_write_sync(s.activeFD, $0.baseAddress, $0.count) }
            guard rc == 0 else {
                let code = cifm_rw_errno()
                // Nothing half written stays before the next record.
                _ = cifm_rw_truncate(Self.path(folder, s.segments[last].sequence), offset)
                throw .system("write \(folder)", code: code)
            }
            s.segments[last].size += Int64(bytes.count)
            s.segments[last].records.append(Record(offset: offset, length: Int64(bytes.count), samples: UInt64(samples)))
            let position = Position(sequence: s.segments[last].sequence, end: offset + Int64(bytes.count))
            try enforceBound(&s)
            return position
        }
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
                _ = cifm_rw_unlink(Self.path(folder, oldest.sequence))
                (s.ackSequence, s.ackOffset) = (s.segments[0].sequence, s.segments[0].records.first?.offset ?? s.segments[0].size)
            } else if !s.segments[0].records.isEmpty {
                let r = s.segments[0].records.removeFirst()
                s.droppedFull += r.samples
                total -= r.length
                (s.ackSequence, s.ackOffset) = (s.segments[0].sequence, r.offset + r.length)
            } else {
                break
            }
            moved = true
        }
        if moved { try writeAck(s) }
    }

    private func writeAck(_ s: State) throws(SystemError) {
        let flying = s.inFlight.map { " \($0.sequence) \($0.end)" } ?? ""
        try AtomicFile.write(Array("\(s.ackSequence) \(s.ackOffset)\(flying)\n".utf8), to: folder + "/ack")
    }

    /// Whether no record waits.
    public var isEmpty: Bool { state.withLock { s in s.segments.allSatisfy { $0.records.isEmpty } } }

    /// The oldest unsent records of one segment, up to about `maxBytes` and
    /// `maxRecords` (at least one record); the batch in flight again when
    /// there is one.
    public func peek(maxBytes: Int, maxRecords: Int = .max) -> Batch? {
        let picked = state.withLock { s -> (UInt64, [Record], Bool)? in
            guard let segment = s.segments.first(where: { !$0.records.isEmpty }) else { return nil }
            if let flying = s.inFlight, flying.sequence == segment.sequence, segment.records[0].offset < flying.end {
                return (segment.sequence, segment.records.filter { $0.offset < flying.end }, true)
            }
            var records: [Record] = []
            var bytes: Int64 = 0
            for r in segment.records {
                if !records.isEmpty && (bytes + r.length > Int64(maxBytes) || records.count >= maxRecords) { break }
                records.append(r)
                bytes += r.length
            }
            return (segment.sequence, records, false)
        }
        guard let (sequence, records, resent) = picked, let first = records.first, let last = records.last else { return nil }
        let end = last.offset + last.length
        var raw = [UInt8](repeating: 0, count: Int(end - first.offset))
        let path = Self.path(folder, sequence)
        let got = raw.withUnsafeMutableBytes { cifm_rw_read(path, first.offset, $0.baseAddress, $0.count) }
        // Dropped for room meanwhile: the next peek finds what is left.
        guard got == Int64(raw.count) else { return nil }
        var payloads: [[UInt8]] = []
        payloads.reserveCapacity(records.count)
        var samples: UInt64 = 0
        for r in records {
            let from = Int(r.offset - first.offset) + Self.headerBytes
            payloads.append(Array(raw[from..<Int(r.offset - first.offset + r.length)]))
            samples += r.samples
        }
        return Batch(payloads: payloads, samples: samples, resent: resent, sequence: sequence, end: end)
    }

    /// Takes back `samples` counted dropped for room: they were in a request
    /// that reached the receiver after all (posted before the bound dropped
    /// their copy on disk).
    public func delivered(droppedSamples samples: UInt64) {
        state.withLock { $0.droppedFull -= min($0.droppedFull, samples) }
    }

    /// Records that `batch` is about to be posted (synced), unless it was
    /// already: until it is acknowledged, `peek` gives it again with the
    /// same bounds, in this process or after a restart.
    public func markInFlight(_ batch: Batch) throws(SystemError) {
        guard !batch.resent else { return }
        try markInFlight(Position(sequence: batch.sequence, end: batch.end))
    }

    /// Records that the unsent records of `position`'s segment up to it
    /// were posted; nothing when they are gone.
    public func markInFlight(_ position: Position) throws(SystemError) {
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
    public func commit(_ batch: Batch) throws(SystemError) -> Bool { try commit(through: Position(sequence: batch.sequence, end: batch.end)) }

    /// Marks the unsent records of `position`'s segment up to it sent (or
    /// refused). False when none was left (the bound dropped them).
    @discardableResult
    public func commit(through position: Position) throws(SystemError) -> Bool {
        try state.withLock { (s: inout State) throws(SystemError) -> Bool in
            guard let index = s.segments.firstIndex(where: { $0.sequence == position.sequence }) else { return false }
            let before = s.segments[index].records.count
            s.segments[index].records.removeAll { $0.offset < position.end }
            guard s.segments[index].records.count < before else { return false }
            (s.ackSequence, s.ackOffset) = (position.sequence, position.end)
            s.inFlight = nil
            // Whole segments behind the acknowledged point go.
            while let first = s.segments.first, first.records.isEmpty, s.segments.count > 1 {
                _ = cifm_rw_unlink(Self.path(folder, first.sequence))
                s.segments.removeFirst()
                (s.ackSequence, s.ackOffset) = (s.segments[0].sequence, s.segments[0].records.first?.offset ?? s.segments[0].size)
            }
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
        for part in parts {
            for byte in part { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
        }
        return crc ^ 0xFFFF_FFFF
    }
}

extension DiskQueue {
    /// mkdir (0700); 0 when it exists already.
    public static func makeFolder(_ path: String) -> Int32 { cifm_rw_mkdir(path) }
}
