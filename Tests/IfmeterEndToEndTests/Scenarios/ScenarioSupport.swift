// What the scenario suites share: they run ifmeter as a user would, in the
// tests' own namespaces, and read back every figure and label it prints.
import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A folder of the scenario's own, removed with the value.
final class ScenarioFolder {
    let path: String

    init(_ name: String) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-\(name)-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    subscript(_ file: String) -> String { path + "/" + file }

    /// A boot id file the scenario controls (`--boot-id-file`).
    func bootFile(_ id: String = "boot-one") throws -> String {
        try (id + "\n").write(toFile: self["boot_id"], atomically: true, encoding: .utf8)
        return self["boot_id"]
    }
}

/// One interface as `usage --format json` (daily) sums it: its bytes over
/// every period, and the worst quality of them.
struct UsageFigures: Equatable, CustomStringConvertible {
    var rx: UInt64 = 0
    var tx: UInt64 = 0
    var quality = "exact"

    var description: String { "rx \(rx) tx \(tx) \(quality)" }
}

enum Scenario {
    /// `ifmeter COMMAND ...` started in the background inside `ns`.
    static func start(_ ns: TestNamespace, _ command: String, _ arguments: [String], name: String? = nil) throws -> Background {
        try Background(["ip", "netns", "exec", ns.name, try ifmeterBinary(), command] + arguments, name: name ?? command)
    }

    /// Every interface of a usage JSON table (any granularity), summed.
    static func usage(_ state: String, _ extra: [String] = []) throws -> [String: UsageFigures] {
        let result = try ifmeter(["usage", "--state", state, "--format", "json"] + extra)
        guard result.status == 0 else { throw TestFailure("usage failed (\(result.status)): \(result.err)") }
        let table = try JSONParser.parse(result.out)
        guard case .array(let list)? = table["interfaces"] else { throw TestFailure("no interfaces in \(result.out)") }
        var figures: [String: UsageFigures] = [:]
        for item in list {
            guard let name = item["name"]?.stringValue else { continue }
            let key = (item["netns"]?.stringValue).map { $0.isEmpty ? name : $0 + "/" + name } ?? name
            var f = UsageFigures()
            if case .array(let periods)? = item["periods"] {
                for p in periods {
                    f.rx += p["rx_bytes"]?.uint64Value ?? 0
                    f.tx += p["tx_bytes"]?.uint64Value ?? 0
                    f.quality = worse(f.quality, p["quality"]?.stringValue ?? "exact")
                }
            }
            figures[key] = f
        }
        return figures
    }

    static func worse(_ a: String, _ b: String) -> String {
        let order = ["exact", "wrap-corrected", "lower-bound"]
        return (order.firstIndex(of: a) ?? 2) >= (order.firstIndex(of: b) ?? 2) ? a : b
    }

    /// Each interface of an export or replay report: totals and quality.
    static func reportTotals(_ json: String) throws -> [String: (rx: UInt64, tx: UInt64, quality: String)] {
        let report = try JSONParser.parse(json)
        guard case .array(let list)? = report["interfaces"] else { throw TestFailure("no interfaces in \(json.prefix(400))") }
        var totals: [String: (rx: UInt64, tx: UInt64, quality: String)] = [:]
        for item in list {
            guard let name = item["name"]?.stringValue else { continue }
            let key = (item["netns"]?.stringValue).map { $0.isEmpty ? name : $0 + "/" + name } ?? name
            let t = item["totals"]
            totals[key] = (t?["rx_bytes"]?.uint64Value ?? 0, t?["tx_bytes"]?.uint64Value ?? 0, item["quality"]?.stringValue ?? "?")
        }
        return totals
    }

    /// The samples of one metric family in a text exposition, by their
    /// label text (`interface="vA",kind="virtual"`).
    static func metric(_ exposition: String, _ family: String) -> [String: Double] {
        var values: [String: Double] = [:]
        for line in exposition.split(separator: "\n") where line.hasPrefix(family + "{") || line.hasPrefix(family + " ") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            let head = line[..<space]
            let labels = head.firstIndex(of: "{").map { String(head[head.index(after: $0)..<head.index(before: head.endIndex)]) } ?? ""
            values[labels] = value
        }
        return values
    }

    /// Scrapes /metrics in `ns`.
    static func scrape(_ ns: TestNamespace, port: UInt16 = 9874) throws -> String {
        let result = try RawHTTP.request("/metrics", port: port, in: ns.name)
        guard result.status == 200 else { throw TestFailure("scrape: \(result.status)") }
        return result.text
    }
}
