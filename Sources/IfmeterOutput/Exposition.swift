import IfmeterCore
import IfmeterModel

/// What a Prometheus scrape shows: every interface's totals and the
/// exporter's own health. Built by the serving loop after each sample.
package struct ExpositionInput: Sendable {
    package var interfaces: [ExpositionRow]
    package var health: ExporterHealth
    package var families: ExpositionFamilies
    /// `serve --probe`: where the probes leave, and the traffic outside the
    /// tunnels.
    package var routes: RouteExposition?
    /// Planned interfaces' cycles (serve with --state); none by default.
    package var plans: [PlanGauge] = []
    /// Aliases by interface (`ifmeter state alias`): the `alias` label of
    /// `ifmeter_interface_info`.
    package var aliases: [SeriesKey: String] = [:]

    package init(interfaces: [ExpositionRow], health: ExporterHealth, families: ExpositionFamilies = .ifmeter, routes: RouteExposition? = nil) {
        self.interfaces = interfaces
        self.health = health
        self.families = families
        self.routes = routes
    }
}

/// What the exposition shows of one interface: the read model's row,
/// the one every surface shows.
package typealias ExpositionRow = InterfaceRow

/// Which families a scrape holds.
package enum ExpositionFamilies: String, Sendable, CaseIterable {
    /// ifmeter's own families only.
    case ifmeter
    /// ifmeter's, plus node_exporter's `node_network_*_total{device}`.
    case ifmeterAndNode = "node"
    /// node_exporter's families only (and ifmeter's health).
    case nodeOnly = "node-only"
}

/// The exporter's own metrics.
package struct ExporterHealth: Sendable, Hashable {
    package var version: String
    package var source: String
    package var samples: UInt64
    package var sampleErrors: UInt64
    /// Overflows of the link-notification socket (a burst of link changes).
    package var overruns: UInt64
    package var lastSampleSeconds: Double?
    /// Unix time of the last sample.
    package var lastSampleTime: Double?
    /// Unix time the exporter started: the `_created` time of its counters.
    package var startTime: Double
    package var intervalSeconds: Double
    /// serve's HTTP endpoint: connections it closed to protect itself.
    package var httpClosed: HTTPConnectionCounts?
    /// serve's answers that failed on its side (5xx), by path and status.
    package var httpServerErrors: [HTTPServerErrorCount] = []
    /// serve --remote-write: each receiver's queue and counts.
    package var remoteWrite: [RemoteWriteStatus] = []
    /// The commit the binary was built from (`ifmeter_build_info`).
    package var revision = "unknown"
    /// serve's own CPU, memory and descriptors (`process_*`), as of the
    /// sample; nil where they cannot be read.
    package var process: ProcessMetrics?
    /// With a state file: its saves (`ifmeter_state_*`).
    package var state: StateHealth?

    package init(
        version: String, source: String, samples: UInt64 = 0, sampleErrors: UInt64 = 0, overruns: UInt64 = 0,
        lastSampleSeconds: Double? = nil, lastSampleTime: Double? = nil, startTime: Double, intervalSeconds: Double
    ) {
        self.version = version
        self.source = source
        self.samples = samples
        self.sampleErrors = sampleErrors
        self.overruns = overruns
        self.lastSampleSeconds = lastSampleSeconds
        self.lastSampleTime = lastSampleTime
        self.startTime = startTime
        self.intervalSeconds = intervalSeconds
    }
}

/// Renders an exposition in one format, in pieces: the whole text is never
/// held at once (at 4000 interfaces it is 5 MB), so it can go straight into
/// a compressor or a file.
package protocol ExpositionRenderer: Sendable {
    /// The Content-Type of what `render` produces.
    var contentType: String { get }
    /// Hands the exposition to `sink` in order, in pieces of about `chunk`
    /// bytes (each ends with a whole line).
    func render(_ input: ExpositionInput, chunk: Int, into sink: (UnsafeRawBufferPointer) -> Void)
}

