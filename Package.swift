// swift-tools-version:6.0
import PackageDescription

// Linux only: a dependency that exists on Linux alone (libnl, libmicrohttpd,
// libcurl and snappy through their dlopen tables, the kernel shims, the
// tests' tun and GNU pass-through C). SwiftPM leaves such a dependency out on Apple
// platforms; the `Ifmeter` product reaches none without this condition
// (scripts/portable-check and ManifestTests check it). Everything but
// `Ifmeter` (the ifmeter and ifmeter-bench executables, serve, remote write,
// export, live, route) is Linux only: docs/library.md.
let linux = TargetDependencyCondition.when(platforms: [.linux])

let package = Package(
    name: "ifmeter",
    // Synchronization's Mutex and Atomic (in IfmeterSystem, and the
    // library's meter) need macOS 15 and iOS 18. Nothing here has been
    // compiled for an Apple platform yet (docs/library.md).
    platforms: [.macOS(.v15), .iOS(.v18)],
    products: [
        .executable(name: "ifmeter", targets: ["ifmeter"]),
        // The one library with an API promise: the small documented API for
        // app developers (Sources/Ifmeter, its DocC catalog in
        // Sources/Ifmeter/Ifmeter.docc, its baseline in api/Ifmeter.json).
        // The layers under it are modules of this package, not products.
        .library(name: "Ifmeter", targets: ["Ifmeter"]),
    ],
    targets: [
        // libnl-3, found through pkg-config: its sockets and message
        // building. libnl-route-3 is not used (docs/architecture.md says
        // why): ifmeter parses RTM_GETSTATS and RTM_NEWLINK itself.
        .systemLibrary(
            name: "CNetlink",
            pkgConfig: "libnl-3.0",
            providers: [.apt(["libnl-3-dev"])]
        ),
        // libmicrohttpd for the scrape endpoint, zlib for gzip. ifmeter
        // loads libmicrohttpd when `serve` starts (dlopen, in CIfmeterHTTP):
        // linked, it and its TLS libraries would cost every command 2 MB of
        // RSS at start-up. So this target gives its header (in /usr/include)
        // and the apt provider, not pkg-config's -lmicrohttpd.
        .systemLibrary(name: "CMicroHTTPD", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // libyaml for the configuration files (the web config, the remote
        // write config), through IfmeterConfig.
        .systemLibrary(name: "CYAML", pkgConfig: "yaml-0.1", providers: [.apt(["libyaml-dev"]), .brew(["libyaml"])]),
        // cairo for `usage --png`: its header only (in /usr/include/cairo,
        // no pkg-config -lcairo). ifmeter loads libcairo.so.2 on the first
        // picture (dlopen, in CIfmeterImage): linked, it and the 17 libraries
        // under it would load with every command, serve included (2 MiB RSS).
        .systemLibrary(name: "CCairo", providers: [.apt(["libcairo2-dev"]), .brew(["cairo"])]),
        // SQLite for persistent totals.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"]), .brew(["sqlite"])]),
        // C for the HTTP server, only what Swift cannot express: the dlopen
        // tables of libmicrohttpd, its GnuTLS and libcrypt, their variadic
        // calls, zlib's init macros. The policy is Swift's, in IfmeterServe.
        .target(name: "CIfmeterHTTP", dependencies: [.target(name: "CMicroHTTPD", condition: linux), .target(name: "CZlib", condition: linux)]),
        // C for `usage --png`: cairo's dlopen table, loaded on the first
        // picture. The drawing is Swift's, in IfmeterImage's Cairo.swift.
        .target(name: "CIfmeterImage", dependencies: ["CCairo"], cSettings: [.define("_GNU_SOURCE")]),
        // libcurl and libsnappy for remote write: headers only (apt
        // providers, no pkg-config -l flags). ifmeter loads both with dlopen
        // when remote write starts, as serve loads libmicrohttpd.
        .target(name: "CIfmeterRemoteWrite", cSettings: [.define("_GNU_SOURCE")]),
        // serve --remote-write: the queue on disk, the protobuf encoder, the
        // sender and its retries.
        .target(
            name: "IfmeterRemoteWrite",
            dependencies: [
                "IfmeterCore", "IfmeterModel", "IfmeterOutput", "IfmeterSystem", "IfmeterPipeline", "IfmeterConfig",
                .target(name: "CIfmeterRemoteWrite", condition: linux),
            ]),
        // Configuration files: YAML read by libyaml into a tree with lines,
        // and the strict readers the configs are made of.
        .target(name: "IfmeterConfig", dependencies: ["IfmeterCore", "IfmeterSystem", "CYAML"]),
        // serve: the scrape cache, the HTTP server (the one place that calls
        // libmicrohttpd) and its policy, basic auth and the web config, and
        // the usage endpoints.
        .target(
            name: "IfmeterServe",
            dependencies: [
                "IfmeterCore", "IfmeterModel", "IfmeterOutput", "IfmeterSystem", "IfmeterPipeline", "IfmeterConfig", "IfmeterUsage", "IfmeterStore",
                "IfmeterImage", "IfmeterRoute", "IfmeterRemoteWrite",
                .target(name: "CIfmeterHTTP", condition: linux), .target(name: "CMicroHTTPD", condition: linux),
                .target(name: "CZlib", condition: linux),
            ]),
        // C shims for kernel macros and inline structures Swift cannot import.
        .target(
            name: "CIfmeterLinux",
            cSettings: [.define("_GNU_SOURCE")]
        ),
        // The tests' C (tun's ioctl request, glibc's GNU extensions Swift
        // cannot see) and the benchmark's (netlink's macros that build and
        // walk its raw dumps, the /proc/net/dev parse), apart from the
        // product's shims. Neither opens, spawns, runs a thread or reads
        // errno: their Swift does.
        .target(name: "CIfmeterTestSupport", cSettings: [.define("_GNU_SOURCE")]),
        .target(name: "CIfmeterBench", cSettings: [.define("_GNU_SOURCE")]),
        // The model and the engine: samples, counters, deltas, totals,
        // quality, classifier rules, the trace format and the vocabulary.
        // Imports nothing.
        .target(name: "IfmeterCore"),
        // The read model: one row per interface and serve's typed facts,
        // applied once per update and published as a snapshot with a
        // generation, which every surface renders.
        .target(name: "IfmeterModel", dependencies: ["IfmeterCore"]),
        // One renderer per format (text and JSON reports, Prometheus text,
        // OpenMetrics, usage tables, the SVG chart) and the JSON envelope.
        .target(name: "IfmeterOutput", dependencies: ["IfmeterCore", "IfmeterModel"]),
        // `usage --png`: the usage charts and the summary drawn with cairo
        // (the one module that calls it), the figures in a tEXt chunk.
        .target(name: "IfmeterImage", dependencies: ["IfmeterCore", "IfmeterOutput", "CIfmeterImage", "CCairo", "CZlib"]),
        // The system layer: the one place (with the Linux sampler) that
        // calls the C library: errno, clocks, signals, files, the terminal,
        // the local time zone. Its Glibc and Darwin branches live here.
        .target(
            name: "IfmeterSystem",
            dependencies: ["IfmeterCore", .target(name: "CIfmeterLinux", condition: linux)]
        ),
        // The samplers: netlink (Linux) and getifaddrs (per-OS files), and
        // the kernel's facts for the classifier (sysfs, ethtool).
        .target(
            name: "IfmeterSampling",
            dependencies: [
                "IfmeterCore", "IfmeterSystem",
                .target(name: "CNetlink", condition: linux),
                .target(name: "CIfmeterLinux", condition: linux),
            ]
        ),
        // The app library: a meter over the getifaddrs (or netlink) source,
        // its readings, and saved state across launches and boots.
        .target(name: "Ifmeter", dependencies: ["IfmeterCore", "IfmeterSampling", "IfmeterSystem"]),
        // export: a report every period (JSON, JSON Lines, textfile).
        .target(
            name: "IfmeterExport",
            dependencies: ["IfmeterCore", "IfmeterModel", "IfmeterOutput", "IfmeterSystem", "IfmeterPipeline", "IfmeterRoute"]),
        // Route analysis: where probes leave, each tunnel's underlay, the
        // outside estimate, and the feed that follows route changes.
        .target(
            name: "IfmeterRoute",
            dependencies: ["IfmeterCore", "IfmeterOutput", "IfmeterSystem", "IfmeterPipeline", "IfmeterSampling"]),
        // The live view's model and its pure renderer.
        .target(
            name: "IfmeterLive",
            dependencies: ["IfmeterCore", "IfmeterModel", "IfmeterOutput", "IfmeterSystem", "IfmeterPipeline", "IfmeterSampling"]),
        // Persistent totals and daily and monthly usage, in SQLite.
        .target(name: "IfmeterStore", dependencies: ["IfmeterCore", "IfmeterSystem", "CSQLite"]),
        // Usage as a typed query: the request, the document written a piece
        // at a time, the whole table for pictures; what `usage`,
        // /api/v1/usage and /usage.png all call.
        .target(name: "IfmeterUsage", dependencies: ["IfmeterCore", "IfmeterOutput", "IfmeterSystem", "IfmeterStore", "IfmeterImage"]),
        // The one sampling pipeline every command uses: source, filter,
        // engine, persistence, subscribers; and the files it writes.
        .target(name: "IfmeterPipeline", dependencies: ["IfmeterCore", "IfmeterModel", "IfmeterSystem", "IfmeterStore"]),
        .target(
            name: "IfmeterCLI",
            dependencies: [
                "IfmeterCore", "IfmeterOutput", "IfmeterSystem", "IfmeterSampling", "IfmeterPipeline", "IfmeterServe", "IfmeterRoute",
                "IfmeterExport", "IfmeterLive", "IfmeterStore", "IfmeterRemoteWrite", "IfmeterImage", "IfmeterConfig", "IfmeterModel",
                "IfmeterUsage",
            ]
        ),
        .executableTarget(
            name: "ifmeter",
            dependencies: ["IfmeterCLI", "IfmeterSystem"]
        ),
        .executableTarget(
            name: "ifmeter-bench",
            dependencies: [
                "IfmeterCore", "IfmeterModel", "IfmeterOutput", "IfmeterSystem", "IfmeterSampling", "IfmeterPipeline", "IfmeterLive",
                "IfmeterStore", "IfmeterCLI", "IfmeterServe", .target(name: "CIfmeterBench", condition: linux),
            ]
        ),
        // Namespaces, veth pairs and traffic for the integration tests, and
        // a scripted counter source.
        .target(
            name: "IfmeterTestSupport",
            dependencies: ["IfmeterCore", "IfmeterSystem", "IfmeterSampling", .target(name: "CIfmeterTestSupport", condition: linux)]),
        .testTarget(name: "IfmeterCoreTests", dependencies: ["IfmeterOutput", "IfmeterCore", "IfmeterTestSupport"]),
        .testTarget(
            name: "IfmeterSamplingTests",
            dependencies: ["IfmeterSampling", "IfmeterCore", .target(name: "CNetlink", condition: linux), "IfmeterTestSupport"]),
        // The commands' own code, in process: the argument parser, the
        // extension points.
        .testTarget(
            name: "IfmeterCLITests",
            dependencies: ["IfmeterCLI", "IfmeterCore", "IfmeterModel", "IfmeterOutput", "IfmeterPipeline", "IfmeterSampling", "IfmeterTestSupport"]),
        // The binary end to end: serve, export, live, usage, plan, state,
        // route and remote write run as processes against bytes sent in the
        // tests' own namespaces, real Prometheus, Chromium and the
        // scenarios (Scenarios/).
        .testTarget(
            name: "IfmeterEndToEndTests",
            dependencies: [
                "IfmeterCLI", "IfmeterCore", "IfmeterImage", "IfmeterOutput", "IfmeterPipeline", "IfmeterRemoteWrite", "IfmeterSampling",
                "IfmeterServe", "IfmeterStore", "IfmeterSystem", "IfmeterTestSupport",
            ]),
        // The package as shipped: its layering and documents, the
        // generated pages, the release link, the Debian package
        // and the test harness itself.
        .testTarget(name: "IfmeterPackageTests", dependencies: ["IfmeterCLI", "IfmeterCore", "IfmeterTestSupport"]),
        .testTarget(
            name: "IfmeterLiveTests",
            dependencies: ["IfmeterOutput", "IfmeterLive", "IfmeterCore", "IfmeterModel"]),
        .testTarget(
            name: "IfmeterStoreTests", dependencies: ["IfmeterStore", "IfmeterCore", "IfmeterTestSupport"]),
        .testTarget(
            name: "IfmeterTests", dependencies: ["Ifmeter", "IfmeterCore", "IfmeterSampling", "IfmeterSystem", "IfmeterTestSupport"]),
        .testTarget(name: "IfmeterConfigTests", dependencies: ["IfmeterConfig"]),
        .testTarget(
            name: "IfmeterRemoteWriteTests",
            dependencies: [
                "IfmeterRemoteWrite", "IfmeterServe", "IfmeterOutput", "IfmeterPipeline", "IfmeterSystem", "IfmeterCore", "IfmeterModel",
                "IfmeterTestSupport",
            ]),
        .testTarget(
            name: "IfmeterServeTests",
            dependencies: [
                "IfmeterServe", "IfmeterModel", "IfmeterOutput", "IfmeterPipeline", "IfmeterCore", "IfmeterStore", "IfmeterSystem",
                "IfmeterTestSupport",
            ]),
        .testTarget(name: "IfmeterSystemTests", dependencies: ["IfmeterSystem", "IfmeterCore"]),
        .testTarget(name: "IfmeterRouteTests", dependencies: ["IfmeterRoute", "IfmeterSampling", "IfmeterCore"]),
        .testTarget(
            name: "IfmeterExportTests",
            dependencies: ["IfmeterExport", "IfmeterPipeline", "IfmeterOutput", "IfmeterCore", "IfmeterSystem", "IfmeterTestSupport"]),
        .testTarget(name: "IfmeterOutputTests", dependencies: ["IfmeterOutput", "IfmeterCore"]),
        .testTarget(name: "IfmeterModelTests", dependencies: ["IfmeterModel", "IfmeterCore"]),
        .testTarget(name: "IfmeterImageTests", dependencies: ["IfmeterImage", "IfmeterOutput", "IfmeterCore", "CZlib"]),
        .testTarget(
            name: "IfmeterPipelineTests",
            dependencies: [
                "IfmeterOutput", "IfmeterModel", "IfmeterPipeline", "IfmeterCore", "IfmeterStore", "IfmeterTestSupport",
            ]),
    ],
    swiftLanguageModes: [.v6]
)
