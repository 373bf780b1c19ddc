// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "ifmeter",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "ifmeter", targets: ["ifmeter"]),
        .library(name: "IfmeterCore", targets: ["IfmeterCore"]),
        .library(name: "IfmeterSampling", targets: ["IfmeterSampling"]),
    ],
    targets: [
        // libnl-3 and libnl-route-3, found through pkg-config.
        .systemLibrary(
            name: "CNetlink",
            pkgConfig: "libnl-3.0 libnl-route-3.0",
            providers: [.apt(["libnl-3-dev", "libnl-route-3-dev"])]
        ),
        // libmicrohttpd for the scrape endpoint, zlib for gzip. ifmeter
        // loads libmicrohttpd when `serve` starts (dlopen, in CIfmeterHTTP):
        // linked, it and its TLS libraries would cost every command 2 MB of
        // RSS at start-up. So this target gives its header (in /usr/include)
        // and the apt provider, not pkg-config's -lmicrohttpd.
        .systemLibrary(name: "CMicroHTTPD", providers: [.apt(["libmicrohttpd-dev"])]),
        .systemLibrary(name: "CZlib", pkgConfig: "zlib", providers: [.apt(["zlib1g-dev"])]),
        // SQLite for persistent totals.
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        // C shims for libmicrohttpd's variadic start and zlib's macros.
        .target(name: "CIfmeterHTTP", dependencies: ["CMicroHTTPD", "CZlib"]),
        // The HTTP server: the one place that calls libmicrohttpd.
        .target(name: "IfmeterHTTP", dependencies: ["CIfmeterHTTP", "CMicroHTTPD"]),
        // C shims for kernel macros and inline structures Swift cannot import,
        // and the raw C loops the benchmark compares against.
        .target(
            name: "CIfmeterLinux",
            cSettings: [.define("_GNU_SOURCE")]
        ),
        // Platform-neutral: model, classifier rules, delta engine, trace format,
        // report model and renderers. No Linux-only import.
        .target(name: "IfmeterCore"),
        // The only library that touches C: netlink, getifaddrs, sysfs facts.
        .target(
            name: "IfmeterSampling",
            dependencies: [
                "IfmeterCore",
                .target(name: "CNetlink", condition: .when(platforms: [.linux])),
                .target(name: "CIfmeterLinux", condition: .when(platforms: [.linux])),
            ]
        ),
        // The live view's model and its pure renderer.
        .target(name: "IfmeterLive", dependencies: ["IfmeterCore"]),
        // Persistent totals and daily and monthly usage, in SQLite.
        .target(name: "IfmeterStore", dependencies: ["IfmeterCore", "CSQLite"]),
        // The sampling loop the long-running commands share.
        .target(name: "IfmeterService", dependencies: ["IfmeterCore", "IfmeterSampling", "IfmeterStore"]),
        .target(
            name: "IfmeterCLI",
            dependencies: ["IfmeterCore", "IfmeterSampling", "IfmeterService", "IfmeterHTTP", "IfmeterLive", "IfmeterStore"]
        ),
        .executableTarget(
            name: "ifmeter",
            dependencies: ["IfmeterCLI", .target(name: "CIfmeterLinux", condition: .when(platforms: [.linux]))]
        ),
        .executableTarget(
            name: "ifmeter-bench",
            dependencies: ["IfmeterCore", "IfmeterSampling", "IfmeterLive", "CIfmeterLinux"]
        ),
        // Namespaces, veth pairs and traffic for the integration tests.
        .target(name: "IfmeterTestSupport", dependencies: ["IfmeterSampling", "CIfmeterLinux"]),
        .testTarget(name: "IfmeterCoreTests", dependencies: ["IfmeterCore"]),
        .testTarget(
            name: "IfmeterSamplingTests",
            dependencies: ["IfmeterSampling", "IfmeterCore", "CIfmeterLinux", "CNetlink", "IfmeterTestSupport"]),
        .testTarget(name: "IfmeterCLITests", dependencies: ["IfmeterCLI", "IfmeterCore", "IfmeterTestSupport"]),
        .testTarget(name: "IfmeterLiveTests", dependencies: ["IfmeterLive", "IfmeterCore"]),
        .testTarget(name: "IfmeterStoreTests", dependencies: ["IfmeterStore", "IfmeterCore"]),
    ],
    swiftLanguageModes: [.v6]
)
