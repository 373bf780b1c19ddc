import IfmeterCore
import IfmeterSystem

/// Opening a queue folder: what is there is read in bounded pieces,
/// checked, and either kept, skipped where damaged, or set aside; every
/// sample that damage cost is counted (`DiskQueue`'s documentation has the
/// formats).
struct DiskQueueOpening {
    let folder: String
    let identity: UInt64
    /// Files larger than this are no segment this queue writes: set aside
    /// unread.
    let largestSegment: Int64
    let now: Double
    /// One line per finding, for the log.
    var notes: [String] = []
    /// The `ack` must be written again (it was damaged, or losses were
    /// counted and must not be counted again at the next start).
    var rewriteAck = false
    /// Records of the first release's format (magic IFQ2), to queue again
    /// in this one's, oldest first.
    var legacy: [(payload: [UInt8], samples: UInt32)] = []
    var legacyFiles: [String] = []

    typealias Record = DiskQueue.Record
    typealias Segment = DiskQueue.Segment

    /// What `ack` said.
    struct Ack {
        var sequence: UInt64
        var offset: Int64
        var index: UInt64?
        var inFlight: (sequence: UInt64, end: Int64)?
        var lossCountedThrough: UInt64 = 0
        /// Written by the first release (no sample index).
        var legacy: Bool
    }