extension ExpositionRenderer {
    /// The whole exposition at once (for tests and small outputs).
    package func render(_ input: ExpositionInput) -> [UInt8] {
        var all: [UInt8] = []
        render(input, chunk: 64 * 1024) { all.append(contentsOf: $0) }
        return all
    }
}

/// Prometheus text format 0.0.4: what scrapers get by default.
package struct PrometheusTextRenderer: ExpositionRenderer {
    package init() {}
    package let contentType = "text/plain; version=0.0.4; charset=utf-8"
    package func render(_ input: ExpositionInput, chunk: Int, into sink: (UnsafeRawBufferPointer) -> Void) {
        withoutActuallyEscaping(sink) { sink in
            var writer = ExpositionWriter(visitor: ExpositionText(openMetrics: false, chunk: chunk, sink: sink))
            writer.write(input)
            writer.visitor.finish()
        }
    }
}

/// OpenMetrics 1.0.0: what Prometheus asks for first. Counter families are
/// named without `_total` in their metadata, and the text ends with `# EOF`.
package struct OpenMetricsRenderer: ExpositionRenderer {
    package init() {}
    package let contentType = "application/openmetrics-text; version=1.0.0; charset=utf-8"
    package func render(_ input: ExpositionInput, chunk: Int, into sink: (UnsafeRawBufferPointer) -> Void) {
        withoutActuallyEscaping(sink) { sink in
            var writer = ExpositionWriter(visitor: ExpositionText(openMetrics: true, chunk: chunk, sink: sink))
            writer.write(input)
            writer.visitor.finish()
        }
    }
}

/// Picks the exposition format from an Accept header: OpenMetrics when the
/// client ranks it at least as high as the text format, text otherwise.
package enum ExpositionNegotiation {
    package static func prefersOpenMetrics(accept: String?) -> Bool {
        guard let accept, !accept.isEmpty else { return false }
        var openMetrics = -1.0, text = -1.0, any = -1.0
        for part in accept.split(separator: ",") {
            let fields = part.split(separator: ";").map { $0.trimmingSpaces() }
            guard let type = fields.first?.lowercased() else { continue }
            var q = 1.0, version: String?
            for field in fields.dropFirst() {
                let pair = field.split(separator: "=", maxSplits: 1).map { $0.trimmingSpaces() }
                guard pair.count == 2 else { continue }
                if pair[0].lowercased() == "q" { q = Double(pair[1]) ?? 0 }
                if pair[0].lowercased() == "version" { version = pair[1] }
            }
            switch type {
            case "application/openmetrics-text":
                if version == nil || version == "1.0.0" || version == "0.0.1" { openMetrics = max(openMetrics, q) }
            case "text/plain":
                if version == nil || version == "0.0.4" { text = max(text, q) }
            case "*/*", "text/*": any = max(any, q)
            default: break
            }
        }
        return openMetrics > 0 && openMetrics >= max(text, any)
    }
}

/// Walks an exposition's families and series in order, handing each to
/// its visitor: the text formats' writer (`ExpositionText`), remote
/// write's encoder, a collector.
struct ExpositionWriter<Visitor: SeriesVisitor> {
    var visitor: Visitor

    typealias Kind = SeriesKind

    static var caveat: String { Caveat.short }

    mutating func write(_ input: ExpositionInput) {
        if input.families != .nodeOnly { writeInterfaces(input.interfaces, aliases: input.aliases) }
        // A copy of the rows present, only when node's families need it
        // (0.8 MB at 4000 interfaces, for every render).
        if input.families != .ifmeter { writeNode(input.interfaces.filter(\.present)) }
        if let routes = input.routes { writeRoutes(routes) }
        if input.families != .nodeOnly { writePlans(input.plans) }
        writeHealth(input.health, interfaces: input.interfaces.count)
    }

    // MARK: ifmeter's families

