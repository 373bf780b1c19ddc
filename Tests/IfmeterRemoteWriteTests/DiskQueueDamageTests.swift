import Foundation
import IfmeterCore
import IfmeterRemoteWrite
import IfmeterSystem
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 29, findings 1, 3 and 4: the queue folder is checked as the state
/// file is; damage in it (a cut, a flipped bit, a wild length, a wild
/// `ack`) costs only the records it hit, and every sample it cost is
/// counted; what is not this queue's segment (a link, a FIFO, another
/// user's file, a name out of range, a sparse giant, another queue's) is
/// set aside unread and never posted.
@Suite struct DiskQueueDamageTests {
    static let nobody: UInt32 = 65534

    func folder() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-qdamage-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Push `n`: 1000 bytes of `n`, 10 samples.
    static func payload(_ n: Int) -> [UInt8] { Array(repeating: UInt8(truncatingIfNeeded: n), count: 1000) }

    /// 48 pushes of 10 samples in a queue of 16 KiB segments (15 records
    /// each): four segments.
    func filled(_ q: String) throws {
        let queue = try DiskQueue(folder: q, maxBytes: 256 * 1024, identity: 7)
        for n in 0..<48 { try queue.append(payload: Self.payload(n), samples: 10) }
    }

    func open(_ q: String) throws -> DiskQueue { try DiskQueue(folder: q, maxBytes: 256 * 1024, identity: 7) }

    /// Sends everything (each record's first byte says which push it is).
    func drain(_ queue: DiskQueue) throws -> (pushes: [Int], samples: UInt64, resent: [Int]) {
        var pushes: [Int] = []
        var resent: [Int] = []
        var samples: UInt64 = 0
        while let batch = queue.peek(maxBytes: 4000) {
            for payload in batch.payloads {
                pushes.append(Int(payload[0]))
                if batch.resent { resent.append(Int(payload[0])) }
            }
            samples += batch.samples
            try queue.markInFlight(batch)
            try queue.commit(batch)
        }
        return (pushes, samples, resent)
    }

    func segments(_ q: String) -> [String] { listDirectory(q).filter { $0.hasSuffix(".seg") || $0.hasSuffix(".damaged") }.sorted() }
    func aside(_ q: String) -> [String] { listDirectory(q).filter { $0.contains(".corrupt-") }.sorted() }

    func rewrite(_ path: String, _ change: (inout [UInt8]) -> Void) throws {
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        change(&bytes)
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Every sample is delivered or counted lost, whatever the damage.
    func expectAccounted(_ queue: DiskQueue, lost: UInt64, sourceLocation: SourceLocation = #_sourceLocation) throws -> [Int] {
        #expect(queue.counts.droppedCorrupt == lost, "\(queue.openingNotes)", sourceLocation: sourceLocation)
        let drained = try drain(queue)
        #expect(drained.samples + queue.counts.droppedCorrupt == 480, "delivered \(drained.samples)", sourceLocation: sourceLocation)
        #expect(drained.pushes == drained.pushes.sorted(), "oldest first: \(drained.pushes)", sourceLocation: sourceLocation)
        return drained.pushes
    }

    @Test func aCutSegmentLosesOnlyWhatWasCutAndCountsIt() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A segment in the middle cut at half, and the last one cut too.
        let q = dir + "/q"
        try filled(q)
        let names = segments(q)
        #expect(names.count == 4, "\(names)")
        // Seven whole records of the second segment are left, one of the last.
        #expect(truncate(q + "/" + names[1], 8000) == 0 && truncate(q + "/" + names[3], 1500) == 0)
        let queue = try open(q)
        let pushes = try expectAccounted(queue, lost: 100)
        #expect(pushes == Array(0..<22) + Array(30..<46), "\(pushes)")
        #expect(queue.openingNotes.contains { $0.contains("100 queued samples were lost to damage") }, "\(queue.openingNotes)")
        // The cut segments were read to their end, then set aside, not deleted.
        #expect(aside(q).count == 2 && aside(q).allSatisfy { $0.contains(".damaged.corrupt-") }, "\(aside(q))")
        #expect(segments(q).isEmpty)
        // Counted once: a restart does not count the same loss again.
        #expect(try open(q).counts.droppedCorrupt == 0)
    }