    mutating func open() throws(SystemError) -> DiskQueue.State {
        var s = DiskQueue.State()
        var ackDamaged = false
        var ack: Ack?
        let ackMissing = FileStatus(folder + "/ack") == nil
        switch readAck() {
        case .none: break
        case .some(.success(let value)): ack = value
        case .some(.failure(let why)):
            ackDamaged = true
            setAside("ack", why: "the ack file \(why)")
        }
        var head: UInt64?
        var headDamaged = false
        if let status = FileStatus(folder + "/head") {
            if let value = readHead(status) {
                head = value
            } else {
                headDamaged = true
                setAside("head", why: "the head file is damaged or not this queue's")
            }
        }

        // The names that may be segments, checked without opening them.
        var candidates: [(sequence: UInt64, name: String, size: Int64)] = []
        for entry in try OwnFolder.entries(folder) {
            let name = entry.name
            if name == "ack" || name == "head" || name.hasPrefix(".") || name.contains(DiskQueue.asideMark) { continue }
            let suffix = [DiskQueue.segmentSuffix, DiskQueue.damagedSuffix].first { name.hasSuffix($0) }
            guard let suffix, let status = entry.status else { continue }
            let stem = name.dropLast(suffix.count)
            guard stem.count == 20, stem.allSatisfy({ $0 >= "0" && $0 <= "9" }), let sequence = UInt64(stem), sequence >= 1,
                sequence < DiskQueue.sequenceLimit
            else {
                setAside(name, why: "\(TerminalText.escaped(name)) is named like a segment, but no segment this queue writes has that number")
                continue
            }
            if let problem = OwnFile.problem(status) {
                setAside(name, why: "\(TerminalText.escaped(name)) is not one of this queue's files: \(problem)")
                continue
            }
            if status.size > largestSegment {
                setAside(name, why: "\(name) is \(status.size) bytes, more than any segment this queue writes (\(largestSegment))")
                continue
            }
            if candidates.contains(where: { $0.sequence == sequence }) {
                setAside(name, why: "\(name) has the number of another segment")
                continue
            }
            candidates.append((sequence, name, status.size))
        }
        candidates.sort { $0.sequence < $1.sequence }

        // An ack past every segment (or numbered past them) is damage, not
        // progress: nothing is deleted on its word.
        if let a = ack, let last = candidates.last?.sequence, a.sequence > last + 1 {
            ack = nil
            ackDamaged = true
            setAside("ack", why: "the ack file names segment \(a.sequence), past the last one (\(last))")
        }
        if let a = ack, !a.legacy, let named = candidates.first(where: { $0.sequence == a.sequence }),
            a.offset < Int64(DiskQueue.segmentHeaderBytes) || a.offset > named.size
        {
            ack = nil
            ackDamaged = true
            setAside("ack", why: "the ack file names offset \(a.offset) in segment \(a.sequence), which holds \(named.size) bytes")
        }

        var legacyAck: Ack? = ack?.legacy == true ? ack : nil
        for candidate in candidates {
            if let a = ack, candidate.sequence < a.sequence {
                // Sent.
                if candidate.name.hasSuffix(DiskQueue.damagedSuffix) {
                    setAside(candidate.name, why: nil)
                } else {
                    try? OwnFolder.remove(candidate.name, in: folder)
                }
                continue
            }
            let file: OwnFile
            do throws(SystemError) {
                file = try OwnFile(folder + "/" + candidate.name, .read)
            } catch {
                setAside(candidate.name, why: "\(candidate.name) changed while the queue was opened: \(error.message)")
                continue
            }
            let size = try file.size()
            if size == 0 {
                // Made, then a kill before its header: nothing in it.
                try? OwnFolder.remove(candidate.name, in: folder)
                continue
            }
            let start = try file.read(at: 0, count: DiskQueue.segmentHeaderBytes)
            if start.count >= 4, Array(start[0..<4]) == Array("IFQ2".utf8) {
                try readLegacy(file, size: size, sequence: candidate.sequence, ack: &legacyAck)
                legacyFiles.append(candidate.name)
                continue
            }
            guard start.count == DiskQueue.segmentHeaderBytes, Array(start[0..<4]) == DiskQueue.segmentMagic,
                CRC32.of(start[0..<28]) == DiskQueue.u32(start, 28), DiskQueue.u32(start, 4) == DiskQueue.version
            else {
                setAside(candidate.name, why: "\(candidate.name) has no segment header this queue writes")
                continue
            }
            guard DiskQueue.u64(start, 8) == candidate.sequence, DiskQueue.u64(start, 16) == identity else {
                setAside(candidate.name, why: "\(candidate.name) was written by another queue (its header names another segment or receiver)")
                continue
            }
            let (whole, damage) = try scan(file, size: size)
            var records = whole
            var name = candidate.name
            if !damage.isEmpty {
                let bytes = damage.reduce(Int64(0)) { $0 + $1.length }
                let places = damage.prefix(3).map { "\($0.length) at \($0.offset)" }.joined(separator: ", ")
                if name.hasSuffix(DiskQueue.segmentSuffix) {
                    let damagedName = DiskQueue.name(candidate.sequence, suffix: DiskQueue.damagedSuffix)
                    try OwnFolder.rename(name, to: damagedName, in: folder)
                    name = damagedName
                }
                notes.append(
                    "remote write queue \(folder): \(bytes) damaged bytes in segment \(candidate.sequence) (\(places)\(damage.count > 3 ? ", ..." : "")); its whole records are still sent, then the file is set aside as \(name)\(DiskQueue.asideMark)TIME"
                )
            }
            if let a = ack, !a.legacy, candidate.sequence == a.sequence { records.removeAll { $0.offset < a.offset } }
            s.segments.append(Segment(sequence: candidate.sequence, name: name, size: size, records: records))
        }
        if !legacyFiles.isEmpty {
            ack = nil
            s.ackSequence = (candidates.last?.sequence ?? 0) + 1
            notes.append("remote write queue \(folder): \(legacy.count) records of the first release's format are queued again in this one's")
        }

        // What damage cost: the gaps between sample indices, from the
        // acknowledged one to `head`.
        let counted = ack?.lossCountedThrough ?? 0
        func gap(_ from: UInt64, _ to: UInt64) -> UInt64 {
            let start = max(from, counted)
            return to > start ? to - start : 0
        }
        var expected = ack?.index
        var lost: UInt64 = 0
        for segment in s.segments {
            for r in segment.records {
                if let e = expected { lost += gap(e, r.index) }
                expected = max(expected ?? 0, r.index + r.samples)
            }
        }
        if let head, let e = expected { lost += gap(e, head) }
        s.droppedCorrupt = lost
        s.nextIndex = max(head ?? 0, expected ?? 0)
        s.lossCountedThrough = s.nextIndex
        if lost > 0 {
            notes.append("remote write queue \(folder): \(lost) queued samples were lost to damage (counted as dropped, reason corrupt)")
            rewriteAck = true
        }
        if (head == nil || headDamaged), !(s.segments.allSatisfy { $0.records.isEmpty }) {
            notes.append(
                "remote write queue \(folder): the head file is missing or damaged: samples lost after the last whole record, if any, cannot be counted"
            )
        }

        if let a = ack {
            s.ackSequence = a.sequence
            s.ackOffset = a.offset
            s.ackIndex = a.index ?? DiskQueue.firstIndex(s)
            s.inFlight = a.inFlight
        } else if let first = s.segments.first {
            s.ackSequence = first.sequence
            s.ackOffset = first.records.first?.offset ?? first.size
            s.ackIndex = DiskQueue.firstIndex(s)
        }
        if ackMissing, legacyFiles.isEmpty, !(s.segments.allSatisfy { $0.records.isEmpty }) {
            // The first record queued writes an ack: records without one
            // lost it.
            ackDamaged = true
            notes.append("remote write queue \(folder): the ack file is missing")
        }
        if !legacyFiles.isEmpty { rewriteAck = true }
        if ackDamaged {
            rewriteAck = true
            // Anything left may have been posted already.
            if let last = s.segments.last(where: { !$0.records.isEmpty }), let r = last.records.last {
                s.maybeSentThrough = (last.sequence, r.offset + r.length)
            }
            notes.append(
                "remote write queue \(folder): without a whole ack file, every record left is posted again (a copy the receiver refuses is counted as a duplicate)"
            )
        }
        if s.segments.isEmpty, ack != nil { s.ackOffset = 0 }
        // A request in flight whose records are gone (sent, or dropped for
        // room) is no longer one: a new segment may take its number.
        if let flying = s.inFlight, !s.holdsUnsent(flying.sequence, before: flying.end) { s.inFlight = nil }
        return s
    }

