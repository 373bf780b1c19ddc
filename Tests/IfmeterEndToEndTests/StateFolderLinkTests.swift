import Foundation
import IfmeterTestSupport
import Testing

/// systemd's DynamicUser=yes makes /var/lib/ifmeter a link to
/// /var/lib/private/ifmeter: the service's state file is reached through a
/// linked folder. SQLITE_OPEN_NOFOLLOW refused every such path ("unable to
/// open database file"), so the packaged service never started. A link in
/// the folder is followed now (the file itself is still opened O_NOFOLLOW;
/// a link as the state file is checked by FileHardeningTests).
@Suite(.blocking) struct StateFolderLinkTests {
    @Test func aStateFileInALinkedFolderOpens() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-linked-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: root + "/private/ifmeter", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/ifmeter", withDestinationPath: "private/ifmeter")
        let state = root + "/ifmeter/state.db"
        let set = try ifmeter(["plan", "set", "lo", "--state", state, "--cycle-start", "1"])
        #expect(set.status == 0, "\(set.err)")
        #expect(FileManager.default.fileExists(atPath: root + "/private/ifmeter/state.db"))
        let list = try ifmeter(["plan", "list", "--state", state])
        #expect(list.status == 0 && list.out.contains("lo"), "\(list.err)")
        let usage = try ifmeter(["usage", "--state", state])
        #expect(usage.status == 0, "\(usage.err)")
        // A sampler writes it too (live's plain lines, stopped by SIGINT).
        let live = try run(
            ["timeout", "--preserve-status", "-s", "INT", "1.5", try ifmeterBinary(), "live", "--state", state, "--interval", "200ms"],
            allowFailure: true)
        #expect(live.status == 0 && !live.err.contains("Error"), "\(live.err)")
    }
}