    @Test func aFlippedBitOrAWildLengthCostsOneRecord() throws {
        for damage in ["bit", "length"] {
            let dir = try folder()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let q = dir + "/q"
            try filled(q)
            let second = q + "/" + segments(q)[1]
            // Record 3 of the second segment (push 18).
            let at = DiskQueue.segmentHeaderBytes + 3 * (DiskQueue.headerBytes + 1000)
            try rewrite(second) { bytes in
                if damage == "bit" {
                    bytes[at + DiskQueue.headerBytes + 500] ^= 0x10
                } else {
                    for i in 4..<8 { bytes[at + i] = 0xFF }
                }
            }
            let queue = try open(q)
            let pushes = try expectAccounted(queue, lost: 10)
            #expect(pushes == Array(0..<18) + Array(19..<48), "\(damage): \(pushes)")
        }
    }

    @Test func aWildAckDeletesNothingAndEverythingIsPostedAgainAsPossiblySent() throws {
        for ack in ["18446744073709551615 9223372036854775807\n", "2 -5000 2 -1\n", "3 1000 200 0 0 0 deadbeef\n", "\u{1B}[2J garbage"] {
            let dir = try folder()
            defer { try? FileManager.default.removeItem(atPath: dir) }
            let q = dir + "/q"
            try filled(q)
            // Five pushes sent before the ack was damaged.
            do {
                let queue = try open(q)
                let batch = try #require(queue.peek(maxBytes: 5 * 1030))
                try queue.commit(batch)
            }
            try ack.write(toFile: q + "/ack", atomically: true, encoding: .utf8)
            let queue = try open(q)
            #expect(queue.openingNotes.contains { $0.contains("the ack file") }, "\(ack): \(queue.openingNotes)")
            #expect(!queue.openingNotes.joined().contains("\u{1B}"), "the note escapes what the file held")
            let drained = try drain(queue)
            // Nothing lost: the records left are all posted, the ones in the
            // first segment flagged as possibly sent (a refusal is a duplicate).
            #expect(Set(drained.pushes).isSuperset(of: Set(5..<48)), "\(ack.debugDescription): \(drained.pushes)")
            #expect(queue.counts.droppedCorrupt == 0)
            #expect(!drained.resent.isEmpty)
            #expect(aside(q).contains { $0.hasPrefix("ack.corrupt-") }, "the damaged ack is kept: \(listDirectory(q))")
        }
    }

    @Test func filesThatAreNoSegmentOfThisQueueAreSetAsideUnread() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = dir + "/q"
        try filled(q)
        // A number past what the sequence can count (SIGILL before).
        #expect(FileManager.default.createFile(atPath: q + "/18446744073709551615.seg", contents: Data()))
        // A FIFO (startup blocked forever before, deaf to SIGTERM).
        #expect(mkfifo(q + "/00000000000000000100.seg", 0o600) == 0)
        // A sparse gigabyte (read whole before: 1 GB of RSS).
        let giant = q + "/00000000000000000200.seg"
        #expect(FileManager.default.createFile(atPath: giant, contents: Data()))
        #expect(truncate(giant, 1 << 30) == 0)
        // A link to a victim file.
        let victim = dir + "/victim"
        try "twenty-five bytes, kept\n".write(toFile: victim, atomically: true, encoding: .utf8)
        try FileManager.default.createSymbolicLink(atPath: q + "/00000000000000000300.seg", withDestinationPath: victim)
        // A valid segment of another queue (another receiver's), copied in.
        let other = dir + "/other"
        do {
            let queue = try DiskQueue(folder: other, maxBytes: 256 * 1024, identity: 8)
            try queue.append(payload: Array(repeating: 0xEE, count: 1000), samples: 10)
        }
        let foreign = try #require(segments(other).first)
        try FileManager.default.copyItem(atPath: other + "/" + foreign, toPath: q + "/00000000000000000400.seg")
        // A name with a hard link elsewhere.
        #expect(link(q + "/" + segments(q)[0], dir + "/second-name") == 0)