    /// Sets a file aside, with a note saying why.
    mutating func setAside(_ name: String, why: String?) {
        do throws(SystemError) {
            let target = try DiskQueue.setAside(name, in: folder, now: now)
            if let why { notes.append("remote write queue \(folder): \(why); set aside as \(TerminalText.escaped(target)), never posted") }
        } catch {
            notes.append("remote write queue \(folder): \(why ?? name); could not set it aside: \(error.message)")
        }
    }

    enum AckResult {
        case success(Ack)
        case failure(String)
    }

    /// `ack`, when there is one: this release's line (with its CRC) or the
    /// first release's two or four numbers.
    func readAck() -> AckResult? {
        guard let status = FileStatus(folder + "/ack") else { return nil }
        if let problem = OwnFile.problem(status) { return .failure("is not this queue's: \(problem)") }
        guard let file = try? OwnFile(folder + "/ack", .read), let bytes = try? file.read(at: 0, count: 512), bytes.count < 512 else {
            return .failure("cannot be read whole")
        }
        let text = String(decoding: bytes, as: UTF8.self)
        let fields = text.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        if fields.count == 8 {
            let line = fields[0..<7].joined(separator: " ")
            guard text == line + " " + fields[7] + "\n", UInt32(fields[7], radix: 16) == CRC32.of(Array(line.utf8)[...]),
                fields[0] == String(DiskQueue.version), let sequence = UInt64(fields[1]), let offset = Int64(fields[2]),
                let index = UInt64(fields[3]), let flying = UInt64(fields[4]), let end = Int64(fields[5]), let counted = UInt64(fields[6]),
                sequence >= 1, sequence < DiskQueue.sequenceLimit, offset >= 0, flying < DiskQueue.sequenceLimit, end >= 0
            else { return .failure("is damaged (\(TerminalText.escaped(String(text.prefix(120)))))") }
            return .success(
                Ack(
                    sequence: sequence, offset: offset, index: index, inFlight: flying == 0 ? nil : (flying, end),
                    lossCountedThrough: counted, legacy: false))
        }
        if fields.count == 2 || fields.count == 4, let sequence = UInt64(fields[0]), let offset = Int64(fields[1]), sequence >= 1,
            sequence < DiskQueue.sequenceLimit, offset >= 0
        {
            var ack = Ack(sequence: sequence, offset: offset, index: nil, inFlight: nil, legacy: true)
            if fields.count == 4 {
                guard let flying = UInt64(fields[2]), let end = Int64(fields[3]), flying >= 1, flying < DiskQueue.sequenceLimit, end >= 0 else {
                    return .failure("is damaged (\(TerminalText.escaped(String(text.prefix(120)))))")
                }
                ack.inFlight = (flying, end)
            }
            return .success(ack)
        }
        return .failure("is damaged (\(TerminalText.escaped(String(text.prefix(120)))))")
    }

