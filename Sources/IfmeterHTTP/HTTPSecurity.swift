import CIfmeterHTTP
import Glibc
import IfmeterCore
import Synchronization

/// HTTPS settings: PEM text (not paths), client certificates, versions.
public struct HTTPTLSSettings: Sendable, Equatable {
    public enum ClientAuth: Int32, Sendable {
        case none = 0
        /// A certificate is optional; one given must verify against the CA.
        case verifyIfGiven = 1
        /// A certificate signed by the CA is required.
        case requireAndVerify = 2
    }

    public enum Version: Int, Sendable, Comparable {
        case tls12 = 12, tls13 = 13
        public static func < (a: Version, b: Version) -> Bool { a.rawValue < b.rawValue }
        var gnutlsName: String { self == .tls12 ? "VERS-TLS1.2" : "VERS-TLS1.3" }
    }

    public var certificatePEM: String
    public var keyPEM: String
    public var clientCAPEM: String?
    public var clientAuth: ClientAuth = .none
    public var minVersion: Version = .tls12
    public var maxVersion: Version = .tls13

    public init(certificatePEM: String, keyPEM: String) {
        self.certificatePEM = certificatePEM
        self.keyPEM = keyPEM
    }

    /// The GnuTLS priority string: its defaults, only the versions allowed.
    public var priorities: String {
        let versions = [Version.tls13, .tls12].filter { $0 >= minVersion && $0 <= maxVersion }
        return "NORMAL:-VERS-ALL" + versions.map { ":+" + $0.gnutlsName }.joined()
    }

    /// Calls `body` with the C view of these settings.
    func withC<T>(_ body: (UnsafePointer<cifm_http_tls>) -> T) -> T {
        certificatePEM.withCString { cert in
            keyPEM.withCString { key in
                priorities.withCString { priorities in
                    func go(_ trust: UnsafePointer<CChar>?) -> T {
                        var raw = cifm_http_tls(cert_pem: cert, key_pem: key, trust_pem: trust, priorities: priorities, client_auth: clientAuth.rawValue)
                        return withUnsafePointer(to: &raw) { body($0) }
                    }
                    if let ca = clientCAPEM { return ca.withCString { go($0) } }
                    return go(nil)
                }
            }
        }
    }
}

/// HTTP Basic authentication against bcrypt hashes, as Prometheus
/// exporter-toolkit does it: every user is checked with one bcrypt
/// comparison (a fixed hash for unknown users, so timing does not tell
/// who exists); results are cached under a SHA-256 of user, hash and
/// password, because bcrypt is slow by design.
public final class BasicAuthenticator: Sendable {
    private let users: [String: String]
    private let cache = Mutex<[[UInt8]: Bool]>([:])
    /// bcrypt runs one at a time, so guessing costs one core at most.
    private let bcryptLock = Mutex(())
    private static let cacheLimit = 256
    /// The hash of a password nobody knows, for unknown users.
    private static let decoy = "$2y$10$QOauhQNbBCuQDKes6eFzPeMqBSjb7Mr5DUmpZ/VcEd00UAV/LDeSi"

    /// `users` maps a user name to a bcrypt hash ($2y$..., $2b$, $2a$).
    public init(users: [String: String]) {
        self.users = users
    }

    /// Whether an `Authorization` header value carries a known user and
    /// the right password.
    public func allows(authorization: String?) -> Bool {
        guard let authorization, let (user, password) = Self.basicCredentials(authorization) else { return false }
        let known = users[user]
        let hash = known ?? Self.decoy
        var material = Array(user.utf8) + [0] + Array(hash.utf8) + [0] + Array(password.utf8)
        defer { for i in material.indices { material[i] = 0 } }
        var digest = [UInt8](repeating: 0, count: 32)
        let hashed = material.withUnsafeBytes { cifm_sha256($0.baseAddress, $0.count, &digest) } == 0
        if hashed, let cached = cache.withLock({ $0[digest] }) { return cached && known != nil }
        let matches = bcryptLock.withLock { _ in cifm_crypt_matches(password, hash) == 1 }
        let allowed = matches && known != nil
        if hashed {
            cache.withLock { cache in
                if cache.count >= Self.cacheLimit { cache.removeAll() }
                cache[digest] = allowed
            }
        }
        return allowed
    }

    /// User and password from `Basic <base64>` (the scheme in any case).
    static func basicCredentials(_ header: String) -> (String, String)? {
        let trimmed = header.trimmingSpaces()
        guard trimmed.count > 6, trimmed.prefix(6).lowercased() == "basic " else { return nil }
        guard let decoded = base64Decode(String(trimmed.dropFirst(6)).trimmingSpaces()),
              let colon = decoded.firstIndex(of: UInt8(ascii: ":"))
        else { return nil }
        let user = String(decoding: decoded[..<colon], as: UTF8.self)
        let password = String(decoding: decoded[(colon + 1)...], as: UTF8.self)
        return (user, password)
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

extension String {
    /// Without leading and trailing spaces and tabs.
    fileprivate func trimmingSpaces() -> String { self[...].trimmingSpaces() }
}
