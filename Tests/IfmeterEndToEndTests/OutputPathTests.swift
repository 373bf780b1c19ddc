import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Files ifmeter writes, as an attacker or a careless operator leaves them:
/// a device node, a FIFO or a folder at the path; a file another user
/// made or anyone may write; a folder link another user owns; hard links.
/// Each is refused at start with one line, and nothing there is changed.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .serialized, .blocking)
struct OutputPathTests {
    /// A 0777 folder, as /tmp is, with what `nobody` could leave in it.
    final class PublicFolder {
        let folder: ScenarioFolder
        var path: String { folder.path }

        init(_ name: String) throws {
            folder = try ScenarioFolder(name)
            chmod(folder.path, 0o1777)
        }

        subscript(_ file: String) -> String { folder[file] }

        /// A file `nobody` makes, mode 0666.
        func foreignFile(_ name: String, contents: String = "") throws -> String {
            try run([
                "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c",
                "umask 0; printf '%s' '\(contents)' > '\(self[name])'",
            ])
            return self[name]
        }
    }

    /// One line on stderr, the exit code, and what was there is untouched.
    func expectRefused(_ arguments: [String], status: Int32, mentioning needle: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let result = try ifmeter(arguments)
        #expect(result.status == status, "\(arguments): \(result)", sourceLocation: sourceLocation)
        #expect(
            result.err.split(separator: "\n").count == 1 && result.err.hasPrefix("Error: ") && result.err.contains(needle),
            "\(arguments): \(result.err)", sourceLocation: sourceLocation)
    }

    /// Finding 2 of the hardening issue: `mknod /tmp/n c 1 3; ifmeter
    /// export --json /tmp/n` turned the device node into a regular file
    /// (--textfile too; as root, --json /dev/null would replace /dev/null);
    /// a folder, or '', as the target was accepted and retried forever.
    @Test func aDeviceFIFOOrFolderIsNoOutput() throws {
        try Netns.requireRoot()
        let dir = try PublicFolder("device-targets")
        try run(["mknod", dir["n"], "c", "1", "3"])
        try run(["mkfifo", dir["fifo"]])
        for (option, extra) in [("--json", [String]()), ("--textfile", []), ("--json-lines", [])] {
            try expectRefused(["export", option, dir["n"], "--every", "1s"] + extra, status: 64, mentioning: "a character device")
            try expectRefused(["export", option, dir["fifo"], "--every", "1s"], status: 64, mentioning: "a FIFO")
            try expectRefused(["export", option, dir.path, "--every", "1s"], status: 64, mentioning: "a folder")
            try expectRefused(["export", option, "", "--every", "1s"], status: 64, mentioning: "expected a file name")
        }
        try expectRefused(["export", "--json", "/dev/null", "--every", "1s"], status: 64, mentioning: "a character device")
        try expectRefused(["serve", "--state", dir["n"], "--listen", "127.0.0.1:1"], status: 64, mentioning: "a character device")
        try expectRefused(["record", "-o", dir["fifo"], "--count", "1"], status: 64, mentioning: "a FIFO")
        var st = stat()
        #expect(lstat(dir["n"], &st) == 0 && (st.st_mode & S_IFMT) == S_IFCHR, "the device node is still one")
        #expect(lstat("/dev/null", &st) == 0 && (st.st_mode & S_IFMT) == S_IFCHR)
    }

    /// Finding 3: a state file or JSON Lines file that `nobody` made (0666)
    /// in a 0777 folder was adopted by root without a word; that user could
    /// then change it under ifmeter (the usage crash of finding 4 went this
    /// way). Refused, unless --allow-foreign-files.
    @Test func filesOfAnotherUserOrWritableByAllAreRefused() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try PublicFolder("foreign-files")
        let state = try dir.foreignFile("state.db")
        let lines = try dir.foreignFile("r.jsonl")
        try expectRefused(["export", "--state", state, "--json", dir["r.json"], "--every", "1s"], status: 1, mentioning: "owned by uid 65534")
        try expectRefused(["export", "--json-lines", lines, "--every", "1s"], status: 1, mentioning: "owned by uid 65534")
        try expectRefused(["plan", "set", "eth0", "--state", state, "--cycle-start", "1"], status: 1, mentioning: "owned by uid 65534")
        // Root's own file, but writable by all.
        let open = dir["open.jsonl"]
        #expect(FileManager.default.createFile(atPath: open, contents: nil))
        chmod(open, 0o666)
        try expectRefused(["export", "--json-lines", open, "--every", "1s"], status: 1, mentioning: "writable by every user")
        // The operator's word: used all the same.
        let allowed = try Scenario.start(ns, "export", ["--json-lines", lines, "--every", "200ms", "--allow-foreign-files"])
        _ = try waitFor("a report in the foreign file") {
            ((try? String(contentsOfFile: lines, encoding: .utf8)) ?? "").contains("ifmeter.export") ? true : nil
        }
        #expect(allowed.stop() == 0)
    }

    /// Finding 3: a symlink owned by `nobody` used as a folder on the path
    /// (`--json /tmp/pub/d/r.json`, `d` pointing to a root-only folder) was
    /// followed silently.
    @Test func aFolderLinkOfAnotherUserIsRefused() throws {
        try Netns.requireRoot()
        let dir = try PublicFolder("foreign-link")
        let rootOnly = try ScenarioFolder("root-only")
        chmod(rootOnly.path, 0o700)
        try run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "ln", "-s", rootOnly.path, dir["d"]])
        try expectRefused(
            ["export", "--json", dir["d"] + "/r.json", "--every", "1s"], status: 1, mentioning: "on the way, is a symbolic link owned by uid 65534")
        let stateFolder = try ScenarioFolder("link-state")
        let state = stateFolder["state.db"]
        #expect(try ifmeter(["plan", "set", "eth0", "--state", state, "--cycle-start", "1"]).status == 0)
        try expectRefused(["usage", "--state", state, "--svg", dir["d"] + "/u.svg"], status: 1, mentioning: "on the way")
        try expectRefused(["usage", "--state", state, "--png", dir["d"] + "/u.png"], status: 1, mentioning: "on the way")
        #expect(!FileManager.default.fileExists(atPath: rootOnly["r.json"]))
        // Root's own link on the way is followed.
        try run(["ln", "-s", rootOnly.path, dir["mine"]])
        let ok = try ifmeter(["record", "--count", "1", "--interval", "100ms", "-o", dir["mine"] + "/t.jsonl"])
        #expect(ok.status == 0 && FileManager.default.fileExists(atPath: rootOnly["t.jsonl"]), "\(ok.err)")
    }

    /// Finding 3: hard links at -wal, -shm or the JSON Lines name wrote
    /// into the linked file (on hosts with fs.protected_hardlinks=0 anyone
    /// can make one). A file written in place with more than one link is
    /// refused; a file that is replaced whole (--json) is renamed over, so
    /// the other name keeps what it had.
    @Test func hardLinksAreRefusedWhereTheFileIsWrittenInPlace() throws {
        try Netns.requireRoot()
        let ns = try TestNamespace()
        let dir = try ScenarioFolder("hard-links")
        let victim = dir["victim"]
        try "precious\n".write(toFile: victim, atomically: true, encoding: .utf8)
        for name in ["r.jsonl", "state.db-wal", "state.db-shm", "t.jsonl"] { link(victim, dir[name]) }
        try expectRefused(["export", "--json-lines", dir["r.jsonl"], "--every", "1s"], status: 1, mentioning: "hard links")
        try expectRefused(["export", "--state", dir["state.db"], "--json", dir["r.json"], "--every", "1s"], status: 1, mentioning: "hard links")
        try expectRefused(["record", "-o", dir["t.jsonl"], "--count", "1"], status: 1, mentioning: "hard links")
        link(victim, dir["r.json"])
        let exporter = try Scenario.start(ns, "export", ["--json", dir["r.json"], "--every", "200ms"])
        _ = try waitFor("the report") {
            ((try? String(contentsOfFile: dir["r.json"], encoding: .utf8)) ?? "").contains("ifmeter.export") ? true : nil
        }
        #expect(exporter.stop() == 0)
        #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n", "no name of the victim was written")
    }

    /// Finding 7: `plan remove NAME` for a missing plan exited 64 but
    /// rewrote the file's `started`; and an empty trace, or one without a
    /// sample, replayed with exit 0.
    @Test func smallerOnes() throws {
        let dir = try ScenarioFolder("smaller")
        let state = dir["state.db"]
        #expect(try ifmeter(["plan", "set", "eth0", "--state", state, "--cycle-start", "3"]).status == 0)
        let before = try run(["sqlite3", state, "SELECT key, value FROM meta ORDER BY key"]).out
        let missing = try ifmeter(["plan", "remove", "wlan9", "--state", state])
        #expect(missing.status == 64)
        #expect(try run(["sqlite3", state, "SELECT key, value FROM meta ORDER BY key"]).out == before, "the file's meta is as it was")
        for (what, text) in [("empty", ""), ("a header alone", #"{"trace":"ifmeter/1"}"# + "\n"), ("blank lines", "\n\n")] {
            let replay = try ifmeter(["replay", "-"], input: text)
            #expect(replay.status == 65 && replay.err.contains("no sample line"), "\(what): \(replay)")
            #expect(replay.out.isEmpty)
        }
    }
}
