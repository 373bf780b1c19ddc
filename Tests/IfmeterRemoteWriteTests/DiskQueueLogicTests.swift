import Foundation
import IfmeterCore
import IfmeterRemoteWrite
import IfmeterSystem
import Testing

/// The queue's own logic, in process, through IfmeterSystem's files: what
/// goes in comes back in order, the bound drops the oldest and counts it,
/// and a start after a crash (a file cut anywhere) keeps every whole record.
@Suite struct DiskQueueLogicTests {
    func folder() throws -> String {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-qlogic-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        return dir
    }

    /// Push `n`: `size` bytes of `n`.
    static func payload(_ n: Int, size: Int = 100) -> [UInt8] { Array(repeating: UInt8(truncatingIfNeeded: n), count: size) }

    /// Everything queued, sent: each record's first byte and samples.
    func drain(_ queue: DiskQueue, batchBytes: Int = 1 << 20) throws -> (pushes: [Int], samples: UInt64) {
        var pushes: [Int] = []
        var samples: UInt64 = 0
        while let batch = queue.peek(maxBytes: batchBytes) {
            pushes += batch.payloads.map { Int($0[0]) }
            samples += batch.samples
            try queue.markInFlight(batch)
            try queue.commit(batch)
        }
        return (pushes, samples)
    }

    func segments(_ q: String) -> [String] { listDirectory(q).filter { $0.hasSuffix(".seg") }.sorted() }