    mutating func writeInterfaces(_ interfaces: [ExpositionRow], aliases: [SeriesKey: String] = [:]) {
        for family in ExpositionTables.counterFamilies {
            guard interfaces.contains(where: { $0.counters.has(family.key) }) else { continue }
            header(
                family.name, .counter, unit: family.name.hasSuffix("_bytes") ? "bytes" : nil,
                help:
                    "\(family.help): the kernel counter when ifmeter first saw the interface, plus every delta since; it never goes down, across wraps, resets and recreations. \(Self.caveat)"
            )
            for i in interfaces where i.counters.has(family.key) {
                sample(family.name, suffix: "_total", i, value: i.counters.value(family.key))
            }
        }
        let events: [(String, String, KeyPath<EventCounts, Int>)] = [
            ("ifmeter_interface_resets", "Counter resets seen (each makes the totals a lower bound)", \.resets),
            ("ifmeter_interface_wraps", "32-bit counter wraps corrected", \.wraps),
            ("ifmeter_interface_recreations", "Times the interface was recreated under the same name", \.recreations),
            ("ifmeter_interface_deletions", "Deletions seen with final counters", \.deletions),
        ]
        for (name, help, path) in events {
            header(name, .counter, help: "\(help), since ifmeter started. \(Self.caveat)")
            for i in interfaces { sample(name, suffix: "_total", i, value: UInt64(i.events[keyPath: path])) }
        }
        header(
            "ifmeter_interface_quality", .gauge,
            help:
                "1 for the quality of the totals since ifmeter started (exact, wrap-corrected, or lower-bound: traffic was lost), 0 for the others. \(Self.caveat)"
        )
        for i in interfaces {
            for quality in Quality.allCases {
                sample("ifmeter_interface_quality", i, extra: [("quality", quality.name)], value: i.quality == quality ? 1 : 0)
            }
        }
        header(
            "ifmeter_interface_present", .gauge,
            help:
                "1 when the interface was in the last sample, 0 while a gone one is still kept. \(Self.caveat)")
        for i in interfaces { sample("ifmeter_interface_present", i, value: i.present ? 1 : 0) }
        header(
            "ifmeter_interface_carrier_changes", .counter,
            help: "Times the link's carrier came or went since the link was made (the kernel's count): a link that flaps. \(Self.caveat)")
        for i in interfaces {
            if let changes = i.attributes?.carrierChanges { sample("ifmeter_interface_carrier_changes", suffix: "_total", i, value: UInt64(changes)) }
        }
        header("ifmeter_interface_up", .gauge, help: "1 when the operational state is up. \(Self.caveat)")
        for i in interfaces where i.attributes?.operstate != nil {
            sample("ifmeter_interface_up", i, value: i.attributes?.operstate == "up" ? 1 : 0)
        }
        header(
            "ifmeter_interface_speed_bytes", .gauge, unit: "bytes",
            help:
                "Link speed the driver reports, in bytes per second. \(Self.caveat)")
        for i in interfaces {
            if let speed = i.attributes?.reportedSpeedBps { sample("ifmeter_interface_speed_bytes", i, value: speed / 8) }
        }
        header("ifmeter_interface_mtu_bytes", .gauge, unit: "bytes", help: "MTU. \(Self.caveat)")
        for i in interfaces {
            if let mtu = i.attributes?.mtu { sample("ifmeter_interface_mtu_bytes", i, value: UInt64(mtu)) }
        }
        header(
            "ifmeter_interface", .info,
            help:
                "Interface facts: index, counter width, operational state, the evidence of its kind and its alias. \(Self.caveat)")
        for i in interfaces {
            var extra: [(String, String)] = [("evidence", i.evidence), ("width", String(i.width.rawValue))]
            if let index = i.index { extra.append(("index", String(index))) }
            if let operstate = i.attributes?.operstate { extra.append(("operstate", operstate)) }
            if let alias = aliases[SeriesKey(netns: i.netns, name: i.name)] { extra.append(("alias", alias)) }
            sample("ifmeter_interface", suffix: "_info", i, extra: extra, value: 1)
        }
    }

