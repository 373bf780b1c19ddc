import IfmeterCore
import IfmeterSystem

/// The server's one timer thread: every 100 ms, and whenever poked, it
/// runs `tick` with the time (milliseconds of the monotonic clock), which
/// sweeps the connection table and resumes the auth waits that are due;
/// `tick` says when it wants to run next.
final class ServerTimer: Sendable {
    private struct Control: Sendable {
        var pokes: UInt64 = 0
        var stopping = false
        var running = false
    }

    private let control = ConditionLock(Control())
    static let periodMs: UInt64 = 100

    /// Starts the thread.
    func start(_ tick: @escaping @Sendable (_ nowMs: UInt64) -> UInt64?) throws(SystemError) {
        control.update { $0.running = true }
        do throws(SystemError) {
            try startThread { [control] in
                var seen: UInt64 = 0
                while true {
                    let now = monotonicMilliseconds()
                    let next = tick(now)
                    let sleepMs = min(Self.periodMs, next.map { $0 > now ? $0 - now : 0 } ?? Self.periodMs)
                    let stop = control.wait(seconds: Double(sleepMs) / 1000, until: { $0.stopping || $0.pokes != seen }) { control, _ in
                        seen = control.pokes
                        return control.stopping
                    }
                    if stop { break }
                }
                control.update { $0.running = false }
            }
        } catch {
            control.update { $0.running = false }
            throw error
        }
    }

    /// Runs `tick` now (something is due sooner than it said).
    func poke() { control.update { $0.pokes &+= 1 } }

    /// Stops the thread and waits until it has ended (it is not in `tick`
    /// any more).
    func stop() {
        control.update { $0.stopping = true }
        control.wait(seconds: 60, until: { !$0.running }) { _, _ in }
    }
}

/// Milliseconds of the monotonic clock, as the timer, the connection table
/// and the auth waits count them.
func monotonicMilliseconds() -> UInt64 { UInt64(max(0, monotonicSeconds() * 1000)) }
