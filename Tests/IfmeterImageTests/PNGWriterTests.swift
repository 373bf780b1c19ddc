import CZlib
import IfmeterCore
@testable import IfmeterImage
import IfmeterOutput
import Testing

/// The PNG writer in process: each picture decoded here with zlib, apart
/// from the writer's own reader: the signature, IHDR's size, every chunk's
/// CRC, the IDAT stream inflated to exactly the rows the size needs, and
/// the figures of the tEXt chunk equal to the table's.
@Suite struct PNGWriterTests {
    struct Decoded {
        var width: Int
        var height: Int
        var colorType: UInt8
        var bitDepth: UInt8
        var inflated: Int
        var types: [String]
        var texts: [String: String]
    }

    enum DecodeError: Error { case bad(String) }

    /// A PNG decoded by hand: the CRC of every chunk recomputed with
    /// zlib's crc32, the IDAT chunks' zlib stream inflated.
    static func decode(_ png: [UInt8]) throws -> Decoded {
        guard png.count > 8, Array(png[0..<8]) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] else {
            throw DecodeError.bad("signature")
        }
        func word(_ i: Int) -> Int { png[i..<i + 4].reduce(0) { $0 << 8 | Int($1) } }
        var at = 8
        var types: [String] = [], texts: [String: String] = [:], idat: [UInt8] = []
        var width = 0, height = 0, colorType: UInt8 = 0, bitDepth: UInt8 = 0
        while at + 12 <= png.count {
            let length = word(at)
            guard at + 12 + length <= png.count else { throw DecodeError.bad("chunk past the end at \(at)") }
            let body = Array(png[at + 4..<at + 8 + length])
            let crc = body.withUnsafeBufferPointer { Int(crc32(0, $0.baseAddress, UInt32($0.count))) }
            let type = String(decoding: body[0..<4], as: UTF8.self)
            guard crc == word(at + 8 + length) else { throw DecodeError.bad("CRC of \(type) at \(at)") }
            let data = Array(body[4...])
            types.append(type)
            switch type {
            case "IHDR":
                width = data[0..<4].reduce(0) { $0 << 8 | Int($1) }
                height = data[4..<8].reduce(0) { $0 << 8 | Int($1) }
                bitDepth = data[8]
                colorType = data[9]
            case "IDAT": idat += data
            case "tEXt":
                let nul = try #require(data.firstIndex(of: 0))
                texts[String(decoding: data[..<nul], as: UTF8.self)] = String(decoding: data[(nul + 1)...], as: UTF8.self)
            default: break
            }
            at += 12 + length
        }
        guard at == png.count else { throw DecodeError.bad("bytes after the last chunk") }
        return Decoded(
            width: width, height: height, colorType: colorType, bitDepth: bitDepth, inflated: try inflate(idat), types: types, texts: texts)
    }

    /// How many bytes a zlib stream inflates to.
    static func inflate(_ input: [UInt8]) throws -> Int {
        var stream = z_stream()
        var source = input
        guard inflateInit_(&stream, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw DecodeError.bad("inflateInit") }
        defer { inflateEnd(&stream) }
        var total = 0
        var out = [UInt8](repeating: 0, count: 65536)
        let status: Int32 = source.withUnsafeMutableBufferPointer { src in
            stream.next_in = src.baseAddress
            stream.avail_in = UInt32(src.count)
            var status = Z_OK
            while status == Z_OK {
                status = out.withUnsafeMutableBufferPointer { dst in
                    stream.next_out = dst.baseAddress
                    stream.avail_out = UInt32(dst.count)
                    let s = CZlib.inflate(&stream, Z_NO_FLUSH)
                    total += dst.count - Int(stream.avail_out)
                    return s
                }
            }
            return status
        }
        guard status == Z_STREAM_END else { throw DecodeError.bad("inflate: \(status)") }
        return total
    }

    static func check(_ png: [UInt8], width: Int) throws -> (Decoded, JSONValue) {
        let d = try decode(png)
        #expect(d.types.first == "IHDR" && d.types.last == "IEND" && d.types.contains("IDAT"), "\(d.types)")
        #expect(d.types.lastIndex(of: "tEXt").map { $0 == d.types.count - 2 } == true, "the figures just before IEND: \(d.types)")
        #expect(d.width == width)
        #expect(d.bitDepth == 8 && d.colorType == 2, "8-bit RGB")
        // Every row: a filter byte and three bytes a pixel.
        #expect(d.inflated == d.height * (1 + 3 * d.width))
        let text = try #require(d.texts[UsagePNG.figuresKey])
        #expect(text.utf8.allSatisfy { $0 >= 0x20 && $0 < 0x7F }, "printable ASCII in a Latin-1 chunk")
        return (d, try JSONParser.parse(text))
    }

    static let noon: Int64 = 1_796_212_800 // 2026-12-02T12:00:00Z
    static func slice(_ name: String, hoursAgo: Int64, rx: UInt64, tx: UInt64, quality: Quality = .exact) -> UsageSlice {
        UsageSlice(
            name: name, kind: .ethernet, start: (noon / 3600 - hoursAgo) * 3600, seconds: 3600,
            counters: Counters(rxBytes: rx, txBytes: tx, rxPackets: 1, txPackets: 1), quality: quality)
    }

    static let slices = [
        slice("eth0", hoursAgo: 50, rx: 5_000_000, tx: 1_000_000),
        slice("eth0", hoursAgo: 3, rx: 2_000_000, tx: 300_000, quality: .lowerBound),
        slice("eth0", hoursAgo: 0, rx: 700_000, tx: 90_000),
        // Noncharacters, which cairo's UTF-8 check refuses (a Swift
        // literal cannot hold some of them).
        slice(
            "wlan0\u{202e}é" + String(String.UnicodeScalarView([0xFFFE, 0xFDD0, 0x10FFFF].compactMap(Unicode.Scalar.init))), hoursAgo: 1, rx: 12_345,
            tx: 678),
    ]

    @Test(arguments: [UsagePeriodKind.hour, .day, .fiveMinutes, .month])
    func aChartsFiguresAreTheTablesBars(granularity: UsagePeriodKind) throws {
        let table = UsageTable(slices: Self.slices, plans: [], granularity: granularity, zone: .utc, now: Self.noon)
        let (d, figures) = try Self.check(try UsagePNG.chart(table), width: 720)
        #expect(d.height == 40 + 2 * 232 + 40, "a panel per interface")
        #expect(figures["kind"]?.stringValue == "chart" && figures["granularity"]?.stringValue == granularity.rawValue)
        guard case .array(let drawn)? = figures["interfaces"] else { throw DecodeError.bad("no interfaces") }
        #expect(drawn.count == table.interfaces.count)
        for (i, j) in zip(table.interfaces, drawn) {
            #expect(j["name"]?.stringValue == i.stored, "a name outside ASCII comes back whole through \\u escapes")
            guard case .array(let bars)? = j["periods"] else { throw DecodeError.bad("no periods") }
            let rows = i.rows.suffix(48)
            #expect(bars.count == rows.count)
            for (r, b) in zip(rows, bars) {
                #expect(b["period"]?.stringValue == r.period.label)
                #expect(b["rx_bytes"]?.uint64Value == r.counters.rxBytes && b["tx_bytes"]?.uint64Value == r.counters.txBytes)
                #expect(b["quality"]?.stringValue == r.quality.name)
            }
        }
        // The lower bound reaches the figures as such.
        if granularity == .hour || granularity == .day {
            #expect(JSONWriter().string(figures).contains("\"lower-bound\""))
        }
    }

    @Test func theSummaryIsVnstatisSizeAndCarriesRatesLimitsAndTheLastSave() throws {
        var plan = Plan(pattern: "eth0", cycleStartDay: 1, quotaBytes: 10_000_000, direction: .both)
        plan.limits = [PeriodLimit(period: .hour, bytes: 1_000_000), PeriodLimit(period: .day, bytes: 2_000_000)]
        let saved = Double(Self.noon - 600)
        let summary = UsageSummary(slices: Self.slices, plans: [plan], zone: .utc, now: Self.noon, savedAt: saved)
        let (d, figures) = try Self.check(try UsagePNG.summary(summary), width: 500)
        #expect(d.height == 28 + 2 * 200 + 34, "about 500 × 200 per interface")
        #expect(figures["as_of"]?.stringValue == LocalZone.utc.rfc3339(Self.noon - 600), "as of the last save, not the drawing")
        guard case .array(let list)? = figures["interfaces"], let eth = list.first(where: { $0["name"]?.stringValue == "eth0" }),
            case .array(let shown)? = eth["figures"], case .array(let hours)? = eth["hours"]
        else { throw DecodeError.bad("no eth0") }
        let byKey = Dictionary(uniqueKeysWithValues: shown.map { ($0["period"]?.stringValue ?? "?", $0) })
        // Today: the slices 3 and 0 hours ago (a lower bound among them).
        #expect(byKey["today"]?["rx_bytes"]?.uint64Value == 2_700_000 && byKey["today"]?["tx_bytes"]?.uint64Value == 390_000)
        #expect(byKey["today"]?["quality"]?.stringValue == "lower-bound")
        #expect(byKey["today"]?["limit"]?.stringValue == "day" && byKey["today"]?["percent_used"]?.doubleValue == 154.5)
        // Today's average rate: its bytes over the 11 h 50 min to the save.
        #expect(byKey["today"]?["average_bits_per_second"]?.doubleValue == (3_090_000 * 8 / Double(12 * 3600 - 600)).rounded())
        #expect(byKey["cycle"]?["limit"]?.stringValue == "quota" && byKey["cycle"]?["percent_used"]?.doubleValue == 30.9)
        #expect(byKey["all"]?["rx_bytes"]?.uint64Value == 7_700_000 && byKey["all"]?["limit"] == nil)
        #expect(hours.count == 24 && hours.compactMap { $0["rx_bytes"]?.uint64Value }.reduce(0, +) == 2_700_000)
        #expect(eth["hour_limit_bytes"]?.uint64Value == 1_000_000)
        // The SVG of the same summary: the hour limit is within the scale,
        // so a line; today's share of the day limit is over 100%.
        let svg = UsageSummaryChart(summary: summary).svg()
        let limit = try #require(svg.split(separator: "<g class=\"limit\"", maxSplits: 1).dropFirst().first)
        #expect(limit.hasPrefix(" data-period=\"hour\" data-limit=\"1000000\"") && limit.contains("<line"), "\(limit.prefix(300))")
        #expect(!limit.contains("above-scale"))
        #expect(svg.contains("data-limit=\"2000000\" data-limit-kind=\"day\" data-limit-direction=\"both\" data-percent=\"154.5\""))
        #expect(svg.contains("data-limit=\"10000000\" data-limit-kind=\"quota\" data-limit-direction=\"both\" data-percent=\"30.9\""))
        #expect(svg.contains("data-as-of=\"\(LocalZone.utc.rfc3339(Self.noon - 600))\""))
        #expect(eth["peak_hour_bits_per_second"]?.doubleValue == (2_300_000 * 8 / 3600.0).rounded())
    }

    @Test func aSaveAheadOfTheClockOrNoneIsSaidSo() {
        let ahead = UsageSummary(slices: Self.slices, plans: [], zone: .utc, now: Self.noon, savedAt: Double(Self.noon + 3600))
        #expect(ahead.asOf == Self.noon && ahead.asOfWords.contains("ahead of this clock"), "\(ahead.asOfWords)")
        let never = UsageSummary(slices: Self.slices, plans: [], zone: .utc, now: Self.noon)
        #expect(never.asOf == Self.noon && never.asOfWords.hasPrefix("never saved"))
        let saved = UsageSummary(slices: Self.slices, plans: [], zone: .utc, now: Self.noon, savedAt: Double(Self.noon - 90) + 0.5)
        #expect(saved.asOfWords == "as of the last save, " + LocalZone.utc.rfc3339(Self.noon - 90))
    }

    @Test func aFailedCairoCallIsNamedWithCairosWords() {
        do {
            _ = try Cairo.png(width: 1 << 20, height: 10) { _ in }
            Issue.record("a surface a million pixels wide was made")
        } catch {
            #expect(error.call == "cairo_image_surface_create" && error.status.contains("invalid value"), "\(error)")
            #expect(error.description.hasPrefix("cairo_image_surface_create failed: "))
        }
    }

    @Test func emptyTablesStillDrawAPicture() throws {
        let table = UsageTable(slices: [], plans: [], granularity: .day, zone: .utc, now: Self.noon)
        let (d, figures) = try Self.check(try UsagePNG.chart(table), width: 720)
        #expect(d.height == 40 + 232 + 40)
        #expect(figures["interfaces"] == .array([]))
    }

    @Test func theChunkReaderRefusesWhatIsNotAWholePNG() throws {
        let png = try UsagePNG.chart(UsageTable(slices: Self.slices, plans: [], granularity: .day, zone: .utc, now: Self.noon))
        #expect(throws: PNGChunks.Failure.notPNG) { try PNGChunks.read(Array(png.dropFirst())) }
        #expect(throws: PNGChunks.Failure.self) { try PNGChunks.read(Array(png.dropLast(6))) }
        #expect(throws: PNGChunks.Failure.noEnd) { try PNGChunks.read(Array(png.prefix(8))) }
        #expect(try PNGChunks.text(UsagePNG.figuresKey, in: png)?.hasPrefix("{") == true)
        #expect(try PNGChunks.text("other", in: png) == nil)
        // The CRC of a known chunk: IEND's is fixed by the standard.
        #expect(PNGChunks.encode(type: "IEND", data: []) == [0, 0, 0, 0, 0x49, 0x45, 0x4E, 0x44, 0xAE, 0x42, 0x60, 0x82])
    }
}