    // MARK: node_exporter's families

    /// Raw kernel counters under node_exporter's names and HELP text, so
    /// existing dashboards keep working; `lo` is left out of them, as
    /// node_exporter's netdev collector does by default. Then the netclass
    /// families (`lo` included, as there).
    mutating func writeNode(_ interfaces: [ExpositionRow]) {
        let withStats = interfaces.compactMap { i in i.name == "lo" ? nil : i.kernelStats.map { (i, $0) } }
        for (statistic, value) in ExpositionTables.nodeFamilies {
            let name = "node_network_" + statistic
            // node_exporter's own words, without the estimate caveat: these
            // families stand in for node_exporter's.
            header(name, .counter, help: "Network device statistic \(statistic).")
            for (i, stats) in withStats {
                visitor.beginSeries(name, suffix: "_total")
                visitor.label("device", Self.shown(i.name))
                if !i.netns.isEmpty { visitor.label("netns", Self.shown(i.netns)) }
                visitor.endSeries(.unsigned(value(stats)))
            }
        }
        writeNetclass(interfaces)
    }

    // MARK: routes and tunnels (serve --probe)

    mutating func writeRoutes(_ routes: RouteExposition) {
        if !routes.egress.isEmpty {
            header(
                "ifmeter_route_egress", .info,
                help:
                    "The interface a packet to the probe address would leave by: the kernel's routing decision (RTM_GETROUTE, policy rules included; no packet is sent), followed through route notifications. interface is empty and kind is \"unreachable\" when there is no route."
            )
            for probe in routes.egress {
                labeledSample(
                    "ifmeter_route_egress_info",
                    [
                        ("interface", probe.interface ?? ""),
                        ("kind", probe.interface == nil ? "unreachable" : probe.classification?.kind.rawValue ?? "other"), ("probe", probe.probe),
                    ], .unsigned(1))
            }
        }
        if !routes.outside.isEmpty {
            header(
                "ifmeter_tunnel_outside_bytes", .counter, unit: "bytes",
                help:
                    "Traffic that used a tunnel's underlay without the tunnel, summed per interval: underlay bytes - tunnel bytes - tunnel packets x overhead, floored at 0 (local network traffic, the tunnel's control traffic, and leaks). \(Caveat.short)"
            )
            for t in routes.outside {
                for (direction, value) in [("rx", t.rxBytes), ("tx", t.txBytes)] {
                    labeledSample(
                        "ifmeter_tunnel_outside_bytes_total", [("direction", direction), ("tunnel", t.tunnel), ("underlay", t.underlay)],
                        .unsigned(value))
                }
            }
            header(
                "ifmeter_tunnel_outside_uncertain", .gauge,
                help:
                    "1 when a tunnel's outside estimate may be off either way: another tunnel shares its underlay, or a counter it came from lost traffic (lower bound)."
            )
            for t in routes.outside {
                labeledSample("ifmeter_tunnel_outside_uncertain", [("tunnel", t.tunnel), ("underlay", t.underlay)], .unsigned(t.uncertain ? 1 : 0))
            }
        }
    }

    // MARK: the exporter's health

