import IfmeterCore
import Testing

/// Event counts are kept in 32 bits each (every series, row and total holds
/// one): a count stops at the top instead of wrapping, and never goes below
/// zero.
@Suite struct EventCountsTests {
    @Test func aCountStopsAtItsTopAndAtZero() {
        var counts = EventCounts(wraps: 2, resets: 0, recreations: Int(UInt32.max) - 1, deletions: 5)
        counts.recreations += 1
        counts.recreations += 1
        counts.resets -= 1
        counts.wraps += 3
        #expect(counts.recreations == Int(UInt32.max), "stopped at 4,294,967,295, not wrapped to 0")
        #expect(counts.resets == 0)
        #expect(counts.wraps == 5 && counts.deletions == 5)
    }

    @Test func equalCountsAreOneInASet() {
        let a = EventCounts(wraps: 1, resets: 2, recreations: 3, deletions: 4)
        var b = EventCounts()
        b.wraps = 1
        b.resets = 2
        b.recreations = 3
        b.deletions = 4
        #expect(a == b)
        #expect(Set([a, b, EventCounts(deletions: 4)]).count == 2)
        #expect(a != EventCounts(wraps: 1, resets: 2, recreations: 3, deletions: 5))
    }
}
