/// A JSON value. Numbers keep their text, so that 64-bit counters up to
/// 2^64-1 survive exactly (a Double would round them).
public enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case number(String)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    public subscript(key: String) -> JSONValue? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public var stringValue: String? {
        if case .string(let s) = self { return s }
        return nil
    }

    public var doubleValue: Double? {
        if case .number(let text) = self { return Double(text) }
        return nil
    }

    /// The number as an unsigned 64-bit integer, when its text is a plain
    /// non-negative integer that fits.
    public var uint64Value: UInt64? {
        if case .number(let text) = self, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) { return UInt64(text) }
        return nil
    }

    public static func number<T: BinaryInteger>(_ value: T) -> JSONValue { .number(String(value)) }

    /// A double as JSON text: the shortest text that reads back the same;
    /// `null` for infinities and NaN, which JSON cannot hold.
    public static func number(_ value: Double) -> JSONValue {
        value.isFinite ? .number(value.description) : .null
    }
}

/// Where a JSON text went wrong.
public struct JSONError: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String
    /// Byte offset in the text, from 0.
    public var offset: Int
    public var description: String { "\(message) at byte \(offset + 1)" }
}

/// A strict RFC 8259 parser.
public struct JSONParser {
    private let bytes: [UInt8]
    private var i = 0
    private var depth = 0
    private static let maxDepth = 128

    private init(_ bytes: [UInt8]) { self.bytes = bytes }

    public static func parse(_ text: String) throws(JSONError) -> JSONValue {
        try parse(Array(text.utf8))
    }

    public static func parse(_ bytes: [UInt8]) throws(JSONError) -> JSONValue {
        var parser = JSONParser(bytes)
        parser.skipSpace()
        let value = try parser.value()
        parser.skipSpace()
        if parser.i != bytes.count { throw parser.error("unexpected text after the JSON value") }
        return value
    }

    private func error(_ message: String) -> JSONError { JSONError(message: message, offset: i) }

    private mutating func skipSpace() {
        while i < bytes.count, bytes[i] == 0x20 || bytes[i] == 0x0A || bytes[i] == 0x0D || bytes[i] == 0x09 { i += 1 }
    }

    private mutating func value() throws(JSONError) -> JSONValue {
        guard i < bytes.count else { throw error("unexpected end of JSON") }
        switch bytes[i] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): try literal("true"); return .bool(true)
        case UInt8(ascii: "f"): try literal("false"); return .bool(false)
        case UInt8(ascii: "n"): try literal("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw error("unexpected character '\(Self.show(bytes[i]))'")
        }
    }

    private static func show(_ byte: UInt8) -> String {
        byte >= 0x20 && byte < 0x7F ? String(UnicodeScalar(byte)) : "\\x" + String(byte, radix: 16)
    }

    private mutating func literal(_ word: String) throws(JSONError) {
        let expected = Array(word.utf8)
        guard i + expected.count <= bytes.count, Array(bytes[i..<(i + expected.count)]) == expected else {
            throw error("invalid literal")
        }
        i += expected.count
    }

    private mutating func enter() throws(JSONError) {
        depth += 1
        if depth > Self.maxDepth { throw error("JSON nested deeper than \(Self.maxDepth) levels") }
    }

    private mutating func object() throws(JSONError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        i += 1
        var members: [String: JSONValue] = [:]
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
        while true {
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw error("expected a quoted key") }
            let key = try string()
            skipSpace()
            guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw error("expected ':' after a key") }
            i += 1
            skipSpace()
            members[key] = try value()
            skipSpace()
            guard i < bytes.count else { throw error("unexpected end of JSON in an object") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
            throw error("expected ',' or '}' in an object")
        }
    }

    private mutating func array() throws(JSONError) -> JSONValue {
        try enter()
        defer { depth -= 1 }
        i += 1
        var elements: [JSONValue] = []
        skipSpace()
        if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(elements) }
        while true {
            skipSpace()
            elements.append(try value())
            skipSpace()
            guard i < bytes.count else { throw error("unexpected end of JSON in an array") }
            if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
            if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(elements) }
            throw error("expected ',' or ']' in an array")
        }
    }

    private mutating func number() throws(JSONError) -> JSONValue {
        let start = i
        if bytes[i] == UInt8(ascii: "-") { i += 1 }
        guard i < bytes.count, isDigit(bytes[i]) else { throw error("invalid number") }
        if bytes[i] == UInt8(ascii: "0") {
            i += 1
        } else {
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: ".") {
            i += 1
            guard i < bytes.count, isDigit(bytes[i]) else { throw error("invalid number: digits expected after '.'") }
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        if i < bytes.count, bytes[i] == UInt8(ascii: "e") || bytes[i] == UInt8(ascii: "E") {
            i += 1
            if i < bytes.count, bytes[i] == UInt8(ascii: "+") || bytes[i] == UInt8(ascii: "-") { i += 1 }
            guard i < bytes.count, isDigit(bytes[i]) else { throw error("invalid number: digits expected in the exponent") }
            while i < bytes.count, isDigit(bytes[i]) { i += 1 }
        }
        return .number(String(decoding: bytes[start..<i], as: UTF8.self))
    }

    private func isDigit(_ b: UInt8) -> Bool { b >= 0x30 && b <= 0x39 }

    private mutating func hex4() throws(JSONError) -> UInt32 {
        guard i + 4 <= bytes.count else { throw error("unexpected end of JSON in a \\u escape") }
        var v: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[i]
            let d: UInt32
            switch b {
            case 0x30...0x39: d = UInt32(b - 0x30)
            case 0x41...0x46: d = UInt32(b - 0x41 + 10)
            case 0x61...0x66: d = UInt32(b - 0x61 + 10)
            default: throw error("invalid \\u escape")
            }
            v = v << 4 | d
            i += 1
        }
        return v
    }

    private mutating func string() throws(JSONError) -> String {
        i += 1
        let start = i
        // Fast path: no escapes.
        while i < bytes.count, bytes[i] != UInt8(ascii: "\""), bytes[i] != UInt8(ascii: "\\"), bytes[i] >= 0x20 { i += 1 }
        if i < bytes.count, bytes[i] == UInt8(ascii: "\"") {
            let s = try validated(bytes[start..<i])
            i += 1
            return s
        }
        var out = Array(bytes[start..<i])
        while true {
            guard i < bytes.count else { throw error("unterminated string") }
            let b = bytes[i]
            if b == UInt8(ascii: "\"") { i += 1; break }
            if b < 0x20 { throw error("control character in a string") }
            if b != UInt8(ascii: "\\") { out.append(b); i += 1; continue }
            i += 1
            guard i < bytes.count else { throw error("unterminated escape") }
            let e = bytes[i]
            i += 1
            switch e {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if scalar >= 0xD800 && scalar < 0xDC00 {
                    guard i + 6 <= bytes.count, bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u") else {
                        throw error("unpaired surrogate in a \\u escape")
                    }
                    i += 2
                    let low = try hex4()
                    guard low >= 0xDC00 && low < 0xE000 else { throw error("unpaired surrogate in a \\u escape") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if scalar >= 0xDC00 && scalar < 0xE000 {
                    throw error("unpaired surrogate in a \\u escape")
                }
                out.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
            default: throw error("invalid escape '\\\(Self.show(e))'")
            }
        }
        return try validated(out[...])
    }

    private func validated(_ slice: ArraySlice<UInt8>) throws(JSONError) -> String {
        guard let s = String(validating: slice, as: UTF8.self) else { throw error("invalid UTF-8 in a string") }
        return s
    }
}

