import IfmeterTestSupport
import Synchronization
import Testing

@testable import IfmeterServe

/// How long an unknown user is kept waiting, in process and by the tests'
/// own clock: each check moves it by its cost's time, so no wall time is
/// measured. An unknown user must be refused after what a check of the
/// configured user's cost takes, or the answer's speed tells who the users
/// are (a cost-10 decoy against a cost-12 user answered in a quarter of
/// the time). AuthHardeningTests sends such requests to a running serve.
@Suite(.blocking) struct BasicAuthTimingTests {
    /// Seconds, moved only by the fake checks.
    private final class Clock: Sendable {
        let seconds = Mutex(0.0)
        func now() -> Double { seconds.withLock { $0 } }
        func advance(_ by: Double) { seconds.withLock { $0 += by } }
    }

    /// A check of a cost-`c` hash takes 2^c x 0.1 ms: cost 12 is 0.4096 s.
    private static func seconds(cost: Int) -> Double { Double(1 << cost) * 1e-4 }

    /// A well-formed bcrypt hash of `cost` (the fake check reads only its cost).
    private static func hash(cost: Int) -> String { "$2y$\(cost)$" + String(repeating: "a", count: 53) }

    @Test(arguments: [10, 12])
    func anUnknownUserIsRefusedAfterACheckOfTheUsersCost(cost: Int) throws {
        let clock = Clock()
        let checked = Mutex<[Int]>([])
        let auth = try BasicAuthenticator(
            users: ["prometheus": Self.hash(cost: cost)],
            check: { _, hash in
                let cost = BasicAuthenticator.bcryptCost(hash)!
                clock.advance(Self.seconds(cost: cost))
                checked.withLock { $0.append(cost) }
                return 0
            }, clock: clock.now)
        // The start measures the user's cost once, in the background.
        _ = try waitFor("the first check of cost \(cost)") {
            checked.withLock { $0.contains(cost) } && auth.checksQueuedOrRunning == 0 ? true : nil
        }
        #expect(abs(auth.expectedSeconds(cost: cost) - Self.seconds(cost: cost)) < 1e-9)
        let unknown = auth.assess(authorization: BasicAuthAssessmentTests.basic("mallory", "guess")) { .unknown }
        guard case .refusedAfter(let seconds) = unknown else {
            Issue.record("an unknown user: \(unknown)")
            return
        }
        #expect(
            abs(seconds - Self.seconds(cost: cost)) < 1e-9, "refused after \(seconds) s; a check of cost \(cost) takes \(Self.seconds(cost: cost)) s")
        // And a decoy check of that cost runs, as a real one would.
        _ = try waitFor("the decoy check") { checked.withLock { $0.filter { $0 == cost }.count } >= 2 ? true : nil }
    }
}
