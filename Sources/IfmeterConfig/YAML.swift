import CYAML
import IfmeterCore
import IfmeterSystem

/// A problem in a configuration file, at a line (and a column) when known.
package struct ConfigError: Error, Equatable, Sendable {
    package var line: Int?
    /// 1-based, in characters: said where the line itself is not repeated.
    package var column: Int?
    package var message: String
    /// A file it names is one another user could change
    /// (`SettingsFile.check`): refused, as a state file is (exit 1), not
    /// bad data.
    package var refused: Bool

    package init(line: Int?, column: Int? = nil, message: String, refused: Bool = false) {
        self.line = line
        self.column = column
        self.message = message
        self.refused = refused
    }

    /// `path:line` or `path:line:column` (`path` alone without a line).
    package func location(in path: String) -> String {
        guard let line else { return path }
        return "\(path):\(line)" + (column.map { ":\($0)" } ?? "")
    }
}

/// Why a configuration file could not be used.
package enum ConfigLoadError: Error, Sendable {
    /// The file cannot be read (missing, a FIFO, a folder...): the command
    /// line names no usable file.
    case unreadable(SystemError)
    /// What it holds is wrong, at `location` (`path:line`).
    case invalid(location: String, message: String)
    /// It, or a file it names (at `location`), is one another user could
    /// change: refused (`SettingsFile.check`).
    case refused(location: String, message: String)
}

/// A YAML document as a tree, every node with its line: what libyaml
/// (Debian's libyaml) reads, kept strict for configuration. Anchors,
/// aliases and tags are refused (a config needs none, and aliases can
/// multiply a small file into a huge tree); so are a second document and
/// duplicate keys (which YAML forbids and libyaml lets through).
package struct YAMLNode: Sendable, Equatable {
    package indirect enum Value: Sendable, Equatable {
        /// A scalar, and whether it was plain (unquoted).
        case scalar(String, plain: Bool)
        case sequence([YAMLNode])
        case mapping([YAMLEntry])
    }

    package var value: Value
    /// 1-based.
    package var line: Int
    /// 1-based, in characters.
    package var column: Int = 1

    /// A plain empty scalar, `~` or `null`: nothing given.
    package var isNull: Bool {
        if case .scalar(let text, true) = value { return text.isEmpty || text == "~" || text == "null" || text == "Null" || text == "NULL" }
        return false
    }
}

/// `key: value` in a mapping.
package struct YAMLEntry: Sendable, Equatable {
    package var key: String
    package var line: Int
    package var value: YAMLNode
    /// The key's column (1-based).
    package var column: Int = 1

    /// The key reads as a setting's name: a letter, then letters, digits,
    /// '_', '-' or '.', 64 at most. Only such a key is ever quoted in a
    /// message: a line that is none (a file that is no config at all, a
    /// shadow file's `user:$6$...:` line) is placed by its line and
    /// column, never repeated.
    package var isNameLike: Bool { YAML.isNameLike(key) }

    /// `unknown key 'name'; expected ...`, the key named only when it reads
    /// as a name (`isNameLike`); otherwise placed by its column.
    package func unknownKey(expected: String, under section: String? = nil) -> ConfigError {
        let place = section.map { " in \($0)" } ?? ""
        guard isNameLike else {
            return ConfigError(
                line: line, column: column, message: "a key that is not a name (its text is not repeated here)\(place); expected \(expected)")
        }
        return ConfigError(line: line, message: "unknown key '\(key)'\(place); expected \(expected)")
    }
}

