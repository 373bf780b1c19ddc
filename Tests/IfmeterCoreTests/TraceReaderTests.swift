import IfmeterCore
import Testing

@Suite struct TraceReaderTests {
    func error(_ text: String) -> TraceError? {
        do {
            _ = try readTrace(text)
            return nil
        } catch let error as TraceError {
            return error
        } catch {
            return nil
        }
    }

    let good = #"{"t": 1, "interfaces": [{"name": "eth0", "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#

    @Test func readsHeaderSamplesEventsAndSkipsBlankLines() throws {
        let text = """
            {"trace": "ifmeter/1", "platform": "darwin", "source": "getifaddrs", "future_key": [1, 2]}

            \(good)
            {"t": 2, "event": "deleted", "interface": {"name": "eth0", "index": 4, "rx_bytes": 18446744073709551615, "tx_bytes": 0, "rx_packets": 0, "tx_packets": 0}}
            """
        let (header, records) = try readTrace(text)
        #expect(header.platform == .darwin)
        #expect(header.source == "getifaddrs")
        #expect(records.count == 2)
        guard case .deleted(let event) = records[1] else {
            Issue.record("expected an event")
            return
        }
        #expect(event.interface.counters.rxBytes == UInt64.max)
        #expect(event.interface.index == 4)
    }

    @Test func unknownKeysAreIgnored() throws {
        let text =
            #"{"t": 1, "new": {"x": 1}, "interfaces": [{"name": "a", "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4, "rx_multicast": 9, "vendor": "x"}]}"#
        let (_, records) = try readTrace(text)
        #expect(records.count == 1)
    }

    @Test(
        arguments: [
            ("{not json", 1, "not valid JSON"),
            (#"{"t": 1, "interfaces": [{"name": "a", "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3}]}"#, 1, "lacks required counter \"tx_packets\""),
            (
                #"{"t": 1, "interfaces": [{"name": "a", "rx_bytes": -1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#, 1,
                "must be an unsigned integer"
            ),
            (
                #"{"t": 1, "interfaces": [{"name": "a", "rx_bytes": 1.5, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#, 1,
                "must be an unsigned integer"
            ),
            (
                #"{"t": 1, "interfaces": [{"name": "a", "rx_bytes": "1", "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#, 1,
                "must be an unsigned integer"
            ),
            (
                #"{"t": 1, "interfaces": [{"name": "a", "rx_bytes": 18446744073709551616, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#, 1,
                "up to 2^64-1"
            ),
            (#"{"t": 1, "interfaces": [{"rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#, 1, "lacks a \"name\""),
            (#"{"interfaces": []}"#, 1, "missing required key \"t\""),
            (#"{"t": "x", "interfaces": []}"#, 1, "\"t\" must be a number"),
            (#"{"t": 1}"#, 1, "needs \"interfaces\""),
            (
                #"{"t": 1, "interfaces": [{"name": "a", "kind": "modem", "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#, 1,
                "\"kind\" must be one of"
            ),
            (
                #"{"t": 1, "interfaces": [{"name": "a", "width": 16, "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#, 1,
                "\"width\" must be 32 or 64"
            ),
            (
                #"{"t": 1, "interfaces": [{"name": "a", "width": 32, "rx_bytes": 4294967296, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#, 1,
                "too large for a 32-bit counter"
            ),
            (
                #"{"t": 1, "event": "deleted", "interface": {"name": "a", "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4, "lower_bound": "rx_bytes"}}"#,
                1, "\"lower_bound\" must be an array"
            ),
            (
                #"{"t": 1, "interfaces": [{"name": "a", "netns": 7, "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}]}"#, 1,
                "\"netns\" must be a string"
            ),
            (#"[1, 2]"#, 1, "expected a JSON object"),
        ] as [(String, Int, String)])
    func malformedLinesNameTheirProblem(line: String, number: Int, fragment: String) throws {
        let failure = try #require(error(line))
        #expect(failure.line == number)
        #expect(failure.message.contains(fragment), "\(failure.message)")
    }

    @Test func lineNumbersCountBlankLinesAndTheHeader() throws {
        let text = """
            {"trace": "ifmeter/1"}
            \(good)

            {"t": 2, "interfaces": [{"name": "eth0", "rx_bytes": 1}]}
            """
        let failure = try #require(error(text))
        #expect(failure.line == 4)
        #expect(failure.description.hasPrefix("line 4: "))
    }

    @Test func timeMustNotGoBackwards() throws {
        let text = good.replacingOccurrences(of: "\"t\": 1", with: "\"t\": 5") + "\n" + good
        let failure = try #require(error(text))
        #expect(failure.line == 2)
        #expect(failure.message.contains("non-decreasing"))
    }

    @Test func headerOnlyFirstAndOnlyVersionOne() throws {
        #expect(error(good + "\n" + #"{"trace": "ifmeter/1"}"#)?.message.contains("only be the first line") == true)
        #expect(error(#"{"trace": "ifmeter/2"}"#)?.message.contains("unsupported trace version") == true)
        #expect(error(#"{"trace": "ifmeter/1", "platform": "windows"}"#)?.message.contains("\"platform\"") == true)
    }

    @Test func duplicateNamesInOneSample() throws {
        let one = #"{"name": "a", "rx_bytes": 1, "tx_bytes": 2, "rx_packets": 3, "tx_packets": 4}"#
        let failure = try #require(error(#"{"t": 1, "interfaces": ["# + one + "," + one + "]}"))
        #expect(failure.message.contains("appears twice"))
    }

    @Test func writerOutputReadsBackTheSame() throws {
        let sample = Sample(
            time: 12.5,
            interfaces: [
                InterfaceSample(
                    name: "wlp2s0", index: 3, classification: Classification(kind: .wifi, evidence: "sysfs:phy80211"),
                    width: .bits32, speedBps: 1_000_000_000,
                    counters: Counters(rxBytes: 1200, txBytes: 800, rxPackets: 10, txPackets: 7, rxErrors: 1))
            ])
        let event = DeletionEvent(
            time: 13.1,
            interface: InterfaceSample(
                name: "tun0", index: 7, counters: Counters(rxBytes: .max, txBytes: 4000, rxPackets: 40, txPackets: 30)))
        let text = [
            TraceWriter.headerLine(TraceHeader(platform: .linux, source: "netlink", host: "h")),
            TraceWriter.line(.sample(sample)), TraceWriter.line(.deleted(event)),
        ].joined(separator: "\n")
        let (header, records) = try readTrace(text)
        #expect(header.source == "netlink" && header.host == "h")
        #expect(records == [.sample(sample), .deleted(event)])
    }
}
