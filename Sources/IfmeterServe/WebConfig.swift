import IfmeterCore
import IfmeterSystem

/// A problem in a web config file, at a line when known.
public struct WebConfigError: Error, Equatable, Sendable {
    public var line: Int?
    public var message: String
}

/// A small, strict subset of YAML, enough for Prometheus exporter-toolkit's
/// web config: block mappings nested by spaces, plain or quoted scalars,
/// comments. Anything else (lists, flow style, anchors, tags, multi-line
/// scalars, tabs) is an error naming the line.
enum MiniYAML {
    /// Reads `path` and gives its text and its folder (which relative file
    /// names in it are relative to, as exporter-toolkit has them) to
    /// `parse`; an error comes back as `path:line: message`.
    static func load<Config>(
        _ path: String, _ parse: (String, String) throws(WebConfigError) -> Config
    ) throws(WebConfig.LoadError) -> Config {
        let text: String
        do throws(SystemError) {
            text = try readTextFile(path)
        } catch {
            throw .unreadable(error)
        }
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        do throws(WebConfigError) {
            return try parse(text, folder)
        } catch {
            throw .invalid(location: error.line.map { "\(path):\($0)" } ?? path, message: error.message)
        }
    }

    indirect enum Node: Equatable {
        case scalar(String, line: Int)
        case mapping([Entry], line: Int)
        /// `key:` with nothing after it and nothing nested.
        case empty(line: Int)

        var line: Int {
            switch self {
            case .scalar(_, let line), .mapping(_, let line), .empty(let line): line
            }
        }
    }

    struct Entry: Equatable {
        var key: String
        var line: Int
        var value: Node
    }

    private struct Line {
        var number: Int
        var indent: Int
        var key: String
        /// The value after `key:`, nil when none (a nested mapping may follow).
        var value: String?
    }

    /// Parses `text` into its top-level mapping (empty for an empty file).
    static func parse(_ text: String) throws(WebConfigError) -> [Entry] {
        var lines: [Line] = []
        var number = 0
        for raw in text.split(separator: "\n", omittingEmptySubsequences: false) {
            number += 1
            var line = String(raw)
            if line.hasSuffix("\r") { line.removeLast() }
            if number == 1, line.hasPrefix("\u{FEFF}") { line.removeFirst() }
            guard let parsed = try parseLine(line, number: number) else { continue }
            lines.append(parsed)
        }
        var index = 0
        let entries = try mapping(lines, &index, indent: lines.first?.indent ?? 0)
        if index < lines.count {
            throw WebConfigError(
                line: lines[index].number,
                message: "indentation does not match any mapping above; indent keys of one mapping by the same number of spaces")
        }
        return entries
    }

    private static func mapping(_ lines: [Line], _ index: inout Int, indent: Int) throws(WebConfigError) -> [Entry] {
        var entries: [Entry] = []
        while index < lines.count {
            let line = lines[index]
            if line.indent < indent { break }
            if line.indent > indent {
                // Back from a deeper mapping, to a column no mapping uses.
                throw WebConfigError(
                    line: line.number,
                    message: "indentation does not match any mapping above; indent keys of one mapping by the same number of spaces")
            }
            index += 1
            if entries.contains(where: { $0.key == line.key }) {
                throw WebConfigError(line: line.number, message: "'\(line.key)' is given twice; keep one")
            }
            let value: Node
            if let text = line.value {
                if index < lines.count, lines[index].indent > indent {
                    throw WebConfigError(line: lines[index].number, message: "'\(line.key)' has a value and nested keys; give one or the other")
                }
                value = .scalar(try scalar(text, line: line.number), line: line.number)
            } else if index < lines.count, lines[index].indent > indent {
                value = .mapping(try mapping(lines, &index, indent: lines[index].indent), line: line.number)
            } else {
                value = .empty(line: line.number)
            }
            entries.append(Entry(key: line.key, line: line.number, value: value))
        }
        return entries
    }

