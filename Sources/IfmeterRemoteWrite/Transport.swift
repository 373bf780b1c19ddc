import CIfmeterRemoteWrite
import IfmeterCore
import IfmeterSystem
import Synchronization

/// What one POST came back with.
package struct PostOutcome: Sendable, Equatable {
    /// The HTTP status; 0 when no response came (a network error).
    package var status: Int
    /// Retry-After, in seconds, when the response had one.
    package var retryAfter: Double?
    /// The error, or the start of the response body.
    package var message: String
    /// Bytes of the body that went out (all of it, part of it on an error,
    /// none when no connection was made).
    package var uploadedBytes: Int

    package init(status: Int, retryAfter: Double? = nil, message: String = "", uploadedBytes: Int = 0) {
        self.status = status
        self.retryAfter = retryAfter
        self.message = message
        self.uploadedBytes = uploadedBytes
    }
}

/// Sends a request body (snappy-compressed protobuf) to one receiver; used
/// from one thread at a time.
package protocol RemoteWriteTransport: Sendable {
    func post(_ body: [UInt8]) -> PostOutcome
}

/// libcurl and libsnappy, loaded once, when remote write starts.
package enum RemoteWriteLibraries {
    /// Whether they are loaded; held while loading, so one thread loads.
    private static let loaded = Mutex(false)

    package static func load() throws(SystemError) {
        try loaded.withLock { (loaded: inout Bool) throws(SystemError) in
            if loaded { return }
            var error = [CChar](repeating: 0, count: 512)
            guard cifm_rw_load(&error, error.count) == 0 else {
                throw .system(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self), code: 0)
            }
            loaded = true
        }
    }

    /// Snappy's block format (the libraries must be loaded).
    package static func compress(_ input: [UInt8]) -> [UInt8]? {
        // The bound is about 1/6 more than the input; snappy writes only what
        // it needs, so the rest is never touched (not zero-filled either).
        let bound = cifm_rw_snappy_max_compressed(input.count)
        var ok = false
        let out = [UInt8](unsafeUninitializedCapacity: bound) { buffer, count in
            var length = bound
            let rc = input.withUnsafeBytes { cifm_rw_snappy_compress($0.baseAddress, $0.count, buffer.baseAddress, &length) }
            ok = rc == 0
            count = ok ? length : 0
        }
        // A copy of its own size: the bound's pages go back.
        return ok ? Array(out[...]) : nil
    }

    package static func uncompress(_ input: [UInt8]) -> [UInt8]? {
        var length = 0
        guard input.withUnsafeBytes({ cifm_rw_snappy_uncompressed_length($0.baseAddress, $0.count, &length) }) == 0 else { return nil }
        var out = [UInt8](repeating: 0, count: length)
        let rc = input.withUnsafeBytes { i in
            out.withUnsafeMutableBytes { cifm_rw_snappy_uncompress(i.baseAddress, i.count, $0.baseAddress, &length) }
        }
        return rc == 0 ? out : nil
    }
}

