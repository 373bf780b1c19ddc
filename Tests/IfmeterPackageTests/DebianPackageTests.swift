import Foundation
@testable import IfmeterCLI
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The Debian package `make deb` builds (issue 24), installed on this
/// machine with `dpkg -i`, checked where Debian expects each file, then
/// removed and purged: nothing of it is left.
///
/// `make test` runs `make deb` beside the test run and this suite after it
/// (scripts/test-beside-release; building it here would wait forever on
/// SwiftPM's lock, which this run holds), so the test only reads
/// .build/deb/ifmeter_VERSION_ARCH.deb and fails when it is missing.
/// It needs root (dpkg); without root it skips, unless IFMETER_REQUIRE_NETNS=1
/// makes that a failure. It changes the machine, so it refuses to start
/// when ifmeter is there already (installed by dpkg or `make install`, or
/// a service's totals in /var/lib/ifmeter), and purges the package on every
/// way out.
@Suite(.enabled(if: DebianPackage.enabled, Comment(rawValue: DebianPackage.reason)), .serialized, .blocking)
struct DebianPackageTests {
    @Test func theDebSaysWhatItIsAndHoldsAStaticallyLinkedSwiftBinary() throws {
        let deb = try DebianPackage.file()
        func field(_ name: String) throws -> String {
            try run(["dpkg-deb", "--field", deb, name]).out.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try field("Package") == "ifmeter")
        #expect(try field("Version") == IfmeterCLI.version)
        #expect(try field("Architecture") == DebianPackage.architecture())
        // From dh_shlibdeps (the libraries the binary links) and the two it
        // loads with dlopen(): libmicrohttpd12 for serve, libcrypt1.
        let depends = try field("Depends").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let names = depends.map { String($0.prefix { $0 != " " && $0 != "(" }) }
        for wanted in ["libc6", "libnl-3-200", "libsqlite3-0", "zlib1g", "libmicrohttpd12", "libcrypt1"] {
            #expect(names.contains(wanted), "Depends: \(depends)")
        }
        // cairo is loaded with dlopen() by usage --png only: recommended,
        // as remote write's libcurl4 and libsnappy1v5 are.
        #expect(!names.contains("libcairo2"), "Depends: \(depends)")
        let recommends = try field("Recommends").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        for wanted in ["libcairo2", "libcurl4", "libsnappy1v5"] {
            #expect(recommends.contains { $0.hasPrefix(wanted) }, "Recommends: \(recommends)")
        }
        #expect(!names.contains { $0.hasPrefix("libstdc++") || $0.hasPrefix("libswift") }, "Depends: \(depends)")
        // The Swift runtime and libstdc++ are inside the binary.
        let work = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-deb-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: work) }
        try run(["dpkg-deb", "--extract", deb, work.path])
        let dynamic = try run(["readelf", "-dW", work.path + "/usr/bin/ifmeter"]).out
        let needed = dynamic.split(separator: "\n").filter { $0.contains("(NEEDED)") }
        #expect(!needed.isEmpty)
        #expect(!needed.contains { $0.contains("libswift") || $0.contains("libFoundation") || $0.contains("libstdc++") }, "\(needed)")
        #expect(!dynamic.contains("(RUNPATH)") && !dynamic.contains("(RPATH)"), "no search path into the toolchain")
    }

    @Test func installsWhereDebianExpectsThenRemovesAndPurgesToNothing() throws {
        try DebianPackage.requireRoot()
        let deb = try DebianPackage.file()
        try DebianPackage.refuseWhenIfmeterIsHere()
        let before = try DebianPackage.traces()
        // From here on the machine is changed: put back on every way out.
        var madePrivate = false
        defer {
            DebianPackage.purgeQuietly()
            try? FileManager.default.removeItem(atPath: "/var/lib/ifmeter")
            try? FileManager.default.removeItem(atPath: "/var/lib/private/ifmeter")
            if madePrivate { try? FileManager.default.removeItem(atPath: "/var/lib/private") }
        }
        let install = try run(["dpkg", "-i", deb])
        print("dpkg -i \(deb):\n\(install.out)\(install.err)")
        #expect(try DebianPackage.status() == "install ok installed")

        // The binary, this build's.
        #expect(try run(["/usr/bin/ifmeter", "--version"]).out == "ifmeter \(IfmeterCLI.version)\n")
        #expect(
            try run(["/usr/bin/ifmeter", "serve", "--help"]).out == ServeCommand.spec.help,
            "the package is older than this build: run 'make deb'")
        #expect(try run(["dpkg-query", "-S", "/usr/bin/ifmeter"]).out.hasPrefix("ifmeter: "))

        // The unit, where systemd reads packages' units, verified; enabled
        // by its postinst (no systemd runs here to start it).
        let unit = "/lib/systemd/system/ifmeter-serve.service"
        let text = try String(contentsOfFile: unit, encoding: .utf8)
        #expect(text.contains("ExecStart=/usr/bin/ifmeter serve --config /etc/ifmeter/ifmeter.yml --state /var/lib/ifmeter/state.db\n"))
        // The config file it reads: a conffile (kept when edited, on
        // upgrades), every setting commented out, and good.
        let conffiles = try run(["dpkg-query", "-W", "-f=${Conffiles}", "ifmeter"]).out
        #expect(conffiles.contains("/etc/ifmeter/ifmeter.yml "), "\(conffiles)")
        let check = try run(["/usr/bin/ifmeter", "config", "check"], allowFailure: true)
        #expect(check.status == 0 && check.out.contains("/etc/ifmeter/ifmeter.yml: good."), "\(check)")
        #expect(text.contains("DynamicUser=yes\n"), "no user to create")
        let verify = try run(["systemd-analyze", "verify", unit], allowFailure: true)
        #expect(verify.status == 0 && verify.err.isEmpty, "\(verify.out)\(verify.err)")
        let wants = "/etc/systemd/system/multi-user.target.wants/ifmeter-serve.service"
        #expect((try? FileManager.default.destinationOfSymbolicLink(atPath: wants)) == unit, "enabled: \(wants)")
        let enabled = try run(["systemctl", "--root=/", "is-enabled", "ifmeter-serve.service"], allowFailure: true)
        #expect(enabled.out == "enabled\n", "\(enabled.out)\(enabled.err)")

        // Man pages, compressed, found by man; completions where each shell
        // looks for a package's.
        let pages = try FileManager.default.contentsOfDirectory(atPath: "/usr/share/man/man1").filter { $0.hasPrefix("ifmeter") }.sorted()
        #expect(pages == ManPages().pages.map { $0.fileName + ".gz" }.sorted())
        #expect(try run(["man", "-w", "ifmeter-serve"]).out == "/usr/share/man/man1/ifmeter-serve.1.gz\n")
        let page = try run(["env", "MANWIDTH=80", "man", "--warnings", "ifmeter"])
        #expect(page.err.isEmpty && page.out.contains("systemctl enable --now ifmeter-serve"), "\(page.err)")
        let bash = try run([
            "bash", "--norc", "--noprofile", "-c",
            "source /usr/share/bash-completion/bash_completion; _completion_loader ifmeter; complete -p ifmeter",
        ])
        #expect(bash.out.contains("ifmeter"), "bash-completion loads /usr/share/bash-completion/completions/ifmeter")
        let fpath = try run(["zsh", "-f", "-c", "print -l $fpath"]).out.split(separator: "\n")
        #expect(fpath.contains("/usr/share/zsh/vendor-completions"))
        #expect(FileManager.default.fileExists(atPath: "/usr/share/zsh/vendor-completions/_ifmeter"))
        // (fish --no-config reads no vendor folder: a plain fish, as a user's.)
        let fishPath = try run(["fish", "-c", "printf '%s\\n' $fish_complete_path"]).out.split(separator: "\n")
        #expect(fishPath.contains("/usr/share/fish/vendor_completions.d"))
        let fish = try run(["fish", "-c", "complete -C 'ifmeter se'"]).out
        #expect(fish.split(separator: "\n").map { $0.split(separator: "\t").first ?? "" } == ["serve"], "fish: \(fish)")
        for doc in ["copyright", "changelog.gz", "README.Debian"] {
            #expect(FileManager.default.fileExists(atPath: "/usr/share/doc/ifmeter/" + doc), "\(doc)")
        }
        // For a fleet: the rules with their suite (which passes where it
        // lies), the dashboard and the runbook the alerts point at.
        let shipped = [
            "/usr/share/ifmeter/prometheus/ifmeter-rules.yml", "/usr/share/ifmeter/prometheus/ifmeter-rules-test.yml",
            "/usr/share/ifmeter/grafana/ifmeter.json", "/usr/share/ifmeter/alerts.md",
        ]
        for file in shipped { #expect(FileManager.default.fileExists(atPath: file), "\(file)") }
        let suite = try run(["promtool", "test", "rules", shipped[1]], allowFailure: true)
        #expect(suite.status == 0 && suite.out.contains("SUCCESS"), "\(suite.out)\(suite.err)")

        // What systemd would have made when the service ran: its totals.
        var isDirectory: ObjCBool = false
        madePrivate = !FileManager.default.fileExists(atPath: "/var/lib/private", isDirectory: &isDirectory)
        try FileManager.default.createDirectory(atPath: "/var/lib/private/ifmeter", withIntermediateDirectories: true)
        try Data("totals".utf8).write(to: URL(fileURLWithPath: "/var/lib/private/ifmeter/state.db"))
        try FileManager.default.createSymbolicLink(atPath: "/var/lib/ifmeter", withDestinationPath: "private/ifmeter")

        let listed = try run(["dpkg-query", "-L", "ifmeter"]).out.split(separator: "\n").map(String.init)
        #expect(listed.contains("/usr/bin/ifmeter") && listed.contains(unit))
        #expect(shipped.allSatisfy(listed.contains), "the rules, dashboard and runbook are the package's")

        // Removal: ifmeter's files go, its totals stay.
        try run(["dpkg", "--remove", "ifmeter"])
        #expect(!FileManager.default.fileExists(atPath: "/usr/bin/ifmeter") && !FileManager.default.fileExists(atPath: unit))
        #expect(FileManager.default.fileExists(atPath: "/var/lib/ifmeter/state.db"), "remove keeps the totals")

        // Purge: nothing left of what the package listed but folders other
        // packages own, no totals, no enablement link, dpkg forgets it.
        try run(["dpkg", "--purge", "ifmeter"])
        #expect(try DebianPackage.status() == nil)
        var left: [String] = []
        for path in listed where path != "/." && FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            let shared = isDirectory.boolValue && (try? run(["dpkg-query", "-S", path]))?.status == 0
            if !shared { left.append(path) }
        }
        #expect(left == [], "left after purge, not a folder another package owns")
        #expect((try? FileManager.default.attributesOfItem(atPath: "/var/lib/ifmeter")) == nil, "/var/lib/ifmeter")
        #expect(!FileManager.default.fileExists(atPath: "/var/lib/private/ifmeter"))
        #expect((try? FileManager.default.attributesOfItem(atPath: wants)) == nil, "the enablement link")
        #expect(try DebianPackage.traces() == before, "every file named ifmeter in /etc, /var/lib and /usr is as before")
    }
}