/// Writes JSON with sorted keys, so the same value always gives the same text.
public struct JSONWriter {
    /// Spaces per level; 0 writes one compact line.
    public var indent: Int

    public init(indent: Int = 0) { self.indent = indent }

    public func string(_ value: JSONValue) -> String { string(value, level: 0) }

    /// The value as it is written `level` deep in a document (its inner
    /// lines indented for that depth; the first line is not).
    public func string(_ value: JSONValue, level: Int) -> String {
        var out = ""
        out.reserveCapacity(256)
        write(value, into: &out, level: level)
        return out
    }

    private func newline(_ out: inout String, _ level: Int) {
        guard indent > 0 else { return }
        out.append("\n")
        out.append(String(repeating: " ", count: indent * level))
    }

    private func write(_ value: JSONValue, into out: inout String, level: Int) {
        switch value {
        case .null: out.append("null")
        case .bool(let b): out.append(b ? "true" : "false")
        case .number(let text): out.append(text)
        case .string(let s): Self.quote(s, into: &out)
        case .array(let elements):
            if elements.isEmpty { out.append("[]"); return }
            out.append("[")
            for (n, element) in elements.enumerated() {
                if n > 0 { out.append(",") }
                newline(&out, level + 1)
                write(element, into: &out, level: level + 1)
            }
            newline(&out, level)
            out.append("]")
        case .object(let members):
            if members.isEmpty { out.append("{}"); return }
            out.append("{")
            for (n, key) in members.keys.sorted().enumerated() {
                if n > 0 { out.append(",") }
                newline(&out, level + 1)
                Self.quote(key, into: &out)
                out.append(indent > 0 ? ": " : ":")
                write(members[key]!, into: &out, level: level + 1)
            }
            newline(&out, level)
            out.append("}")
        }
    }

    /// A JSON string literal for `s`.
    public static func quote(_ s: String, into out: inout String) {
        out.append("\"")
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out.append("\\\"")
            case "\\": out.append("\\\\")
            case "\n": out.append("\\n")
            case "\r": out.append("\\r")
            case "\t": out.append("\\t")
            default:
                // Control characters must be escaped; DEL, C1 controls and
                // the invisible reordering marks are too, so that JSON shown
                // on a terminal is safe (the value is the same).
                if scalar.value < 0x20 || (scalar.value >= 0x7F && TerminalText.isUnsafe(scalar)) {
                    let hex = String(scalar.value, radix: 16)
                    out.append("\\u" + String(repeating: "0", count: 4 - hex.count) + hex)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out.append("\"")
    }
}