    mutating func writeHealth(_ health: ExporterHealth, interfaces: Int) {
        let note = Caveat.health
        header("ifmeter_samples", .counter, help: "Samples taken. \(note)")
        plain("ifmeter_samples_total", .unsigned(health.samples))
        created("ifmeter_samples", health.startTime)
        header("ifmeter_sample_errors", .counter, help: "Samples that failed. \(note)")
        plain("ifmeter_sample_errors_total", .unsigned(health.sampleErrors))
        created("ifmeter_sample_errors", health.startTime)
        header(
            "ifmeter_link_event_overruns", .counter,
            help:
                "Times link notifications overflowed the socket buffer and a full dump resynchronized. \(note)")
        plain("ifmeter_link_event_overruns_total", .unsigned(health.overruns))
        created("ifmeter_link_event_overruns", health.startTime)
        if let closed = health.httpClosed {
            header(
                "ifmeter_http_connections_closed", .counter,
                help:
                    "Scrape connections ifmeter closed to protect the endpoint: reason deadline (a request was not whole in time), idle (kept alive after a response, no request line in time: a scraper between scrapes, not a slow request), evicted (the oldest waiting connection, to make room at the connection limits) or budget (the oldest response still being sent, a reader too slow, to keep their memory within its budget). \(note)"
            )
            labeledSample("ifmeter_http_connections_closed_total", [("reason", "budget")], .unsigned(closed.budget))
            labeledSample("ifmeter_http_connections_closed_total", [("reason", "deadline")], .unsigned(closed.deadline))
            labeledSample("ifmeter_http_connections_closed_total", [("reason", "evicted")], .unsigned(closed.evicted))
            labeledSample("ifmeter_http_connections_closed_total", [("reason", "idle")], .unsigned(closed.idle))
        }
        if !health.httpServerErrors.isEmpty {
            header(
                "ifmeter_http_server_errors", .counter,
                help:
                    "Answers serve gave with a status of 5xx, a failure on its side (the state file unreadable for the usage tables, a picture not drawn, a render that failed), by path and code; each is also said in the log. \(note)"
            )
            for error in health.httpServerErrors.sorted(by: { ($0.path, $0.status) < ($1.path, $1.status) }) {
                labeledSample("ifmeter_http_server_errors_total", [("code", String(error.status)), ("path", error.path)], .unsigned(error.count))
            }
        }
        writeRemoteWrite(health.remoteWrite)
        if let state = health.state { writeState(state, startTime: health.startTime) }
        if let seconds = health.lastSampleSeconds {
            header("ifmeter_last_sample_duration_seconds", .gauge, unit: "seconds", help: "How long the last sample took. \(note)")
            plain("ifmeter_last_sample_duration_seconds", .double(seconds))
        }
        if let time = health.lastSampleTime {
            header("ifmeter_last_sample_timestamp_seconds", .gauge, unit: "seconds", help: "Unix time of the last sample. \(note)")
            plain("ifmeter_last_sample_timestamp_seconds", .double(time))
        }
        header("ifmeter_sample_interval_seconds", .gauge, unit: "seconds", help: "Time between samples. \(note)")
        plain("ifmeter_sample_interval_seconds", .double(health.intervalSeconds))
        header("ifmeter_interfaces", .gauge, help: "Interfaces in this exposition. \(note)")
        plain("ifmeter_interfaces", .unsigned(UInt64(interfaces)))
        header("ifmeter_build", .info, help: "ifmeter's version, the commit it was built from, and its counter source. \(note)")
        labeledSample("ifmeter_build_info", [("revision", health.revision), ("source", health.source), ("version", health.version)], .unsigned(1))
        if let process = health.process { writeProcess(process) }
    }

    /// The state file's saves: a save that fails is never silent
    /// (docs/hardening.md, "Saves").
    mutating func writeState(_ state: StateHealth, startTime: Double) {
        let note = Caveat.health
        header("ifmeter_state_saves", .counter, help: "Saves of the state file that worked. \(note)")
        plain("ifmeter_state_saves_total", .unsigned(state.saves))
        created("ifmeter_state_saves", startTime)
        header(
            "ifmeter_state_save_failures", .counter,
            help:
                "Saves of the state file that failed (full disk, deleted folder, I/O error); each is retried and what it held is kept in memory until one works. \(note)"
        )
        plain("ifmeter_state_save_failures_total", .unsigned(state.failures))
        created("ifmeter_state_save_failures", startTime)
        header(
            "ifmeter_state_save_failing", .gauge,
            help: "1 while the last save of the state file failed: what was counted since the last good save is not on disk. \(note)")
        plain("ifmeter_state_save_failing", .unsigned(state.failing ? 1 : 0))
        header(
            "ifmeter_state_recreations", .counter,
            help: "Times the state file was found deleted or replaced under ifmeter and written anew at its path. \(note)")
        plain("ifmeter_state_recreations_total", .unsigned(state.recreations))
        created("ifmeter_state_recreations", startTime)
        header("ifmeter_state_save_interval_seconds", .gauge, unit: "seconds", help: "Time between saves of the state file. \(note)")
        plain("ifmeter_state_save_interval_seconds", .double(state.saveEvery))
        if let time = state.lastSaveTime {
            header(
                "ifmeter_state_last_save_timestamp_seconds", .gauge, unit: "seconds",
                help: "Unix time of the last save of the state file that worked. \(note)")
            plain("ifmeter_state_last_save_timestamp_seconds", .double(time))
        }
    }

