import Foundation
import IfmeterCore
import IfmeterRemoteWrite
import IfmeterSystem
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Issue 29, findings 1 and 3 to 5, as they were found: another local user
/// (nobody) planting the queue folder, its links and a forged segment for
/// root's serve; a full disk and a damaged queue under a pushing serve; a
/// receiver that redirects or never ends its answer; credentials in the
/// URL. Every serve runs in a namespace of the test's own, pushing to a
/// receiver there.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct RemoteWriteAbuseTests {
    static let nobody: UInt32 = 65534

    func folder(_ mode: mode_t = 0o755) throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-rwabuse-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        #expect(chmod(path, mode) == 0)
        return path
    }

    /// A shell command as nobody.
    func asNobody(_ command: String) throws {
        try run(["setpriv", "--reuid=\(Self.nobody)", "--regid=\(Self.nobody)", "--clear-groups", "sh", "-c", command])
    }

    static func hash(_ url: String) -> String {
        let hex = String(FNV1a.hash(url.utf8), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    func serveArguments(_ ns: TestNamespace, _ extra: [String]) throws -> [String] {
        ["ip", "netns", "exec", ns.name, try ifmeterBinary(), "serve", "--interval", "200ms", "--remote-write-interval", "200ms"] + extra
    }

    /// serve in the foreground, for starts that must fail (a limit, so an
    /// ifmeter that starts anyway fails the test instead of hanging it).
    func serveOnce(_ ns: TestNamespace, _ extra: [String]) throws -> (out: String, err: String, status: Int32) {
        try run(["timeout", "10"] + serveArguments(ns, ["--listen", "none"] + extra), allowFailure: true)
    }

    func metric(_ ns: TestNamespace, _ port: UInt16, _ prefix: String) -> Double? {
        guard let text = try? RawHTTP.request("/metrics", port: port, in: ns.name).text else { return nil }
        return text.split(separator: "\n").first { $0.hasPrefix(prefix) }.flatMap { $0.split(separator: " ").last.flatMap { Double($0) } }
    }

    /// One push's request as the queue holds it: a snappy block of series.
    static func push(_ interface: String, value: Double) throws -> [UInt8] {
        try RemoteWriteLibraries.load()
        var out = ProtobufWriter()
        RemoteWriteEncoding.appendTimeSeries(
            to: &out, labels: [("__name__", "ifmeter_transmit_bytes_total"), ("interface", interface)], value: value,
            timestampMs: Int64(wallClock() * 1000))
        return try #require(RemoteWriteLibraries.compress(out.bytes))
    }

    @Test func aQueueFolderOrStateFolderAnotherUserControlsIsRefused() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // A shared folder, as /tmp: root's, sticky, open to all.
        let shared = dir + "/shared"
        #expect(mkdir(shared, 0o755) == 0 && chmod(shared, 0o1777) == 0)
        // A root file nobody cannot read, for the planted links.
        let victims = dir + "/victims"
        #expect(mkdir(victims, 0o700) == 0)
        let victim = victims + "/victim"
        try "25 bytes that stay here.\n".write(toFile: victim, atomically: true, encoding: .utf8)
        let url = "http://127.0.0.1:49611/api/v1/write"
        // nobody makes the queue folder root's serve will use, and plants a
        // link where its first segment goes.
        try asNobody(
            "mkdir -p \(shared)/s.db.remote-write/\(Self.hash(url)) && ln -s \(victim) \(shared)/s.db.remote-write/\(Self.hash(url))/00000000000000000001.seg"
        )
        var result = try serveOnce(ns, ["--state", shared + "/s.db", "--remote-write", url])
        #expect(result.status == 1, "\(result)")
        #expect(result.err.split(separator: "\n").count == 1 && result.err.contains("owned by uid 65534"), "\(result.err)")
        #expect(result.err.contains("--remote-write-queue"), "the line says what to do: \(result.err)")
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "25 bytes that stay here.\n", "the link was not followed")
        #expect(!FileManager.default.fileExists(atPath: shared + "/s.db"), "nothing written: the check comes before the state file")

        // --remote-write-queue naming a folder nobody made.
        try asNobody("mkdir \(shared)/q")
        result = try serveOnce(ns, ["--remote-write-queue", shared + "/q", "--remote-write", url])
        #expect(result.status == 1 && result.err.contains("owned by uid 65534"), "\(result)")

        // The state file's own folder, another user's: serve and plan refuse it.
        let theirs = dir + "/theirs"
        #expect(mkdir(theirs, 0o755) == 0 && chown(theirs, Self.nobody, Self.nobody) == 0)
        result = try run(
            [
                "timeout", "10", "ip", "netns", "exec", ns.name, try ifmeterBinary(), "serve", "--listen", "127.0.0.1:49621", "--state",
                theirs + "/s.db",
            ],
            allowFailure: true)
        #expect(result.status == 1 && result.err.contains("its folder") && result.err.contains("owned by uid 65534"), "\(result)")
        // With remote write, its queue (beside the state file) is refused first.
        result = try serveOnce(ns, ["--state", theirs + "/s.db", "--remote-write", url])
        #expect(result.status == 1 && result.err.contains("owned by uid 65534"), "\(result)")
        let plan = try ifmeter(["plan", "set", "eth0", "--state", theirs + "/s.db", "--cycle-start", "1", "--quota", "1GB"])
        #expect(plan.status == 1 && plan.err.contains("its folder"), "\(plan)")
        #expect(listDirectory(theirs).isEmpty, "nothing written in their folder")
    }

    @Test func aForgedSegmentIsNeverPostedWithRootsCredentials() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let receiver = try RemoteWriteReceiver(in: ns.name, port: 49612, folder: dir)
        let url = "http://127.0.0.1:49612/api/v1/write"
        try "bearer_token_file: \(dir)/token\n".write(toFile: dir + "/rw.yml", atomically: true, encoding: .utf8)
        try "roots-secret-token\n".write(toFile: dir + "/token", atomically: true, encoding: .utf8)
        // A valid segment, in every byte what this queue writes, with a
        // forged sample, in a folder nobody made.
        let shared = dir + "/shared"
        #expect(mkdir(shared, 0o755) == 0 && chmod(shared, 0o1777) == 0)
        let planted = shared + "/s.db.remote-write/" + Self.hash(url)
        do {
            try FileManager.default.createDirectory(atPath: shared + "/s.db.remote-write", withIntermediateDirectories: false)
            let queue = try DiskQueue(folder: planted, maxBytes: 1 << 20, identity: FNV1a.hash(url.utf8))
            try queue.append(payload: try Self.push("FORGED-by-nobody", value: 1e15), samples: 1)
        }
        try run(["chown", "-R", "\(Self.nobody):\(Self.nobody)", shared + "/s.db.remote-write"])
        let result = try serveOnce(ns, ["--state", shared + "/s.db", "--remote-write", url, "--remote-write-config", dir + "/rw.yml"])
        #expect(result.status == 1 && result.err.contains("owned by uid 65534"), "\(result)")
        #expect(receiver.requests.isEmpty, "nothing posted: \(receiver.requests)")

        // The same segment in root's own queue folder, but nobody's file:
        // set aside, said, and never posted; root's own pushes go on.
        let own = dir + "/own"
        #expect(mkdir(own, 0o700) == 0)
        try run(["chown", "-R", "0:0", shared + "/s.db.remote-write"])
        #expect(rename(shared + "/s.db.remote-write", own + "/s.db.remote-write") == 0)
        let segment = try #require(listDirectory(own + "/s.db.remote-write/" + Self.hash(url)).first { $0.hasSuffix(".seg") })
        #expect(chown(own + "/s.db.remote-write/" + Self.hash(url) + "/" + segment, Self.nobody, Self.nobody) == 0)
        let serve = try Background(
            try serveArguments(
                ns, ["--listen", "none", "--state", own + "/s.db", "--remote-write", url, "--remote-write-config", dir + "/rw.yml"]),
            name: "serve-forged")
        _ = try waitFor("root's own pushes") { receiver.requests.count >= 3 ? true : nil }
        #expect(serve.stop() == 0)
        #expect(serve.log.contains("owned by uid 65534") && serve.log.contains("never posted"), "\(serve.log)")
        for n in 1...receiver.requests.count {
            let series = try #require(RemoteWriteLibraries.uncompress(receiver.body(n)))
            #expect(!String(decoding: series, as: UTF8.self).contains("FORGED"), "request \(n) carried the forged sample")
        }
    }

    @Test func samplesAFullDiskOrADamagedQueueCostAreCountedAndSaid() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let url = "http://127.0.0.1:49613/api/v1/write"
        let queueFolder = dir + "/q"
        #expect(mkdir(queueFolder, 0o700) == 0)
        // A damaged queue from before: five pushes of 7 samples, one bit
        // flipped in the third; and a FIFO and an empty file named past what
        // a sequence can count beside them.
        let perURL = queueFolder + "/" + Self.hash(url)
        do {
            let queue = try DiskQueue(folder: perURL, maxBytes: 1 << 20, identity: FNV1a.hash(url.utf8))
            for n in 0..<5 { try queue.append(payload: try Self.push("before-\(n)", value: Double(n)), samples: 7) }
        }
        let segment = perURL + "/" + (try #require(listDirectory(perURL).first { $0.hasSuffix(".seg") }))
        var bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: segment)))
        let recordBytes = (bytes.count - DiskQueue.segmentHeaderBytes) / 5
        bytes[DiskQueue.segmentHeaderBytes + 2 * recordBytes + DiskQueue.headerBytes + 3] ^= 0x01
        try Data(bytes).write(to: URL(fileURLWithPath: segment))
        #expect(mkfifo(perURL + "/00000000000000000007.seg", 0o600) == 0)
        #expect(FileManager.default.createFile(atPath: perURL + "/18446744073709551615.seg", contents: Data()))
        // The disk then fills: the queue lives on a 100 KiB tmpfs, with the
        // receiver down.
        let mounted = dir + "/small"
        #expect(mkdir(mounted, 0o700) == 0)
        try run(["mount", "-t", "tmpfs", "-o", "size=100k,mode=0700", "tmpfs", mounted])
        defer { _ = try? run(["umount", "-l", mounted], allowFailure: true) }
        try run(["cp", "-a", perURL, mounted + "/"])

        let serve = try Background(
            try serveArguments(ns, ["--listen", "127.0.0.1:49614", "--remote-write-queue", mounted, "--remote-write", url]), name: "serve-full")
        defer { _ = serve.stop() }
        // Started, not hung on the FIFO, not crashed on the name.
        let corrupt = try waitFor("the damage counted") { () -> Double? in
            try serve.requireRunning()
            return metric(ns, 49614, #"ifmeter_remote_write_samples_dropped_total{reason="corrupt""#)
        }
        #expect(corrupt == 7, "the flipped record's samples: \(serve.log)")
        #expect(serve.log.contains("7 queued samples were lost to damage"), "\(serve.log)")
        #expect(serve.log.contains("a FIFO") && serve.log.contains("18446744073709551615.seg"), "\(serve.log)")
        // Filling the disk: what cannot be queued is counted, and said.
        let failed = try waitFor("pushes that cannot be queued", timeout: 60) { () -> Double? in
            guard let n = metric(ns, 49614, #"ifmeter_remote_write_samples_dropped_total{reason="write_failed""#), n > 0 else { return nil }
            return n
        }
        #expect(serve.log.contains("No space left on device") && serve.log.contains("reason write_failed"), "\(serve.log)")
        // The receiver comes up: what the queue held arrives, none twice.
        let receiver = try RemoteWriteReceiver(in: ns.name, port: 49613, folder: dir)
        _ = try waitFor("the queue drained") { metric(ns, 49614, "ifmeter_remote_write_queue_samples{") == 0 ? true : nil }
        var before: [String] = []
        for n in 1...receiver.requests.count {
            let text = String(decoding: try #require(RemoteWriteLibraries.uncompress(receiver.body(n))), as: UTF8.self)
            for i in 0..<5 where text.contains("before-\(i)") { before.append("before-\(i)") }
        }
        #expect(before == ["before-0", "before-1", "before-3", "before-4"], "the whole records, once, in order: \(before)")
        #expect(serve.stop() == 0, "a clean stop on SIGTERM")
        print("remote write, full disk: \(Int(failed)) samples dropped (write_failed), 7 lost to a flipped bit")
    }

    @Test func redirectsAreFollowedAndAnEndlessAnswerIsCut() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        // 307 from /old to /api/v1/write: followed, the POST and its body kept.
        let redirecting = try RemoteWriteReceiver(in: ns.name, port: 49615, folder: dir, behaviour: .redirect)
        var serve = try Background(
            try serveArguments(
                ns, ["--listen", "127.0.0.1:49616", "--remote-write-queue", dir + "/q1", "--remote-write", "http://127.0.0.1:49615/old"]),
            name: "serve-redirect")
        _ = try waitFor("pushes that followed the redirect") {
            redirecting.requests.filter { $0.path == "/api/v1/write" && $0.status == 204 && $0.bodyBytes > 0 }.count >= 2 ? true : nil
        }
        let sent = try waitFor("sent counted") { metric(ns, 49616, "ifmeter_remote_write_samples_sent_total{").flatMap { $0 > 0 ? $0 : nil } }
        #expect(metric(ns, 49616, #"ifmeter_remote_write_samples_dropped_total{reason="rejected""#) == 0, "none refused: \(serve.log)")
        #expect(serve.stop() == 0)
        print("remote write, 307: \(Int(sent)) samples sent through \(redirecting.requests.count) requests")

        // 200 and a body that never ends: read up to a cap, then cut.
        try FileManager.default.createDirectory(atPath: dir + "/e", withIntermediateDirectories: false)
        let endless = try RemoteWriteReceiver(in: ns.name, port: 49617, folder: dir + "/e", behaviour: .endlessBody)
        serve = try Background(
            try serveArguments(
                ns, ["--listen", "127.0.0.1:49618", "--remote-write-queue", dir + "/q2", "--remote-write", "http://127.0.0.1:49617/api/v1/write"]),
            name: "serve-endless")
        let answered = try waitFor("three answers cut short") { () -> [Int]? in
            let done = endless.requests.map(\.sentBytes)
            return done.count >= 3 ? done : nil
        }
        #expect(answered.allSatisfy { $0 < 16 << 20 }, "at most the cap and the socket's buffers each: \(answered)")
        #expect((metric(ns, 49618, "ifmeter_remote_write_samples_sent_total{") ?? 0) > 0, "a 200 is a success: \(serve.log)")
        #expect(serve.stop() == 0)
    }

    @Test func credentialsStayOutOfTheCommandLineLabelsAndLogs() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try folder()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let userinfo = try serveOnce(ns, ["--remote-write", "http://alice:hunter2@127.0.0.1:49619/api/v1/write", "--remote-write-queue", dir + "/q"])
        #expect(userinfo.status == 64, "\(userinfo)")
        #expect(userinfo.err.contains("--remote-write-config") && !userinfo.err.contains("hunter2"), "\(userinfo.err)")
        // A key in the query string is sent, but shown nowhere.
        let serve = try Background(
            try serveArguments(
                ns,
                [
                    "--listen", "127.0.0.1:49620", "--remote-write-queue", dir + "/q", "--remote-write",
                    "http://127.0.0.1:49619/api/v1/write?api_key=SECRET",
                ]
            ), name: "serve-query")
        let text = try waitFor("a failed push said") { () -> String? in
            guard serve.log.contains("retrying") else { return nil }
            return try? RawHTTP.request("/metrics", port: 49620, in: ns.name).text
        }
        #expect(text.contains(#"url="http://127.0.0.1:49619/api/v1/write""#), "the label without its query")
        #expect(!text.contains("SECRET") && !serve.log.contains("SECRET"), "\(serve.log)")
        #expect(serve.stop() == 0)
    }
}