        let rss = residentPeakKiB()
        let queue = try open(q)
        #expect(residentPeakKiB() - rss < 64 * 1024, "nothing read whole")
        let notes = queue.openingNotes.joined(separator: "\n")
        for what in [
            "18446744073709551615.seg", "a FIFO", "00000000000000000200.seg is 1073741824 bytes", "a symbolic link", "another queue", "hard links",
        ] {
            #expect(notes.contains(what), "\(what): \(notes)")
        }
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "twenty-five bytes, kept\n")
        // The hard-linked first segment went aside: its 15 pushes are
        // counted lost; the rest are posted, and never another queue's.
        #expect(queue.counts.droppedCorrupt == 150)
        let drained = try drain(queue)
        #expect(drained.pushes == Array(15..<48), "\(drained.pushes)")
        // Appending goes on after the highest real segment, without overflow.
        try queue.append(payload: Self.payload(99), samples: 10)
        #expect(queue.peek(maxBytes: 1 << 20)?.payloads.first?.first == 99)
        #expect(aside(q).count >= 6, "\(aside(q))")
    }

    @Test func anotherUsersSegmentOrFolderIsRefused() throws {
        try Netns.requireRoot()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = dir + "/q"
        try filled(q)
        // A forged segment, valid in every byte, but another user's.
        let forged = q + "/00000000000000000009.seg"
        try FileManager.default.copyItem(atPath: q + "/" + segments(q)[0], toPath: forged)
        try rewrite(forged) { bytes in
            // Its header names segment 9 (CRC made right), so only the owner tells.
            let header = DiskQueueTestBytes.segmentHeader(sequence: 9, identity: 7)
            bytes.replaceSubrange(0..<header.count, with: header)
        }
        #expect(chown(forged, Self.nobody, Self.nobody) == 0)
        let queue = try open(q)
        #expect(queue.openingNotes.contains { $0.contains("owned by uid 65534") }, "\(queue.openingNotes)")
        #expect(try drain(queue).samples == 480, "the forged copy is never posted")

        // A queue folder made by another user, or writable by all, is never adopted.
        for (owner, mode) in [(Self.nobody, 0o700), (0, 0o777)] as [(UInt32, mode_t)] {
            let planted = dir + "/planted-\(owner)-\(mode)"
            #expect(mkdir(planted, mode) == 0 && chmod(planted, mode) == 0 && chown(planted, owner, owner) == 0)
            let error = #expect(throws: SystemError.self) { try DiskQueue(folder: planted, maxBytes: 1 << 20) }
            #expect(error?.message.contains(owner == 0 ? "writable by every user" : "owned by uid 65534") == true, "\(String(describing: error))")
            #expect(listDirectory(planted).isEmpty, "nothing written in it")
        }
        // Sticky and root's (as /tmp): adopted.
        let sticky = dir + "/sticky"
        #expect(mkdir(sticky, 0o777) == 0 && chmod(sticky, 0o1777) == 0)
        _ = try DiskQueue(folder: sticky, maxBytes: 1 << 20)
    }

    @Test func theFirstReleasesQueueIsReadAndQueuedAgain() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = dir + "/q"
        #expect(mkdir(q, 0o700) == 0)
        // 0.1.0's format: 16-byte headers (IFQ2, length, samples, CRC of
        // samples and payload), no segment header; its ack says two records
        // of segment 1 were sent.
        var segment: [UInt8] = []
        for n in 0..<5 { segment += DiskQueueTestBytes.legacyRecord(payload: Self.payload(n), samples: 10) }
        try Data(segment).write(to: URL(fileURLWithPath: q + "/00000000000000000001.seg"))
        try "1 \(2 * (16 + 1000))\n".write(toFile: q + "/ack", atomically: true, encoding: .utf8)
        let queue = try DiskQueue(folder: q, maxBytes: 1 << 20, identity: 7)
        #expect(queue.openingNotes.contains { $0.contains("first release") }, "\(queue.openingNotes)")
        #expect(try drain(queue).pushes == [2, 3, 4])
        #expect(segments(q) == ["00000000000000000002.seg"], "the old segment went once queued again: \(listDirectory(q))")
    }

    func residentPeakKiB() -> Int {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return usage.ru_maxrss
    }
}

/// Bytes laid out as the formats say, written here apart from the queue's
/// own code.
enum DiskQueueTestBytes {
    static func le32(_ v: UInt32) -> [UInt8] { (0..<4).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }
    static func le64(_ v: UInt64) -> [UInt8] { (0..<8).map { UInt8(truncatingIfNeeded: v >> (8 * $0)) } }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 != 0 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
        }
        return crc ^ 0xFFFF_FFFF
    }

    static func segmentHeader(sequence: UInt64, identity: UInt64) -> [UInt8] {
        let head = Array("IFQS".utf8) + le32(3) + le64(sequence) + le64(identity) + le32(0)
        return head + le32(crc32(head))
    }

    static func legacyRecord(payload: [UInt8], samples: UInt32) -> [UInt8] {
        Array("IFQ2".utf8) + le32(UInt32(payload.count)) + le32(samples) + le32(crc32(le32(samples) + payload)) + payload
    }
}
