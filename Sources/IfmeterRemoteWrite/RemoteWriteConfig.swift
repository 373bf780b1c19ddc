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
///     write_relabel_configs: [{source_labels, separator, regex, target_label, replacement, action}]
///     queue_config: {capacity, max_samples_per_send, batch_send_deadline, min_backoff, max_backoff}
///
/// Relative file names are relative to the file's folder.
package struct RemoteWriteConfig: Sendable {
    package var username: String?
    package var password: String?
    package var bearerTokenFile: String?
    package var caFile: String?
    package var certFile: String?
    package var keyFile: String?
    package var insecureSkipVerify = false
    /// Nil: `defaultTimeoutSeconds`.
    package var timeoutSeconds: Double?
    package var externalLabels: [(String, String)] = []
    /// `write_relabel_configs`, applied in order to every series pushed
    /// (after the external labels, as Prometheus applies them).
    package var relabel: [RelabelRule] = []
    package var queue = QueueSettings()

    /// `queue_config`, Prometheus's keys as ifmeter's sender reads them.
    package struct QueueSettings: Sendable, Equatable {
        /// Samples kept in memory while a request is in flight; past them,
        /// pushes go to the queue on disk. Nil: no bound but the pushes'.
        package var capacity: Int?
        /// Samples in one request at most (a push is split to fit).
        package var maxSamplesPerSend: Int?
        /// The longest a sample may wait for its request: ifmeter holds no
        /// push back to fill a batch, so this is met whatever it is.
        package var batchSendDeadline: Double?
        /// The first and the longest wait between retries.
        package var minBackoff = 0.1
        package var maxBackoff = 5.0

        package init() {}
    }

    /// A request's limit without `remote_timeout`, as Prometheus's.
    package static let defaultTimeoutSeconds: Double = 30

    /// No authentication, the system's CAs, no extra labels.
    package init() {}

    /// The file cannot be read, or what it holds is wrong: as a web
    /// config's.
    package typealias LoadError = ConfigLoadError

    package static func validLabelName(_ name: String) -> Bool {
        guard let first = name.utf8.first, first == UInt8(ascii: "_") || (first | 0x20 >= UInt8(ascii: "a") && first | 0x20 <= UInt8(ascii: "z"))
        else { return false }
        return name.utf8.allSatisfy { c in
            c == UInt8(ascii: "_") || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || (c | 0x20 >= UInt8(ascii: "a") && c | 0x20 <= UInt8(ascii: "z"))
        }
    }

    /// Reads and checks `path`: it and the files it names must be ones no
    /// other user could change (`SettingsFile.check`), unless
    /// `foreignAllowed`.
    package static func load(_ path: String, foreignAllowed: Bool = false) throws(LoadError) -> RemoteWriteConfig {
        try YAML.load(path, foreignAllowed: foreignAllowed) { root, folder throws(ConfigError) in
            try read(root?.mapping("the remote write config") ?? [], folder: folder, foreignAllowed: foreignAllowed)
        }
    }

    package static func parse(_ text: String, folder: String, foreignAllowed: Bool = false) throws(ConfigError) -> RemoteWriteConfig {
        try read(try YAML.parse(text)?.mapping("the remote write config") ?? [], folder: folder, foreignAllowed: foreignAllowed)
    }

    /// The settings in a mapping's entries (a file's, or a target's in the
    /// main config); relative file names start at `folder`.
    package static func read(_ entries: [YAMLEntry], folder: String, foreignAllowed: Bool = false) throws(ConfigError) -> RemoteWriteConfig {
        var config = RemoteWriteConfig()
        func file(_ entry: YAMLEntry) throws(ConfigError) -> String {
            let name = try entry.string()
            guard !name.isEmpty else { throw ConfigError(line: entry.line, message: "'\(entry.key)' names no file") }
            let path = name.hasPrefix("/") ? name : folder + "/" + name
            if !foreignAllowed {
                do throws(SystemError) {
                    try SettingsFile.check(path)
                } catch {
                    throw ConfigError(line: entry.line, message: "\(entry.key) '\(path)': \(error.call): \(error.message)", refused: true)
                }
            }
            return path
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
                            throw ConfigError(line: e.line, message: "cannot read the password file \(path)")
                        }
                        config.password = String(text.filter { $0 != "\n" && $0 != "\r" })
                    default: throw e.unknownKey(expected: "username, password or password_file")
                    }
                }
                if config.username == nil { throw ConfigError(line: entry.line, message: "basic_auth needs a username") }
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
                            throw ConfigError(line: e.line, message: "insecure_skip_verify is true or false, not '\(value)'")
                        }
                        config.insecureSkipVerify = value == "true"
                    default:
                        throw e.unknownKey(expected: "ca_file, cert_file, key_file or insecure_skip_verify")
                    }
                }
                if (config.certFile == nil) != (config.keyFile == nil) {
                    throw ConfigError(line: entry.line, message: "tls_config needs both cert_file and key_file, or neither")
                }
            case "remote_timeout":
                let value = try entry.string()
                guard value.hasSuffix("s"), let seconds = Double(value.dropLast()), seconds > 0 else {
                    throw ConfigError(line: entry.line, message: "remote_timeout is seconds, like 30s, not '\(value)'")
                }
                config.timeoutSeconds = seconds
            case "external_labels":
                for e in try entry.mapping() {
                    guard validLabelName(e.key), !e.key.hasPrefix("__") else {
                        // Named only when it reads as a name at all.
                        guard e.isNameLike else {
                            throw ConfigError(
                                line: e.line, column: e.column,
                                message:
                                    "a key of external_labels that is not a label name (its text is not repeated here); use [a-zA-Z_][a-zA-Z0-9_]*, not __*"
                            )
                        }
                        throw ConfigError(line: e.line, message: "'\(e.key)' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*, not __*)")
                    }
                    config.externalLabels.append((e.key, try e.string()))
                }
            case "write_relabel_configs":
                for item in try entry.list() { config.relabel.append(try relabelRule(item)) }
            case "queue_config":
                config.queue = try queueSettings(entry)
            default:
                throw entry.unknownKey(
                    expected: "basic_auth, bearer_token_file, tls_config, remote_timeout, external_labels, write_relabel_configs or queue_config")
            }
        }
        if config.queue.minBackoff > config.queue.maxBackoff {
            throw ConfigError(line: nil, message: "queue_config: min_backoff is longer than max_backoff; shorten it or raise max_backoff")
        }
        if config.username != nil && config.bearerTokenFile != nil {
            throw ConfigError(line: nil, message: "basic_auth and bearer_token_file together; keep one")
        }
        return config
    }

    /// One `write_relabel_configs` item, checked as Prometheus checks it.
    static func relabelRule(_ item: YAMLNode) throws(ConfigError) -> RelabelRule {
        var action = RelabelRule.Action.replace
        var sources: [String] = []
        var separator = ";", regex = "(.*)", target = "", replacement = "$1"
        for e in try item.mapping("a write_relabel_configs item") {
            switch e.key {
            case "action":
                let text = try e.string()
                guard let known = RelabelRule.Action(rawValue: text.lowercased()) else {
                    throw ConfigError(
                        line: e.line,
                        message:
                            "action '\(TerminalText.escaped(text))' is not one ifmeter applies; use \(RelabelRule.Action.allCases.map(\.rawValue).joined(separator: ", "))"
                    )
                }
                action = known
            case "source_labels":
                sources = try e.list().map { (node: YAMLNode) throws(ConfigError) -> String in try node.string("a source label") }
            case "separator": separator = try e.string()
            case "regex": regex = try e.string()
            case "target_label": target = try e.string()
            case "replacement": replacement = try e.string()
            case "modulus":
                throw ConfigError(line: e.line, message: "'modulus' (hashmod) is not supported by ifmeter's remote write; remove it")
            default:
                throw e.unknownKey(expected: "source_labels, separator, regex, target_label, replacement or action")
            }
        }
        do throws(RelabelRule.Invalid) {
            return try RelabelRule(
                action: action, sourceLabels: sources, separator: separator, regex: regex, targetLabel: target, replacement: replacement)
        } catch {
            throw ConfigError(line: item.line, message: "write_relabel_configs: \(error.message)")
        }
    }

    static func queueSettings(_ entry: YAMLEntry) throws(ConfigError) -> QueueSettings {
        var queue = QueueSettings()
        func count(_ e: YAMLEntry) throws(ConfigError) -> Int {
            let text = try e.string()
            guard let n = Int(text), n >= 1, n <= 10_000_000 else {
                throw ConfigError(line: e.line, message: "'\(e.key)' is a whole number from 1 to 10000000, not '\(TerminalText.escaped(text))'")
            }
            return n
        }
        func duration(_ e: YAMLEntry) throws(ConfigError) -> Double {
            let text = try e.string()
            guard let seconds = Units.parseDuration(text), seconds >= 0.001, seconds <= 3600 else {
                throw ConfigError(
                    line: e.line, message: "'\(e.key)' is a duration from 1ms to 1h, like 100ms or 5s, not '\(TerminalText.escaped(text))'")
            }
            return seconds
        }
        for e in try entry.mapping() {
            switch e.key {
            case "capacity": queue.capacity = try count(e)
            case "max_samples_per_send": queue.maxSamplesPerSend = try count(e)
            case "batch_send_deadline": queue.batchSendDeadline = try duration(e)
            case "min_backoff": queue.minBackoff = try duration(e)
            case "max_backoff": queue.maxBackoff = try duration(e)
            case "max_shards", "min_shards", "retry_on_http_429", "sample_age_limit":
                throw ConfigError(
                    line: e.line, message: "'\(e.key)' is not supported by ifmeter (one sender per receiver, every 429 retried); remove it")
            default:
                throw e.unknownKey(expected: "capacity, max_samples_per_send, batch_send_deadline, min_backoff or max_backoff")
            }
        }
        return queue
    }
}