enum DebianPackage {
    static let enabled = Netns.isRoot || Netns.required
    static let reason =
        "skipped: installing the Debian package with dpkg needs root (run as root; IFMETER_REQUIRE_NETNS=1 turns this skip into a failure)"

    /// Fails the test when it must run (IFMETER_REQUIRE_NETNS=1) but cannot.
    static func requireRoot() throws {
        if !Netns.isRoot { throw TestFailure("IFMETER_REQUIRE_NETNS=1 but not running as root: dpkg cannot install the package") }
    }

    static func architecture() throws -> String {
        try run(["dpkg", "--print-architecture"]).out.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// .build/deb/ifmeter_VERSION_ARCH.deb, which `make deb` builds.
    static func file() throws -> String {
        let path = repositoryRoot.appendingPathComponent(".build/deb/ifmeter_\(IfmeterCLI.version)_\(try architecture()).deb").path
        guard FileManager.default.fileExists(atPath: path) else {
            throw TestFailure(
                "no Debian package at \(path): run 'make deb' first ('make test' does, before swift test; "
                    + "building it inside the tests would wait on SwiftPM's lock)")
        }
        return path
    }

    /// dpkg's status of the package ("install ok installed"), or nil when
    /// dpkg knows nothing of it (never installed, or purged).
    static func status() throws -> String? {
        let query = try run(["dpkg-query", "-W", "-f=${Status}", "ifmeter"], allowFailure: true)
        return query.status == 0 && !query.out.hasSuffix(" not-installed") ? query.out : nil
    }

    /// Fails, changing nothing, when the test would overwrite or purge
    /// someone's ifmeter.
    static func refuseWhenIfmeterIsHere() throws {
        if let status = try status() {
            throw TestFailure(
                "the ifmeter package is on this machine (dpkg: \(status)); this test would purge it: 'dpkg --purge ifmeter' first")
        }
        if FileManager.default.fileExists(atPath: "/usr/bin/ifmeter") {
            throw TestFailure(
                "/usr/bin/ifmeter exists and no package owns it ('make install PREFIX=/usr'?): "
                    + "dpkg -i would overwrite it; 'make uninstall PREFIX=/usr' first")
        }
        for state in ["/var/lib/ifmeter", "/var/lib/private/ifmeter"] where (try? FileManager.default.attributesOfItem(atPath: state)) != nil {
            throw TestFailure("\(state) holds a service's totals; purging the package would delete them: move it away first")
        }
    }

    /// Every path named *ifmeter* in the folders a package writes to.
    static func traces() throws -> [String] {
        let found = try run(["find", "/etc", "/var/lib", "/usr", "-xdev", "-name", "*ifmeter*"], allowFailure: true)
        return found.out.split(separator: "\n").map(String.init).sorted()
    }

    /// The cleanup: whatever state the package is in, purged.
    static func purgeQuietly() {
        if (try? run(["dpkg-query", "-W", "ifmeter"], allowFailure: true))?.status == 0 {
            _ = try? run(["dpkg", "--purge", "ifmeter"], allowFailure: true)
        }
    }
}
