import IfmeterCore
import IfmeterOutput
import IfmeterPipeline
import IfmeterRemoteWrite
import IfmeterServe
import IfmeterTestSupport
import Testing

/// Remote write takes the exposition's series as they are visited, typed,
/// never from text (issue 32): the series visited are those that parsing
/// the rendered text gives, and the bytes encoded from them are those the
/// text path encoded.
@Suite struct TypedSeriesTests {
    /// Visited series as parsing their text line gives them: `__name__`
    /// among the labels, sorted by name, the value a double.
    static func asParsed(_ series: [CollectedSeries]) -> [ExpositionSeries] {
        series.map { s in
            var labels = [ExpositionSeries.Label("__name__", s.name)] + s.labels.map { ExpositionSeries.Label($0.name, $0.value) }
            labels.sort { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
            return ExpositionSeries(labels: labels, value: s.value.double)
        }
    }

    static func expectSame(_ visited: [CollectedSeries], _ text: [UInt8], _ what: String) {
        let parsed = ExpositionSeries.parse(text), typed = asParsed(visited)
        #expect(typed.count == parsed.count, "\(what): \(typed.count) series visited, \(parsed.count) lines")
        for (t, p) in zip(typed, parsed) {
            // Bit for bit: -0.0, NaN and large whole numbers included.
            #expect(t.labels == p.labels && t.value.bitPattern == p.value.bitPattern, "\(what): \(t) against \(p)")
        }
    }

    @Test func theSeriesVisitedAreThoseOfTheTextForEveryFamily() {
        for families in ExpositionFamilies.allCases {
            let input = TypedSeriesFixture.input(families)
            var collector = SeriesCollector()
            input.visitSeries(&collector)
            #expect(collector.series.count > 50, "\(families)")
            Self.expectSame(collector.series, PrometheusTextRenderer().render(input), "\(families)")
            #expect(!collector.series.contains { $0.name.hasSuffix("_created") }, "the text format's series only")
        }
    }

    @Test func valuesKeepTheirTypeAndLabelsAreAsTheExpositionShowsThem() {
        var collector = SeriesCollector()
        TypedSeriesFixture.input(.ifmeterAndNode).visitSeries(&collector)
        let series = collector.series
        func first(_ name: String, _ label: (String, String)? = nil) -> CollectedSeries? {
            series.first { s in s.name == name && label.map { l in s.labels.contains(.init(l.0, l.1)) } ?? true }
        }
        #expect(first("ifmeter_receive_bytes_total", ("interface", "tun0"))?.value == .unsigned(36_893_488_146))
        #expect(first("ifmeter_plan_cycle_start_timestamp_seconds", ("interface", "tun0"))?.value == .signed(-5))
        #expect(first("ifmeter_last_sample_duration_seconds")?.value == .double(0.00125))
        #expect(first("node_network_speed_bytes")?.value == .signed(-125_000))
        // A control character is the text the outputs show; the format's
        // escapes are the text writer's alone.
        #expect(first("ifmeter_receive_bytes_total", ("interface", "we\"ird\\n\\x0ax")) != nil)
        #expect(first("ifmeter_receive_bytes_total", ("interface", "wlan\\x1b[31m")) != nil)
        #expect(first("ifmeter_interface_info", ("alias", "uplink \"main\"\\x0aline")) != nil)
    }

    /// A scrape cache fed by a pipeline: interfaces (one in another
    /// namespace, names that need escaping), plans, aliases, probes,
    /// receivers, the endpoint's and the process's figures.
    static func cache(_ families: ExpositionFamilies) -> (ScrapeCache, Pipeline) {
        let steps: [ScriptedSource.Step] = (1...6).map { t in
            // wlan goes at the third sample and is forgotten after.
            let without: Set<String> = t >= 3 ? ["wlan\u{1B}[31m"] : []
            return .reading(SourceReading(sample: Sample(time: Double(t), interfaces: TypedSeriesFixture.interfaces(UInt64(t), without: without))))
        }
        let pipeline = Pipeline(
            source: ScriptedSource(steps), configuration: PipelineConfiguration(interval: 1, seriesLifetime: 1),
            clock: PipelineClock(monotonic: { 0 }, wall: { 1_796_040_000.25 }))
        let cache = ScrapeCache(families: families, version: "9.9", revision: "abc\"1", interval: 1)
        pipeline.add(sink: ScrapeFeed(cache: cache, ready: {}))
        cache.setPlans(TypedSeriesFixture.plans)
        cache.setAliases(TypedSeriesFixture.aliases)
        cache.setRoutes(TypedSeriesFixture.routes)
        cache.setRemoteWrite(TypedSeriesFixture.remoteWrite)
        cache.setProcess(TypedSeriesFixture.process)
        cache.setHTTPClosed(TypedSeriesFixture.httpClosed)
        return (cache, pipeline)
    }

    static func text(_ cache: ScrapeCache) -> [UInt8] {
        var text: [UInt8] = []
        cache.renderText(chunk: 1024) { text.append(contentsOf: $0) }
        return text
    }

    @Test func aScrapeCacheVisitsTheSeriesOfItsText() {
        for families in ExpositionFamilies.allCases {
            let (cache, pipeline) = Self.cache(families)
            for step in 0..<3 {
                _ = pipeline.step()
                var collector = SeriesCollector()
                cache.visitSeries(&collector)
                Self.expectSame(collector.series, Self.text(cache), "\(families), sample \(step)")
            }
        }
    }

    /// The text path as it was: the cache's text, parsed, each series'
    /// labels given the external ones and sorted (`RemoteWriteTests.reference`,
    /// which the encoder's own test holds equal to encoding every line),
    /// stale markers for the series of the last push not in this one.
    @Test func encodingTypedSeriesGivesTheBytesTheTextPathGave() {
        let external = [("host", "gw1"), ("interface", "never replaces"), ("Zone", "a")]
        for families in [ExpositionFamilies.ifmeter, .ifmeterAndNode] {
            let (cache, pipeline) = Self.cache(families)
            let feed = RemoteWriteFeed(source: cache, writers: [], externalLabels: external)
            // The feed shows its (no) writers' status in the source.
            #expect(!String(decoding: Self.text(cache), as: UTF8.self).contains("ifmeter_remote_write_"))
            cache.setRemoteWrite(TypedSeriesFixture.remoteWrite)
            var previous = ""
            var ended = 0
            for push in 0..<6 {
                _ = pipeline.step()
                // Plans and probes end too: their series get stale markers.
                if push == 3 {
                    cache.setPlans([])
                    cache.setRoutes(nil)
                }
                let text = String(decoding: Self.text(cache), as: UTF8.self)
                let stamp = 1_796_040_000_000 + Int64(push) * 1000
                let got = feed.encode(timestampMs: stamp)
                let want = RemoteWriteTests.reference(text, previous: previous, external: external, timestampMs: stamp)
                #expect(got.1 == want.1 && got.0 == want.0, "\(families), push \(push): \(got.1) series against \(want.1)")
                ended += Int(want.1) - ExpositionSeries.parse(Array(text.utf8)).count
                previous = text
            }
            #expect(ended > 20, "\(families): \(ended) stale markers (wlan forgotten, the plans and probes gone)")
        }
    }

    @Test func relabelingTypedSeriesGivesWhatRelabelingTheirTextGives() throws {
        let rules = [
            try RelabelRule(action: .drop, sourceLabels: ["__name__"], regex: "ifmeter_interface_quality"),
            try RelabelRule(action: .labeldrop, regex: "kind"),
            try RelabelRule(sourceLabels: ["instance", "interface"], separator: "/", targetLabel: "link"),
        ]
        let external = [("job", "ifmeter"), ("instance", "gw1")]
        let (cache, pipeline) = Self.cache(.ifmeterAndNode)
        let feed = RemoteWriteFeed(source: cache, writers: [], externalLabels: external, relabel: rules)
        var fromText = SeriesEncoder(externalLabels: external, relabel: rules)
        for push in 0..<4 {
            _ = pipeline.step()
            let text = Self.text(cache)
            let got = feed.encode(timestampMs: Int64(push))
            let want = fromText.encode(text, timestampMs: Int64(push))
            #expect(got.1 == want.1 && got.0 == want.0, "push \(push): \(got.1) series against \(want.1)")
            #expect(got.1 > 0)
        }
    }
}
