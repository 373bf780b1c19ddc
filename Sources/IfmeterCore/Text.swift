extension Substring {
    /// Without leading and trailing spaces and tabs (header values).
    public func trimmingSpaces() -> String {
        var s = self
        while s.first == " " || s.first == "\t" { s = s.dropFirst() }
        while s.last == " " || s.last == "\t" { s = s.dropLast() }
        return String(s)
    }
}

/// Bytes that should be UTF-8 (a config file, an argument): where they are
/// not, said instead of silently read as U+FFFD.
public enum UTF8Text {
    /// The first byte that is not UTF-8: its offset, its line and column
    /// (1-based, the column in characters) and its value; nil when every
    /// byte is.
    public static func firstInvalid(_ bytes: [UInt8]) -> (offset: Int, line: Int, column: Int, byte: UInt8)? {
        var parser = Unicode.UTF8.ForwardParser()
        var iterator = bytes.makeIterator()
        var line = 1, column = 1, offset = 0
        while true {
            switch parser.parseScalar(from: &iterator) {
            case .valid(let encoded):
                if encoded.count == 1, encoded.first == UInt8(ascii: "\n") {
                    line += 1
                    column = 1
                } else {
                    column += 1
                }
                offset += encoded.count
            case .error:
                return (offset, line, column, bytes[offset])
            case .emptyInput:
                return nil
            }
        }
    }
}
