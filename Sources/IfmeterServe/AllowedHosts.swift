import IfmeterSystem
import Synchronization

/// Which names a request's `Host` may give, against DNS rebinding: a page
/// of `http://rebind.example:9874` whose name its author points at
/// 127.0.0.1 after it loaded is, for the browser, the same origin as this
/// server, and could read every answer; its requests carry that name in
/// `Host`. Answered are a request without `Host` (HTTP/1.0), and one whose
/// `Host` (its port ignored, ASCII case ignored, one trailing dot ignored)
/// is:
///
/// - an IP address (`127.0.0.1`, `[::1]`, or `::1` without brackets as
///   some clients send it): a page can only have that origin by being
///   served from it;
/// - a name of one label (`localhost`, `vm`, a container's service name):
///   nobody can have a page of such a name served by DNS (public names
///   have a dot; a search domain makes it the local network's own name);
/// - the name serve listens on (`--listen myhost:9874`), the machine's host
///   name (asked at each request) and the name the resolver gives it
///   (looked up once at start, off the request path);
/// - a name given with `--allow-host` (`*`: any name, no check).
///
/// Anything else gets `refusal`: 421 Misdirected Request and one line.
package final class AllowedHosts: Sendable {
    /// `--allow-host`'s names, as `normalized` made them.
    package let configured: Set<String>
    /// `--allow-host '*'`: every name.
    package let any: Bool
    private let listenName: String?
    private let hostName: @Sendable () -> String
    private let canonical = Mutex<String?>(nil)

    /// `configured`: names as `normalized` accepts them, or `*`; `hostName`
    /// is asked at each request a name in this list does not allow.
    package init(configured: [String], listen: ListenAddress?, hostName: @escaping @Sendable () -> String = { IfmeterSystem.hostName() }) {
        any = configured.contains("*")
        self.configured = Set(configured.compactMap(Self.normalized))
        listenName = listen.flatMap { PeerAddress(parsing: $0.host) == nil ? Self.normalized($0.host) : nil }
        self.hostName = hostName
    }

    /// Looks the host name's canonical name up (getaddrinfo, which may
    /// wait for DNS) on a thread of its own; it is allowed once found.
    package func lookUpCanonicalName() {
        let name = hostName()
        try? startThread { [self] in
            if let found = canonicalHostName(name).flatMap(Self.normalized) { canonical.withLock { $0 = found } }
        }
    }

    /// What `judge` says of a request.
    package enum Verdict: Sendable, Equatable {
        case allowed
        /// The Host header as given.
        case refused(String)
    }

    /// Whether a request whose Host header is `host` (nil: none) is answered.
    package func judge(_ host: String?) -> Verdict {
        guard let host, !any else { return .allowed }
        guard let name = Self.name(inHost: host) else { return .refused(host) }
        if name.literal || !name.text.contains(".") { return .allowed }
        if name.text == listenName || configured.contains(name.text) { return .allowed }
        if Self.normalized(hostName()) == name.text || canonical.withLock({ $0 }) == name.text { return .allowed }
        return .refused(host)
    }

    /// The answer to a refused request: 421 and one line naming the name
    /// and how to allow it.
    package static func refusal(_ host: String) -> HTTPResponse {
        let shown = ServeRoutes.shown(host)
        let name = name(inHost: host).map(\.text).map(ServeRoutes.shown) ?? shown
        return HTTPResponse(
            status: 421,
            text:
                "421 Misdirected Request: this server does not answer to the name '\(shown)' (a page of another site could use such a name to read it: DNS rebinding); if it is this server's name, start serve with --allow-host \(name).\n"
        )
    }

    /// The line serve's log gets for a refused request.
    package static func logLine(_ host: String) -> String {
        "refused a request for host '\(ServeRoutes.shown(host))' (421): not a name of this server; --allow-host allows one"
    }

    /// A configured name in the form requests are compared in: lower case,
    /// without a trailing dot; nil when it is no host name (letters,
    /// digits, '-' and '_' in labels of 1 to 63 separated by dots, 253 at
    /// most).
    package static func normalized(_ text: String) -> String? {
        var name = String(text.lowercased())
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty, name.utf8.count <= 253 else { return nil }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        for label in labels {
            guard (1...63).contains(label.utf8.count),
                label.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D || $0 == 0x5F })
            else { return nil }
        }
        return name
    }

    /// The name in a Host header (`name`, `name:port`, `[v6]`, `[v6]:port`),
    /// lower case and without a trailing dot, and whether it is an IP
    /// address; nil when the header is none of these.
    static func name(inHost host: String) -> (text: String, literal: Bool)? {
        func isPort(_ text: Substring) -> Bool { text.utf8.count <= 5 && text.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { return nil }
            let inner = String(host[host.index(after: host.startIndex)..<close])
            let rest = host[host.index(after: close)...]
            guard rest.isEmpty || (rest.hasPrefix(":") && isPort(rest.dropFirst())),
                PeerAddress(parsing: inner)?.family == .ipv6
            else { return nil }
            return (inner.lowercased(), true)
        }
        let parts = host.split(separator: ":", omittingEmptySubsequences: false)
        if parts.count > 2 {
            // An IPv6 address without brackets (some clients send it so),
            // with a port or not: an address all the same; no name has a colon.
            let withoutPort = parts.dropLast().joined(separator: ":")
            for text in [host, withoutPort] where PeerAddress(parsing: text)?.family == .ipv6 { return (text.lowercased(), true) }
            return nil
        }
        guard parts.count == 1 || isPort(parts[1]) else { return nil }
        var name = parts[0].lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty else { return nil }
        return (name, PeerAddress(parsing: name)?.family == .ipv4)
    }
}
