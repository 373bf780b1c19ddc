import CIfmeterRemoteWrite
import IfmeterCore
import IfmeterServe
import IfmeterSystem

/// What one POST came back with.
public struct PostOutcome: Sendable, Equatable {
    /// The HTTP status; 0 when no response came (a network error).
    public var status: Int
    /// Retry-After, in seconds, when the response had one.
    public var retryAfter: Double?
    /// The error, or the start of the response body.
    public var message: String
    /// Bytes of the body that went out (all of it, part of it on an error,
    /// none when no connection was made).
    public var uploadedBytes: Int

    public init(status: Int, retryAfter: Double? = nil, message: String = "", uploadedBytes: Int = 0) {
        self.status = status
        self.retryAfter = retryAfter
        self.message = message
        self.uploadedBytes = uploadedBytes
    }
}

/// Sends a request body (snappy-compressed protobuf) to one receiver; used
/// from one thread at a time.
public protocol RemoteWriteTransport: Sendable {
    func post(_ body: [UInt8]) -> PostOutcome
}

/// libcurl and libsnappy, loaded once, when remote write starts.
public enum RemoteWriteLibraries {
    public static func load() throws(SystemError) {
        var error = [CChar](repeating: 0, count: 512)
        guard cifm_rw_load(&error, error.count) == 0 else {
            throw .system(String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self), code: 0)
        }
    }

    /// Snappy's block format (the libraries must be loaded).
    public static func compress(_ input: [UInt8]) -> [UInt8]? {
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

    public static func uncompress(_ input: [UInt8]) -> [UInt8]? {
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
public final class CurlTransport: RemoteWriteTransport, @unchecked Sendable {
    // One handle, used by the one sender thread that owns the transport.
    private let client: OpaquePointer
    let url: String
    let settings: RemoteWriteConfig
    let userAgent: String

    public init(url: String, settings: RemoteWriteConfig, userAgent: String) throws(SystemError) {
        try RemoteWriteLibraries.load()
        guard let client = cifm_rw_client_new() else { throw .system("curl_easy_init", code: 0) }
        self.client = client
        self.url = url
        self.settings = settings
        self.userAgent = userAgent
    }

    deinit { cifm_rw_client_free(client) }

    public func post(_ body: [UInt8]) -> PostOutcome {
        var token: String?
        if let file = settings.bearerTokenFile {
            guard let text = readSmallFile(file, limit: 4000) else {
                return PostOutcome(status: 0, message: "cannot read the bearer token file \(file)")
            }
            token = String(text.filter { $0 != "\n" && $0 != "\r" })
        }
        var result = cifm_rw_result()
        let timeout = Int((settings.timeoutSeconds ?? RemoteWriteConfig.defaultTimeoutSeconds) * 1000)
        _ = body.withUnsafeBytes { raw in
            url.withCString { url in
                userAgent.withCString { agent in
                    withOptional(settings.username) { user in
                        withOptional(settings.password) { password in
                            withOptional(token) { token in
                                withOptional(settings.caFile) { ca in
                                    withOptional(settings.certFile) { cert in
                                        withOptional(settings.keyFile) { key in
                                            var request = cifm_rw_request(
                                                url: url, body: raw.baseAddress, body_len: raw.count, user_agent: agent, username: user,
                                                password: password, bearer_token: token, ca_file: ca, cert_file: cert, key_file: key,
                                                insecure_skip_verify: settings.insecureSkipVerify ? 1 : 0, timeout_ms: timeout)
                                            return cifm_rw_post(client, &request, &result)
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        let message = result.status == 0 ? Self.string(result.error) : Self.string(result.body)
        return PostOutcome(
            status: Int(result.status), retryAfter: result.retry_after >= 0 ? result.retry_after : nil, message: message,
            uploadedBytes: Int(result.uploaded))
    }

    static func string<T>(_ tuple: T) -> String {
        withUnsafeBytes(of: tuple) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

private func withOptional<R>(_ s: String?, _ body: (UnsafePointer<CChar>?) -> R) -> R {
    guard let s else { return body(nil) }
    return s.withCString { body($0) }
}
