import IfmeterCore
import IfmeterStore
import Synchronization

/// The traffic a writer counted since its last save that worked, by
/// interface and local hour (and five-minute slot), as of its last sample:
/// what serve's usage tables add to the file's rows so that they are
/// current within one sample, as the plan gauges are (issue 46). The
/// persistence publishes it after each sample and each save; any thread
/// reads it. The save interval then decides only what a power cut loses.
package final class UnsavedUsage: Sendable {
    struct Held: Sendable {
        var hours: [SeriesKey: [Int64: HourUsage]] = [:]
        var kinds: [SeriesKey: InterfaceKind] = [:]
    }
    private let held = Mutex(Held())

    package init() {}

    func publish(hours: [SeriesKey: [Int64: HourUsage]], kinds: [SeriesKey: InterfaceKind]) {
        held.withLock { $0 = Held(hours: hours, kinds: kinds) }
    }

    /// The unsaved traffic as the file's rows are read: hour slices, or
    /// five-minute ones, each under its stored name (`NS/NAME` for another
    /// namespace's), sorted by name and start.
    package func slices(fiveMinutes: Bool) -> [UsageSlice] {
        let now = held.withLock { $0 }
        var out: [UsageSlice] = []
        for (key, hours) in now.hours {
            let kind = now.kinds[key] ?? .other
            for hour in hours.values {
                if fiveMinutes {
                    for slot in hour.fiveMinutes {
                        out.append(
                            UsageSlice(
                                name: key.description, kind: kind, start: slot.start, seconds: 300, counters: slot.counters, quality: slot.quality))
                    }
                } else {
                    out.append(
                        UsageSlice(
                            name: key.description, kind: kind, start: hour.start, seconds: 3600, counters: hour.counters, quality: hour.quality))
                }
            }
        }
        return out.sorted { ($0.name, $0.start) < ($1.name, $1.start) }
    }
}
