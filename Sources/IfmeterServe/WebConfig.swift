import IfmeterConfig
import IfmeterCore
import IfmeterSystem

/// A problem in a web config file, at a line when known.
package typealias WebConfigError = ConfigError

/// `serve --web-config FILE`: Prometheus exporter-toolkit's web
/// configuration, the parts ifmeter supports.
package struct WebConfig: Sendable {
    package var tls: HTTPTLSSettings?
    package var users: [String: String]

    /// Neither TLS nor users (an empty file, or comments only): serve
    /// warns that it serves as without --web-config.
    package var asksForNothing: Bool { tls == nil && users.isEmpty }

    static let supportedTLSKeys = ["cert_file", "key_file", "client_auth_type", "client_ca_file", "min_version", "max_version"]
    static let unsupportedTLSKeys = [
        "cert", "key", "client_ca", "cipher_suites", "curve_preferences", "prefer_server_cipher_suites", "client_allowed_sans",
    ]

    /// Why a web config could not be used.
    package typealias LoadError = ConfigLoadError

    /// Reads and checks `path`; relative file names in it are relative to
    /// its folder, as exporter-toolkit has them. It and the files it names
    /// must be ones no other user could change (`SettingsFile.check`),
    /// unless `foreignAllowed`.
    package static func load(_ path: String, foreignAllowed: Bool = false) throws(LoadError) -> WebConfig {
        try YAML.load(path, foreignAllowed: foreignAllowed) { root, folder throws(ConfigError) in
            try read(root, folder: folder, foreignAllowed: foreignAllowed)
        }
    }

    package static func parse(_ text: String, folder: String, foreignAllowed: Bool = false) throws(WebConfigError) -> WebConfig {
        try read(try YAML.parse(text), folder: folder, foreignAllowed: foreignAllowed)
    }

    /// The web config in a YAML tree (nil: an empty file).
    package static func read(_ root: YAMLNode?, folder: String, foreignAllowed: Bool = false) throws(WebConfigError) -> WebConfig {
        var config = WebConfig(tls: nil, users: [:])
        for entry in try root?.mapping("the web config") ?? [] {
            switch entry.key {
            case "tls_server_config":
                config.tls = try tlsSettings(entry, folder: folder, foreignAllowed: foreignAllowed)
            case "basic_auth_users":
                config.users = try users(entry)
            case "http_server_config":
                throw WebConfigError(
                    line: entry.line, message: "'http_server_config' is not supported by ifmeter (HTTP/1.1 only, no extra headers); remove it")
            default:
                throw entry.unknownKey(expected: "tls_server_config or basic_auth_users")
            }
        }
        return config
    }

    private static func tlsSettings(_ section: YAMLEntry, folder: String, foreignAllowed: Bool) throws(WebConfigError) -> HTTPTLSSettings {
        let entries = try section.mapping()
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
                throw entry.unknownKey(expected: "one of \(supportedTLSKeys.joined(separator: ", "))", under: "tls_server_config")
            }
            values[entry.key] = (try entry.string(), entry.line)
        }
        func file(_ key: String) throws(WebConfigError) -> String? {
            guard let (name, line) = values[key], !name.isEmpty else { return nil }
            let path = name.hasPrefix("/") ? name : folder + "/" + name
            if !foreignAllowed {
                do throws(SystemError) {
                    try SettingsFile.check(path)
                } catch {
                    throw WebConfigError(line: line, message: "\(key) '\(path)': \(error.call): \(error.message)", refused: true)
                }
            }
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

    private static func users(_ section: YAMLEntry) throws(WebConfigError) -> [String: String] {
        var users: [String: String] = [:]
        let entries = try section.mapping()
        if entries.isEmpty {
            // Serving without auth where the file asks for it would be quiet about the one thing asked.
            throw WebConfigError(
                line: section.line,
                message: "basic_auth_users names no user; add 'NAME: BCRYPT-HASH' lines under it, or remove it to serve without basic auth")
        }
        for entry in entries {
            let hash = try entry.string()
            if entry.key.contains(":") {
                // No user name has one: the line may be no user's (a
                // shadow file's), so it is placed, not repeated.
                throw WebConfigError(
                    line: entry.line, column: entry.column,
                    message: "this user name contains ':', which Basic authentication cannot carry (its text is not repeated here); rename the user")
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
