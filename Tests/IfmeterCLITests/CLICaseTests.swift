import Foundation
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The command-line cases issue 15 lists, each with its message and exit
/// code: a pattern that matches nothing, a typo in an option or a
/// subcommand, and permission errors that say which privilege is missing.
/// (`--listen :PORT`, names and `[v6]:PORT` are in ServeTests; `--netns`
/// without CAP_SYS_ADMIN in NamespaceAndEventTests.)
@Suite struct CLICaseTests {
    @Test func aPatternThatMatchesNothingIsSaid() throws {
        let result = try ifmeter(["list", "--include", "wlan9", "--exclude", "nothing-like-this*"])
        #expect(result.status == 0, "an empty selection is not an error")
        #expect(result.err.contains("Warning: --include 'wlan9' matches no interface; see 'ifmeter list' for their names."), "\(result.err)")
        #expect(result.err.contains("Warning: --exclude 'nothing-like-this*' matches no interface"), "\(result.err)")
        let fine = try ifmeter(["list", "--include", "lo"])
        #expect(fine.status == 0 && !fine.err.contains("Warning"), "\(fine.err)")
        // replay: over every sample of the trace.
        let trace = repositoryRoot.appendingPathComponent("Fixtures/traces/recreation.jsonl").path
        let replay = try ifmeter(["replay", trace, "--format", "text", "--include", "wg0,wlan9"])
        #expect(replay.status == 0 && replay.out.contains("wg0"))
        #expect(replay.err == "Warning: --include 'wlan9' matches no interface in the trace.\n", "\(replay.err)")
    }

    @Test func typosGetADidYouMean() throws {
        for (arguments, message) in [
            (["serv"], "Error: unknown subcommand 'serv' (did you mean 'serve'?). See 'ifmeter --help'."),
            (["sampel"], "Error: unknown subcommand 'sampel' (did you mean 'sample'?). See 'ifmeter --help'."),
            (["sample", "--coutn", "2"], "Error: unknown option '--coutn' (did you mean '--count'?). See 'ifmeter sample --help'."),
            (["serve", "--listn", ":1"], "Error: unknown option '--listn' (did you mean '--listen'?). See 'ifmeter serve --help'."),
            (["list", "--incl", "x"], "Error: unknown option '--incl' (did you mean '--include'?). See 'ifmeter list --help'."),
            (["list", "--frobnicate"], "Error: unknown option '--frobnicate'. See 'ifmeter list --help'."),
            (["xyzzy"], "Error: unknown subcommand 'xyzzy'. See 'ifmeter --help'."),
        ] {
            let result = try ifmeter(arguments)
            #expect(result.status == 64, "\(arguments)")
            #expect(result.err == message + "\n", "\(arguments): \(result.err)")
        }
    }

    /// A folder another user owns: the error says whose it is, its mode,
    /// and who ifmeter runs as; for a folder on the way, which one.
    @Test func permissionErrorsSayWhatIsMissing() throws {
        try Netns.requireRoot()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-perm-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder + "/locked", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        chmod(folder, 0o755)
        chmod(folder + "/locked", 0o700)
        let binary = try ifmeterBinary()
        func asNobody(_ arguments: [String]) throws -> (out: String, err: String, status: Int32) {
            try run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", binary] + arguments, allowFailure: true)
        }
        let direct = try asNobody(["export", "--json", folder + "/locked/r.json", "--every", "1s"])
        #expect(direct.status == 1)
        #expect(direct.err.contains("no permission to write in \(folder)/locked: it is owned by uid 0, gid 0, mode 0700, and ifmeter runs as uid 65534, gid 65534"),
                "\(direct.err)")
        let below = try asNobody(["export", "--json", folder + "/locked/sub/r.json", "--every", "1s"])
        #expect(below.status == 1)
        #expect(below.err.contains("\(folder)/locked, on the way, is owned by uid 0, gid 0, mode 0700"), "\(below.err)")
        // A state file that cannot be read is said to be so (not missing,
        // not damaged): exit 1.
        let state = try asNobody(["usage", "--state", folder + "/locked/state.db"])
        #expect(state.status == 1 && state.err.lowercased().contains("permission"), "\(state.err)")
    }
}
