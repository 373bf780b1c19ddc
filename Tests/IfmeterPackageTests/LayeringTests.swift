import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// The layout shows the design (docs/architecture.md): every dependency
/// arrow between ifmeter's modules points down its layers; only the system
/// layer, the samplers, the tests' support and the benchmark call the C
/// library through Glibc or Darwin; each module reaches only the C targets
/// allowed it here; and no C target but CIfmeterLinux calls the system's
/// threads, files or errno (issue 32).
@Suite(.blocking) struct LayeringTests {
    /// From the bottom: a module may depend only on modules of lower layers
    /// (and on the C targets `cTargetsAllowed` gives it).
    static let layers: [[String]] = [
        ["IfmeterCore"],
        ["IfmeterModel"],
        ["IfmeterOutput"],
        ["IfmeterSystem"],
        ["IfmeterSampling", "IfmeterConfig", "IfmeterImage"],
        ["IfmeterStore", "Ifmeter"],
        ["IfmeterPipeline", "IfmeterUsage"],
        ["IfmeterRoute", "IfmeterLive", "IfmeterRemoteWrite"],
        ["IfmeterServe", "IfmeterExport"],
        ["IfmeterCLI"],
        ["ifmeter"],
    ]

    /// Where `import Glibc` (or Darwin) may appear.
    static let callingC: Set<String> = ["IfmeterSystem", "IfmeterSampling", "IfmeterTestSupport", "ifmeter-bench"]

    /// The C targets each Swift module (test targets included) may import
    /// or name as a dependency in Package.swift, each with why. This is
    /// today's truth, not a wish: an entry nothing uses any more fails too,
    /// so the list says exactly where C comes in.
    static let cTargetsAllowed: [String: [String: String]] = [
        "IfmeterSystem": [
            "CIfmeterLinux": "the system layer's shims for what Glibc does not export (malloc tuning, the revision stamp)"
        ],
        "IfmeterSampling": [
            "CNetlink": "the netlink sampler, link events and routes stand on libnl-3's sockets",
            "CIfmeterLinux": "netlink's and ethtool's macros and inline structures, setns, the getifaddrs stats",
        ],
        "IfmeterConfig": ["CYAML": "the configuration files are read by libyaml"],
        "IfmeterImage": [
            "CIfmeterImage": "cairo's dlopen table: usage --png draws with cairo, in this module only, loaded on the first picture",
            "CCairo": "cairo's types (its header only: libcairo.so.2 is loaded, not linked)",
            "CZlib": "the CRC-32 of the tEXt chunk that carries a PNG's figures",
        ],
        "IfmeterImageTests": ["CZlib": "inflating a PNG's IDAT and checking every chunk's CRC with zlib, apart from the writer's code"],
        "IfmeterStore": ["CSQLite": "state and usage live in SQLite"],
        "IfmeterServe": [
            "CIfmeterHTTP": "the dlopen tables of libmicrohttpd, its GnuTLS and libcrypt, their variadic calls, zlib's init macros",
            "CMicroHTTPD": "libmicrohttpd's connection, response and callback types, which the Swift callbacks take",
            "CZlib": "deflate and inflate of the scrape's gzip render (zlib's init macros through CIfmeterHTTP)",
        ],
        "IfmeterRemoteWrite": [
            "CIfmeterRemoteWrite": "libcurl's and libsnappy's dlopen tables and its variadic setopt calls"
        ],
        "IfmeterTestSupport": [
            "CIfmeterTestSupport": "tun's ioctl number and request, and the GNU pass-throughs Glibc leaves out (pipe2, closefrom, usable size)"
        ],
        "ifmeter-bench": ["CIfmeterBench": "netlink's macros and the /proc/net/dev parse of the raw loops the product is timed against"],
        "IfmeterSamplingTests": ["CNetlink": "LibnlLinkageTests checks libnl-3 is what the sampler uses"],
    ]

    /// The C targets that may call `pthread_*`, `open(`, `fsync`,
    /// `fdatasync` or touch `errno`: the product's one system shim target.
    /// The tests' and the benchmark's C do not either: their Swift
    /// (IfmeterTestSupport, ifmeter-bench) opens, spawns, reads, runs
    /// threads and reads errno through Glibc and IfmeterSystem (issue 32).
    static let cTargetsCallingTheSystem: [String: String] = [
        "CIfmeterLinux": "the product's C system shims: what Swift cannot reach of the kernel and libc"
    ]

