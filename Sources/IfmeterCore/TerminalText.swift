/// Text that is safe to write to a terminal.
///
/// Interface and namespace names come from the kernel and from trace files:
/// `$'\x1b]0;PWNED\x07'` is a valid interface name, and written raw it
/// retitles the window, clears the screen or worse. Every text output writes
/// names through `escaped`: C0 and C1 control characters and DEL become
/// `\x1b`-style escapes, and the invisible characters that reorder or hide
/// text (bidirectional overrides and isolates, zero-width marks) become
/// `\u{202e}`-style escapes. JSON needs none of this: its writer escapes
/// control characters itself, and a name in JSON is the exact name.
public enum TerminalText {
    /// The text with every unsafe character escaped; `keeping` lists
    /// characters left as they are (a newline, in whole outputs).
    public static func escaped(_ text: String, keeping kept: Unicode.Scalar? = nil) -> String {
        guard mayNeedEscaping(text, keeping: kept) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            if scalar == kept || !isUnsafe(scalar) {
                out.unicodeScalars.append(scalar)
            } else if scalar.value < 0x80 {
                out += "\\x" + hex(scalar.value, digits: 2)
            } else {
                out += "\\u{" + hex(scalar.value, digits: scalar.value < 0x100 ? 2 : 4) + "}"
            }
        }
        return out
    }

    /// False when nothing in the text would be escaped: one pass over its
    /// UTF-8 bytes, so clean text (nearly all of it) costs no copy.
    public static func mayNeedEscaping(_ text: String, keeping kept: Unicode.Scalar? = nil) -> Bool {
        let keptByte = kept.flatMap { $0.isASCII ? UInt8($0.value) : nil }
        var previous: UInt8 = 0, beforePrevious: UInt8 = 0
        for byte in text.utf8 {
            if byte < 0x20 || byte == 0x7F {
                if byte != keptByte { return true }
            } else if previous == 0xC2, (0x80...0x9F).contains(byte) {
                return true // a C1 control
            } else if beforePrevious == 0xE2, previous == 0x80 || previous == 0x81 {
                // U+2000...U+207F: the invisible ones are checked exactly.
                let scalar = 0x2000 + UInt32(previous & 0x3F) << 6 + UInt32(byte & 0x3F)
                if isInvisible(scalar) { return true }
            } else if previous == 0xEF, byte == 0xBB {
                return true // perhaps U+FEFF: `escaped` looks exactly
            }
            beforePrevious = previous
            previous = byte
        }
        return false
    }

    static func isUnsafe(_ scalar: Unicode.Scalar) -> Bool {
        let v = scalar.value
        return v < 0x20 || v == 0x7F || (0x80...0x9F).contains(v) || isInvisible(v) || v == 0xFEFF
    }

    /// Zero-width characters and the bidirectional controls.
    static func isInvisible(_ v: UInt32) -> Bool {
        (0x200B...0x200F).contains(v) || (0x2028...0x202E).contains(v) || (0x2060...0x2069).contains(v)
    }

    private static func hex(_ value: UInt32, digits: Int) -> String {
        let s = String(value, radix: 16)
        return String(repeating: "0", count: max(0, digits - s.count)) + s
    }
}

extension SeriesKey {
    /// `NAME` or `NS/NAME`, safe for a terminal (see `TerminalText`).
    public var display: String { TerminalText.escaped(description) }
}

/// Text for a terminal whose locale is not UTF-8 (`LANG=C`): every
/// character ifmeter draws outside ASCII has an ASCII stand-in. `≥` becomes
/// `>=`, taking a space of padding before it when there are two (so a
/// right-aligned column keeps its width); `~` stays; bars become `#` (high)
/// and `-` (low), `·` a `-` between words and `.` in a bar. Other text
/// outside ASCII (a name from the kernel) is left as it is.
public enum ASCIIText {
    public static func folded(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { !$0.isASCII }) else { return text }
        var out = String.UnicodeScalarView()
        let scalars = Array(text.unicodeScalars)
        for (i, scalar) in scalars.enumerated() {
            let before = i > 0 ? scalars[i - 1] : " ", after = i + 1 < scalars.count ? scalars[i + 1] : " "
            func put(_ s: String) { out.append(contentsOf: s.unicodeScalars) }
            switch scalar {
            case "≥":
                let count = out.count
                if count >= 2, out[out.index(out.endIndex, offsetBy: -1)] == " ", out[out.index(out.endIndex, offsetBy: -2)] == " " {
                    out.removeLast()
                }
                put(">=")
            case "≤": put("<=")
            case "≈": put("~")
            case "·": put(before == " " && after == " " ? "-" : ".")
            case "▁", "▂", "▃", "▄": put("-")
            case "▅", "▆", "▇", "█": put("#")
            case "░": put(".")
            case "▏", "│": put("|")
            case "┤": put("+")
            case "─", "—", "–": put("-")
            case "›": put(">")
            case "↓": put("v")
            case "↑": put("^")
            case "→": put("->")
            case "←": put("<-")
            case "…": put("...")
            case "±": put("+/-")
            case "×": put("x")
            case "∞": put("inf")
            case "§": put("S")
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
