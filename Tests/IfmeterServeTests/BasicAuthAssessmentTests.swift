import Foundation
import IfmeterServe
import IfmeterTestSupport
import Testing

/// What basic auth decides for a request before any check runs, in
/// process: no time is measured, the assessment says which path a request
/// takes. (AuthHardeningTests sends the same requests to a running serve.)
@Suite(.blocking) struct BasicAuthAssessmentTests {
    static func basic(_ user: String, _ password: String) -> String { "Basic " + Data("\(user):\(password)".utf8).base64EncodedString() }

    static func authenticator() throws -> BasicAuthenticator {
        let line = try run(["htpasswd", "-nbBC", "4", "prometheus", "right horse battery"]).out
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return try BasicAuthenticator(users: ["prometheus": String(line.split(separator: ":", maxSplits: 1)[1])])
    }

    /// No credentials, or ones that are not Basic: 401 at once, with no
    /// check, no wait and no token taken from the client's bucket (the
    /// client is never even asked for).
    @Test func noCredentialsAreRefusedAtOnceWithoutACheck() throws {
        let auth = try Self.authenticator()
        for header in [nil, "", "Bearer abc", "Basic", "Basic !!!", "Basic " + "bm9jb2xvbg=="] as [String?] {
            var asked = false
            let assessment = auth.assess(authorization: header) {
                asked = true
                return BasicAuthenticator.Client(high: 0, low: 1)
            }
            guard case .now(.refused) = assessment else {
                Issue.record("\(header ?? "no header"): \(assessment), not a 401 at once")
                continue
            }
            #expect(!asked, "\(header ?? "no header"): the client's bucket was consulted")
        }
    }

    /// An unknown user is refused after a time modelled on a check (and a
    /// decoy check runs), never at once: answering it sooner than a wrong
    /// password would tell who the users are. A known user's wrong
    /// password is checked.
    @Test func anUnknownUserWaitsLikeACheckAndAKnownOneIsChecked() throws {
        let auth = try Self.authenticator()
        let client = BasicAuthenticator.Client(high: 0, low: 2)
        let unknown = auth.assess(authorization: Self.basic("mallory", "guess")) { client }
        guard case .refusedAfter(let seconds) = unknown else {
            Issue.record("an unknown user: \(unknown)")
            return
        }
        #expect(seconds > 0)
        let known = auth.assess(authorization: Self.basic("prometheus", "wrong")) { client }
        guard case .verify(let verification) = known else {
            Issue.record("a known user's wrong password: \(known)")
            return
        }
        auth.abandon(verification)
    }
}
