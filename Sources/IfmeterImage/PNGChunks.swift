import CZlib

/// A PNG's chunks, read and written: enough to put the figures a picture
/// shows into it as `tEXt` (key, NUL, Latin-1 text), before `IEND`, with
/// zlib's CRC-32 over each chunk's type and data.
package enum PNGChunks {
    package static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    package struct Chunk: Sendable, Hashable {
        package var type: String
        package var data: [UInt8]
        /// The CRC the file holds for the chunk.
        package var crc: UInt32
    }

    package enum Failure: Error, Sendable, Hashable, CustomStringConvertible {
        case notPNG
        case truncated(at: Int)
        case noEnd

        package var description: String {
            switch self {
            case .notPNG: "not a PNG: its first eight bytes are not the PNG signature"
            case .truncated(let at): "the PNG ends inside a chunk at byte \(at)"
            case .noEnd: "the PNG has no IEND chunk"
            }
        }
    }

    /// zlib's CRC-32 of `bytes`, continuing `crc`.
    package static func crc32(_ bytes: [UInt8], continuing crc: UInt32 = 0) -> UInt32 {
        bytes.withUnsafeBufferPointer { UInt32(CZlib.crc32(UInt(crc), $0.baseAddress, UInt32($0.count))) }
    }

    /// The chunks of a PNG in order, with the offset each starts at.
    package static func read(_ png: [UInt8]) throws(Failure) -> [(offset: Int, chunk: Chunk)] {
        guard png.count >= 8, Array(png[0..<8]) == signature else { throw .notPNG }
        var chunks: [(offset: Int, chunk: Chunk)] = []
        var at = 8
        func word(_ i: Int) -> UInt32 { png[i..<i + 4].reduce(0) { $0 << 8 | UInt32($1) } }
        while at < png.count {
            guard png.count - at >= 12 else { throw .truncated(at: at) }
            let length = Int(word(at))
            guard length <= png.count - at - 12 else { throw .truncated(at: at) }
            let type = String(decoding: png[at + 4..<at + 8], as: UTF8.self)
            let data = Array(png[at + 8..<at + 8 + length])
            chunks.append((at, Chunk(type: type, data: data, crc: word(at + 8 + length))))
            at += 12 + length
            if type == "IEND" { break }
        }
        guard chunks.last?.chunk.type == "IEND" else { throw .noEnd }
        return chunks
    }

    /// A chunk as bytes: length, type, data, CRC over type and data.
    package static func encode(type: String, data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        let length = UInt32(data.count), crc = crc32(body)
        func be(_ v: UInt32) -> [UInt8] { [UInt8(v >> 24), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
        return be(length) + body + be(crc)
    }

    /// `png` with a `tEXt` chunk of `key` and `text` before its `IEND`.
    /// Text outside printable ASCII is written `\uXXXX` (JSON's escape),
    /// so the Latin-1 chunk carries any name and stays valid JSON.
    package static func inserting(text: String, key: String, into png: [UInt8]) throws(Failure) -> [UInt8] {
        let chunks = try read(png)
        guard let end = chunks.last, end.chunk.type == "IEND" else { throw .noEnd }
        var ascii = ""
        for unit in text.utf16 {
            if unit >= 0x20, unit < 0x7F {
                ascii.unicodeScalars.append(Unicode.Scalar(UInt8(unit)))
            } else {
                let hex = String(unit, radix: 16)
                ascii += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            }
        }
        let chunk = encode(type: "tEXt", data: Array(key.utf8) + [0] + Array(ascii.utf8))
        return Array(png[..<end.offset]) + chunk + Array(png[end.offset...])
    }

    /// The text of the first `tEXt` chunk with `key`.
    package static func text(_ key: String, in png: [UInt8]) throws(Failure) -> String? {
        for (_, c) in try read(png) where c.type == "tEXt" {
            guard let nul = c.data.firstIndex(of: 0), Array(c.data[..<nul]) == Array(key.utf8) else { continue }
            return String(decoding: c.data[(nul + 1)...], as: UTF8.self)
        }
        return nil
    }
}
