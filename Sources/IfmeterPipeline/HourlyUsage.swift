import IfmeterCore
import IfmeterStore
import IfmeterSystem

/// Traffic not yet saved, per interface and local hour: each delta is split
/// across the hours its interval spans (`HourSplit`), so a save that comes
/// after midnight (or any hour) puts the bytes before it where they belong.
package struct HourlyUsage: Sendable {
    package var zone: LocalZone
    package private(set) var hours: [SeriesKey: [Int64: HourUsage]] = [:]

    package init(zone: LocalZone = .system) { self.zone = zone }

    /// Adds a sample's deltas; `sampleTime` (monotonic) and `wallTime` are
    /// the same instant, so a delta's wall interval is its monotonic one
    /// moved by their difference. Baselines and idle intervals add nothing.
    package mutating func add(_ deltas: [InterfaceDelta], sampleTime: Double, wallTime: Double) {
        for d in deltas where d.change != .baseline {
            if d.isIdle { continue }
            let end = wallTime - (sampleTime - d.time)
            let start = end - max(0, d.seconds ?? 0)
            // Five-minute slots only for the hours the table keeps (an
            // interval of days after a long pause splits into hours alone).
            let kept = Double(FiveMinuteSplit.oldestKept(now: LocalZone.second(end) ?? 0))
            for share in HourSplit.split(d.counters, from: start, to: end, zone: zone) {
                var hour = HourUsage(start: share.hourStart, counters: share.counters, quality: d.quality)
                let until = Double(zone.nextHour(share.hourStart))
                if until > kept {
                    // The part of the interval in this hour, split by slot.
                    let from = start.isFinite ? max(start, Double(share.hourStart)) : start
                    hour.fiveMinutes = FiveMinuteSplit.split(share.counters, from: from, to: min(end, until)).map {
                        FiveMinuteUsage(start: $0.start, counters: $0.counters, quality: d.quality)
                    }
                }
                add(d.key, hour)
            }
        }
    }

    /// Makes the hour holding `wallTime` a lower bound for `key` (traffic
    /// is known to be missing: an unclean stop), adding an empty hour when
    /// it has none. A time no stored hour may start at (a state file's
    /// `saved` of 1e300, inf, or year 20000) marks nothing: no such hour
    /// could be saved or read back.
    package mutating func markLowerBound(_ key: SeriesKey, at wallTime: Double) {
        guard let second = LocalZone.second(wallTime) else { return }
        let start = zone.hourStart(second)
        guard UsageSlice.startRange.contains(start) else { return }
        let zero = Counters(rxBytes: 0, txBytes: 0, rxPackets: 0, txPackets: 0)
        add(
            key,
            HourUsage(
                start: start, counters: zero, quality: .lowerBound,
                fiveMinutes: [FiveMinuteUsage(start: FiveMinuteSplit.slotStart(second), counters: zero, quality: .lowerBound)]))
    }

    mutating func add(_ key: SeriesKey, _ h: HourUsage) {
        var mine = hours[key] ?? [:]
        if var old = mine[h.start] {
            old.counters.add(h.counters)
            old.quality = max(old.quality, h.quality)
            for slot in h.fiveMinutes {
                if let i = old.fiveMinutes.firstIndex(where: { $0.start == slot.start }) {
                    old.fiveMinutes[i].counters.add(slot.counters)
                    old.fiveMinutes[i].quality = max(old.fiveMinutes[i].quality, slot.quality)
                } else {
                    old.fiveMinutes.append(slot)
                }
            }
            mine[h.start] = old
        } else {
            mine[h.start] = h
        }
        hours[key] = mine
    }

    /// Returns the hours and starts afresh.
    package mutating func take() -> [SeriesKey: [HourUsage]] {
        defer { hours = [:] }
        return hours.mapValues { $0.values.sorted { $0.start < $1.start } }
    }

    /// Puts back hours taken but not saved (a failed save).
    package mutating func putBack(_ taken: [SeriesKey: [HourUsage]]) {
        for (key, list) in taken {
            for h in list { add(key, h) }
        }
    }
}
