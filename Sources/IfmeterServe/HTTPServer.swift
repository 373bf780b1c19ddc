import CIfmeterHTTP
import CMicroHTTPD
import IfmeterCore
import IfmeterOutput
import Synchronization
import IfmeterSystem

/// Where to listen: `127.0.0.1:9874`, `0.0.0.0:9874`, `[::]:9874`, `[::1]:9874`.
public struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`, `[IPv6]:PORT` or `:PORT` (every address, IPv4
    /// and IPv6, as Go servers read it). HOST may be a name (`localhost`),
    /// resolved when listening. Nil when malformed.
    public init?(parsing text: String) {
        // No host name or address holds a space (one around the port is
        // refused, not handed to the resolver).
        guard !text.contains(where: \.isWhitespace) else { return nil }
        let host: Substring, portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return nil }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return nil }
            portText = rest.dropFirst()
        } else {
            guard let colon = text.lastIndex(of: ":") else { return nil }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") { return nil } // a bare IPv6 address needs brackets
        }
        guard let port = UInt16(portText), port > 0 else { return nil }
        if host.isEmpty {
            guard !text.hasPrefix("[") else { return nil }
            self.host = "::"
        } else {
            self.host = String(host)
        }
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Limits that keep slow or broken clients from starving the others.
public struct HTTPLimits: Sendable {
    /// Threads polling connections with epoll.
    public var threads: UInt32 = 2
    /// Open connections; past it a new one closes the oldest connection
    /// still waiting for its request (so a fresh client is always served).
    public var connections: UInt32 = 1024
    /// The same, per client address.
    public var perClient: UInt32 = 256
    /// Seconds of silence after which a connection is closed.
    public var idleTimeoutSeconds: UInt32 = 10
    /// Seconds a connection has to deliver a whole request (TLS handshake
    /// included), from its start or from the previous response, however
    /// steadily it trickles bytes.
    public var requestDeadlineSeconds: Double = 5
    /// Memory per connection, which bounds request headers (bigger ones get
    /// 431 Request Header Fields Too Large).
    public var memoryPerConnection: Int = 32 * 1024
    /// Query strings longer than this, or with more parameters, get 414.
    public var maxQueryBytes: Int = 1024
    public var maxQueryParameters: UInt32 = 32
    /// Request bodies (nothing here takes one) longer than this get 413,
    /// or the connection closed when the length was not announced.
    public var maxBodyBytes: UInt64 = 4096
    /// Memory held by plain-text responses being inflated from the gzip
    /// render as they are sent (zlib's state and 16 KiB window,
    /// libmicrohttpd's 32 KiB block, and the connection's memory: some
    /// 90 KB each); past it, the connection whose response started first
    /// is closed, so slow readers cannot hold memory without bound (gzip
    /// responses share the render and are not charged).
    public var sendBudgetBytes: Int = 32 << 20

    public init() {}
}

/// A request as the handler sees it.
public struct HTTPRequest: Sendable {
    public var method: String
    public var path: String
    /// Header names in lower case.
    public var headers: [String: String]

    public init(method: String, path: String, headers: [String: String]) {
        self.method = method
        self.path = path
        self.headers = headers
    }
}

/// Bytes shared between a cache and the responses that send them, at a
/// stable address that libmicrohttpd sends from without copying.
public final class HTTPBody: @unchecked Sendable {
    // Immutable after init; freed when the last holder lets go.
    public let base: UnsafeRawPointer?
    public let count: Int
    /// For gzip bytes: the window they were deflated with (inflating them
    /// needs one as big, no bigger).
    public let windowBits: Int32
    private let owned: Bool

    /// Copies `bytes`.
    public init(_ bytes: some Collection<UInt8>) {
        count = bytes.count
        if count == 0 {
            base = nil
        } else {
            let memory = UnsafeMutableRawPointer.allocate(byteCount: count, alignment: 1)
            UnsafeMutableRawBufferPointer(start: memory, count: count).copyBytes(from: bytes)
            base = UnsafeRawPointer(memory)
        }
        owned = true
        windowBits = 15
    }

    /// Takes memory from `malloc` (zlib's output), freed with `free`.
    public init(mallocated pointer: UnsafeMutableRawPointer, count: Int, windowBits: Int32 = 15) {
        base = UnsafeRawPointer(pointer)
        self.count = count
        self.windowBits = windowBits
        owned = false
    }

    deinit {
        guard let base else { return }
        if owned { base.deallocate() } else { freeMallocated(UnsafeMutableRawPointer(mutating: base)) }
    }

    public var bytes: [UInt8] { base.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? [] }
}

public struct HTTPResponse: Sendable {
    /// What goes out: the bytes, or the inflated contents of gzip bytes
    /// (`size` long), inflated piece by piece as the client reads.
    public enum Payload: Sendable {
        case bytes(HTTPBody)
        case inflated(HTTPBody, size: UInt64)
    }

    public var status: Int
    public var headers: [(String, String)]
    public var payload: Payload

    public init(status: Int, headers: [(String, String)] = [], body: HTTPBody) {
        self.status = status
        self.headers = headers
        self.payload = .bytes(body)
    }

    /// Sends what `gzipped` holds, uncompressed, without holding it whole.
    public init(status: Int, headers: [(String, String)] = [], inflating gzipped: HTTPBody, size: UInt64) {
        self.status = status
        self.headers = headers
        self.payload = .inflated(gzipped, size: size)
    }

    public init(status: Int, contentType: String = "text/plain; charset=utf-8", text: String, headers: [(String, String)] = []) {
        self.init(status: status, headers: [("Content-Type", contentType)] + headers, body: HTTPBody(Array(text.utf8)))
    }
}

/// An HTTP server on libmicrohttpd: a pool of epoll threads, bounded
/// connections and timeouts. Handlers run on those threads and must be
/// quick; HEAD is answered like GET without the body.
public final class HTTPServer: Sendable {
    public typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
    public typealias Logger = @Sendable (String) -> Void

    public let address: ListenAddress
    private let context: HTTPServerContextBox
    private let server: Mutex<OpaquePointer?>

    /// Binds `address` and starts serving. Throws with the reason when the
    /// address cannot be bound (in use, not local, ...).
    /// HTTPS when `tls` is given; every request needs Basic credentials
    /// `authenticator` allows when one is given (401 otherwise).
    public init(
        address: ListenAddress, limits: HTTPLimits = HTTPLimits(), tls: HTTPTLSSettings? = nil,
        authenticator: BasicAuthenticator? = nil, logger: @escaping Logger, handler: @escaping Handler
    ) throws(SystemError) {
        self.address = address
        try Self.loadLibrary()
        if let tls { try Self.check(tls) }
        let fd = try Self.listen(on: address)
        let context = HTTPServerContextBox(
            handler: handler, logger: logger, maxBodyBytes: limits.maxBodyBytes,
            clientAuth: tls?.clientAuth ?? .none, authenticator: authenticator)
        self.context = context
        let raw = cifm_http_limits(
            threads: limits.threads, connections: limits.connections, per_ip: limits.perClient,
            timeout_seconds: limits.idleTimeoutSeconds, memory_per_connection: limits.memoryPerConnection,
            request_deadline_ms: UInt32(limits.requestDeadlineSeconds * 1000),
            max_query_bytes: limits.maxQueryBytes, max_query_params: limits.maxQueryParameters,
            send_budget: limits.sendBudgetBytes)
        let unmanaged = Unmanaged.passUnretained(context).toOpaque()
        let started =
            tls.map { tls in
                tls.withC { cifm_http_start(fd, raw, $0, accessHandler, unmanaged, logHandler, unmanaged) }
            } ?? cifm_http_start(fd, raw, nil, accessHandler, unmanaged, logHandler, unmanaged)
        guard let started else {
            closeDescriptor(fd)
            throw SystemError(call: "MHD_start_daemon(\(address))", message: "libmicrohttpd could not start")
        }
        server = Mutex(started)
    }

    /// Basic auth from the next request on (nil: none): what a reload of
    /// the web config's `basic_auth_users` applies. TLS stays as started:
    /// libmicrohttpd takes its certificate and key when the daemon starts.
    public func setAuthenticator(_ authenticator: BasicAuthenticator?) {
        let old = context.authenticator.withLock { current in
            defer { current = authenticator }
            return current
        }
        if let old { context.retired.withLock { $0.append(old) } }
    }

    deinit { stop() }

    /// Loads libmicrohttpd (once).
    public static func loadLibrary() throws(SystemError) {
        var reason = [CChar](repeating: 0, count: 512)
        // IFMETER_LIBMICROHTTPD names another build of the library.
        let library = environment("IFMETER_LIBMICROHTTPD") ?? "libmicrohttpd.so.12"
        guard cifm_http_load(library, &reason, reason.count) == 0 else {
            let text = reason.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
            throw SystemError(
                call: "dlopen(\(library))",
                message: "cannot load libmicrohttpd (\(text)); install it (Debian: libmicrohttpd12) or name it with IFMETER_LIBMICROHTTPD")
        }
    }

    /// Whether GnuTLS takes `tls` (the certificate matches the key, the CA
    /// and versions parse). Throws with GnuTLS's reason.
    public static func check(_ tls: HTTPTLSSettings) throws(SystemError) {
        try loadLibrary()
        var reason = [CChar](repeating: 0, count: 512)
        let rc = tls.withC { cifm_tls_check($0, &reason, reason.count) }
        if rc != 0 {
            throw SystemError(call: "gnutls", message: reason.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
    }

    /// Stops accepting; in-flight responses finish. Safe to call twice.
    public func stop() {
        server.withLock { server in
            if let running = server {
                cifm_http_stop(running)
                server = nil
            }
        }
    }

    /// Connections closed for missing the request deadline, for sending no
    /// request line by the deadline after a response (kept alive, idle), to
    /// make room for others, and to keep responses being sent within the
    /// send budget, since the start.
    public var closedCounts: HTTPConnectionCounts {
        server.withLock { server in
            var deadline: UInt64 = 0, idle: UInt64 = 0, evicted: UInt64 = 0, budget: UInt64 = 0
            if let server { cifm_http_counts(server, &deadline, &idle, &evicted, &budget) }
            return HTTPConnectionCounts(deadline: deadline, idle: idle, evicted: evicted, budget: budget)
        }
    }

    /// A listening socket for `address` (the first of its addresses that
    /// binds).
    public static func listen(on address: ListenAddress) throws(SystemError) -> Int32 {
        try listeningSocket(host: address.host, port: address.port, named: address.description)
    }
}

/// libmicrohttpd's access handler: builds the request, calls the Swift
/// handler, queues its response. The first call only marks the request
/// (or refuses it at once: a query string over the limits, a body
/// announced too long); a request body is read and discarded (every answer
/// here ignores it) up to a bound; the response goes out on the last call,
/// so the connection stays open for the next request (keep-alive).
private let accessHandler: cifm_http_handler = { cls, connection, url, method, version, _, uploadSize, reqCls in
    guard let cls, let connection, let url, let method, let reqCls,
        let state = reqCls.pointee?.assumingMemoryBound(to: cifm_http_request.self)
    else { return 0 }
    let context = Unmanaged<HTTPServerContextBox>.fromOpaque(cls).takeUnretainedValue()
    if state.pointee.seen == 0 {
        state.pointee.seen = 1
        if let problem = framingProblem(connection, version: version.map { String(cString: $0) } ?? "") {
            return queue(
                HTTPResponse(
                    status: 400, text: "400 Bad Request: \(problem); send GET /metrics without a body.\n", headers: [("Connection", "close")]),
                on: connection)
        }
        if state.pointee.uri_too_long != 0 {
            return queue(
                HTTPResponse(status: 414, text: "414 URI Too Long: ifmeter takes no long query strings; send GET /metrics.\n"), on: connection)
        }
        if let length = header(connection, "Content-Length").flatMap(UInt64.init), length > context.maxBodyBytes {
            return queue(
                HTTPResponse(status: 413, text: "413 Content Too Large: ifmeter takes no request body; send GET /metrics.\n"), on: connection)
        }
        if cifm_http_client_cert_ok(connection, context.clientAuth.rawValue) != 1 {
            return queue(
                HTTPResponse(status: 403, text: "403 Forbidden: a client certificate signed by the configured CA is required.\n"), on: connection)
        }
        if let authenticator = context.authenticator.withLock({ $0 }) {
            return authenticate(authenticator, connection, state)
        }
        return 1
    }
    if state.pointee.auth_waiting != 0 {
        // Resumed with a verdict on its credentials.
        state.pointee.auth_waiting = 0
        switch Int(cifm_http_wait_result(state)) {
        case Int(CIFM_AUTH_ALLOWED): return 1
        case Int(CIFM_AUTH_REFUSED): return queue(.unauthorized, on: connection)
        case Int(CIFM_AUTH_BUSY): return queue(.verdict(.busy(retryAfter: 1)), on: connection)
        default: return queue(.stopping, on: connection)
        }
    }
    if let uploadSize, uploadSize.pointee > 0 {
        state.pointee.body_bytes += UInt64(uploadSize.pointee)
        // Too long without announcing it (chunked): a response cannot be
        // queued mid-body, so the connection is closed.
        if state.pointee.body_bytes > context.maxBodyBytes { return 0 }
        uploadSize.pointee = 0
        return 1
    }
    var headers: [String: String] = [:]
    withUnsafeMutablePointer(to: &headers) { headersPointer in
        _ = cifm_mhd_get_connection_values(
            connection, 1 /* MHD_HEADER_KIND */,
            { cls, _, key, value in
                guard let cls, let key else { return 1 }
                let dict = cls.assumingMemoryBound(to: [String: String].self)
                dict.pointee[String(cString: key).lowercased()] = value.map { String(cString: $0) } ?? ""
                return 1 // MHD_YES: go on
            }, headersPointer)
    }
    var path = String(cString: url)
    if let q = path.firstIndex(of: "?") { path = String(path[..<q]) }
    let methodText = String(cString: method)
    let response =
        isToken(methodText)
        ? context.handle(HTTPRequest(method: methodText, path: path, headers: headers))
        : HTTPResponse(status: 400, text: "400 Bad Request: the request method is not an HTTP token; send GET /metrics.\n")
    return queue(response, on: connection)
}

/// Basic auth for a request (see BasicAuthenticator): answered at once,
/// or suspended until the verdict (a check on the pool, or a timer).
private func authenticate(_ authenticator: BasicAuthenticator, _ connection: OpaquePointer, _ state: UnsafeMutablePointer<cifm_http_request>) -> Int32
{
    let assessment = authenticator.assess(authorization: header(connection, "Authorization")) { clientKey(connection) }
    switch assessment {
    case .now(.allowed):
        return 1
    case .now(let verdict):
        return queue(.verdict(verdict), on: connection)
    case .refusedAfter(let seconds):
        guard let wait = cifm_http_wait_begin(connection, state) else { return queue(.unauthorized, on: connection) }
        cifm_http_wait_finish(wait, Int32(CIFM_AUTH_REFUSED), UInt32(max(1, min(seconds, 60) * 1000)))
        return 1
    case .verify(let verification):
        // (It cannot wait when the server stops, or in the rare case that
        // the connection is not tracked: try again.)
        guard let wait = cifm_http_wait_begin(connection, state) else {
            authenticator.abandon(verification)
            return queue(.verdict(.busy(retryAfter: 1)), on: connection)
        }
        let handle = WaitHandle(pointer: wait)
        authenticator.verify(verification) { verdict in
            let code: Int32 =
                switch verdict {
                case .allowed: Int32(CIFM_AUTH_ALLOWED)
                case .refused, .throttled: Int32(CIFM_AUTH_REFUSED)
                case .busy: Int32(CIFM_AUTH_BUSY)
                }
            cifm_http_wait_finish(handle.pointer, code, 0)
        }
        return 1
    }
}

/// A suspended request, handed to the thread that gives its verdict.
private struct WaitHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// The connection's client address as the throttle counts it.
private func clientKey(_ connection: OpaquePointer) -> BasicAuthenticator.Client {
    var key = (UInt64(0), UInt64(0))
    let rc = withUnsafeMutableBytes(of: &key) { cifm_http_client_key(connection, $0.baseAddress!.assumingMemoryBound(to: UInt8.self)) }
    return rc == 0 ? BasicAuthenticator.Client(high: key.0, low: key.1) : .unknown
}

extension HTTPResponse {
    static let unauthorized = HTTPResponse(status: 401, text: "401 Unauthorized\n", headers: [("WWW-Authenticate", "Basic")])
    static let stopping = HTTPResponse(status: 503, text: "503 Service Unavailable: ifmeter is stopping.\n", headers: [("Connection", "close")])

    static func verdict(_ verdict: BasicAuthenticator.Verdict) -> HTTPResponse {
        switch verdict {
        case .allowed, .refused:
            return .unauthorized
        case .throttled(let seconds):
            return HTTPResponse(
                status: 429, text: "429 Too Many Requests: too many failed logins from this address; retry after \(seconds) s.\n",
                headers: [("Retry-After", String(seconds))])
        case .busy(let seconds):
            return HTTPResponse(
                status: 503, text: "503 Service Unavailable: too many logins are being checked; retry after \(seconds) s.\n",
                headers: [("Retry-After", String(seconds))])
        }
    }
}

/// Why a request's body length is ambiguous (RFC 9112 §6.1, §6.3), nil
/// when it is not: libmicrohttpd 0.9.75 lets Transfer-Encoding win over
/// Content-Length and keeps the connection, takes the first of several
/// Content-Length values, and reads a body of an unknown coding to the
/// end of the stream. A proxy in front that reads the other way would see
/// a second request hidden in the first one's bytes. Answered with 400,
/// and the connection closed (its answer is queued before the body is
/// read, so libmicrohttpd reads nothing more on it either).
private func framingProblem(_ connection: OpaquePointer, version: String) -> String? {
    var found: (lengths: [String], codings: [String]) = ([], [])
    withUnsafeMutablePointer(to: &found) { pointer in
        _ = cifm_mhd_get_connection_values(
            connection, 1 /* MHD_HEADER_KIND */,
            { cls, _, key, value in
                guard let cls, let key else { return 1 }
                let target = cls.assumingMemoryBound(to: (lengths: [String], codings: [String]).self)
                let name = String(cString: key).lowercased()
                let text = value.map { String(cString: $0)[...].trimmingSpaces() } ?? ""
                if name == "content-length" { target.pointee.lengths.append(text) }
                if name == "transfer-encoding" { target.pointee.codings.append(text) }
                return 1
            }, pointer)
    }
    if !found.codings.isEmpty {
        if !found.lengths.isEmpty { return "both Content-Length and Transfer-Encoding" }
        if found.codings.count > 1 { return "Transfer-Encoding given twice" }
        if found.codings[0].lowercased() != "chunked" { return "a Transfer-Encoding other than chunked" }
        if version == "HTTP/1.0" { return "Transfer-Encoding in an HTTP/1.0 request" }
    }
    if Set(found.lengths).count > 1 { return "Content-Length given twice with different values" }
    return nil
}

/// A request header's value (libmicrohttpd matches the name ignoring case).
private func header(_ connection: OpaquePointer, _ name: String) -> String? {
    var search: (found: String?, name: String) = (nil, name.lowercased())
    withUnsafeMutablePointer(to: &search) { pointer in
        _ = cifm_mhd_get_connection_values(
            connection, 1 /* MHD_HEADER_KIND */,
            { cls, _, key, value in
                guard let cls, let key, let value else { return 1 }
                let target = cls.assumingMemoryBound(to: (found: String?, name: String).self)
                if String(cString: key).lowercased() == target.pointee.name {
                    target.pointee.found = String(cString: value)
                    return 0
                }
                return 1
            }, pointer)
    }
    return search.found
}

/// Hands `response` to libmicrohttpd for `connection`; 1 when queued.
private func queue(_ response: HTTPResponse, on connection: OpaquePointer) -> Int32 {
    let mhdResponse: OpaquePointer?
    switch response.payload {
    case .bytes(let bytes):
        let body = Unmanaged.passRetained(bytes)
        mhdResponse = cifm_mhd_create_response(
            bytes.count, UnsafeMutableRawPointer(mutating: bytes.base),
            { cls in
                if let cls { Unmanaged<HTTPBody>.fromOpaque(cls).release() }
            }, body.toOpaque())
        if mhdResponse == nil { body.release() }
    case .inflated(let gzipped, let size):
        let body = Unmanaged.passRetained(gzipped)
        mhdResponse = cifm_mhd_create_gunzip_response(
            connection, gzipped.base, gzipped.count, size, gzipped.windowBits,
            { cls in
                if let cls { Unmanaged<HTTPBody>.fromOpaque(cls).release() }
            }, body.toOpaque())
        if mhdResponse == nil { body.release() }
    }
    guard let mhdResponse else { return 0 }
    for (name, value) in response.headers { _ = cifm_mhd_add_response_header(mhdResponse, name, value) }
    let queued = cifm_mhd_queue_response(connection, UInt32(response.status), mhdResponse)
    cifm_mhd_destroy_response(mhdResponse)
    return queued
}

/// RFC 9110 token characters, which a method must consist of.
private func isToken(_ text: String) -> Bool {
    !text.isEmpty
        && text.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
}

private let logHandler: cifm_http_logger = { cls, message in
    guard let cls, let message else { return }
    Unmanaged<HTTPServerContextBox>.fromOpaque(cls).takeUnretainedValue().log(String(cString: message))
}

/// What the C callbacks reach through their `cls` pointer.
private final class HTTPServerContextBox: Sendable {
    let handler: HTTPServer.Handler
    let logger: HTTPServer.Logger
    let maxBodyBytes: UInt64
    let clientAuth: HTTPTLSSettings.ClientAuth
    /// Replaced when a reload changes the users (`setAuthenticator`).
    let authenticator: Mutex<BasicAuthenticator?>
    /// Those replaced: a check they started may still be running on their
    /// pool, so they are kept for the server's life (a reload is rare).
    let retired = Mutex<[BasicAuthenticator]>([])

    init(
        handler: @escaping HTTPServer.Handler, logger: @escaping HTTPServer.Logger, maxBodyBytes: UInt64,
        clientAuth: HTTPTLSSettings.ClientAuth, authenticator: BasicAuthenticator?
    ) {
        self.handler = handler
        self.logger = logger
        self.maxBodyBytes = maxBodyBytes
        self.clientAuth = clientAuth
        self.authenticator = Mutex(authenticator)
    }

    func handle(_ request: HTTPRequest) -> HTTPResponse { handler(request) }
    func log(_ line: String) { logger(line) }
}

/// gzip compression of text given in pieces; the compressed whole grows in
/// one buffer, the text itself is never held. zlib level 1: text this
/// repetitive still shrinks about twentyfold.
public final class GzipWriter {
    private var stream: OpaquePointer?
    /// Bytes written so far (the inflated size).
    public private(set) var inputBytes: UInt64 = 0
    private var failed = false

    /// `expectedSize`: the compressed size to make room for at once (such
    /// as the last one's), so the buffer does not grow by doubling.
    public init?(level: Int32 = 1, expectedSize: Int = 0) {
        guard let stream = cifm_gzip_begin(level, max(0, expectedSize)) else { return nil }
        self.stream = stream
    }

    deinit { cifm_gzip_abort(stream) }

    public func write(_ bytes: UnsafeRawBufferPointer) {
        guard let stream, !failed, !bytes.isEmpty else { return }
        if cifm_gzip_write(stream, bytes.baseAddress, bytes.count) != 0 { failed = true }
        inputBytes += UInt64(bytes.count)
    }

    /// The compressed whole; nil when zlib failed.
    public func finish() -> HTTPBody? {
        guard let stream else { return nil }
        self.stream = nil
        if failed {
            cifm_gzip_abort(stream)
            return nil
        }
        var output: UnsafeMutableRawPointer?
        var length = 0
        guard cifm_gzip_end(stream, &output, &length) == 0, let output else { return nil }
        return HTTPBody(mallocated: output, count: length, windowBits: CIFM_GZIP_WINDOW_BITS)
    }
}

/// gzip-compresses `bytes` (zlib level 1: text this repetitive still
/// shrinks about tenfold). Nil when zlib fails.
public func gzip(_ bytes: [UInt8], level: Int32 = 1) -> HTTPBody? {
    var output: UnsafeMutableRawPointer?
    var length = 0
    let rc = bytes.withUnsafeBytes { cifm_http_gzip($0.baseAddress, $0.count, level, &output, &length) }
    guard rc == 0, let output else { return nil }
    return HTTPBody(mallocated: output, count: length)
}
