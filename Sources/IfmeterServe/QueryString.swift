import IfmeterCore

/// A request's query string, read once for every endpoint, as sent: `+`
/// and percent escapes decoded as libmicrohttpd decodes them, but whole.
/// libmicrohttpd hands each value on as a C string, so a `%00` cut it
/// there (`interface=lo%00anything` asked for `lo`), and a key given twice
/// kept only its last value: both are refused here, with the key, instead
/// of answering a question that was not asked. Tested in process
/// (`QueryStringTests`).
package enum QueryString {
    /// The parameters of `raw` (what follows the `?`, undecoded), or what
    /// is wrong with it. A key without `=` has the empty value; empty
    /// pieces (`a=1&&b=2`) are skipped.
    package static func parse(_ raw: some Collection<UInt8>) -> Result<[String: String], HTTPError> {
        var parameters: [String: String] = [:]
        for piece in raw.split(separator: UInt8(ascii: "&"), omittingEmptySubsequences: true) {
            let equals = piece.firstIndex(of: UInt8(ascii: "="))
            let keyBytes = decoded(piece[..<(equals ?? piece.endIndex)])
            let valueBytes = equals.map { decoded(piece[piece.index(after: $0)...]) } ?? []
            let key = String(decoding: keyBytes, as: UTF8.self)
            guard !keyBytes.contains(0) else {
                return .failure(HTTPError("a parameter's name '\(ServeRoutes.shown(key))' holds %00 (a NUL byte); leave it out"))
            }
            guard !valueBytes.contains(0) else {
                return .failure(
                    HTTPError(
                        "invalid \(ServeRoutes.shown(key)): its value holds %00 (a NUL byte), which no value here holds; leave it out"))
            }
            guard parameters[key] == nil else {
                return .failure(HTTPError("'\(ServeRoutes.shown(key))' is given twice; give each parameter once"))
            }
            parameters[key] = String(decoding: valueBytes, as: UTF8.self)
        }
        return .success(parameters)
    }

    /// `parameters` as a query string, keys in order, every byte but
    /// letters, digits and `-._~` percent-escaped: what `parse` reads back
    /// (a usage document's `next` URL).
    package static func encode(_ parameters: [String: String]) -> String {
        func escaped(_ text: String) -> String {
            var out = ""
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                    out.append(Character(UnicodeScalar(byte)))
                default:
                    let hex = String(byte, radix: 16, uppercase: true)
                    out += "%" + (hex.count == 1 ? "0" : "") + hex
                }
            }
            return out
        }
        return parameters.keys.sorted().map { escaped($0) + "=" + escaped(parameters[$0] ?? "") }.joined(separator: "&")
    }

    /// `+` as a space and `%XX` as its byte; a `%` without two hex digits
    /// after it stays as it is (libmicrohttpd's reading).
    static func decoded(_ bytes: some Collection<UInt8>) -> [UInt8] {
        let bytes = Array(bytes)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        while i < bytes.count {
            let b = bytes[i]
            if b == UInt8(ascii: "+") {
                out.append(UInt8(ascii: " "))
            } else if b == UInt8(ascii: "%"), i + 2 < bytes.count, let high = hex(bytes[i + 1]), let low = hex(bytes[i + 2]) {
                out.append(high << 4 | low)
                i += 3
                continue
            } else {
                out.append(b)
            }
            i += 1
        }
        return out
    }

    private static func hex(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): b - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