    /// One line as `key: value`, or nil for a blank or comment line.
    private static func parseLine(_ line: String, number: Int) throws(WebConfigError) -> Line? {
        let chars = Array(line)
        var indent = 0
        while indent < chars.count, chars[indent] == " " { indent += 1 }
        if indent < chars.count, chars[indent] == "\t" {
            throw WebConfigError(line: number, message: "a tab in the indentation; YAML indents with spaces")
        }
        let content = String(chars[indent...])
        let body = try stripComment(content, line: number).trimmingSpaces()
        if body.isEmpty { return nil }
        if body == "---" { return nil } // a document start
        if body.hasPrefix("- ") || body == "-" {
            throw WebConfigError(line: number, message: "a list item; the web config has no lists here, only 'key: value' lines")
        }
        if let first = body.first, "{[&*!|>%@`".contains(first) {
            throw WebConfigError(
                line: number,
                message: "'\(first)' starts YAML that ifmeter does not read (flow style, anchors, tags, block scalars); write 'key: value'")
        }
        // The key: plain, up to the first ': ' or a final ':'.
        let keyEnd: String.Index
        if let colon = body.indices.first(where: { body[$0] == ":" && body.index(after: $0) < body.endIndex && body[body.index(after: $0)] == " " }) {
            keyEnd = colon
        } else if body.hasSuffix(":") {
            keyEnd = body.index(before: body.endIndex)
        } else {
            throw WebConfigError(line: number, message: "expected 'key: value' or 'key:'")
        }
        let key = String(body[..<keyEnd]).trimmingSpaces()
        guard !key.isEmpty, !key.hasPrefix("\""), !key.hasPrefix("'") else {
            throw WebConfigError(line: number, message: "expected a plain key before ':'")
        }
        let rest = String(body[body.index(after: keyEnd)...]).trimmingSpaces()
        return Line(number: number, indent: indent, key: key, value: rest.isEmpty ? nil : rest)
    }

    /// `text` without a trailing comment: `#` at the start or after a
    /// space, outside quotes.
    private static func stripComment(_ text: String, line: Int) throws(WebConfigError) -> String {
        var out = ""
        var quote: Character?
        var previous: Character = " "
        var escaped = false
        for c in text {
            if let q = quote {
                if q == "\"", c == "\\", !escaped {
                    escaped = true
                    out.append(c)
                    continue
                }
                if c == q, !escaped { quote = nil }
                escaped = false
            } else if c == "#", previous == " " || previous == "\t" {
                break
            } else if (c == "\"" || c == "'"), previous == " " {
                quote = c
            }
            out.append(c)
            previous = c
        }
        return out
    }

    /// A scalar value: plain, 'single-quoted' ('' for a quote) or
    /// "double-quoted" (\\, \", \n, \t, \/).
    static func scalar(_ text: String, line: Int) throws(WebConfigError) -> String {
        guard let first = text.first else { return "" }
        if first == "'" || first == "\"" {
            var chars = Array(text.dropFirst())
            var out = ""
            var i = 0
            while i < chars.count {
                let c = chars[i]
                if c == first {
                    if first == "'", i + 1 < chars.count, chars[i + 1] == "'" {
                        out.append("'")
                        i += 2
                        continue
                    }
                    let trailing = String(chars[(i + 1)...]).trimmingSpaces()
                    guard trailing.isEmpty else {
                        throw WebConfigError(line: line, message: "text after the closing quote: \(trailing)")
                    }
                    return out
                }
                if first == "\"", c == "\\" {
                    guard i + 1 < chars.count else { break }
                    switch chars[i + 1] {
                    case "\\": out.append("\\")
                    case "\"": out.append("\"")
                    case "/": out.append("/")
                    case "n": out.append("\n")
                    case "t": out.append("\t")
                    default:
                        throw WebConfigError(
                            line: line, message: "unknown escape '\\\(chars[i + 1])' in a double-quoted string; use single quotes for backslashes")
                    }
                    i += 2
                    continue
                }
                out.append(c)
                i += 1
            }
            chars.removeAll()
            throw WebConfigError(line: line, message: "a quoted string without its closing \(first)")
        }
        if let c = text.first, "{[&*!|>%@`".contains(c) {
            throw WebConfigError(
                line: line, message: "'\(c)' starts YAML that ifmeter does not read (flow style, anchors, tags, block scalars); quote the value")
        }
        return text
    }
}

/// `serve --web-config FILE`: Prometheus exporter-toolkit's web
/// configuration, the parts ifmeter supports.
public struct WebConfig: Sendable {
    public var tls: HTTPTLSSettings?
    public var users: [String: String]

