import Foundation
import IfmeterCore
import IfmeterTestSupport
import Testing

/// Issue 29, finding 9: state files no honest writer leaves, forged with
/// `sqlite3` and read by the binary. A writer whose clock ran a day ahead
/// and was killed: `usage --check` said "Last saved ... (0 ms ago)" and
/// exited 0. `saved=nan` printed "an unknown time (0 ms ago)". Rows of
/// 2^63-1 summed to 18446744073709551615 labelled exact.
@Suite(.blocking) struct ForgedStateTests {
    /// A state file made by `plan set` (a plan for eth0, 1 GB a cycle),
    /// with `rows` added to `usage_hours` as (name, start, rx bytes) and
    /// `meta` set.
    func state(_ folder: ScenarioFolder, rows: [(String, Int64, UInt64)], meta: [(String, String)]) throws -> String {
        let path = folder["state-\(UUID().uuidString).db"]
        let plan = try ifmeter(["plan", "set", "eth0", "--state", path, "--cycle-start", "1", "--quota", "1GB"])
        guard plan.status == 0 else { throw TestFailure("plan set: \(plan.err)") }
        var sql = rows.map { "INSERT INTO usage_hours VALUES ('\($0.0)', \($0.1), 3600, 'ethernet', \($0.2), 0, 1, 1, 0);" }
        sql += meta.map { "INSERT OR REPLACE INTO meta (key, value) VALUES ('\($0.0)', '\($0.1)');" }
        try run(["sqlite3", path, sql.joined(separator: "\n")])
        return path
    }

    /// This hour's start (UTC hours are local hours in every zone ifmeter
    /// knows but for offsets of :30 and :45, where the row still lands in
    /// the current cycle).
    var thisHour: Int64 {
        let now = Int64(Date().timeIntervalSince1970)
        return now - now % 3600
    }

    @Test func aSaveInTheFutureOrAtNoTimeIsNotCurrent() throws {
        let folder = try ScenarioFolder("forged-save")
        let writer = [("save_every", "300"), ("running", "1")]
        let now = Date().timeIntervalSince1970
        // The same file saved a second ago: under the quota, said so.
        let fresh = try state(folder, rows: [("eth0", thisHour, 1000)], meta: writer + [("saved", String(now - 1))])
        let under = try ifmeter(["usage", "--state", fresh, "--check"])
        #expect(under.status == 0 && under.out.hasPrefix("under eth0"), "\(under.out)\(under.err)")

        for (saved, said) in [
            (String(now + 86400), "in the future: the clock of the ifmeter that saved them was ahead, or this clock stepped back since"),
            ("nan", "last save time cannot be read (nan)"), ("inf", "cannot be read (inf)"), ("garbage", "cannot be read (nan)"),
        ] {
            let path = try state(folder, rows: [("eth0", thisHour, 1000)], meta: writer + [("saved", saved)])
            let check = try ifmeter(["usage", "--state", path, "--check"])
            #expect(check.status == 4, "saved=\(saved): under cannot be proven: \(check.out)\(check.err)")
            #expect(check.out.hasPrefix("WARNING: ") && check.out.contains(said), "saved=\(saved): \(check.out)")
            #expect(check.out.contains("UNKNOWN eth0") && !check.out.contains("under eth0"), "\(check.out)")
            #expect(!check.out.contains(" ago") && !check.out.contains("0 ms"), "no age for a save at no time or ahead: \(check.out)")
            let text = try ifmeter(["usage", "--state", path])
            #expect(text.status == 0 && text.out.hasPrefix("WARNING: ") && text.out.contains(said), "\(text.out)")
            let json = try ifmeter(["usage", "--state", path, "--format", "json"])
            let document = try JSONParser.parse(json.out)
            #expect(document["state"]?["stale"] == .bool(true), "\(json.out)")
            #expect(json.err.hasPrefix("WARNING: "), "beside JSON, on stderr: \(json.err)")
        }
    }

    @Test func sumsPastTwoToThe64AreLowerBounds() throws {
        let folder = try ScenarioFolder("forged-sums")
        let most = UInt64(Int64.max)
        // Three hours of today (local midnight on), 2^63-1 bytes each.
        let midnight = Int64(Calendar.current.startOfDay(for: Date()).timeIntervalSince1970)
        let rows = (0..<3).map { ("eth0", midnight + 3600 * Int64($0), most) }
        let path = try state(folder, rows: rows, meta: [("saved", String(Date().timeIntervalSince1970)), ("running", "0")])

        let json = try ifmeter(["usage", "--state", path, "--format", "json"])
        #expect(json.status == 0, "\(json.err)")
        guard case .array(let interfaces)? = try JSONParser.parse(json.out)["interfaces"],
            case .array(let periods)? = interfaces.first?["periods"], let today = periods.last
        else { throw TestFailure("no periods: \(json.out)") }
        #expect(today["rx_bytes"]?.uint64Value == .max && today["quality"]?.stringValue == "lower-bound", "\(today)")
        let text = try ifmeter(["usage", "--state", path])
        #expect(text.out.contains("≥ 16.0 EiB") && text.out.contains("lower-bound"), "\(text.out)")
        let oneline = try ifmeter(["usage", "--state", path, "--oneline"])
        #expect(oneline.out.contains(";18446744073709551615;0;18446744073709551615;lower-bound;"), "\(oneline.out)")
        let check = try ifmeter(["usage", "--state", path, "--check"])
        #expect(check.status == 3 && check.out.contains("OVER eth0: at least"), "\(check.out)")
    }
}