/// HTTP through libcurl, with the remote write headers.
package final class CurlTransport: RemoteWriteTransport, @unchecked Sendable {
    // One handle, used by the one sender thread that owns the transport.
    private let client: UnsafeMutableRawPointer
    let url: String
    let settings: RemoteWriteConfig
    let userAgent: String

    package init(url: String, settings: RemoteWriteConfig, userAgent: String) throws(SystemError) {
        try RemoteWriteLibraries.load()
        guard let client = cifm_rw_client_new() else { throw .system("curl_easy_init", code: 0) }
        self.client = client
        self.url = url
        self.settings = settings
        self.userAgent = userAgent
    }

    deinit { cifm_rw_client_free(client) }

    package func post(_ body: [UInt8]) -> PostOutcome {
        var token: String?
        if let file = settings.bearerTokenFile {
            guard let text = readSmallFile(file, limit: 4000) else {
                return PostOutcome(status: 0, message: "cannot read the bearer token file \(file)")
            }
            token = String(text.filter { $0 != "\n" && $0 != "\r" })
        }
        var result = cifm_rw_result()
        var response = ResponseReader()
        let timeout = Int((settings.timeoutSeconds ?? RemoteWriteConfig.defaultTimeoutSeconds) * 1000)
        withUnsafeMutablePointer(to: &response) { response in
            body.withUnsafeBytes { raw in
                url.withCString { url in
                    userAgent.withCString { agent in
                        withOptional(settings.username) { user in
                            withOptional(settings.password) { password in
                                withOptional(token) { token in
                                    withOptional(settings.caFile) { ca in
                                        withOptional(settings.certFile) { cert in
                                            withOptional(settings.keyFile) { key in
                                                var request = cifm_rw_request(
                                                    url: url, user_agent: agent, username: user, password: password, bearer_token: token,
                                                    ca_file: ca, cert_file: cert, key_file: key, body: raw.baseAddress, body_len: raw.count,
                                                    insecure_skip_verify: settings.insecureSkipVerify ? 1 : 0, timeout_ms: timeout,
                                                    on_header: { data, one, count, context in
                                                        let bytes = UnsafeRawBufferPointer(start: data, count: one * count)
                                                        let response = context!.assumingMemoryBound(to: ResponseReader.self)
                                                        response.pointee.header(bytes, now: { wallClock() }, date: CurlTransport.date)
                                                        return one * count
                                                    },
                                                    on_body: { data, one, count, context in
                                                        let bytes = UnsafeRawBufferPointer(start: data, count: one * count)
                                                        let response = context!.assumingMemoryBound(to: ResponseReader.self)
                                                        return response.pointee.body(bytes) ? one * count : 0
                                                    }, context: UnsafeMutableRawPointer(response))
                                                cifm_rw_post(client, &request, &result)
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        // A response whose body was cut still came: only the transfer was stopped.
        let answered = result.failed == 0 || (result.stopped != 0 && response.bodyCut)
        let status = answered ? Int(result.status) : 0
        return PostOutcome(
            status: status, retryAfter: response.retryAfter, message: status == 0 ? Self.string(result.error) : response.text,
            uploadedBytes: Int(result.uploaded))
    }

    /// libcurl's HTTP date parser (RFC 9110's three forms).
    static func date(_ text: [UInt8]) -> Int64? {
        let when = (text + [0]).withUnsafeBufferPointer { $0.withMemoryRebound(to: CChar.self) { cifm_rw_getdate($0.baseAddress) } }
        return when == -1 ? nil : Int64(when)
    }

    static func string<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

/// What a response's header lines and body chunks come to: Retry-After
/// (seconds, or an HTTP date) and the start of the body for the log. A body
/// is read to at most 64 KiB: past that the transfer is stopped, so an
/// endless body cannot hold the sender.
package struct ResponseReader: Sendable {
    /// The most of a body read.
    package static let bodyCap = 64 * 1024
    /// Bytes of the body kept for the log.
    package static let kept = 255

    /// Retry-After, in seconds from now; the last such header wins.
    package private(set) var retryAfter: Double?
    /// The start of the body (`kept` bytes at most).
    package private(set) var start: [UInt8] = []
    /// Bytes of the body seen.
    package private(set) var bodyBytes = 0
    /// The body passed `bodyCap` and was not read further.
    package private(set) var bodyCut = false

    package init() {}

    /// The start of the body, up to a NUL byte, for the log.
    package var text: String { String(decoding: start.prefix { $0 != 0 }, as: UTF8.self) }

    /// One header line as it came (its CRLF included). `now` is the wall
    /// clock, `date` an HTTP date parser (seconds since the epoch).
    package mutating func header(_ line: some Collection<UInt8>, now: () -> Double, date: ([UInt8]) -> Int64?) {
        let name = Array("retry-after:".utf8)
        guard line.count > name.count, zip(line, name).allSatisfy({ Self.lowercased($0) == $1 }) else { return }
        // At most 127 bytes of the value, to a NUL; blanks trimmed.
        var value = Array(line.dropFirst(name.count).prefix(127).prefix { $0 != 0 })
        value = Array(value.drop { $0 == 0x20 || $0 == 0x09 })
        while let last = value.last, last == 0x0D || last == 0x0A || last == 0x20 { value.removeLast() }
        // strtod's syntax, the whole value: Swift's parser is strtod, less
        // the leading white space strtod skips.
        let number = value.drop { $0 == 0x20 || (0x09...0x0D).contains($0) }
        if !number.isEmpty, let seconds = Double(String(decoding: number, as: UTF8.self)), seconds >= 0 {
            retryAfter = seconds
        } else if let when = date(value) {
            // time(NULL): whole seconds.
            let delta = Double(when) - Double(Int64(now()))
            retryAfter = delta > 0 ? delta : 0
        }
    }

    /// One chunk of the body; false once it passes `bodyCap` (stop).
    package mutating func body(_ chunk: some Collection<UInt8>) -> Bool {
        bodyBytes += chunk.count
        if bodyBytes > Self.bodyCap {
            bodyCut = true
            return false
        }
        start.append(contentsOf: chunk.prefix(Self.kept - start.count))
        return true
    }

    private static func lowercased(_ byte: UInt8) -> UInt8 { (0x41...0x5A).contains(byte) ? byte + 0x20 : byte }
}

private func withOptional<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}