    /// The families every Prometheus client library exposes, named and
    /// typed as client_golang's process collector has them.
    mutating func writeProcess(_ p: ProcessMetrics) {
        header("process_cpu_seconds", .counter, unit: "seconds", help: "Total user and system CPU time spent in seconds.")
        plain("process_cpu_seconds_total", .double(p.cpuSeconds))
        header("process_max_fds", .gauge, help: "Maximum number of open file descriptors.")
        plain("process_max_fds", .unsigned(p.maxFDs))
        header("process_open_fds", .gauge, help: "Number of open file descriptors.")
        plain("process_open_fds", .unsigned(p.openFDs))
        header("process_resident_memory_bytes", .gauge, unit: "bytes", help: "Resident memory size in bytes.")
        plain("process_resident_memory_bytes", .unsigned(p.residentBytes))
        header("process_start_time_seconds", .gauge, unit: "seconds", help: "Start time of the process since unix epoch in seconds.")
        plain("process_start_time_seconds", .double(p.startTime))
        header("process_virtual_memory_bytes", .gauge, unit: "bytes", help: "Virtual memory size in bytes.")
        plain("process_virtual_memory_bytes", .unsigned(p.virtualBytes))
    }

    // MARK: writing

    /// A family's metadata. `name` is the family name without `_total`.
    mutating func header(_ name: String, _ kind: Kind, unit: String? = nil, help: String) {
        visitor.family(name, kind, unit: unit, help: help)
    }

    /// A label value as the exposition shows it: a control or invisible
    /// character (an interface name may hold ESC or BEL) becomes the text
    /// that text outputs show (`\x1b`), so a scrape shown on a terminal is
    /// safe and the label reads as the name does everywhere else.
    @inline(__always)
    static func shown(_ s: String) -> String {
        TerminalText.mayNeedEscaping(s) ? TerminalText.escaped(s) : s
    }

    /// One sample with the `interface` and `kind` labels (and `netns` for
    /// another namespace's interface, plus `extra`), labels in name order.
    mutating func sample(
        _ name: String, suffix: String = "", _ i: ExpositionRow, extra: [(String, String)] = [], value: UInt64
    ) {
        if extra.isEmpty {
            // The common case, without building a label list.
            visitor.beginSeries(name, suffix: suffix)
            visitor.label("interface", Self.shown(i.name))
            visitor.label("kind", i.kind.rawValue)
            if !i.netns.isEmpty { visitor.label("netns", Self.shown(i.netns)) }
            visitor.endSeries(.unsigned(value))
            return
        }
        var own = [("interface", i.name), ("kind", i.kind.rawValue)]
        if !i.netns.isEmpty { own.append(("netns", i.netns)) }
        labeledSample(name + suffix, (extra + own).sorted { $0.0 < $1.0 }, .unsigned(value))
    }

    /// One sample with the labels given, in the order given (name order,
    /// by the caller).
    mutating func labeledSample(_ name: String, _ labels: [(String, String)], _ value: SeriesValue) {
        visitor.beginSeries(name, suffix: "")
        for (label, labelValue) in labels { visitor.label(label, Self.shown(labelValue)) }
        visitor.endSeries(value)
    }