    /// Neither TLS nor users (an empty file, or comments only): serve
    /// warns that it serves as without --web-config.
    public var asksForNothing: Bool { tls == nil && users.isEmpty }

    static let supportedTLSKeys = ["cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"]
    static let unsupportedTLSKeys = [
        "cert", "key", "client_ca", "cipher_suites", "curve_preferences", "prefer_server_cipher_suites", "client_allowed_sans",
    ]

    /// Why a web config could not be used.
    public enum LoadError: Error, Sendable {
        /// The file cannot be read (missing, a FIFO, a folder...): the
        /// command line names no usable file.
        case unreadable(SystemError)
        /// What it holds is wrong, at `location` (`path:line`).
        case invalid(location: String, message: String)
    }

    /// Reads and checks `path`; relative file names in it are relative to
    /// its folder, as exporter-toolkit has them.
    public static func load(_ path: String) throws(LoadError) -> WebConfig {
        try MiniYAML.load(path, parse)
    }

    public static func parse(_ text: String, folder: String) throws(WebConfigError) -> WebConfig {
        var config = WebConfig(tls: nil, users: [:])
        for entry in try MiniYAML.parse(text) {
            switch entry.key {
            case "tls_server_config":
                config.tls = try tlsSettings(entry, folder: folder)
            case "basic_auth_users":
                config.users = try users(entry)
            case "http_server_config":
                throw WebConfigError(
                    line: entry.line, message: "'http_server_config' is not supported by ifmeter (HTTP/1.1 only, no extra headers); remove it")
            default:
                throw WebConfigError(line: entry.line, message: "unknown key '\(entry.key)'; expected tls_server_config or basic_auth_users")
            }
        }
        return config
    }

    private static func mapping(_ entry: MiniYAML.Entry) throws(WebConfigError) -> [MiniYAML.Entry] {
        switch entry.value {
        case .mapping(let entries, _): return entries
        case .empty: return []
        case .scalar: throw WebConfigError(line: entry.line, message: "'\(entry.key)' must be a mapping (nested 'key: value' lines), not a value")
        }
    }

    private static func string(_ entry: MiniYAML.Entry) throws(WebConfigError) -> String {
        switch entry.value {
        case .scalar(let text, _): return text
        case .empty: return ""
        case .mapping: throw WebConfigError(line: entry.line, message: "'\(entry.key)' must be a value, not a mapping")
        }
    }

