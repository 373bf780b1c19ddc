import CIfmeterHTTP
import IfmeterCore
import Synchronization
import IfmeterSystem

/// HTTPS settings: PEM text (not paths), client certificates, versions.
package struct HTTPTLSSettings: Sendable, Equatable {
    package enum ClientAuth: Int32, Sendable {
        case none = 0
        /// A certificate is optional; one given must verify against the CA.
        case verifyIfGiven = 1
        /// A certificate signed by the CA is required.
        case requireAndVerify = 2
    }

    package enum Version: Int, Sendable, Comparable {
        case tls12 = 12, tls13 = 13
        package static func < (a: Version, b: Version) -> Bool { a.rawValue < b.rawValue }
        var gnutlsName: String { self == .tls12 ? "VERS-TLS1.2" : "VERS-TLS1.3" }
    }

    package var certificatePEM: String
    package var keyPEM: String
    package var clientCAPEM: String?
    package var clientAuth: ClientAuth = .none
    package var minVersion: Version = .tls12
    package var maxVersion: Version = .tls13

    package init(certificatePEM: String, keyPEM: String) {
        self.certificatePEM = certificatePEM
        self.keyPEM = keyPEM
    }

    /// The GnuTLS priority string: its defaults, only the versions allowed.
    package var priorities: String {
        let versions = [Version.tls13, .tls12].filter { $0 >= minVersion && $0 <= maxVersion }
        return "NORMAL:-VERS-ALL" + versions.map { ":+" + $0.gnutlsName }.joined()
    }
}