    /// `head`'s index, when the file is whole and this queue's.
    func readHead(_ status: FileStatus) -> UInt64? {
        guard OwnFile.problem(status) == nil, status.size == 16, let file = try? OwnFile(folder + "/head", .read),
            let bytes = try? file.read(at: 0, count: 16), bytes.count == 16, Array(bytes[0..<4]) == DiskQueue.headMagic,
            CRC32.of(bytes[0..<12]) == DiskQueue.u32(bytes, 12)
        else { return nil }
        return DiskQueue.u64(bytes, 4)
    }

    /// A segment's whole records after its header, and where it is damaged:
    /// read in pieces of at most 64 KiB, past damage to the next record
    /// whose magic and both CRCs hold.
    func scan(_ file: OwnFile, size: Int64) throws(SystemError) -> ([Record], [(offset: Int64, length: Int64)]) {
        var records: [Record] = []
        var damage: [(offset: Int64, length: Int64)] = []
        var at = Int64(DiskQueue.segmentHeaderBytes)
        while at < size {
            if let record = try wholeRecord(file, at: at, size: size) {
                records.append(record)
                at += record.length
                continue
            }
            let next = try nextRecord(file, after: at + 1, size: size)
            damage.append((at, (next ?? size) - at))
            guard let next else { break }
            at = next
        }
        return (records, damage)
    }

    /// The record at `at`, when its header and payload hold.
    func wholeRecord(_ file: OwnFile, at: Int64, size: Int64) throws(SystemError) -> Record? {
        guard at + Int64(DiskQueue.headerBytes) <= size else { return nil }
        let header = try file.read(at: at, count: DiskQueue.headerBytes)
        guard let fields = DiskQueue.parseHeader(header) else { return nil }
        let end = at + Int64(DiskQueue.headerBytes) + fields.length
        guard end <= size else { return nil }
        var crc: UInt32 = 0xFFFF_FFFF
        var offset = at + Int64(DiskQueue.headerBytes)
        while offset < end {
            let piece = try file.read(at: offset, count: Int(min(64 * 1024, end - offset)))
            guard !piece.isEmpty else { return nil }
            crc = CRC32.update(crc, piece[...])
            offset += Int64(piece.count)
        }
        guard crc ^ 0xFFFF_FFFF == DiskQueue.u32(header, 24) else { return nil }
        return Record(offset: at, length: end - at, samples: fields.samples, index: fields.index)
    }

    /// Where the next whole record after damage starts, if any.
    func nextRecord(_ file: OwnFile, after start: Int64, size: Int64) throws(SystemError) -> Int64? {
        let magic = DiskQueue.magic
        var offset = start
        while offset + Int64(DiskQueue.headerBytes) <= size {
            let piece = try file.read(at: offset, count: Int(min(64 * 1024, size - offset)))
            guard piece.count >= magic.count else { return nil }
            var i = 0
            while i + magic.count <= piece.count {
                if piece[i] == magic[0], piece[i + 1] == magic[1], piece[i + 2] == magic[2], piece[i + 3] == magic[3],
                    try wholeRecord(file, at: offset + Int64(i), size: size) != nil
                {
                    return offset + Int64(i)
                }
                i += 1
            }
            // The next piece overlaps this one by a magic's length less one.
            offset += Int64(piece.count - (magic.count - 1))
        }
        return nil
    }

    /// A segment of the first release (16-byte headers: magic IFQ2, length,
    /// samples, CRC of samples and payload, no segment header): its whole
    /// records up to the first that is not, past its ack.
    mutating func readLegacy(_ file: OwnFile, size: Int64, sequence: UInt64, ack: inout Ack?) throws(SystemError) {
        var at: Int64 = 0
        let from = ack.map { $0.sequence == sequence ? $0.offset : ($0.sequence > sequence ? Int64.max : 0) } ?? 0
        while at + 16 <= size {
            let header = try file.read(at: at, count: 16)
            guard header.count == 16, Array(header[0..<4]) == Array("IFQ2".utf8) else { break }
            let length = Int64(DiskQueue.u32(header, 4))
            guard at + 16 + length <= size, length <= largestSegment else { break }
            let payload = try file.read(at: at + 16, count: Int(length))
            guard CRC32.of(header[8..<12], payload[...]) == DiskQueue.u32(header, 12) else { break }
            if at >= from { legacy.append((payload, DiskQueue.u32(header, 8))) }
            at += 16 + length
        }
    }
}