    mutating func plain(_ name: String, _ value: SeriesValue) {
        visitor.beginSeries(name, suffix: "")
        visitor.endSeries(value)
    }

    /// `NAME_created` in OpenMetrics, for counters whose start is known.
    mutating func created(_ family: String, _ time: Double) {
        guard visitor.visitsCreated else { return }
        plain(family + "_created", .double(time))
    }
}

/// Writes both text formats; the differences are the counter metadata
/// names, the escaping of HELP, units, `_created` and `# EOF`.
struct ExpositionText: SeriesVisitor {
    let openMetrics: Bool
    /// The piece being written; handed on whole lines past `chunk` bytes.
    var bytes: [UInt8] = []
    let chunk: Int
    let sink: (UnsafeRawBufferPointer) -> Void
    /// Whether the series being written has a label yet (its `{` is open).
    var labeled = false

    init(openMetrics: Bool, chunk: Int, sink: @escaping (UnsafeRawBufferPointer) -> Void) {
        self.openMetrics = openMetrics
        self.chunk = chunk
        self.sink = sink
        bytes.reserveCapacity(chunk + 4096)
    }

    var visitsCreated: Bool { openMetrics }

    /// The end: `# EOF` in OpenMetrics, and the last piece handed on.
    mutating func finish() {
        if openMetrics { append("# EOF\n") }
        flush()
    }

    /// Hands the piece on (after whole lines only).
    mutating func flush() {
        guard !bytes.isEmpty else { return }
        bytes.withUnsafeBytes(sink)
        bytes.removeAll(keepingCapacity: true)
    }

    @inline(__always)
    mutating func lineEnded() {
        if bytes.count >= chunk { flush() }
    }

    /// `# HELP` and `# TYPE` (and `# UNIT` in OpenMetrics). `name` is the
    /// family name without `_total`; the text format names counters with it.
    mutating func family(_ name: String, _ kind: SeriesKind, unit: String?, help: String) {
        let metadataName: String
        let type: String
        if openMetrics {
            metadataName = name
            type = kind.text
        } else {
            metadataName = kind == .counter ? name + "_total" : (kind == .info ? name + "_info" : name)
            type = kind == .info ? "gauge" : kind.text
        }
        append("# HELP ")
        append(metadataName)
        append(" ")
        appendHelp(help)
        append("\n# TYPE ")
        append(metadataName)
        append(" ")
        append(type)
        append("\n")
        if openMetrics, let unit {
            append("# UNIT ")
            append(name)
            append(" ")
            append(unit)
            append("\n")
        }
    }

    @inline(__always)
    mutating func beginSeries(_ name: String, suffix: String) {
        append(name)
        if !suffix.isEmpty { append(suffix) }
    }

    @inline(__always)
    mutating func label(_ name: String, _ value: String) {
        bytes.append(labeled ? UInt8(ascii: ",") : UInt8(ascii: "{"))
        labeled = true
        append(name)
        bytes.append(UInt8(ascii: "="))
        bytes.append(UInt8(ascii: "\""))
        appendEscaped(value)
        bytes.append(UInt8(ascii: "\""))
    }

    @inline(__always)
    mutating func endSeries(_ value: SeriesValue) {
        if labeled {
            bytes.append(UInt8(ascii: "}"))
            labeled = false
        }
        bytes.append(UInt8(ascii: " "))
        switch value {
        case .unsigned(let v): appendDecimal(v)
        case .signed(let v):
            if v < 0 { bytes.append(UInt8(ascii: "-")) }
            appendDecimal(v.magnitude)
        case .double(let v): append(SeriesValue.text(v))
        }
        bytes.append(UInt8(ascii: "\n"))
        lineEnded()
    }

    @inline(__always)
    mutating func append(_ s: String) {
        bytes.append(contentsOf: s.utf8)
    }

