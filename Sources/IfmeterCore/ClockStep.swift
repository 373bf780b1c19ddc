/// A step of the wall clock between two readings of both clocks: NTP
/// setting a clock that was far off, an administrator's `date -s`, a
/// virtual machine resumed. The wall clock labels periods (RFC 3339 start
/// and end); the monotonic clock measures them. When the two spans differ
/// by more than slew and the moment each clock is read can explain, the
/// wall clock stepped, and a period's start and end do not span it (an end
/// may even come before its start).
public enum ClockStep {
    /// What the two spans may differ by without a step: NTP slews a clock by
    /// at most 500 ppm, so a thousandth of the span, and at least a second
    /// (the two clocks are not read at the same instant).
    public static func tolerance(monotonicSeconds: Double) -> Double { max(1, abs(monotonicSeconds) / 1000) }

    /// Seconds the wall clock stepped between the readings (forward
    /// positive, back negative), to the millisecond; 0 when the spans agree
    /// within `tolerance`, or when a reading is no number (no claim).
    public static func seconds(wall: (start: Double, end: Double), monotonic: (start: Double, end: Double)) -> Double {
        let span = monotonic.end - monotonic.start
        let step = (wall.end - wall.start) - span
        guard step.isFinite, abs(step) > tolerance(monotonicSeconds: span) else { return 0 }
        return (step * 1000).rounded() / 1000
    }

    /// The sentence for a step `during` a span ("this period", "this
    /// interval"); nil without one.
    public static func sentence(_ step: Double, during: String) -> String? {
        guard step != 0, step.isFinite else { return nil }
        return "The wall clock stepped \(step > 0 ? "forward" : "back") \(Units.duration(abs(step))) during \(during): "
            + "its wall-clock times are readings of a clock that moved; its length is measured on the monotonic clock."
    }
}