    @Test func whatIsAppendedIsReadBackInOrderWithItsSamplesAndSizes() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let queue = try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20)
        #expect(queue.isEmpty)
        #expect(queue.peek(maxBytes: 1 << 20) == nil)
        for n in 0..<20 { try queue.append(payload: Self.payload(n, size: 50 + n), samples: UInt32(n + 1)) }
        #expect(!queue.isEmpty)
        let counts = queue.counts
        #expect(counts.samples == (1...20).reduce(0) { $0 + UInt64($1) })
        #expect(counts.bytes == UInt64((0..<20).reduce(0) { $0 + DiskQueue.headerBytes + 50 + $1 }), "a header and the payload per record")
        #expect(counts.droppedFull == 0 && counts.droppedCorrupt == 0)
        // A batch never passes its byte bound (unless one record does).
        var sizes: [Int] = []
        while let batch = queue.peek(maxBytes: 400) {
            #expect(batch.payloads.reduce(0) { $0 + $1.count + DiskQueue.headerBytes } <= 400 || batch.payloads.count == 1)
            for payload in batch.payloads {
                #expect(payload.allSatisfy { $0 == payload[0] }, "a record comes back whole")
                sizes.append(payload.count)
            }
            try queue.markInFlight(batch)
            try queue.commit(batch)
        }
        #expect(sizes == (0..<20).map { 50 + $0 })
        #expect(queue.isEmpty && queue.counts.bytes == 0)
        // Nothing is sent twice after a restart.
        let reopened = try DiskQueue(folder: dir + "/q", maxBytes: 1 << 20)
        #expect(reopened.isEmpty && reopened.counts.samples == 0)
    }

    @Test func theBoundDropsTheOldestWholeSegmentsFirstAndCountsEverySample() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = dir + "/q"
        // 64 KiB: segments of 16 KiB, 1 KB records.
        let queue = try DiskQueue(folder: q, maxBytes: 64 * 1024)
        var appended: UInt64 = 0
        for n in 0..<300 {
            try queue.append(payload: Self.payload(n, size: 1000), samples: 3)
            appended += 3
            let counts = queue.counts
            #expect(counts.bytes <= 64 * 1024, "after push \(n)")
            #expect(counts.samples + counts.droppedFull == appended, "every sample queued or counted dropped, after push \(n)")
        }
        // Old segments' files went with their records.
        #expect(segments(q).count <= 6, "\(segments(q))")
        // The bound holds after a restart too, and the count of what it
        // dropped is not counted again.
        let before = queue.counts
        let reopened = try DiskQueue(folder: q, maxBytes: 64 * 1024)
        #expect(reopened.counts.samples == before.samples)
        let sent = try drain(reopened, batchBytes: 8000)
        #expect(sent.samples == before.samples)
        #expect(sent.pushes.last == 299 % 256)
        #expect(zip(sent.pushes, sent.pushes.dropFirst()).allSatisfy { $1 == ($0 + 1) % 256 }, "the newest kept, oldest first, none missing")
    }

    @Test func aSmallerBoundAtTheNextStartDropsTheOldestThen() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = dir + "/q"
        do {
            let queue = try DiskQueue(folder: q, maxBytes: 1 << 20)
            for n in 0..<100 { try queue.append(payload: Self.payload(n, size: 1000), samples: 2) }
        }
        let smaller = try DiskQueue(folder: q, maxBytes: 32 * 1024)
        // The bound is enforced at the next append.
        try smaller.append(payload: Self.payload(100, size: 1000), samples: 2)
        let counts = smaller.counts
        #expect(counts.bytes <= 32 * 1024)
        #expect(counts.samples + counts.droppedFull == 202, "\(counts)")
        let sent = try drain(smaller)
        #expect(sent.pushes.last == 100)
    }

    @Test func aCrashWhileASegmentWasStartedLosesNoWholeRecord() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = dir + "/q"
        do {
            let queue = try DiskQueue(folder: q, maxBytes: 1 << 20)
            for n in 0..<40 { try queue.append(payload: Self.payload(n, size: 1000), samples: 1) }
        }
        let names = segments(q)
        #expect(!names.isEmpty)
        // A kill -9 after the next segment was created, before its header
        // reached the disk: the file is there, cut inside its header.
        let last = try #require(UInt64(names.last!.prefix(20)))
        let next = String(repeating: "0", count: 20 - String(last + 1).count) + String(last + 1) + ".seg"
        let header = try [UInt8](Data(contentsOf: URL(fileURLWithPath: q + "/" + names.last!))).prefix(DiskQueue.segmentHeaderBytes / 2)
        for cut in [0, header.count] {
            try Data(header.prefix(cut)).write(to: URL(fileURLWithPath: q + "/" + next))
            try setPermissions(q + "/" + next, 0o600)
            let reopened = try DiskQueue(folder: q, maxBytes: 1 << 20)
            #expect(reopened.counts.samples == 40, "every whole record, with \(cut) bytes of the new header: \(reopened.openingNotes)")
            #expect(reopened.counts.droppedCorrupt == 0)
        }
        // Appending goes on after them, and all come back in order.
        let reopened = try DiskQueue(folder: q, maxBytes: 1 << 20)
        try reopened.append(payload: Self.payload(200, size: 1000), samples: 1)
        let sent = try drain(try DiskQueue(folder: q, maxBytes: 1 << 20))
        #expect(sent.pushes == Array(0..<40) + [200])
    }

    @Test func aCrashInTheMiddleOfAnAppendKeepsTheRecordsBeforeItAndLaterOnes() throws {
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let q = dir + "/q"
        do {
            let queue = try DiskQueue(folder: q, maxBytes: 1 << 20)
            for n in 0..<5 { try queue.append(payload: Self.payload(n), samples: 4) }
        }
        let path = q + "/" + segments(q).last!
        let full = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        // Cut at every length inside the last record: header or payload.
        let lastStart = full.count - (DiskQueue.headerBytes + 100)
        for cut in [lastStart + 1, lastStart + DiskQueue.headerBytes - 1, lastStart + DiskQueue.headerBytes, full.count - 1] {
            let copy = dir + "/cut-\(cut)"
            try FileManager.default.createDirectory(atPath: copy, withIntermediateDirectories: false)
            for name in listDirectory(q) {
                let data = try Data(contentsOf: URL(fileURLWithPath: q + "/" + name))
                try (name == path.split(separator: "/").last.map(String.init) ? data.prefix(cut) : data)
                    .write(to: URL(fileURLWithPath: copy + "/" + name))
                try setPermissions(copy + "/" + name, 0o600)
            }
            try setPermissions(copy, 0o700)
            let reopened = try DiskQueue(folder: copy, maxBytes: 1 << 20)
            #expect(reopened.counts.samples == 16, "four whole records at a cut at \(cut)")
            #expect(reopened.counts.droppedCorrupt == 4, "the torn record's samples counted at a cut at \(cut): \(reopened.openingNotes)")
            try reopened.append(payload: Self.payload(9), samples: 4)
            let sent = try drain(try DiskQueue(folder: copy, maxBytes: 1 << 20))
            #expect(sent.pushes == [0, 1, 2, 3, 9], "at a cut at \(cut)")
        }
    }
}
