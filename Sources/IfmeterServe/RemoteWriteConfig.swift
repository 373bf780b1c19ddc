import IfmeterConfig
import IfmeterCore
import IfmeterSystem

/// `serve --remote-write-config`: the receivers' client settings, in the
/// shape of Prometheus's remote_write entries (the same small YAML as the
/// web config):
///
///     basic_auth: {username, password | password_file}
///     bearer_token_file: token       # read before every request
///     tls_config: {ca_file, cert_file, key_file, insecure_skip_verify}
///     remote_timeout: 30s
///     external_labels: {host: gw1}
///
/// Relative file names are relative to the file's folder.
public struct RemoteWriteConfig: Sendable {
    public var username: String?
    public var password: String?
    public var bearerTokenFile: String?
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    public var insecureSkipVerify = false
    /// Nil: `defaultTimeoutSeconds`.
    public var timeoutSeconds: Double?
    public var externalLabels: [(String, String)] = []

    /// A request's limit without `remote_timeout`, as Prometheus's.
    public static let defaultTimeoutSeconds: Double = 30

    /// No authentication, the system's CAs, no extra labels.
    public init() {}

    /// The file cannot be read, or what it holds is wrong: as a web
    /// config's.
    public typealias LoadError = WebConfig.LoadError

    public static func validLabelName(_ name: String) -> Bool {
        guard let first = name.utf8.first, first == UInt8(ascii: "_") || (first | 0x20 >= UInt8(ascii: "a") && first | 0x20 <= UInt8(ascii: "z"))
        else { return false }
        return name.utf8.allSatisfy { c in
            c == UInt8(ascii: "_") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || (c | 0x20 >= UInt8(ascii: "a") && c | 0x20 <= UInt8(ascii: "z"))
        }
    }

    public static func load(_ path: String) throws(LoadError) -> RemoteWriteConfig {
        try YAML.load(path) { root, folder throws(ConfigError) in try read(root?.mapping("the remote write config") ?? [], folder: folder) }
    }

    public static func parse(_ text: String, folder: String) throws(WebConfigError) -> RemoteWriteConfig {
        try read(try YAML.parse(text)?.mapping("the remote write config") ?? [], folder: folder)
    }

    /// The settings in a mapping's entries (a file's, or a target's in the
    /// main config); relative file names start at `folder`.
    public static func read(_ entries: [YAMLEntry], folder: String) throws(WebConfigError) -> RemoteWriteConfig {
        var config = RemoteWriteConfig()
        func file(_ entry: YAMLEntry) throws(WebConfigError) -> String {
            let name = try entry.string()
            guard !name.isEmpty else { throw WebConfigError(line: entry.line, message: "'\(entry.key)' names no file") }
            return name.hasPrefix("/") ? name : folder + "/" + name
        }
        for entry in entries {
            switch entry.key {
            case "basic_auth":
                for e in try entry.mapping() {
                    switch e.key {
                    case "username": config.username = try e.string()
                    case "password": config.password = try e.string()
                    case "password_file":
                        let path = try file(e)
                        guard let text = readSmallFile(path, limit: 4096) else {
                            throw WebConfigError(line: e.line, message: "cannot read the password file \(path)")
                        }
                        config.password = String(text.filter { $0 != "\n" && $0 != "\r" })
                    default: throw WebConfigError(line: e.line, message: "unknown key '\(e.key)'; expected username, password or password_file")
                    }
                }
                if config.username == nil { throw WebConfigError(line: entry.line, message: "basic_auth needs a username") }
            case "bearer_token_file":
                config.bearerTokenFile = try file(entry)
            case "tls_config":
                for e in try entry.mapping() {
                    switch e.key {
                    case "ca_file": config.caFile = try file(e)
                    case "cert_file": config.certFile = try file(e)
                    case "key_file": config.keyFile = try file(e)
                    case "insecure_skip_verify":
                        let value = try e.string()
                        guard value == "true" || value == "false" else {
                            throw WebConfigError(line: e.line, message: "insecure_skip_verify is true or false, not '\(value)'")
                        }
                        config.insecureSkipVerify = value == "true"
                    default:
                        throw WebConfigError(
                            line: e.line, message: "unknown key '\(e.key)'; expected ca_file, cert_file, key_file or insecure_skip_verify")
                    }
                }
                if (config.certFile == nil) != (config.keyFile == nil) {
                    throw WebConfigError(line: entry.line, message: "tls_config needs both cert_file and key_file, or neither")
                }
            case "remote_timeout":
                let value = try entry.string()
                guard value.hasSuffix("s"), let seconds = Double(value.dropLast()), seconds > 0 else {
                    throw WebConfigError(line: entry.line, message: "remote_timeout is seconds, like 30s, not '\(value)'")
                }
                config.timeoutSeconds = seconds
            case "external_labels":
                for e in try entry.mapping() {
                    guard validLabelName(e.key), !e.key.hasPrefix("__") else {
                        throw WebConfigError(line: e.line, message: "'\(e.key)' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not __*)")
                    }
                    config.externalLabels.append((e.key, try e.string()))
                }
            default:
                throw WebConfigError(
                    line: entry.line,
                    message: "unknown key '\(entry.key)'; expected basic_auth, bearer_token_file, tls_config, remote_timeout or external_labels")
            }
        }
        if config.username != nil && config.bearerTokenFile != nil {
            throw WebConfigError(line: nil, message: "basic_auth and bearer_token_file together; keep one")
        }
        return config
    }
}
