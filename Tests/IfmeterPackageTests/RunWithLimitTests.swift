import Foundation
import IfmeterTestSupport
import Testing

/// scripts/run-with-limit, which `make test` runs `swift test` under. Run
/// in a PID namespace of its own (`unshare --pid`): what the script sees,
/// and may stop, is what the test started there, never this test run.
@Suite(.enabled(if: Netns.enabled, Comment(rawValue: Netns.reason)), .blocking)
struct RunWithLimitTests {
    let script = repositoryRoot.appendingPathComponent("scripts/run-with-limit").path

    /// Runs `body` (bash) as the first process of a new PID namespace.
    func inPIDNamespace(_ body: String) throws -> String {
        try Netns.requireRoot()
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-limit-\(UUID().uuidString).sh").path
        defer { try? FileManager.default.removeItem(atPath: file) }
        try body.write(toFile: file, atomically: true, encoding: .utf8)
        return try run(["unshare", "--pid", "--fork", "--mount-proc", "bash", file], timeout: 90).out
    }

    /// Past the limit: the stacks of its own test process only (demangled
    /// when swift is not in PATH too), then the command and everything
    /// under it stopped; another test run's process is left alone.
    @Test func pastTheLimitOnlyTheCommandsTreeIsShownAndStopped() throws {
        let out = try inPIDNamespace(
            """
            bash -c 'exec -a other-run-PackageTests.xctest sleep 60' &
            other=$!
            PATH=/usr/bin:/bin '\(script)' 2 bash -c 'sleep 61 & exec -a this-run-PackageTests.xctest sleep 62' 2>"$0.err"
            echo "status $?"
            sleep 0.5
            kill -0 "$other" 2>/dev/null && echo "other run alive"
            ps -e -o args= | grep -E '^(sleep 6[12]|this-run.*)$' | sed 's/^/left: /'
            grep -c '^run-with-limit: where test process' "$0.err" | sed 's/^/stacks: /'
            grep -q '^TID' "$0.err" && echo "threads shown"
            grep -i 'not found' "$0.err"
            kill "$other"
            rm -f "$0.err"
            """)
        let lines = out.split(separator: "\n").map(String.init)
        #expect(lines.contains("status 1"), "\(out)")
        #expect(lines.contains("other run alive"), "another test run's process is not stopped: \(out)")
        #expect(!lines.contains { $0.hasPrefix("left: ") }, "nothing of the command's is left running: \(out)")
        #expect(lines.contains("stacks: 1"), "its own test process's stacks only: \(out)")
        #expect(lines.contains("threads shown") && !out.contains("not found"), "\(out)")
    }

    /// Stopped itself (CI cancelled): the command does not run on.
    @Test func aStoppedRunStopsTheCommand() throws {
        let out = try inPIDNamespace(
            """
            '\(script)' 100 bash -c 'sleep 63 & exec sleep 64' &
            limit=$!
            sleep 1
            kill -TERM "$limit"
            wait "$limit"
            echo "status $?"
            sleep 0.5
            ps -e -o args= | grep -E '^sleep 6[34]$' | sed 's/^/left: /'
            true
            """)
        let lines = out.split(separator: "\n").map(String.init)
        #expect(lines.contains("status 143"), "\(out)")
        #expect(!lines.contains { $0.hasPrefix("left: ") }, "\(out)")
    }

    /// Within the limit: the command's own exit status.
    @Test func theCommandsStatusIsTheRunsStatus() throws {
        let out = try inPIDNamespace(
            """
            '\(script)' 100 sh -c 'exit 3'
            echo "status $?"
            '\(script)' 100 grep SigIgn /proc/self/status
            """)
        #expect(out.contains("status 3"), "\(out)")
        // Run in the background, the command would ignore SIGINT and
        // SIGQUIT (bash's rule for background commands); ^C must stop it.
        let ignored = out.split(separator: "\n").first { $0.hasPrefix("SigIgn:") }.flatMap {
            UInt64($0.dropFirst(7).trimmingCharacters(in: .whitespaces), radix: 16)
        }
        #expect(ignored.map { $0 & (1 << (SIGINT - 1) | 1 << (SIGQUIT - 1)) == 0 } == true, "SIGINT and SIGQUIT not ignored: \(out)")
    }
}