    /// Other C targets that still call the system today: none since issue
    /// 32 moved the HTTP layer's threads, locks and errno to Swift over
    /// IfmeterSystem, and the tests' tun and spawn and the benchmark's
    /// sockets, reads and HTTP sink to Swift over Glibc. A pair found but
    /// not listed fails, and so does a pair listed but no longer found
    /// (then delete its line).
    static let cSystemCallsLeft: [CSystemCall: String] = [:]

    /// The product's C targets beside CIfmeterLinux hold only what Swift
    /// cannot express; their size (source and headers) keeps them so.
    static let cTargetLineLimits: [String: Int] = ["CIfmeterHTTP": 300, "CIfmeterRemoteWrite": 150, "CIfmeterImage": 80]

    struct CSystemCall: Hashable, Sendable, CustomStringConvertible {
        let target: String
        let symbol: String
        init(_ target: String, _ symbol: String) {
            self.target = target
            self.symbol = symbol
        }
        var description: String { "(\(target), \(symbol))" }
    }

    /// What the C scan looks for: a name, and whether it must be called.
    static let systemSymbols: [(symbol: String, call: Bool, prefix: Bool)] = [
        ("pthread_", false, true), ("open", true, false), ("fsync", false, false), ("fdatasync", false, false),
        ("errno", false, false),
    ]

    static func layer(of module: String) -> Int? { layers.firstIndex { $0.contains(module) } }

    @Test func everyDependencyPointsDown() throws {
        let targets = try PackageTarget.all.get()
        var checked = 0
        for target in targets where target.kind == .swift {
            guard target.name.hasPrefix("Ifmeter") || target.name == "ifmeter" else { continue }
            guard let own = Self.layer(of: target.name) else {
                if target.name != "IfmeterTestSupport" { Issue.record("\(target.name) is in no layer of docs/architecture.md") }
                continue
            }
            for other in target.dependencies {
                guard let below = Self.layer(of: other) else { continue } // a C target: see cTargetsAllowed
                #expect(below < own, "\(target.name) (layer \(own)) depends on \(other) (layer \(below)): the arrow must point down")
                checked += 1
            }
        }
        #expect(checked > 20, "\(checked) arrows checked")
    }