    private static func tlsSettings(_ section: MiniYAML.Entry, folder: String) throws(WebConfigError) -> HTTPTLSSettings {
        let entries = try mapping(section)
        if entries.isEmpty {
            // Serving plain HTTP where the file asks for TLS would be quiet about the one thing asked.
            throw WebConfigError(
                line: section.line,
                message: "tls_server_config names no cert_file and key_file; add them, or remove tls_server_config to serve plain HTTP")
        }
        var values: [String: (String, Int)] = [:]
        for entry in entries {
            if unsupportedTLSKeys.contains(entry.key) {
                throw WebConfigError(
                    line: entry.line,
                    message: "'\(entry.key)' is not supported by ifmeter; remove it (supported: \(supportedTLSKeys.joined(separator: ", ")))")
            }
            guard supportedTLSKeys.contains(entry.key) else {
                throw WebConfigError(
                    line: entry.line,
                    message: "unknown key '\(entry.key)' in tls_server_config; expected one of \(supportedTLSKeys.joined(separator: ", "))")
            }
            values[entry.key] = (try string(entry), entry.line)
        }
        func file(_ key: String) throws(WebConfigError) -> String? {
            guard let (name, line) = values[key], !name.isEmpty else { return nil }
            let path = name.hasPrefix("/") ? name : folder + "/" + name
            let text: String
            do throws(SystemError) {
                text = try readTextFile(path)
            } catch {
                throw WebConfigError(
                    line: line, message: "cannot read \(key) '\(path)': \(error.message); fix the path (relative paths start at the config's folder)")
            }
            guard text.contains("-----BEGIN ") else {
                throw WebConfigError(line: line, message: "\(key) '\(path)' is not PEM (no '-----BEGIN' line); give a PEM file")
            }
            return text
        }
        guard let cert = try file("cert_file") else {
            throw WebConfigError(line: section.line, message: "tls_server_config needs cert_file and key_file")
        }
        guard let key = try file("key_file") else {
            throw WebConfigError(line: section.line, message: "tls_server_config needs key_file beside cert_file")
        }
        var settings = HTTPTLSSettings(certificatePEM: cert, keyPEM: key)
        if let (text, line) = values["client_auth_type"] {
            switch text {
            case "NoClientCert", "": settings.clientAuth = .none
            case "VerifyClientCertIfGiven": settings.clientAuth = .verifyIfGiven
            case "RequireAndVerifyClientCert": settings.clientAuth = .requireAndVerify
            case "RequestClientCert", "RequireAnyClientCert":
                throw WebConfigError(
                    line: line,
                    message:
                        "client_auth_type \(text) (a certificate taken without verifying it) is not supported by ifmeter; use VerifyClientCertIfGiven or RequireAndVerifyClientCert with client_ca_file"
                )
            default:
                throw WebConfigError(
                    line: line, message: "unknown client_auth_type '\(text)'; use NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
                )
            }
        }
        settings.clientCAPEM = try file("client_ca_file")
        if settings.clientAuth != .none, settings.clientCAPEM == nil {
            throw WebConfigError(
                line: values["client_auth_type"]?.1,
                message: "client_auth_type \(values["client_auth_type"]!.0) needs client_ca_file, the CA that signs client certificates")
        }
        if settings.clientAuth == .none, let (_, line) = values["client_ca_file"] {
            throw WebConfigError(
                line: line,
                message:
                    "client_ca_file is set but client_auth_type is NoClientCert; set client_auth_type to RequireAndVerifyClientCert or VerifyClientCertIfGiven"
            )
        }
        func version(_ key: String) throws(WebConfigError) -> HTTPTLSSettings.Version? {
            guard let (text, line) = values[key] else { return nil }
            switch text {
            case "TLS12": return .tls12
            case "TLS13": return .tls13
            case "TLS10", "TLS11":
                throw WebConfigError(line: line, message: "\(key) \(text) is not supported by ifmeter (too old); use TLS12 or TLS13")
            default:
                throw WebConfigError(line: line, message: "unknown \(key) '\(text)'; use TLS12 or TLS13")
            }
        }
        settings.minVersion = try version("min_version") ?? .tls12
        settings.maxVersion = try version("max_version") ?? .tls13
        if settings.minVersion > settings.maxVersion {
            throw WebConfigError(line: values["max_version"]?.1, message: "max_version is below min_version; raise max_version or lower min_version")
        }
        return settings
    }

    private static func users(_ section: MiniYAML.Entry) throws(WebConfigError) -> [String: String] {
        var users: [String: String] = [:]
        let entries = try mapping(section)
        if entries.isEmpty {
            // Serving without auth where the file asks for it would be quiet about the one thing asked.
            throw WebConfigError(
                line: section.line,
                message: "basic_auth_users names no user; add 'NAME: BCRYPT-HASH' lines under it, or remove it to serve without basic auth")
        }
        for entry in entries {
            let hash = try string(entry)
            if entry.key.contains(":") {
                throw WebConfigError(
                    line: entry.line, message: "user '\(entry.key)' contains ':', which Basic authentication cannot carry; rename the user")
            }
            guard let cost = BasicAuthenticator.bcryptCost(hash) else {
                throw WebConfigError(
                    line: entry.line,
                    message:
                        "the password of '\(entry.key)' is not a bcrypt hash ($2y$..., 60 characters); make one with 'htpasswd -nBC 10 \(entry.key)' and quote it"
                )
            }
            // Below 4 libxcrypt refuses the hash (no password could ever
            // match); above 16 one check takes a core for seconds to days.
            guard BasicAuthenticator.costs.contains(cost) else {
                throw WebConfigError(
                    line: entry.line,
                    message:
                        "the bcrypt cost of '\(entry.key)' is \(cost), outside the \(BasicAuthenticator.costs.lowerBound) to \(BasicAuthenticator.costs.upperBound) ifmeter accepts; make a new hash with 'htpasswd -nBC 10 \(entry.key)'"
                )
            }
            users[entry.key] = hash
        }
        return users
    }
}

extension String {
    /// Without leading and trailing spaces and tabs.
    fileprivate func trimmingSpaces() -> String { self[...].trimmingSpaces() }
}
