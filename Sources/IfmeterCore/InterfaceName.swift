/// Interface names as the kernel gives them: bytes, usually UTF-8.
public enum InterfaceName {
    /// The name as text. Valid UTF-8 is the name's own characters, exactly
    /// (a backslash stays one backslash, in JSON too). A byte that does not
    /// decode becomes `:xNN` (its value in hex after a colon), and that
    /// form cannot collide with a real name: Linux refuses a colon in an
    /// interface name (`dev_valid_name`), so `a:xff` is byte 0xFF after
    /// `a`, and the five-character name `a\xff` stays itself.
    public static func decode(_ bytes: some Collection<UInt8>) -> String {
        if let text = String(validating: bytes, as: UTF8.self) { return text }
        var out = ""
        var pending: [UInt8] = []
        func flush() {
            if !pending.isEmpty {
                out += String(decoding: pending, as: UTF8.self)
                pending.removeAll()
            }
        }
        let all = Array(bytes)
        var i = 0
        while i < all.count {
            // The length of a valid UTF-8 sequence starting here, or 0.
            let n = validSequence(all, at: i)
            if n == 0 {
                flush()
                out += ":x" + hex(all[i])
                i += 1
            } else {
                pending += all[i..<(i + n)]
                i += n
            }
        }
        flush()
        return out
    }

    private static func hex(_ byte: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(byte >> 4)], digits[Int(byte & 15)]])
    }

    private static func validSequence(_ b: [UInt8], at i: Int) -> Int {
        let lead = b[i]
        let count: Int
        switch lead {
        case 0x00...0x7F: return 1
        case 0xC2...0xDF: count = 2
        case 0xE0...0xEF: count = 3
        case 0xF0...0xF4: count = 4
        default: return 0
        }
        guard i + count <= b.count else { return 0 }
        return String(validating: b[i..<(i + count)], as: UTF8.self) == nil ? 0 : count
    }
}

extension InterfaceName {
    /// A NUL-terminated C name, decoded as `decode` does.
    public static func decode(cString: UnsafePointer<CChar>) -> String {
        var count = 0
        while cString[count] != 0 { count += 1 }
        return UnsafeRawPointer(cString).withMemoryRebound(to: UInt8.self, capacity: count) {
            decode(UnsafeBufferPointer(start: $0, count: count))
        }
    }
}
