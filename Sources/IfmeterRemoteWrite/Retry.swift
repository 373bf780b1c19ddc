/// What the sender does with a response (Remote-Write 1.0: 5xx and 429 are
/// retried, as are network errors; other 4xx are not).
package enum RetryDecision: Sendable, Equatable {
    case sent
    case retry
    case drop
}

package enum RetryPolicy {
    package static func classify(_ outcome: PostOutcome) -> RetryDecision {
        switch outcome.status {
        case 200..<300: return .sent
        case 0, 429, 500..<600: return .retry
        default: return .drop
        }
    }

    /// The wait before try `attempt` (1 after the first failure):
    /// exponential from `minimum` to `maximum`, with jitter (a random
    /// factor from 0.5 to 1); at least Retry-After when the receiver gave
    /// one (up to `retryAfterCap`).
    package static func delay(
        attempt: Int, retryAfter: Double?, minimum: Double = 0.1, maximum: Double = 5, retryAfterCap: Double = 300,
        random: Double = Double.random(in: 0...1)
    ) -> Double {
        let exponential = min(maximum, minimum * Double(1 << min(max(attempt - 1, 0), 30)))
        let jittered = exponential * (0.5 + 0.5 * random)
        guard let retryAfter else { return jittered }
        return max(jittered, min(retryAfter, retryAfterCap))
    }
}