package enum YAML {
    /// How deep mappings and lists may nest.
    package static let maximumDepth = 64

    /// Whether `text` reads as a setting's name (`YAMLEntry.isNameLike`).
    package static func isNameLike(_ text: String) -> Bool {
        guard let first = text.utf8.first, text.utf8.count <= 64, (first | 0x20) >= UInt8(ascii: "a"), (first | 0x20) <= UInt8(ascii: "z")
        else { return false }
        return text.utf8.allSatisfy { c in
            ((c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
                || c == UInt8(ascii: "_") || c == UInt8(ascii: "-") || c == UInt8(ascii: ".")
        }
    }

    /// Parses `text`: the document's root, nil for an empty file.
    package static func parse(_ text: String) throws(ConfigError) -> YAMLNode? {
        var bytes = Array(text.utf8)
        if bytes.isEmpty { return nil }
        var result: Result<YAMLNode?, ConfigError> = .success(nil)
        bytes.withUnsafeMutableBufferPointer { buffer in
            result = Result { () throws(ConfigError) -> YAMLNode? in try parse(buffer) }
        }
        return try result.get()
    }

    private static func parse(_ buffer: UnsafeMutableBufferPointer<UInt8>) throws(ConfigError) -> YAMLNode? {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { throw ConfigError(line: nil, message: "libyaml could not start (out of memory)") }
        defer { yaml_parser_delete(&parser) }
        yaml_parser_set_input_string(&parser, buffer.baseAddress, buffer.count)
        // Open collections: a list's items, or a mapping's entries and the
        // key waiting for its value.
        enum Open {
            case sequence([YAMLNode], line: Int)
            case mapping([YAMLEntry], key: (String, Int, Int)?, line: Int)
        }
        var stack: [Open] = []
        var root: YAMLNode?
        var documents = 0

        func add(_ node: YAMLNode) throws(ConfigError) {
            guard let top = stack.popLast() else {
                root = node
                return
            }
            switch top {
            case .sequence(var items, let line):
                items.append(node)
                stack.append(.sequence(items, line: line))
            case .mapping(var entries, let key, let line):
                if let (name, keyLine, keyColumn) = key {
                    if entries.contains(where: { $0.key == name }) {
                        // The key named only when it reads as one.
                        guard isNameLike(name) else {
                            throw ConfigError(
                                line: keyLine, column: keyColumn, message: "this key is given twice (its text is not repeated here); keep one")
                        }
                        throw ConfigError(line: keyLine, message: "'\(name)' is given twice; keep one")
                    }
                    entries.append(YAMLEntry(key: name, line: keyLine, value: node, column: keyColumn))
                    stack.append(.mapping(entries, key: nil, line: line))
                } else {
                    guard case .scalar(let name, _) = node.value else {
                        throw ConfigError(line: node.line, message: "a key must be a plain name, not a list or a mapping")
                    }
                    stack.append(.mapping(entries, key: (name, node.line, node.column), line: line))
                }
            }
        }

        while true {
            var event = yaml_event_t()
            guard yaml_parser_parse(&parser, &event) == 1 else {
                throw failure(parser, buffer)
            }
            defer { yaml_event_delete(&event) }
            let line = Int(event.start_mark.line) + 1
            let column = Int(event.start_mark.column) + 1
            switch event.type {
            case YAML_STREAM_START_EVENT, YAML_DOCUMENT_END_EVENT:
                continue
            case YAML_STREAM_END_EVENT:
                return root
            case YAML_DOCUMENT_START_EVENT:
                documents += 1
                if documents > 1 { throw ConfigError(line: line, message: "a second document ('---'); keep one") }
            case YAML_ALIAS_EVENT:
                throw ConfigError(line: line, message: "an alias (*name); write the value out")
            case YAML_SCALAR_EVENT:
                let scalar = event.data.scalar
                if scalar.anchor != nil { throw ConfigError(line: line, message: "an anchor (&name); write the value out") }
                if scalar.tag != nil, scalar.plain_implicit == 0, scalar.quoted_implicit == 0 {
                    throw ConfigError(line: line, message: "a tag (!...); remove it")
                }
                let text = String(decoding: UnsafeBufferPointer(start: scalar.value, count: scalar.length), as: UTF8.self)
                try add(YAMLNode(value: .scalar(text, plain: scalar.style == YAML_PLAIN_SCALAR_STYLE), line: line, column: column))
            case YAML_SEQUENCE_START_EVENT, YAML_MAPPING_START_EVENT:
                let isSequence = event.type == YAML_SEQUENCE_START_EVENT
                let anchor = isSequence ? event.data.sequence_start.anchor : event.data.mapping_start.anchor
                let tagged = isSequence ? event.data.sequence_start.implicit == 0 : event.data.mapping_start.implicit == 0
                if anchor != nil { throw ConfigError(line: line, message: "an anchor (&name); write the value out") }
                if tagged { throw ConfigError(line: line, message: "a tag (!...); remove it") }
                if stack.count >= maximumDepth { throw ConfigError(line: line, message: "nested more than \(maximumDepth) deep") }
                if case .mapping(_, nil, _)? = stack.last {
                    throw ConfigError(line: line, message: "a key must be a plain name, not a list or a mapping")
                }
                stack.append(isSequence ? .sequence([], line: line) : .mapping([], key: nil, line: line))
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                guard let top = stack.popLast() else { continue }
                switch top {
                case .sequence(let items, let line): try add(YAMLNode(value: .sequence(items), line: line))
                case .mapping(let entries, _, let line): try add(YAMLNode(value: .mapping(entries), line: line))
                }
            default:
                continue
            }
        }
    }

    /// libyaml's words, with what they most often mean in a config file.
    private static func failure(_ parser: yaml_parser_t, _ buffer: UnsafeMutableBufferPointer<UInt8>) -> ConfigError {
        let problem = parser.problem.map { String(cString: $0) } ?? "not YAML"
        let context = parser.context.map { String(cString: $0) }
        let words = "libyaml: " + (context.map { $0 + ": " } ?? "") + problem
        var line = Int(parser.problem_mark.line) + 1
        let lines = String(decoding: buffer, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
        let text = line - 1 < lines.count ? lines[line - 1] : ""
        let hint: String
        if problem.contains("cannot start any token"), text.prefix(while: { $0 == " " || $0 == "\t" }).contains("\t") {
            hint = "a tab in the indentation; YAML indents with spaces"
        } else if problem.contains("end of stream"), context?.contains("quoted scalar") == true {
            line = Int(parser.context_mark.line) + 1
            hint = "a quoted string without its closing quote"
        } else if problem.contains("end of stream") || problem.contains("did not find expected ','") {
            line = Int(parser.context_mark.line) + 1
            hint = "a bracket or brace left open"
        } else if problem.contains("mapping values are not allowed") {
            hint = "a ':' where none can be: a key with a value cannot have keys nested under it, and keys of one mapping start in one column"
        } else if problem.contains("did not find expected key") || problem.contains("did not find expected '-'") {
            hint = "indentation does not match the mapping or list above; indent its keys or items by the same number of spaces"
        } else {
            hint = "not valid YAML"
        }
        return ConfigError(line: line, message: "\(hint) (\(words))")
    }

    /// Reads `path` (at most 1 MiB, a regular file, UTF-8) and gives its
    /// root and its folder (which relative file names in it are relative
    /// to) to `read`; an error comes back as `path:line: message`. The file
    /// must be one no other user could change (`SettingsFile.check`),
    /// unless `foreignAllowed` (`--allow-foreign-files`).
    package static func load<Config>(
        _ path: String, foreignAllowed: Bool = false, _ read: (YAMLNode?, String) throws(ConfigError) -> Config
    ) throws(ConfigLoadError) -> Config {
        if !foreignAllowed {
            do throws(SystemError) {
                try SettingsFile.check(path)
            } catch {
                throw .refused(location: path, message: "\(error.call): \(error.message)")
            }
        }
        let bytes: [UInt8]
        do throws(SystemError) {
            bytes = try readFileBytes(path)
        } catch {
            throw .unreadable(error)
        }
        let folder = path.contains("/") ? String(path[..<path.lastIndex(of: "/")!]) : "."
        do throws(ConfigError) {
            if let (_, line, column, byte) = UTF8Text.firstInvalid(bytes) {
                throw ConfigError(
                    line: line, column: column,
                    message: "byte 0x\(String(byte, radix: 16, uppercase: true)) is not UTF-8; write the file in UTF-8 (it is read as UTF-8 only)")
            }
            return try read(try parse(String(decoding: bytes, as: UTF8.self)), folder)
        } catch {
            let location = error.location(in: path)
            throw error.refused ? .refused(location: location, message: error.message) : .invalid(location: location, message: error.message)
        }
    }
}

// MARK: reading a tree strictly

extension YAMLEntry {
    /// The entries of a mapping value; none for an empty value.
    package func mapping() throws(ConfigError) -> [YAMLEntry] {
        if value.isNull { return [] }
        guard case .mapping(let entries) = value.value else {
            throw ConfigError(line: line, message: "'\(key)' must be a mapping (nested 'key: value' lines), not \(value.kindWords)")
        }
        return entries
    }

    /// A scalar value as text; "" for an empty value.
    package func string() throws(ConfigError) -> String {
        if value.isNull { return "" }
        guard case .scalar(let text, _) = value.value else {
            throw ConfigError(line: line, message: "'\(key)' must be a value, not \(value.kindWords)")
        }
        return text
    }

    /// The items of a list value; none for an empty value.
    package func list() throws(ConfigError) -> [YAMLNode] {
        if value.isNull { return [] }
        guard case .sequence(let items) = value.value else {
            throw ConfigError(line: line, message: "'\(key)' must be a list ('- ' items), not \(value.kindWords)")
        }
        return items
    }

    /// true or false.
    package func bool() throws(ConfigError) -> Bool {
        let text = try string()
        switch text {
        case "true", "True", "TRUE": return true
        case "false", "False", "FALSE": return false
        default: throw ConfigError(line: line, message: "'\(key)' is true or false, not '\(TerminalText.escaped(text))'")
        }
    }
}

extension YAMLNode {
    /// `a value`, `a list`, `a mapping`: for messages.
    package var kindWords: String {
        switch value {
        case .scalar: "a value"
        case .sequence: "a list"
        case .mapping: "a mapping"
        }
    }

    /// The root or a list item as a mapping (`what` names it in messages).
    package func mapping(_ what: String) throws(ConfigError) -> [YAMLEntry] {
        if isNull { return [] }
        guard case .mapping(let entries) = value else { throw ConfigError(line: line, message: "\(what) must be a mapping, not \(kindWords)") }
        return entries
    }

    /// A list item as a value.
    package func string(_ what: String) throws(ConfigError) -> String {
        if isNull { return "" }
        guard case .scalar(let text, _) = value else { throw ConfigError(line: line, message: "\(what) must be a value, not \(kindWords)") }
        return text
    }
}
