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

    /// Failed checks are throttled per client address on the
    /// authenticator's clock, which the test moves: a burst of 10, then 5
    /// a second; past them 429 with Retry-After, for an unknown user and a
    /// known one alike; another address has a bucket of its own.
    /// (AuthHardeningTests sends the same to a running serve.)
    @Test func failedChecksAreThrottledPerAddressOnTheClock() throws {
        let clock = Clock()
        let auth = try BasicAuthenticator(
            users: ["prometheus": "$2y$04$" + String(repeating: "a", count: 53)], check: { _, _ in 0 }, clock: clock.now)
        let a = BasicAuthenticator.Client(high: 0, low: 1), b = BasicAuthenticator.Client(high: 0, low: 2)
        /// "check" when a check (or the wait modelled on one) is due,
        /// "429 after N" when throttled.
        func verdict(_ user: String, from client: BasicAuthenticator.Client) -> String {
            switch auth.assess(authorization: BasicAuthAssessmentTests.basic(user, "guess"), client: { client }) {
            case .refusedAfter: return "check"
            case .verify(let verification):
                auth.abandon(verification)
                return "check"
            case .now(.throttled(let retryAfter)): return "429 after \(retryAfter)"
            case .now(let other): return "\(other)"
            }
        }
        let burst = (0..<10).map { verdict("mallory-\($0)", from: a) }
        #expect(burst == Array(repeating: "check", count: 10), "the burst: \(burst)")
        #expect(verdict("mallory", from: a) == "429 after 1")
        #expect(verdict("prometheus", from: a) == "429 after 1", "a known user's password is not checked either")
        #expect(verdict("mallory", from: b) == "check", "another address has its own bucket")
        // 5 a second: one more after 0.2 s, five after a second more.
        clock.advance(0.2)
        #expect([verdict("mallory", from: a), verdict("mallory", from: a)] == ["check", "429 after 1"])
        clock.advance(1.0)
        let second = (0..<6).map { _ in verdict("mallory", from: a) }
        #expect(second == Array(repeating: "check", count: 5) + ["429 after 1"], "\(second)")
        // A quiet while fills the bucket to its burst, no more.
        clock.advance(60)
        let refilled = (0..<11).map { _ in verdict("mallory", from: a) }
        #expect(refilled == Array(repeating: "check", count: 10) + ["429 after 1"], "\(refilled)")
    }
}