    @Test func onlyTheSystemLayerAndTheSamplersCallTheCLibrary() throws {
        let sources = repositoryRoot.appendingPathComponent("Sources")
        let modules = try FileManager.default.contentsOfDirectory(atPath: sources.path)
        var offenders: [String] = []
        for module in modules where !Self.callingC.contains(module) {
            let folder = sources.appendingPathComponent(module)
            guard let files = FileManager.default.enumerator(atPath: folder.path) else { continue }
            for case let file as String in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: folder.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") {
                    let trimmed = line.trimmingCharacters(in: .whitespaces)
                    if trimmed == "import Glibc" || trimmed == "import Darwin" || trimmed.hasPrefix("import Glibc.") {
                        offenders.append("\(module)/\(file)")
                    }
                }
            }
        }
        #expect(offenders.isEmpty, "import Glibc or Darwin outside the system layer and the samplers: \(offenders)")
    }

    /// One way a Swift module reaches a C target: an import line, or a
    /// dependency Package.swift declares.
    struct CUse: Sendable {
        let module: String
        let cTarget: String
        /// `path:line` of the import, or "Package.swift".
        let place: String
    }

    /// Every import of a C target in a Swift module's (or test target's)
    /// sources, and every C dependency Package.swift declares for one.
    static func cUses(of targets: [PackageTarget]) throws -> [CUse] {
        let cTargets = Set(targets.filter { $0.kind == .c }.map(\.name))
        var uses: [CUse] = []
        for target in targets where target.kind != .c {
            for dependency in target.dependencies where cTargets.contains(dependency) {
                uses.append(CUse(module: target.name, cTarget: dependency, place: "Package.swift"))
            }
            for file in target.files(endingIn: [".swift"]) {
                let text = try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
                for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    guard let module = importedModule(line), cTargets.contains(module) else { continue }
                    uses.append(CUse(module: target.name, cTarget: module, place: "\(file):\(index + 1)"))
                }
            }
        }
        return uses
    }

    /// The module an `import` line names (`@preconcurrency import X`,
    /// `internal import X`, `import struct X.y`), or nil.
    static func importedModule(_ line: Substring) -> String? {
        var words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })[...]
        while let first = words.first,
            first.hasPrefix("@") || ["public", "package", "internal", "fileprivate", "private"].contains(String(first))
        {
            words = words.dropFirst()
        }
        guard words.first == "import", words.count >= 2 else { return nil }
        words = words.dropFirst()
        let kinds = ["typealias", "struct", "class", "enum", "protocol", "let", "var", "func"]
        if kinds.contains(String(words.first!)), words.count >= 2 { words = words.dropFirst() }
        let module = words.first!.split(separator: ".").first.map(String.init) ?? ""
        return module.isEmpty ? nil : module
    }

    /// Every import of one of the package's modules, as written in a
    /// target's sources, is a dependency Package.swift declares for that
    /// target, and every module dependency it declares is imported by one
    /// of its files: a module that builds only because another dependency
    /// brought the import along (IfmeterCLI once imported IfmeterConfig
    /// through IfmeterServe) fails here, which dump-package alone cannot
    /// see (issue 46).
    @Test func everyImportIsADeclaredDependency() throws {
        let targets = try PackageTarget.all.get()
        let modules = Set(targets.map(\.name))
        var checked = 0
        for target in targets where target.kind != .c {
            let declared = Set(target.dependencies)
            var imported: [String: String] = [:]
            for file in target.files(endingIn: [".swift"]) {
                let text = try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
                for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    guard let module = Self.importedModule(line), modules.contains(module), module != target.name else { continue }
                    if imported[module] == nil { imported[module] = "\(file):\(index + 1)" }
                    checked += 1
                }
            }
            for (module, place) in imported.sorted(by: { $0.key < $1.key }) where !declared.contains(module) {
                Issue.record("\(place): \(target.name) imports \(module), which Package.swift does not declare as its dependency: add it")
            }
            for module in declared.sorted() where imported[module] == nil {
                // A C target may be reached through another's header (a
                // system library under a C shim); a Swift module may not.
                guard targets.first(where: { $0.name == module })?.kind != .c else { continue }
                Issue.record("Package.swift gives \(target.name) \(module), which none of its files imports: delete the dependency")
            }
        }
        #expect(checked > 200, "\(checked) imports checked")
    }

    /// Modules below the renderers (issue 46): the read model and the
    /// pipeline import no renderer, as written in their sources or as
    /// Package.swift declares; every surface renders the model instead.
    static let belowTheRenderers: [String: Set<String>] = [
        "IfmeterModel": ["IfmeterCore"],
        "IfmeterPipeline": ["IfmeterCore", "IfmeterModel", "IfmeterSystem", "IfmeterStore"],
    ]
    static let renderers: Set<String> = ["IfmeterOutput", "IfmeterImage"]

    @Test func theModelAndThePipelineImportNoRenderer() throws {
        let targets = try PackageTarget.all.get()
        var seen = 0
        for target in targets {
            guard let allowed = Self.belowTheRenderers[target.name] else { continue }
            seen += 1
            for dependency in target.dependencies {
                #expect(!Self.renderers.contains(dependency), "Package.swift gives \(target.name) the renderer \(dependency)")
                #expect(allowed.contains(dependency), "Package.swift gives \(target.name) \(dependency), which it should not need")
            }
            let files = target.files(endingIn: [".swift"])
            #expect(!files.isEmpty, "\(target.name) has sources")
            for file in files {
                let text = try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
                for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    guard let module = Self.importedModule(line), module.hasPrefix("Ifmeter") else { continue }
                    #expect(allowed.contains(module), "\(file):\(index + 1) imports \(module): \(target.name) sits below the renderers")
                }
            }
        }
        #expect(seen == Self.belowTheRenderers.count, "every module below the renderers is in Package.swift")
    }

    /// `public` is the library's promise alone (issue 46): only the
    /// `Ifmeter` product's modules (the library and what it is built of)
    /// declare anything `public`; every other module shares what it
    /// shares inside the package with `package`, so that no module but
    /// the library's reads as an API. A declaration's modifier is read
    /// before any string or comment on its line.
    @Test func onlyTheLibrarysModulesSayPublic() throws {
        let targets = try PackageTarget.all.get()
        var closure = Set(["Ifmeter"]), todo = ["Ifmeter"]
        while let name = todo.popLast() {
            for dependency in targets.first(where: { $0.name == name })?.dependencies ?? [] where closure.insert(dependency).inserted {
                todo.append(dependency)
            }
        }
        var checked = 0
        for target in targets where target.kind == .swift && !closure.contains(target.name) {
            for file in target.files(endingIn: [".swift"]) {
                let text = try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
                checked += 1
                for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                    guard !line.trimmingCharacters(in: .whitespaces).hasPrefix("//") else { continue }
                    let code = line.prefix { $0 != "\"" }.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
                    let words = code.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "(" })
                    if words.contains("public") {
                        Issue.record("\(file):\(index + 1): \(target.name) is not the library's: 'package', not 'public'")
                    }
                }
            }
        }
        #expect(closure.contains("IfmeterCore") && !closure.contains("IfmeterServe"), "\(closure.sorted())")
        #expect(checked > 100, "\(checked) files read")
    }

    @Test func importLinesAreRead() {
        #expect(Self.importedModule("import CNetlink") == "CNetlink")
        #expect(Self.importedModule("@preconcurrency import CSQLite") == "CSQLite")
        #expect(Self.importedModule("  internal import struct CYAML.yaml_parser_t") == "CYAML")
        #expect(Self.importedModule("@_implementationOnly import CZlib.zlib") == "CZlib")
        #expect(Self.importedModule("// import CZlib") == nil)
        #expect(Self.importedModule("let important = 1") == nil)
        #expect(Self.importedModule("import") == nil)
    }

    @Test func eachModuleReachesOnlyTheCTargetsAllowedIt() throws {
        let targets = try PackageTarget.all.get()
        let cTargets = Set(targets.filter { $0.kind == .c }.map(\.name))
        let others = Set(targets.filter { $0.kind != .c }.map(\.name))
        for (module, allowed) in Self.cTargetsAllowed {
            #expect(others.contains(module), "cTargetsAllowed names \(module), which Package.swift has no Swift target of")
            for cTarget in allowed.keys {
                #expect(cTargets.contains(cTarget), "cTargetsAllowed gives \(module) \(cTarget), which is no C target of Package.swift")
            }
        }
        let uses = try Self.cUses(of: targets)
        for use in uses where Self.cTargetsAllowed[use.module]?[use.cTarget] == nil {
            Issue.record(
                "\(use.place): \(use.module) \(use.place == "Package.swift" ? "depends on" : "imports") \(use.cTarget), which LayeringTests.cTargetsAllowed does not allow it"
            )
        }
        for (module, allowed) in Self.cTargetsAllowed {
            for cTarget in allowed.keys where !uses.contains(where: { $0.module == module && $0.cTarget == cTarget }) {
                Issue.record("cTargetsAllowed lets \(module) reach \(cTarget), but nothing does any more: delete the entry")
            }
        }
        #expect(uses.filter { $0.place != "Package.swift" }.count > 20, "\(uses.count) uses of C targets found")
    }

    /// Each (symbol, line number) the scan finds in C source: comments,
    /// strings and `#include` lines are left out.
    static func systemCalls(in text: String) -> [(symbol: String, line: Int)] {
        // Blank out comments and literals, keeping the lines.
        var code: [Character] = []
        var characters = Array(text)[...]
        while let c = characters.first {
            characters = characters.dropFirst()
            if c == "/", characters.first == "/" {
                while let d = characters.first, d != "\n" { characters = characters.dropFirst() }
            } else if c == "/", characters.first == "*" {
                characters = characters.dropFirst()
                while let d = characters.first, !(d == "*" && characters.dropFirst().first == "/") {
                    if d == "\n" { code.append("\n") }
                    characters = characters.dropFirst()
                }
                characters = characters.dropFirst(2)
                code.append(" ")
            } else if c == "\"" || c == "'" {
                while let d = characters.first, d != c, d != "\n" {
                    characters = characters.dropFirst(d == "\\" ? 2 : 1)
                }
                characters = characters.dropFirst()
                code.append(contentsOf: [c, c])
            } else {
                code.append(c)
            }
        }
        func isIdentifier(_ c: Character) -> Bool { c == "_" || c.isLetter || c.isNumber }
        var found: [(symbol: String, line: Int)] = []
        for (index, line) in String(code).split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.hasPrefix("#include") || trimmed.hasPrefix("#import") { continue }
            let chars = Array(line)
            for (symbol, call, prefix) in systemSymbols {
                let name = Array(symbol)
                var at = 0
                var hit = false
                while !hit, at + name.count <= chars.count {
                    defer { at += 1 }
                    guard Array(chars[at..<at + name.count]) == name, at == 0 || !isIdentifier(chars[at - 1]) else { continue }
                    var after = at + name.count
                    if !prefix, after < chars.count, isIdentifier(chars[after]) { continue }
                    if call {
                        while after < chars.count, chars[after] == " " { after += 1 }
                        guard after < chars.count, chars[after] == "(" else { continue }
                    }
                    hit = true
                }
                if hit { found.append((symbol, index + 1)) }
            }
        }
        return found
    }

    @Test func theCScanFindsCallsNotWords() {
        let text = """
            #include <errno.h>
            // errno, pthread_create and open( in a comment
            /* fsync(fd);
               fdatasync(fd); */
            const char *s = "open(errno)"; char c = '"';
            int cifm_rw_errno(void); FILE *f = fopen(path, "r"); int opened = reopen (x);
            int fd = open (path, O_RDONLY); errno = 0;
            pthread_mutex_lock(&lock); fsync(fd);
            """
        let found = Self.systemCalls(in: text).map { "\($0.symbol)@\($0.line)" }
        #expect(found.sorted() == ["errno@7", "fsync@8", "open@7", "pthread_@8"])
    }

    @Test func onlyCIfmeterLinuxCallsTheSystemInC() throws {
        let targets = try PackageTarget.all.get()
        let cTargets = targets.filter { $0.kind == .c }
        for name in Self.cTargetsCallingTheSystem.keys {
            #expect(cTargets.contains { $0.name == name }, "cTargetsCallingTheSystem names \(name), no C target of Package.swift")
        }
        var found: [CSystemCall: [String]] = [:]
        var scanned = 0
        for target in cTargets where Self.cTargetsCallingTheSystem[target.name] == nil {
            for file in target.files(endingIn: [".c", ".h"]) {
                let text = try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
                scanned += 1
                for hit in Self.systemCalls(in: text) {
                    found[CSystemCall(target.name, hit.symbol), default: []].append("\(file):\(hit.line)")
                }
            }
        }
        for (call, places) in found.sorted(by: { $0.key.description < $1.key.description })
        where Self.cSystemCallsLeft[call] == nil {
            Issue.record(
                "\(places[0]): \(call.target) uses \(call.symbol)\(places.count > 1 ? " (and at \(places.dropFirst().prefix(4).joined(separator: ", ")))" : ""); only CIfmeterLinux calls the system in C: go through IfmeterSystem"
            )
        }
        for call in Self.cSystemCallsLeft.keys where found[call] == nil {
            Issue.record("\(call) is gone from the C: delete it from LayeringTests.cSystemCallsLeft (the list only shrinks)")
        }
        #expect(scanned >= 4, "\(scanned) C files scanned")
    }

    @Test func cAtTheEdgesStaysThin() throws {
        let targets = try PackageTarget.all.get()
        for (name, limit) in Self.cTargetLineLimits.sorted(by: { $0.key < $1.key }) {
            let target = try #require(targets.first { $0.name == name }, "\(name) is not a target of Package.swift")
            var lines = 0
            for file in target.files(endingIn: [".c", ".h"]) {
                lines +=
                    try String(contentsOf: repositoryRoot.appendingPathComponent(file), encoding: .utf8)
                    .split(separator: "\n", omittingEmptySubsequences: false).count - 1
            }
            #expect(lines > 0 && lines <= limit, "\(name) has \(lines) lines of C; at most \(limit): policy belongs in Swift")
        }
    }
}
