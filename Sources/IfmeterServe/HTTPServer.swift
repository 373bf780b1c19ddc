import CIfmeterHTTP
import CMicroHTTPD
import IfmeterCore
import IfmeterModel
import IfmeterOutput
import Synchronization
import IfmeterSystem

/// Where to listen: `127.0.0.1:9874`, `0.0.0.0:9874`, `[::]:9874`, `[::1]:9874`.
package struct ListenAddress: Sendable, Hashable, CustomStringConvertible {
    package var host: String
    package var port: UInt16

    package init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT`, `[IPv6]:PORT` or `:PORT` (every address, IPv4
    /// and IPv6, as Go servers read it). HOST may be a name (`localhost`),
    /// resolved when listening. Nil when malformed.
    package init?(parsing text: String) {
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

    package var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// Limits that keep slow or broken clients from starving the others.
package struct HTTPLimits: Sendable {
    /// Threads polling connections with epoll.
    package var threads: UInt32 = 2
    /// Open connections; past it a new one closes the oldest connection
    /// still waiting for its request (so a fresh client is always served).
    package var connections: UInt32 = 1024
    /// The same, per client address.
    package var perClient: UInt32 = 256
    /// Seconds of silence after which a connection is closed.
    package var idleTimeoutSeconds: UInt32 = 10
    /// Seconds a connection has to deliver a whole request (TLS handshake
    /// included), from its start or from the previous response, however
    /// steadily it trickles bytes.
    package var requestDeadlineSeconds: Double = 5
    /// Memory per connection, which bounds request headers (bigger ones get
    /// 431 Request Header Fields Too Large).
    package var memoryPerConnection: Int = 32 * 1024
    /// Query strings longer than this, or with more parameters, get 414.
    package var maxQueryBytes: Int = 1024
    package var maxQueryParameters: UInt32 = 32
    /// Request bodies (nothing here takes one) longer than this get 413,
    /// or the connection closed when the length was not announced.
    package var maxBodyBytes: UInt64 = 4096
    /// Memory held by plain-text responses being inflated from the gzip
    /// render as they are sent (zlib's state and 16 KiB window,
    /// libmicrohttpd's 32 KiB block, and the connection's memory: some
    /// 90 KB each); past it, the connection whose response started first
    /// is closed, so slow readers cannot hold memory without bound (gzip
    /// responses share the render and are not charged).
    package var sendBudgetBytes: Int = 32 << 20

    package init() {}
}

/// A request as the handler sees it.
package struct HTTPRequest: Sendable {
    package var method: String
    package var path: String
    /// Header names in lower case.
    package var headers: [String: String]
    /// The query's arguments, decoded (`QueryString`).
    package var query: [String: String]
    /// What is wrong with the query string as sent (a `%00`, a key given
    /// twice), when something is: `query` is empty then, and an endpoint
    /// that reads parameters answers 400 with it.
    package var queryProblem: HTTPError?

    package init(method: String, path: String, headers: [String: String], query: [String: String] = [:], queryProblem: HTTPError? = nil) {
        self.method = method
        self.path = path
        self.headers = headers
        self.query = query
        self.queryProblem = queryProblem
    }
}

/// Bytes shared between a cache and the responses that send them, at a
/// stable address that libmicrohttpd sends from without copying.
package final class HTTPBody: @unchecked Sendable {
    // Immutable after init; freed when the last holder lets go.
    package let base: UnsafeRawPointer?
    package let count: Int
    /// For gzip bytes: the window they were deflated with (inflating them
    /// needs one as big, no bigger).
    package let windowBits: Int32
    private let owned: Bool

    /// Copies `bytes`.
    package init(_ bytes: some Collection<UInt8>) {
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
    package init(mallocated pointer: UnsafeMutableRawPointer, count: Int, windowBits: Int32 = 15) {
        base = UnsafeRawPointer(pointer)
        self.count = count
        self.windowBits = windowBits
        owned = false
    }

    deinit {
        guard let base else { return }
        if owned { base.deallocate() } else { freeMallocated(UnsafeMutableRawPointer(mutating: base)) }
    }

    package var bytes: [UInt8] { base.map { Array(UnsafeRawBufferPointer(start: $0, count: count)) } ?? [] }
}

package struct HTTPResponse: Sendable {
    /// What goes out: the bytes, or the inflated contents of gzip bytes
    /// (`size` long), inflated piece by piece as the client reads.
    package enum Payload: Sendable {
        case bytes(HTTPBody)
        case inflated(HTTPBody, size: UInt64)
        /// Server-Sent Events: the channel's newest event each time the
        /// client is ready for one, until the channel or the client stops.
        case events(EventChannel)
        /// An answer that takes long: worked out on the server's slow lane
        /// (`SlowLane`) while the connection waits suspended, so no HTTP
        /// thread waits on it; `status` and `headers` are the work's.
        case later(SlowLane.Work)
        /// A long answer written as it is made (chunked): the stream's
        /// pieces, each asked for when the client has read the last, so
        /// memory holds one piece whatever the answer's length.
        case stream(HTTPStream)
    }

    package var status: Int
    package var headers: [(String, String)]
    package var payload: Payload

    package init(status: Int, headers: [(String, String)] = [], body: HTTPBody) {
        self.status = status
        self.headers = headers
        self.payload = .bytes(body)
    }

    /// Sends what `gzipped` holds, uncompressed, without holding it whole.
    package init(status: Int, headers: [(String, String)] = [], inflating gzipped: HTTPBody, size: UInt64) {
        self.status = status
        self.headers = headers
        self.payload = .inflated(gzipped, size: size)
    }

    /// A stream of the channel's events (`text/event-stream`).
    package init(events channel: EventChannel, headers: [(String, String)] = []) {
        self.status = 200
        self.headers = [("Content-Type", "text/event-stream; charset=utf-8"), ("Cache-Control", "no-store")] + headers
        self.payload = .events(channel)
    }

    package init(status: Int, contentType: String = "text/plain; charset=utf-8", text: String, headers: [(String, String)] = []) {
        self.init(status: status, headers: [("Content-Type", contentType)] + headers, body: HTTPBody(Array(text.utf8)))
    }

    /// An answer of `stream`'s pieces, written as they are made.
    package init(status: Int, headers: [(String, String)] = [], stream: HTTPStream) {
        self.status = status
        self.headers = headers
        self.payload = .stream(stream)
    }

    /// The answer `work` gives, worked out on the slow lane.
    package static func later(_ work: @escaping SlowLane.Work) -> HTTPResponse {
        HTTPResponse(status: 0, headers: [], payload: .later(work))
    }

    private init(status: Int, headers: [(String, String)], payload: Payload) {
        self.status = status
        self.headers = headers
        self.payload = payload
    }

    /// The answer itself: a `later` one worked out here, on this thread
    /// (tests, and callers without a server).
    package func resolved() -> HTTPResponse {
        if case .later(let work) = payload { return work() }
        return self
    }
}

/// The pieces of an answer made as it is written (`HTTPResponse.Payload.stream`):
/// `next` gives the next piece, nil after the last; a stream that fails
/// midway ends the connection (`failed`), the client seeing no end of
/// the chunked body rather than a body cut short that looks whole.
package final class HTTPStream: @unchecked Sendable {
    // Read by one connection at a time (libmicrohttpd reads in order).
    private let next: () -> [UInt8]?
    private let failed: () -> Bool
    var current: [UInt8] = []
    var offset = 0

    package init(next: @escaping () -> [UInt8]?, failed: @escaping () -> Bool = { false }) {
        self.next = next
        self.failed = failed
    }

    /// Up to `max` bytes into `buffer`: the count, -1 at the end, -2 on a failure.
    func read(into buffer: UnsafeMutableRawPointer, max: Int) -> Int {
        while offset >= current.count {
            guard let piece = next() else { return failed() ? -2 : -1 }
            current = piece
            offset = 0
        }
        let n = min(max, current.count - offset)
        current.withUnsafeBytes { buffer.copyMemory(from: $0.baseAddress! + offset, byteCount: n) }
        offset += n
        return n
    }

    /// Every piece, joined (tests, and callers without a server).
    package func all() -> [UInt8] {
        var out: [UInt8] = []
        while let piece = next() { out += piece }
        return out
    }
}

/// An HTTP server on libmicrohttpd: a pool of epoll threads, bounded
/// connections and timeouts. Handlers run on those threads and must be
/// quick; HEAD is answered like GET without the body. The policy (which
/// connection to close, when, and which request waits) is Swift's:
/// `ConnectionTable`, `AuthWaits` and a timer that runs both.
package final class HTTPServer: Sendable {
    package typealias Handler = @Sendable (HTTPRequest) -> HTTPResponse
    /// Counts a 5xx answer the server gave itself, by the request's path.
    package typealias ServerErrorCounter = @Sendable (_ path: String, _ status: Int) -> Void

    package let address: ListenAddress
    private let context: HTTPServerContext
    private let daemon: Mutex<MHDDaemon?>

    /// Binds `address` and starts serving. Throws with the reason when the
    /// address cannot be bound (in use, not local, ...).
    /// HTTPS when `tls` is given; every request needs Basic credentials
    /// `authenticator` allows when one is given (401 otherwise). Only
    /// requests whose Host `hosts` allows are answered, when given (421
    /// otherwise: DNS rebinding).
    package init(
        address: ListenAddress, limits: HTTPLimits = HTTPLimits(), tls: HTTPTLSSettings? = nil,
        authenticator: BasicAuthenticator? = nil, hosts: AllowedHosts? = nil, log: Log,
        serverError: @escaping ServerErrorCounter = { _, _ in }, handler: @escaping Handler
    ) throws(SystemError) {
        self.address = address
        try Self.loadLibrary()
        if let tls { try Self.check(tls) }
        let fd = try Self.listen(on: address)
        let context = HTTPServerContext(
            handler: handler, log: log, serverError: serverError, limits: limits, tls: tls, authenticator: authenticator, hosts: hosts)
        self.context = context
        do throws(SystemError) {
            try context.timer.start { [table = context.table, waits = context.waits] nowMs in
                table.sweep(nowMs: nowMs)
                return waits.fire(nowMs: nowMs)
            }
        } catch {
            _ = closeDescriptor(fd)
            throw error
        }
        // libmicrohttpd's own limits sit above ifmeter's, which make room
        // by closing: connections shut down but not yet cleaned up still
        // count there for a moment.
        let headroom = max(limits.connections / 4, 64)
        var options = cifm_http_options()
        options.fd = fd
        options.threads = limits.threads
        options.connection_limit = limits.connections + headroom
        options.per_ip_limit = limits.perClient + headroom
        options.timeout_seconds = limits.idleTimeoutSeconds
        options.memory_per_connection = limits.memoryPerConnection
        options.handler = accessHandler
        options.notify = notifyConnection
        options.completed = requestCompleted
        options.uri = uriArrived
        options.logger = logHandler
        options.cls = Unmanaged.passUnretained(context).toOpaque()
        if let pem = context.tlsText {
            options.cert_pem = UnsafePointer(pem.certificate)
            options.key_pem = UnsafePointer(pem.key)
            options.priorities = UnsafePointer(pem.priorities)
            options.trust_pem = pem.trust.map { UnsafePointer($0) }
        }
        guard let started = cifm_http_start(&options) else {
            context.timer.stop()
            _ = closeDescriptor(fd)
            throw SystemError(call: "MHD_start_daemon(\(address))", message: "libmicrohttpd could not start")
        }
        daemon = Mutex(MHDDaemon(pointer: started))
    }

    /// Basic auth from the next request on (nil: none): what a reload of
    /// the web config's `basic_auth_users` applies. TLS stays as started:
    /// libmicrohttpd takes its certificate and key when the daemon starts.
    package func setAuthenticator(_ authenticator: BasicAuthenticator?) {
        let old = context.authenticator.withLock { current in
            defer { current = authenticator }
            return current
        }
        if let old { context.retired.withLock { $0.append(old) } }
    }

    deinit { stop() }

    /// Loads libmicrohttpd (once).
    package static func loadLibrary() throws(SystemError) {
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
    package static func check(_ tls: HTTPTLSSettings) throws(SystemError) {
        try loadLibrary()
        var reason = [CChar](repeating: 0, count: 512)
        let rc = tls.certificatePEM.withCString { cert in
            tls.keyPEM.withCString { key in
                tls.priorities.withCString { priorities in
                    if let ca = tls.clientCAPEM {
                        return ca.withCString { cifm_tls_check(cert, key, $0, priorities, &reason, reason.count) }
                    }
                    return cifm_tls_check(cert, key, nil, priorities, &reason, reason.count)
                }
            }
        }
        if rc != 0 {
            throw SystemError(call: "gnutls", message: reason.withUnsafeBufferPointer { String(cString: $0.baseAddress!) })
        }
    }

    /// Stops accepting; in-flight responses finish. Safe to call twice.
    /// Requests waiting for a verdict are answered first (libmicrohttpd
    /// must have no suspended connection when it stops).
    package func stop() {
        daemon.withLock { daemon in
            guard let running = daemon else { return }
            // Event streams end, and those waiting for an event are
            // resumed to read that end, as requests waiting for a verdict.
            for channel in context.channels.withLock({ $0 }) { channel.stop() }
            context.waits.close()
            context.slowLane.close()
            context.timer.stop()
            MHD.table.stop_daemon(running.pointer) // reports every connection closed
            daemon = nil
        }
    }

    /// Connections closed for missing the request deadline, for sending no
    /// request line by the deadline after a response (kept alive, idle), to
    /// make room for others, and to keep responses being sent within the
    /// send budget, since the start.
    package var closedCounts: HTTPConnectionCounts { context.table.counts }

    /// Slow answers waiting their turn or being worked out now.
    package var slowRequests: Int { context.slowLane.pending }

    /// A listening socket for `address` (the first of its addresses that
    /// binds).
    package static func listen(on address: ListenAddress) throws(SystemError) -> Int32 {
        try listeningSocket(host: address.host, port: address.port, named: address.description)
    }
}

/// A running daemon, stopped under the server's lock.
private struct MHDDaemon: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// A connection, handed to the thread that gives its request a verdict.
private struct ConnectionHandle: @unchecked Sendable {
    let pointer: OpaquePointer
}

/// libmicrohttpd, through the table CIfmeterHTTP loaded: the one place
/// Swift calls it.
enum MHD {
    static var table: cifm_mhd_functions { cifm_mhd().pointee }

    static func values(
        _ connection: OpaquePointer, _ kind: MHD_ValueKind, _ iterator: MHD_KeyValueIterator, _ cls: UnsafeMutableRawPointer
    ) -> Int32 {
        table.get_connection_values(connection, kind, iterator, cls)
    }

    /// The connection's entry in the table (its socket context).
    static func connectionID(_ connection: OpaquePointer) -> ConnectionTable.ID? {
        guard let info = cifm_mhd_info(connection, .CONNECTION_INFO_SOCKET_CONTEXT),
            let context = info.pointee.socket_context
        else { return nil }
        return ConnectionTable.ID(UInt(bitPattern: context))
    }

    static func fd(_ connection: OpaquePointer) -> Int32? {
        cifm_mhd_info(connection, .CONNECTION_INFO_CONNECTION_FD).map { Int32($0.pointee.connect_fd) }
    }

    static func client(_ connection: OpaquePointer) -> PeerAddress? {
        guard let info = cifm_mhd_info(connection, .CONNECTION_INFO_CLIENT_ADDRESS), let address = info.pointee.client_addr
        else { return nil }
        return PeerAddress(sockaddr: UnsafeRawPointer(address))
    }
}

/// What ifmeter knows of one request, from its request line on
/// (libmicrohttpd's `req_cls`); its callbacks for one connection run on
/// one thread, but a verdict comes from another.
private final class RequestState: @unchecked Sendable {
    var seen = false // the handler has been called for it
    var uriTooLong = false // the query string is over the limits (its parameters were not parsed)
    var query: [UInt8] = [] // the query string as sent, undecoded (QueryString reads it)
    var path = "" // the request's path, without its query
    var bodyBytes: UInt64 = 0 // request body received so far
    var authWaiting = false // suspended until its credentials are judged
    let verdict = Mutex<AuthWaits.Verdict?>(nil)
    var laterWaiting = false // suspended until the slow lane's answer
    let later = Mutex<HTTPResponse?>(nil)
}

/// A connection opened or closed: listed in the table, unlisted.
private let notifyConnection: MHD_NotifyConnectionCallback = { cls, connection, socketContext, code in
    guard let cls, let connection, let socketContext else { return }
    let context = Unmanaged<HTTPServerContext>.fromOpaque(cls).takeUnretainedValue()
    if code == .CONNECTION_NOTIFY_STARTED {
        guard let fd = MHD.fd(connection) else { return } // untracked: only libmicrohttpd's own limits apply
        // Ask for a client certificate; the handler checks every given one (403).
        if context.clientAuth != .none { cifm_tls_ask_client_cert(connection, context.clientAuth.rawValue) }
        let id = context.table.opened(fd: fd, client: MHD.client(connection), nowMs: monotonicMilliseconds())
        socketContext.pointee = UnsafeMutableRawPointer(bitPattern: UInt(id))
    } else if code == .CONNECTION_NOTIFY_CLOSED {
        guard let raw = socketContext.pointee else { return }
        socketContext.pointee = nil
        context.table.closed(ConnectionTable.ID(UInt(bitPattern: raw)))
    }
}

/// The request line arrived: a request record, and a query string checked
/// before libmicrohttpd stores its parameters (hundreds of them would run
/// the connection out of memory).
private let uriArrived: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?, OpaquePointer?) -> UnsafeMutableRawPointer? = {
    cls, uri, connection in
    guard let cls, let uri else { return nil }
    let context = Unmanaged<HTTPServerContext>.fromOpaque(cls).takeUnretainedValue()
    if let connection, let id = MHD.connectionID(connection) { context.table.requestStarted(id) }
    let request = RequestState()
    var pathEnd = uri
    while pathEnd.pointee != 0, pathEnd.pointee != CChar(UInt8(ascii: "?")) { pathEnd += 1 }
    request.path = String(decoding: UnsafeRawBufferPointer(start: uri, count: pathEnd - uri), as: UTF8.self)
    if let query = strchrQuery(uri) {
        var length = 0, params = 1
        while query[1 + length] != 0 {
            if query[1 + length] == CChar(UInt8(ascii: "&")) { params += 1 }
            length += 1
        }
        if length > context.limits.maxQueryBytes || params > Int(context.limits.maxQueryParameters) {
            request.uriTooLong = true
            // libmicrohttpd hands the request line's own buffer here and
            // parses the parameters from it afterwards: cut them off, so
            // none is stored; the handler answers 414.
            UnsafeMutablePointer(mutating: query)[1] = 0
        } else {
            // Kept as sent: libmicrohttpd decodes its own copy in place,
            // and hands on C strings that a %00 cuts short.
            request.query = Array(UnsafeRawBufferPointer(start: query + 1, count: length))
        }
    }
    return Unmanaged.passRetained(request).toOpaque()
}

/// Where `uri`'s query string starts (its `?`), if it has one.
private func strchrQuery(_ uri: UnsafePointer<CChar>) -> UnsafePointer<CChar>? {
    var p = uri
    while p.pointee != 0 {
        if p.pointee == CChar(UInt8(ascii: "?")) { return p }
        p += 1
    }
    return nil
}

/// A request ended (answered or aborted): the connection waits for the
/// next one, under the deadline again.
private let requestCompleted: MHD_RequestCompletedCallback = { cls, connection, reqCls, code in
    guard let cls else { return }
    if let reqCls, let raw = reqCls.pointee {
        Unmanaged<RequestState>.fromOpaque(raw).release()
        reqCls.pointee = nil
    }
    let context = Unmanaged<HTTPServerContext>.fromOpaque(cls).takeUnretainedValue()
    if let connection, let id = MHD.connectionID(connection) {
        context.table.requestEnded(id, completed: code == .REQUEST_TERMINATED_COMPLETED_OK, nowMs: monotonicMilliseconds())
    }
}

/// libmicrohttpd's access handler: builds the request, calls the Swift
/// handler, queues its response. The first call only marks the request
/// (or refuses it at once: a query string over the limits, a body
/// announced too long); a request body is read and discarded (every answer
/// here ignores it) up to a bound; the response goes out on the last call,
/// so the connection stays open for the next request (keep-alive).
private let accessHandler: MHD_AccessHandlerCallback = { cls, connection, url, method, version, _, uploadSize, reqCls in
    guard let cls, let connection, let url, let method, let reqCls, let raw = reqCls.pointee else { return .NO }
    let state = Unmanaged<RequestState>.fromOpaque(raw).takeUnretainedValue()
    let context = Unmanaged<HTTPServerContext>.fromOpaque(cls).takeUnretainedValue()
    if !state.seen {
        state.seen = true
        if let problem = framingProblem(connection, version: version.map { String(cString: $0) } ?? "") {
            return queue(
                HTTPResponse(
                    status: 400, text: "400 Bad Request: \(problem); send GET /metrics without a body.\n", headers: [("Connection", "close")]),
                on: connection, context, state)
        }
        if state.uriTooLong {
            return queue(
                HTTPResponse(status: 414, text: "414 URI Too Long: ifmeter takes no long query strings; send GET /metrics.\n"), on: connection,
                context, state)
        }
        if let length = header(connection, "Content-Length").flatMap(UInt64.init), length > context.limits.maxBodyBytes {
            return queue(
                HTTPResponse(status: 413, text: "413 Content Too Large: ifmeter takes no request body; send GET /metrics.\n"), on: connection,
                context, state)
        }
        // Before credentials are checked: a page of a rebinding name has none.
        if let hosts = context.hosts, case .refused(let given) = hosts.judge(header(connection, "Host")) {
            context.log.warning(AllowedHosts.logLine(given))
            return queue(AllowedHosts.refusal(given), on: connection, context, state)
        }
        if cifm_tls_client_cert_ok(connection, context.clientAuth.rawValue) != 1 {
            return queue(
                HTTPResponse(status: 403, text: "403 Forbidden: a client certificate signed by the configured CA is required.\n"), on: connection,
                context, state)
        }
        if let authenticator = context.authenticator.withLock({ $0 }) {
            return authenticate(authenticator, connection, state, context)
        }
        return .YES
    }
    if state.authWaiting {
        // Resumed with a verdict on its credentials.
        state.authWaiting = false
        switch state.verdict.withLock({ $0 }) {
        case .allowed: return .YES
        case .refused: return queue(.unauthorized, on: connection, context, state)
        case .busy: return queue(.verdict(.busy(retryAfter: 1)), on: connection, context, state)
        case .stopping, nil: return queue(.stopping, on: connection, context, state)
        }
    }
    if state.laterWaiting {
        // Resumed with the slow lane's answer.
        state.laterWaiting = false
        guard let answer = state.later.withLock({ $0 }) else { return queue(.stopping, on: connection, context, state) }
        return queue(answer, on: connection, context, state, handled: true)
    }
    if let uploadSize, uploadSize.pointee > 0 {
        state.bodyBytes += UInt64(uploadSize.pointee)
        // Too long without announcing it (chunked): a response cannot be
        // queued mid-body, so the connection is closed.
        if state.bodyBytes > context.limits.maxBodyBytes { return .NO }
        uploadSize.pointee = 0
        return .YES
    }
    var headers: [String: String] = [:]
    withUnsafeMutablePointer(to: &headers) { headersPointer in
        _ = MHD.values(
            connection, .HEADER_KIND,
            { cls, _, key, value in
                guard let cls, let key else { return .YES }
                let dict = cls.assumingMemoryBound(to: [String: String].self)
                dict.pointee[String(cString: key).lowercased()] = value.map { String(cString: $0) } ?? ""
                return .YES // go on
            }, headersPointer)
    }
    var path = String(cString: url)
    if let q = path.firstIndex(of: "?") { path = String(path[..<q]) }
    let methodText = String(cString: method)
    var request = HTTPRequest(method: methodText, path: path, headers: headers)
    switch QueryString.parse(state.query) {
    case .success(let query): request.query = query
    case .failure(let problem): request.queryProblem = problem
    }
    let response =
        isToken(methodText)
        ? context.handler(request)
        : HTTPResponse(status: 400, text: "400 Bad Request: the request method is not an HTTP token; send GET /metrics.\n")
    if case .later(let work) = response.payload { return answerLater(work, connection, state, context) }
    return queue(response, on: connection, context, state, handled: true)
}

/// A slow answer: the connection is suspended while the slow lane works it
/// out, and resumed with it (or answered 503 at once when the lane is
/// full). Marked busy: no deadline or eviction applies while it waits.
private func answerLater(_ work: @escaping SlowLane.Work, _ connection: OpaquePointer, _ state: RequestState, _ context: HTTPServerContext)
    -> MHD_Result
{
    let handle = ConnectionHandle(pointer: connection)
    let accepted = context.slowLane.submit(
        work, client: MHD.client(connection),
        suspend: {
            state.laterWaiting = true
            MHD.table.suspend_connection(connection)
        },
        resume: { answer in
            state.later.withLock { $0 = answer }
            MHD.table.resume_connection(handle.pointer)
        })
    switch accepted {
    case .accepted: break
    case .full:
        return refuseBusy(
            "a slow request", "\(context.slowLane.capacity) are waiting already",
            "\(context.slowLane.capacity) slow requests are waiting already; try again later.", retryAfter: 2, connection, context, state)
    case .clientFull:
        return refuseBusy(
            "a slow request", "one address has \(context.slowLane.perClient) waiting already",
            "this address has \(context.slowLane.perClient) slow requests waiting already (the most one address may); try again later.",
            retryAfter: 2, connection, context, state)
    }
    if let id = MHD.connectionID(connection) { context.table.markBusy(id) }
    return .YES
}

/// Basic auth for a request (see BasicAuthenticator): answered at once,
/// or suspended until the verdict (a check on the pool, or a timer).
private func authenticate(
    _ authenticator: BasicAuthenticator, _ connection: OpaquePointer, _ state: RequestState, _ context: HTTPServerContext
) -> MHD_Result {
    let assessment = authenticator.assess(authorization: header(connection, "Authorization")) { clientKey(connection) }
    func suspend() -> AuthWaits.Ticket? {
        let handle = ConnectionHandle(pointer: connection)
        let ticket = context.waits.begin(
            suspend: {
                state.authWaiting = true
                MHD.table.suspend_connection(connection)
            },
            resume: { verdict in
                state.verdict.withLock { $0 = verdict }
                MHD.table.resume_connection(handle.pointer)
            })
        // The request is whole: while ifmeter judges it, the deadline for
        // sending one does not apply.
        if ticket != nil, let id = MHD.connectionID(connection) { context.table.markBusy(id) }
        return ticket
    }
    switch assessment {
    case .now(.allowed):
        return .YES
    case .now(let verdict):
        return queue(.verdict(verdict), on: connection, context, state)
    case .refusedAfter(let seconds):
        guard let ticket = suspend() else { return queue(.unauthorized, on: connection, context, state) }
        context.waits.finish(ticket, .refused, delayMs: UInt64(max(1, min(seconds, 60) * 1000)), nowMs: monotonicMilliseconds())
        return .YES
    case .verify(let verification):
        // (It cannot wait when the server stops: try again.)
        guard let ticket = suspend() else {
            authenticator.abandon(verification)
            return queue(.verdict(.busy(retryAfter: 1)), on: connection, context, state)
        }
        authenticator.verify(verification) { [waits = context.waits] verdict in
            let given: AuthWaits.Verdict =
                switch verdict {
                case .allowed: .allowed
                case .refused, .throttled: .refused
                case .busy: .busy
                }
            waits.finish(ticket, given, nowMs: monotonicMilliseconds())
        }
        return .YES
    }
}

/// The connection's client as the throttle counts it.
private func clientKey(_ connection: OpaquePointer) -> BasicAuthenticator.Client {
    guard let address = MHD.client(connection) else { return .unknown }
    return BasicAuthenticator.Client(address)
}

/// Hands `response` to libmicrohttpd for `connection`.
/// A 5xx answer the server gives itself (a refusal, a stop) is counted
/// as the handler's are (`serverError`); the handler's own (`handled`) it
/// counts itself.
/// A request refused for want of room (503, with when to try again), said
/// on serve's log: `what` was refused because `why`; the client reads
/// `advice`.
private func refuseBusy(
    _ what: String, _ why: String, _ advice: String, retryAfter: Int, _ connection: OpaquePointer, _ context: HTTPServerContext,
    _ state: RequestState, file: String = #fileID, line: UInt = #line
) -> MHD_Result {
    // Each refusal's kind is where it is refused (the caller's line).
    context.log.write(.warning, "refused \(what) (503): \(why)", site: LogSite(file: file, line: line))
    return queue(
        HTTPResponse(status: 503, text: "503 Service Unavailable: \(advice)\n", headers: [("Retry-After", String(retryAfter))]), on: connection,
        context, state)
}

private func queue(
    _ response: HTTPResponse, on connection: OpaquePointer, _ context: HTTPServerContext, _ state: RequestState, handled: Bool = false
) -> MHD_Result {
    if response.status >= 500, !handled { context.serverError(state.path, response.status) }
    let mhdResponse: OpaquePointer?
    switch response.payload {
    case .bytes(let bytes):
        let body = Unmanaged.passRetained(bytes)
        mhdResponse = MHD.table.create_response(
            bytes.count, bytes.base,
            { cls in
                if let cls { Unmanaged<HTTPBody>.fromOpaque(cls).release() }
            }, body.toOpaque())
        if mhdResponse == nil { body.release() }
    case .inflated(let gzipped, let size):
        mhdResponse = inflatingResponse(gzipped, size: size, connection, context)
    case .stream(let stream):
        mhdResponse = streamResponse(stream)
    case .later:
        // (The access handler gives these to the slow lane.)
        return queue(HTTPResponse(status: 500, text: "500 Internal Server Error: an answer was not worked out\n"), on: connection, context, state)
    case .events(let channel):
        let client = MHD.client(connection)
        switch channel.join(client: client) {
        case .joined: break
        case .full:
            return refuseBusy(
                "an event stream", "\(channel.capacity) pages are following already",
                "\(channel.capacity) pages are following this server already; try again later.", retryAfter: 10, connection, context, state)
        case .clientFull:
            return refuseBusy(
                "an event stream", "one address follows with \(channel.perClient) pages already",
                "this address follows this server with \(channel.perClient) pages already (the most one address may); close one or try again later.",
                retryAfter: 10, connection, context, state)
        }
        context.channels.withLock { channels in if !channels.contains(where: { $0 === channel }) { channels.append(channel) } }
        mhdResponse = eventResponse(channel, client, connection)
        if mhdResponse == nil { channel.leave(client: client) }
    }
    guard let mhdResponse else { return .NO }
    for (name, value) in response.headers { _ = MHD.table.add_response_header(mhdResponse, name, value) }
    let queued = MHD.table.queue_response(connection, UInt32(response.status), mhdResponse)
    MHD.table.destroy_response(mhdResponse)
    if queued == .YES, let id = MHD.connectionID(connection) { context.table.markBusy(id) }
    return queued
}

/// Plain-text responses are inflated from the gzip render as the client
/// reads: each holds zlib's state and window and libmicrohttpd's block,
/// and its connection's memory, until it is sent, so a thousand readers
/// that never read held 90 MB. Each is charged to the table's send budget.
private let inflateBlock = 32 * 1024

private final class InflatingBody {
    let inflater: Inflater
    let table: ConnectionTable
    var charge: ConnectionTable.Charge?

    init(_ inflater: Inflater, table: ConnectionTable) {
        self.inflater = inflater
        self.table = table
    }
}

private func inflatingResponse(_ gzipped: HTTPBody, size: UInt64, _ connection: OpaquePointer, _ context: HTTPServerContext)
    -> OpaquePointer?
{
    guard let inflater = Inflater(gzipped) else { return nil }
    let body = InflatingBody(inflater, table: context.table)
    let retained = Unmanaged.passRetained(body)
    let response = MHD.table.create_callback_response(
        size, inflateBlock,
        { cls, _, buffer, max in
            // (libmicrohttpd reads in order.)
            guard let cls, let buffer else { return -2 } // MHD_CONTENT_READER_END_WITH_ERROR
            let body = Unmanaged<InflatingBody>.fromOpaque(cls).takeUnretainedValue()
            guard let produced = body.inflater.read(into: UnsafeMutableRawPointer(buffer), max: max) else { return -2 }
            return produced == 0 ? -1 : produced // -1: MHD_CONTENT_READER_END_OF_STREAM
        },
        retained.toOpaque(),
        { cls in
            guard let cls else { return }
            let body = Unmanaged<InflatingBody>.fromOpaque(cls).takeRetainedValue()
            if let charge = body.charge { body.table.release(charge) }
        })
    guard let response else {
        retained.release()
        return nil
    }
    // Its state, the window, the block libmicrohttpd reads into, and the
    // connection's memory (its pool, up to the limit), which closing it
    // frees too.
    if let id = MHD.connectionID(connection) {
        let bytes = inflater.heldBytes + inflateBlock + context.limits.memoryPerConnection
        body.charge = context.table.charge(bytes, for: id, nowMs: monotonicMilliseconds())
    }
    return response
}

/// A stream's pieces as the client reads them (chunked), 32 KiB at a
/// time into libmicrohttpd's block.
private func streamResponse(_ stream: HTTPStream) -> OpaquePointer? {
    let retained = Unmanaged.passRetained(stream)
    let response = MHD.table.create_callback_response(
        UInt64.max, inflateBlock, // MHD_SIZE_UNKNOWN: chunked
        { cls, _, buffer, max in
            guard let cls, let buffer else { return -2 } // MHD_CONTENT_READER_END_WITH_ERROR
            return Unmanaged<HTTPStream>.fromOpaque(cls).takeUnretainedValue().read(into: UnsafeMutableRawPointer(buffer), max: max)
        },
        retained.toOpaque(),
        { cls in
            guard let cls else { return }
            Unmanaged<HTTPStream>.fromOpaque(cls).release()
        })
    if response == nil { retained.release() }
    return response
}

/// An event stream: the channel's newest event each time the client has
/// read the last (so a slow client skips events, and holds none but the
/// one it reads); with none newer, the connection is suspended until a
/// publish resumes it. No deadline or send budget applies: it holds one
/// shared event, and the channel's capacity bounds how many there are.
private final class EventStreamBody: @unchecked Sendable {
    let channel: EventChannel
    let client: PeerAddress?
    let connection: ConnectionHandle
    var seen = 0
    // The browser reconnects 2 s after a lost stream.
    var current: HTTPBody? = HTTPBody(Array("retry: 2000\n\n".utf8))
    var offset = 0

    init(_ channel: EventChannel, _ client: PeerAddress?, _ connection: ConnectionHandle) {
        self.channel = channel
        self.client = client
        self.connection = connection
    }
}

private func eventResponse(_ channel: EventChannel, _ client: PeerAddress?, _ connection: OpaquePointer) -> OpaquePointer? {
    let body = Unmanaged.passRetained(EventStreamBody(channel, client, ConnectionHandle(pointer: connection)))
    let response = MHD.table.create_callback_response(
        UInt64.max, 16 * 1024, // MHD_SIZE_UNKNOWN: chunked
        { cls, _, buffer, max in
            guard let cls, let buffer else { return -2 } // MHD_CONTENT_READER_END_WITH_ERROR
            let body = Unmanaged<EventStreamBody>.fromOpaque(cls).takeUnretainedValue()
            if body.current.map({ body.offset >= $0.count }) ?? true {
                let handle = body.connection
                switch body.channel.next(
                    after: body.seen, suspend: { MHD.table.suspend_connection(handle.pointer) },
                    resume: { MHD.table.resume_connection(handle.pointer) })
                {
                case .event(let number, let event):
                    body.seen = number
                    body.current = event
                    body.offset = 0
                case .wait: return 0 // suspended: read again when resumed
                case .end: return -1 // MHD_CONTENT_READER_END_OF_STREAM
                }
            }
            guard let current = body.current, let base = current.base else { return -1 }
            let n = min(max, current.count - body.offset)
            UnsafeMutableRawPointer(buffer).copyMemory(from: base + body.offset, byteCount: n)
            body.offset += n
            return n
        },
        body.toOpaque(),
        { cls in
            guard let cls else { return }
            let body = Unmanaged<EventStreamBody>.fromOpaque(cls).takeRetainedValue()
            body.channel.leave(client: body.client)
        })
    if response == nil { body.release() }
    return response
}

private let logHandler: @convention(c) (UnsafeMutableRawPointer?, UnsafePointer<CChar>?) -> Void = { cls, message in
    guard let cls, let message else { return }
    let line = String(cString: message)
    // A page that went away is no error (LibraryLog).
    guard !LibraryLog.isPageGone(line) else { return }
    // One call site for all of libmicrohttpd's messages: each class of
    // them is a site of its own (LibraryLog.site).
    Unmanaged<HTTPServerContext>.fromOpaque(cls).takeUnretainedValue().log.write(.warning, line, site: LibraryLog.site(line))
}

/// What the C callbacks reach through their `cls` pointer.
private final class HTTPServerContext: Sendable {
    let handler: HTTPServer.Handler
    let log: Log
    let serverError: HTTPServer.ServerErrorCounter
    let limits: HTTPLimits
    let clientAuth: HTTPTLSSettings.ClientAuth
    let table: ConnectionTable
    let waits: AuthWaits
    /// Where slow answers are worked out (`HTTPResponse.later`).
    let slowLane = SlowLane(stopping: .stopping)
    /// The event channels streams were given from (ended at the stop).
    let channels = Mutex<[EventChannel]>([])
    let timer: ServerTimer
    /// The TLS settings as C text, which libmicrohttpd keeps pointers to.
    let tlsText: TLSText?
    /// Replaced when a reload changes the users (`setAuthenticator`).
    let authenticator: Mutex<BasicAuthenticator?>
    /// Those replaced: a check they started may still be running on their
    /// pool, so they are kept for the server's life (a reload is rare).
    let retired = Mutex<[BasicAuthenticator]>([])
    /// The names requests may give in Host (nil: any).
    let hosts: AllowedHosts?

    init(
        handler: @escaping HTTPServer.Handler, log: Log, serverError: @escaping HTTPServer.ServerErrorCounter,
        limits: HTTPLimits, tls: HTTPTLSSettings?, authenticator: BasicAuthenticator?, hosts: AllowedHosts?
    ) {
        self.hosts = hosts
        self.handler = handler
        self.log = log
        self.serverError = serverError
        self.limits = limits
        self.clientAuth = tls?.clientAuth ?? .none
        table = ConnectionTable(
            limits: ConnectionTable.Limits(
                connections: Int(limits.connections), perClient: Int(limits.perClient),
                requestDeadlineMs: UInt64(limits.requestDeadlineSeconds * 1000), sendBudget: limits.sendBudgetBytes),
            close: shutdownSocket)
        let timer = ServerTimer()
        self.timer = timer
        waits = AuthWaits(wake: { timer.poke() })
        tlsText = tls.map(TLSText.init)
        self.authenticator = Mutex(authenticator)
    }
}

/// NUL-terminated copies of the TLS settings, at fixed addresses.
private final class TLSText: @unchecked Sendable {
    let certificate: UnsafeMutablePointer<CChar>
    let key: UnsafeMutablePointer<CChar>
    let priorities: UnsafeMutablePointer<CChar>
    let trust: UnsafeMutablePointer<CChar>?

    init(_ tls: HTTPTLSSettings) {
        func copy(_ text: String) -> UnsafeMutablePointer<CChar> {
            let bytes = Array(text.utf8CString)
            let memory = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
            memory.initialize(from: bytes, count: bytes.count)
            return memory
        }
        certificate = copy(tls.certificatePEM)
        key = copy(tls.keyPEM)
        priorities = copy(tls.priorities)
        trust = tls.clientCAPEM.map(copy)
    }

    deinit {
        for text in [certificate, key, priorities] + (trust.map { [$0] } ?? []) {
            // (The key is wiped before it goes.)
            var p = text
            while p.pointee != 0 {
                p.pointee = 0
                p += 1
            }
            text.deallocate()
        }
    }
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
        _ = MHD.values(
            connection, .HEADER_KIND,
            { cls, _, key, value in
                guard let cls, let key else { return .YES }
                let target = cls.assumingMemoryBound(to: (lengths: [String], codings: [String]).self)
                let name = String(cString: key).lowercased()
                let text = value.map { String(cString: $0)[...].trimmingSpaces() } ?? ""
                if name == "content-length" { target.pointee.lengths.append(text) }
                if name == "transfer-encoding" { target.pointee.codings.append(text) }
                return .YES
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
        _ = MHD.values(
            connection, .HEADER_KIND,
            { cls, _, key, value in
                guard let cls, let key, let value else { return .YES }
                let target = cls.assumingMemoryBound(to: (found: String?, name: String).self)
                if String(cString: key).lowercased() == target.pointee.name {
                    target.pointee.found = String(cString: value)
                    return .NO
                }
                return .YES
            }, pointer)
    }
    return search.found
}

/// RFC 9110 token characters, which a method must consist of.
private func isToken(_ text: String) -> Bool {
    !text.isEmpty
        && text.utf8.allSatisfy { b in
            (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || "!#$%&'*+-.^_`|~".utf8.contains(b)
        }
}