    /// A whole number's digits, as `String(v)` writes them.
    mutating func appendDecimal(_ v: UInt64) {
        if v < 10 {
            bytes.append(UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: v))
            return
        }
        var digits = 1
        var rest = v / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: digits))
        bytes.withUnsafeMutableBufferPointer { b in
            var at = start + digits - 1
            var rest = v
            while true {
                b[at] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
                rest /= 10
                if rest == 0 { break }
                at -= 1
            }
        }
    }

    /// Label values: backslash, double quote and newline are escaped, as
    /// the format says (the writer made control characters text first).
    @inline(__always)
    mutating func appendEscaped(_ s: String) {
        var s = s
        let plain = s.withUTF8 { utf8 -> Bool in
            guard !utf8.contains(where: { $0 == UInt8(ascii: "\\") || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\n") }) else {
                return false
            }
            bytes.append(contentsOf: utf8)
            return true
        }
        guard !plain else { return }
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case UInt8(ascii: "\""): bytes.append(contentsOf: [0x5C, 0x22])
            case UInt8(ascii: "\n"): bytes.append(contentsOf: [0x5C, 0x6E])
            default: bytes.append(b)
            }
        }
    }

    /// HELP text: backslash and newline escaped; double quotes too in
    /// OpenMetrics.
    mutating func appendHelp(_ s: String) {
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "\\"): bytes.append(contentsOf: [0x5C, 0x5C])
            case UInt8(ascii: "\n"): bytes.append(contentsOf: [0x5C, 0x6E])
            case UInt8(ascii: "\"") where openMetrics: bytes.append(contentsOf: [0x5C, 0x22])
            default: bytes.append(b)
            }
        }
    }
}

/// The families' tables (a generic type keeps no static stored property).
enum ExpositionTables {
    typealias CounterFamily = (name: String, key: CounterKey, help: String)
    static let counterFamilies: [CounterFamily] = [
        ("ifmeter_receive_bytes", .rxBytes, "Bytes received"),
        ("ifmeter_transmit_bytes", .txBytes, "Bytes transmitted"),
        ("ifmeter_receive_packets", .rxPackets, "Packets received"),
        ("ifmeter_transmit_packets", .txPackets, "Packets transmitted"),
        ("ifmeter_receive_errors", .rxErrors, "Receive errors"),
        ("ifmeter_transmit_errors", .txErrors, "Transmit errors"),
        ("ifmeter_receive_drops", .rxDropped, "Received packets dropped"),
        ("ifmeter_transmit_drops", .txDropped, "Packets dropped on transmit"),
    ]

    /// node_exporter 1.5's netdev families (netlink, legacy names), in its
    /// order, and how each is computed from the kernel's link statistics.
    static let nodeFamilies: [(String, @Sendable (KernelLinkStats) -> UInt64)] = [
        ("receive_bytes", { $0[.rxBytes] }),
        ("receive_compressed", { $0[.rxCompressed] }),
        ("receive_drop", { $0[.rxDropped] &+ $0[.rxMissedErrors] }),
        ("receive_errs", { $0[.rxErrors] }),
        ("receive_fifo", { $0[.rxFifoErrors] }),
        ("receive_frame", { $0[.rxFrameErrors] &+ $0[.rxLengthErrors] &+ $0[.rxOverErrors] &+ $0[.rxCrcErrors] }),
        ("receive_multicast", { $0[.multicast] }),
        ("receive_nohandler", { $0[.rxNohandler] }),
        ("receive_packets", { $0[.rxPackets] }),
        ("transmit_bytes", { $0[.txBytes] }),
        (
            "transmit_carrier",
            {
                $0[.txCarrierErrors] &+ $0[.txAbortedErrors] &+ $0[.txHeartbeatErrors] &+ $0[.txWindowErrors]
            }
        ),
        ("transmit_colls", { $0[.collisions] }),
        ("transmit_compressed", { $0[.txCompressed] }),
        ("transmit_drop", { $0[.txDropped] }),
        ("transmit_errs", { $0[.txErrors] }),
        ("transmit_fifo", { $0[.txFifoErrors] }),
        ("transmit_packets", { $0[.txPackets] }),
    ]
}