/// HTTP Basic authentication against bcrypt hashes, built so that wrong
/// credentials, however many, cannot starve a scrape with the right ones,
/// cannot tell which users exist, and cannot hold up a stop.
///
/// The request path never runs bcrypt, and never waits for it on a thread:
/// - No credentials, malformed ones, or NUL in the user or password (C
///   would cut the password there): 401 at once. Nothing names a user, so
///   the timing tells nothing.
/// - A success seen before is found in a cache keyed by an HMAC-SHA256 of
///   user and password under a random per-process key (the cache holds no
///   password, nor a hash one could test guesses against offline): allowed
///   at once, never throttled. Only successes are cached, so guesses cannot
///   fill it.
/// - Anything else first takes a token from its client address's bucket
///   (IPv4 address or IPv6 /64): 5 failed checks a second, a burst of 10.
///   An empty bucket is 429 with Retry-After, for known and unknown users
///   alike (so a 429 tells nothing either); a success gives its token back.
///   Then, if the checks already queued would keep a new one waiting more
///   than 5 s, or 32 are queued: 503 with Retry-After, again for both.
/// - A configured user's password is checked on a pool of at most 2
///   threads (cores - 1, at least 1), the request suspended meanwhile (its
///   connection out of the event loop, no thread held); the verdict
///   resumes it.
/// - An unknown user's 401 is not sent at once: that alone would tell the
///   user does not exist, as a wrong password for a real one takes a bcrypt
///   check. It is held, suspended on a timer (no thread, no pool slot), for
///   what a check would have taken: the expected wait in the queue plus one
///   verification of a configured user's cost (chosen per name by the keyed
///   hash, so one name always looks like the same user), drawn from the
///   last 16 measured verifications of that cost, decoys included, so its
///   spread is a real one too (before any, bcrypt's speed measured at
///   start, scaled by 2^cost: its time doubles per cost step). And so that
///   the CPU load, which other requests feel, does not tell either, a decoy
///   verification of that cost is queued when a pool thread is idle, and
///   dropped when the pool is busy (where a real check would have queued:
///   an attacker who loads the pool to see the difference is throttled
///   first).
/// To an attacker, in the common case (pool idle, under the throttle), a
/// wrong password for a known user and any password for an unknown one
/// both take one verification of that user's cost, spread alike, and cost
/// the server the same CPU. Costs are 4 to 16 (checked at start): cost 16
/// takes about 4 s here. A stop waits for no check: a running one finishes
/// on its thread, its request answered already by the stopping server.
package final class BasicAuthenticator: Sendable {
    /// The bcrypt costs accepted.
    package static let costs = 4...16
    /// Failed checks per client address and second, and the burst above it.
    package static let failuresPerSecond = 5.0
    package static let failureBurst = 10.0
    /// The queue: past this wait, or this many checks, 503.
    package static let maxQueueSeconds = 5.0
    package static let maxQueued = 32
    /// Client addresses with a bucket; past it, idle buckets are dropped,
    /// and with none idle a new address is throttled.
    static let maxClients = 4096
    static let cacheLimit = 256

    /// What a request's credentials come to.
    package enum Verdict: Sendable, Equatable {
        case allowed
        case refused
        /// 429: too many failures from this address.
        case throttled(retryAfter: Int)
        /// 503: too many checks queued.
        case busy(retryAfter: Int)
    }

    /// What the request path does with a request's credentials.
    package enum Assessment: Sendable {
        /// Answer at once.
        case now(Verdict)
        /// 401, after `seconds` (an unknown user, timed like a check).
        case refusedAfter(seconds: Double)
        /// A check to start with `verify(_:then:)` (or `abandon(_:)`).
        case verify(Verification)
    }

    /// A check of a configured user's password, not started yet.
    package struct Verification: Sendable {
        fileprivate let password: [UInt8]
        fileprivate let hash: String
        fileprivate let cost: Int
        fileprivate let digest: Digest?
        fileprivate let client: Client
    }

    /// A client address as the throttle counts it (IPv4, or IPv6 /64).
    package struct Client: Hashable, Sendable {
        package var high: UInt64, low: UInt64
        package init(high: UInt64, low: UInt64) {
            self.high = high
            self.low = low
        }
        /// For requests whose address is unknown: one bucket for them all.
        package static let unknown = Client(high: 0, low: 0)
    }

    fileprivate struct Digest: Hashable, Sendable {
        var a: UInt64, b: UInt64, c: UInt64, d: UInt64
    }

    private struct Bucket {
        var tokens: Double
        var updated: Double
    }

    /// The last 16 verification times of each cost, the last 16 of any
    /// cost divided by 2^cost (for a cost not measured yet), and the work
    /// queued or running, in expected seconds.
    private struct Timing {
        struct Ring {
            var values: [Double] = []
            var next = 0
            mutating func add(_ value: Double) {
                if values.count < 16 { values.append(value) } else { values[next] = value }
                next = (next + 1) % 16
            }
            var mean: Double? { values.isEmpty ? nil : values.reduce(0, +) / Double(values.count) }
        }

        var byCost: [Int: Ring] = [:]
        var perUnit = Ring()
        var pendingSeconds = 0.0

        mutating func record(_ seconds: Double, cost: Int) {
            byCost[cost, default: Ring()].add(seconds)
            perUnit.add(seconds / Double(1 << cost))
        }

        func expected(cost: Int) -> Double { byCost[cost]?.mean ?? (perUnit.mean ?? 0) * Double(1 << cost) }
        func sample(cost: Int) -> Double {
            byCost[cost]?.values.randomElement() ?? (perUnit.values.randomElement() ?? 0) * Double(1 << cost)
        }
    }

    private let users: [String: (hash: String, cost: Int)]
    /// One cost per configured user, sorted: an unknown name is timed as one of them.
    private let decoyCosts: [Int]
    /// A hash nobody knows the password of, per cost.
    private let decoys: [Int: String]
    private let key: [UInt8]
    private let pool: CryptPool
    private let workers: Int
    private let cache = Mutex<Set<Digest>>([])
    private let buckets = Mutex<[Client: Bucket]>([:])
    private let timing = Mutex(Timing())
    private let clock: @Sendable () -> Double

    /// `users` maps a user name to a bcrypt hash ($2y$, $2b$ or $2a$, of a
    /// cost in `costs`). Throws when a hash is not one, or when the random
    /// key or the pool's threads cannot be had.
    package convenience init(users: [String: String]) throws(SystemError) {
        try self.init(users: users, check: CryptPool.crypt, clock: monotonicSeconds)
    }

    /// With a check and a clock of the caller's: tests time checks by a
    /// clock they move.
    init(users: [String: String], check: @escaping CryptPool.Check, clock: @escaping @Sendable () -> Double) throws(SystemError) {
        self.clock = clock
        var parsed: [String: (hash: String, cost: Int)] = [:]
        for (user, hash) in users {
            guard let cost = Self.bcryptCost(hash) else {
                throw SystemError(call: "BasicAuthenticator(users:)", message: "the hash of '\(user)' is not bcrypt")
            }
            guard Self.costs.contains(cost) else {
                throw SystemError(
                    call: "BasicAuthenticator(users:)",
                    message: "the bcrypt cost of '\(user)' is \(cost), outside \(Self.costs.lowerBound) to \(Self.costs.upperBound)")
            }
            parsed[user] = (hash, cost)
        }
        self.users = parsed
        // (With no user at all, every name is unknown: timed as cost 10.)
        decoyCosts = parsed.isEmpty ? [10] : parsed.values.map(\.cost).sorted()
        key = try randomBytes(32)
        var decoys: [Int: String] = [:]
        for cost in Set(decoyCosts + [6]) { decoys[cost] = try Self.decoyHash(cost: cost) }
        self.decoys = decoys
        let cores = processorCount
        workers = max(1, min(2, cores - 1))
        pool = try CryptPool(workers: workers, maxQueued: Self.maxQueued, check: check, clock: clock)
        // A first estimate of bcrypt's speed (two cost-6 checks, some 5 ms
        // each), for costs not measured yet; then, in the background, one
        // check of each configured cost up to 12 (0.3 s), so that the first
        // unknown user is timed by a real one.
        timing.withLock { timing in
            for _ in 0..<2 {
                let started = clock()
                _ = check(Array("calibration".utf8), decoys[6]!)
                timing.record(clock() - started, cost: 6)
            }
        }
        for cost in Set(decoyCosts).sorted() where cost <= 12 {
            submit([], decoys[cost]!, cost: cost, onlyIfIdle: false) { _ in }
        }
    }

    /// What a check of `cost` is expected to take, as measured so far.
    func expectedSeconds(cost: Int) -> Double { timing.withLock { $0.expected(cost: cost) } }
    /// Checks on the pool, queued or running.
    var checksQueuedOrRunning: Int { pool.load }

    /// The cost of a bcrypt hash (`$2y$10$` + 53 characters), nil when it is not one.
    package static func bcryptCost(_ hash: String) -> Int? {
        let bytes = Array(hash.utf8)
        guard bytes.count == 60, bytes[0] == UInt8(ascii: "$"), bytes[1] == UInt8(ascii: "2"),
            [UInt8(ascii: "a"), UInt8(ascii: "b"), UInt8(ascii: "y")].contains(bytes[2]), bytes[3] == UInt8(ascii: "$"),
            bytes[6] == UInt8(ascii: "$"),
            let tens = bytes[4].digitValue, let ones = bytes[5].digitValue,
            bytes[7...].allSatisfy({ bcryptAlphabet.contains($0) })
        else { return nil }
        return tens * 10 + ones
    }

    private static let bcryptAlphabet = Array("./ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8)

    /// A well-formed bcrypt hash of `cost` with a random salt and digest.
    private static func decoyHash(cost: Int) throws(SystemError) -> String {
        let random = try randomBytes(53)
        var text = Array("$2y$".utf8) + Array((cost < 10 ? "0\(cost)" : "\(cost)").utf8) + [UInt8(ascii: "$")]
        for (i, byte) in random.enumerated() {
            // The salt's 22nd character carries 2 bits: one of .Oeu.
            text.append(i == 21 ? Array(".Oeu".utf8)[Int(byte % 4)] : bcryptAlphabet[Int(byte % 64)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// Decides what a request with `authorization` needs, without running
    /// bcrypt; `client` is asked only when a check is due.
    package func assess(authorization: String?, client: () -> Client) -> Assessment {
        guard let authorization, let (user, password) = Self.basicCredentials(authorization),
            !user.contains(0), !password.contains(0)
        else { return .now(.refused) }
        let known = users[String(decoding: user, as: UTF8.self)]
        let digest = known == nil ? nil : self.digest(user, password)
        if let digest, cache.withLock({ $0.contains(digest) }) { return .now(.allowed) }
        let client = client()
        if let retryAfter = takeToken(client) { return .now(.throttled(retryAfter: retryAfter)) }
        let cost = known?.cost ?? decoyCost(for: user)
        let (wait, expected) = timing.withLock { ($0.pendingSeconds / Double(workers), $0.expected(cost: cost)) }
        if wait > Self.maxQueueSeconds || pool.load >= Self.maxQueued {
            returnToken(client)
            return .now(.busy(retryAfter: max(1, Int((wait + expected).rounded(.up)))))
        }
        guard let known else {
            let delay = wait + timing.withLock { $0.sample(cost: cost) }
            submit(password, decoys[cost]!, cost: cost, onlyIfIdle: true) { _ in }
            return .refusedAfter(seconds: delay)
        }
        return .verify(Verification(password: password, hash: known.hash, cost: cost, digest: digest, client: client))
    }

    /// Starts `verification`; `done` runs once with the verdict, on a pool
    /// thread (or on this one, when the pool refuses it: busy).
    package func verify(_ verification: Verification, then done: @escaping @Sendable (Verdict) -> Void) {
        let queued = submit(verification.password, verification.hash, cost: verification.cost, onlyIfIdle: false) { [self] matched in
            if matched {
                returnToken(verification.client)
                if let digest = verification.digest {
                    cache.withLock { cache in
                        if cache.count >= Self.cacheLimit { cache.removeAll() }
                        cache.insert(digest)
                    }
                }
            }
            done(matched ? .allowed : .refused)
        }
        if !queued {
            returnToken(verification.client)
            done(.busy(retryAfter: 1))
        }
    }

    /// A verification that will not be started (the request could not
    /// wait): its token goes back.
    package func abandon(_ verification: Verification) {
        returnToken(verification.client)
    }

    /// Queues a check; `done` gets whether it matched. False when refused.
    @discardableResult
    private func submit(_ password: [UInt8], _ hash: String, cost: Int, onlyIfIdle: Bool, done: @escaping @Sendable (Bool) -> Void) -> Bool {
        let expected = timing.withLock { timing in
            let expected = timing.expected(cost: cost)
            timing.pendingSeconds += expected
            return expected
        }
        let queued = pool.submit(password: password, hash: hash, onlyIfIdle: onlyIfIdle) { [self] matched, nanoseconds in
            timing.withLock { timing in
                timing.pendingSeconds = max(0, timing.pendingSeconds - expected)
                if matched >= 0 { timing.record(Double(nanoseconds) / 1e9, cost: cost) }
            }
            done(matched == 1)
        }
        if !queued {
            timing.withLock { $0.pendingSeconds = max(0, $0.pendingSeconds - expected) }
            return false
        }
        return true
    }

    /// HMAC-SHA256 of user and password (neither holds a NUL) under the
    /// process's key; nil when GnuTLS is not there (then nothing is cached).
    private func digest(_ user: [UInt8], _ password: [UInt8]) -> Digest? {
        var material = user + [0] + password
        defer { for i in material.indices { material[i] = 0 } }
        var out = [UInt8](repeating: 0, count: 32)
        let rc = material.withUnsafeBytes { cifm_hmac_sha256(key, key.count, $0.baseAddress, $0.count, &out) }
        guard rc == 0 else { return nil }
        return Digest(
            a: UInt64(bigEndianBytes: out[0..<8]), b: UInt64(bigEndianBytes: out[8..<16]), c: UInt64(bigEndianBytes: out[16..<24]),
            d: UInt64(bigEndianBytes: out[24..<32]))
    }

    /// The cost an unknown `user` is timed as: one configured user's, the
    /// same for the same name.
    private func decoyCost(for user: [UInt8]) -> Int {
        guard decoyCosts.count > 1, let digest = self.digest(Array("decoy".utf8), user) else { return decoyCosts.first ?? 10 }
        return decoyCosts[Int(digest.a % UInt64(decoyCosts.count))]
    }

    /// Takes a token from `client`'s bucket; nil when there was one, else
    /// the seconds until there is.
    private func takeToken(_ client: Client) -> Int? {
        let now = clock()
        return buckets.withLock { buckets -> Int? in
            if buckets[client] == nil, buckets.count >= Self.maxClients {
                buckets = buckets.filter { _, bucket in
                    bucket.tokens + (now - bucket.updated) * Self.failuresPerSecond < Self.failureBurst
                }
                if buckets.count >= Self.maxClients { return 1 }
            }
            var bucket = buckets[client] ?? Bucket(tokens: Self.failureBurst, updated: now)
            bucket.tokens = min(Self.failureBurst, bucket.tokens + (now - bucket.updated) * Self.failuresPerSecond)
            bucket.updated = now
            defer { buckets[client] = bucket }
            guard bucket.tokens >= 1 else { return max(1, Int(((1 - bucket.tokens) / Self.failuresPerSecond).rounded(.up))) }
            bucket.tokens -= 1
            return nil
        }
    }

    private func returnToken(_ client: Client) {
        buckets.withLock { buckets in
            if var bucket = buckets[client] {
                bucket.tokens = min(Self.failureBurst, bucket.tokens + 1)
                buckets[client] = bucket
            }
        }
    }

    /// User and password bytes from `Basic <base64>` (the scheme in any case).
    static func basicCredentials(_ header: String) -> ([UInt8], [UInt8])? {
        let trimmed = header.trimmingSpaces()
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "basic " else { return nil }
        guard let decoded = base64Decode(String(trimmed.dropFirst(6)).trimmingSpaces()),
            let colon = decoded.firstIndex(of: UInt8(ascii: ":"))
        else { return nil }
        return (Array(decoded[..<colon]), Array(decoded[(colon + 1)...]))
    }

    /// Standard base64 with padding; nil when malformed.
    static func base64Decode(_ text: String) -> [UInt8]? {
        var values: [UInt8] = []
        var padding = 0
        for c in text.utf8 {
            let v: UInt8
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = c - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = c - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): v = 62
            case UInt8(ascii: "/"): v = 63
            case UInt8(ascii: "="):
                padding += 1
                continue
            default: return nil
            }
            if padding > 0 { return nil }
            values.append(v)
        }
        guard (values.count + padding) % 4 == 0, padding <= 2 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < values.count {
            let chunk = values[i..<min(i + 4, values.count)]
            let a = chunk[chunk.startIndex], b = chunk.count > 1 ? chunk[chunk.startIndex + 1] : 0
            let c = chunk.count > 2 ? chunk[chunk.startIndex + 2] : 0, d = chunk.count > 3 ? chunk[chunk.startIndex + 3] : 0
            out.append(a << 2 | b >> 4)
            if chunk.count > 2 { out.append((b & 0x0F) << 4 | c >> 2) }
            if chunk.count > 3 { out.append((c & 0x03) << 6 | d) }
            if chunk.count < 2 { return nil }
            i += 4
        }
        return out
    }
}

extension BasicAuthenticator.Client {
    /// The client `address` is counted as: an IPv4 address as
    /// ::ffff:a.b.c.d, an IPv6 address cut to its /64 (one host usually
    /// has a whole /64).
    init(_ address: PeerAddress) {
        var key = [UInt8](repeating: 0, count: 16)
        switch address.family {
        case .ipv4:
            key[10] = 0xff
            key[11] = 0xff
            key[12..<16] = address.bytes[0..<4]
        case .ipv6:
            let mapped = address.bytes[0..<10].allSatisfy { $0 == 0 } && address.bytes[10] == 0xff && address.bytes[11] == 0xff
            key[0..<(mapped ? 16 : 8)] = address.bytes[0..<(mapped ? 16 : 8)]
        }
        self.init(high: UInt64(bigEndianBytes: key[0..<8]), low: UInt64(bigEndianBytes: key[8..<16]))
    }
}

extension UInt64 {
    /// The number 8 bytes spell, most significant first.
    fileprivate init(bigEndianBytes bytes: ArraySlice<UInt8>) { self = bytes.reduce(0) { $0 << 8 | UInt64($1) } }
}

extension UInt8 {
    fileprivate var digitValue: Int? { self >= 0x30 && self <= 0x39 ? Int(self - 0x30) : nil }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    fileprivate func trimmingSpaces() -> String { self[...].trimmingSpaces() }
}
