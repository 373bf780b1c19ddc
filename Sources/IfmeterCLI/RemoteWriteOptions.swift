import IfmeterCore
import IfmeterOutput
import IfmeterPipeline
import IfmeterRemoteWrite
import IfmeterServe
import IfmeterSystem

/// `serve --remote-write`: push the scrape's series to Prometheus
/// Remote-Write 1.0 receivers (docs/metrics.md, "Remote write").
struct RemoteWriteOptions {
    static let remoteWrite = ListOption(
        "--remote-write", value: "url",
        help: "Also push the series to this Prometheus Remote-Write 1.0 receiver (such as http://prometheus:9090/api/v1/write).")

    static let remoteWriteInterval = Option(
        "--remote-write-interval", value: "duration",
        help: "Time between pushes, as a scrape interval (a sample each, stamped with its time; at most one per --interval).", default: "15s")

    static let remoteWriteQueueMax = Option(
        "--remote-write-queue-max", value: "size", help: "Unsent samples kept per receiver; past it the oldest are dropped (counted).",
        default: "64MiB")

    static let remoteWriteQueue = Option(
        "--remote-write-queue", value: "dir",
        help: "Where unsent samples wait on disk, a folder per receiver (default: beside --state, STATE.remote-write).")

    static let remoteWriteConfig = Option(
        "--remote-write-config", value: "file",
        help: "The receivers' basic auth, bearer token file and TLS (YAML, see docs/metrics.md); their external labels too.")

    static let externalLabel = ListOption(
        "--external-label", value: "name=value", help: "A label added to every pushed series (never replacing one of its own).")

    /// The options that only mean something with `--remote-write`.
    static let needingURL: [any OptionHandle] = [remoteWriteInterval, remoteWriteQueue, remoteWriteQueueMax, remoteWriteConfig, externalLabel]

    static let specs: [OptionSpec] = [remoteWrite.spec] + needingURL.map(\.spec)

    var urls: [String]
    var interval: Double
    var queueFolder: String
    var queueMax: UInt64
    var settings: RemoteWriteConfig

    /// Nil without --remote-write (its other options are then an error).
    init?(_ p: ParsedArguments, statePath: String?) throws(CLIError) {
        // An empty URL is said as one, before anything else: dropped from
        // the list, it read as no --remote-write at all.
        for given in p.given(Self.remoteWrite) where given.allSatisfy({ $0 == "," || $0.isWhitespace }) {
            throw p.usage(
                "invalid value '\(given)' for '--remote-write <url>': the URL is empty; expected an http:// or https:// URL, like http://prometheus:9090/api/v1/write"
            )
        }
        let urls = p[Self.remoteWrite]
        guard !urls.isEmpty else {
            for option in Self.needingURL where p.has(option) {
                throw p.usage("'\(option.spec.long)' needs '\(Self.remoteWrite.spec.long) URL'")
            }
            return nil
        }
        for url in urls where !(url.hasPrefix("http://") || url.hasPrefix("https://")) {
            throw p.usage(
                "invalid value '\(url)' for '--remote-write <url>': expected an http:// or https:// URL, like http://prometheus:9090/api/v1/write")
        }
        for url in urls where RemoteWriter.hasUserInfo(url) {
            throw p.usage(
                "invalid value '\(RemoteWriter.withoutCredentials(url))' for '--remote-write <url>': it carries a user name or password, which any local user could read in the process list; give them as basic_auth in '--remote-write-config FILE' instead"
            )
        }
        self.urls = urls
        interval = try CommonOptions.duration(p, Self.remoteWriteInterval, default: 15)
        guard let folder = p[Self.remoteWriteQueue] ?? statePath.map({ $0 + ".remote-write" }) else {
            throw p.usage(
                "'--remote-write' keeps unsent samples on disk: give '--state FILE' (the queue goes beside it) or '--remote-write-queue DIR'")
        }
        queueFolder = folder
        queueMax = try CommonOptions.size(p, Self.remoteWriteQueueMax, 64 * 1024...(1 << 40), "64KiB to 1TiB") ?? 64 << 20
        settings = RemoteWriteConfig()
        if let path = p[Self.remoteWriteConfig] {
            do throws(RemoteWriteConfig.LoadError) {
                settings = try RemoteWriteConfig.load(path, foreignAllowed: CommandLinePath.allowForeign)
            } catch {
                switch error {
                case .unreadable(let cause):
                    throw p.usage(
                        "cannot read the remote write config '\(path)': \(cause.message); name a readable YAML file with '--remote-write-config'")
                case .invalid(let location, let message):
                    throw .data("remote write config \(location): \(message)")
                case .refused(let location, let message):
                    throw CommandLinePath.refusedSettings("the remote write config", at: location, message)
                }
            }
        }
        for item in p[Self.externalLabel] {
            guard let eq = item.firstIndex(of: "="), let name = Optional(String(item[..<eq])), RemoteWriteConfig.validLabelName(name),
                !name.hasPrefix("__")
            else {
                throw p.usage(
                    "invalid value '\(item)' for '--external-label <name=value>': expected a label name ([a-zA-Z_][a-zA-Z0-9_]*, not __*) = a value, like host=gw1"
                )
            }
            settings.externalLabels.removeAll { $0.0 == name }
            settings.externalLabels.append((name, String(item[item.index(after: eq)...])))
        }
        // Pushed series carry the identity a scrape would give them, so
        // that every rule joins and names hosts alike: job and instance,
        // unless the config or --external-label sets them.
        for (name, value) in Self.identity(host: hostName()) where !settings.externalLabels.contains(where: { $0.0 == name }) {
            settings.externalLabels.append((name, value))
        }
    }

    /// Opens each receiver's queue, starts its sender and adds the feed to
    /// the pipeline (after the scrape feed: it renders the same series);
    /// after `makeQueueFolder`.
    func start(pipeline: Pipeline, cache: ScrapeCache, sampleInterval: Double, log: Log) throws(CLIError)
        -> [RemoteWriter]
    {
        try started(pipeline: pipeline, cache: cache, sampleInterval: sampleInterval, log: log).writers
    }

    /// The same, and the feed that pushes to them (to remove on a reload).
    func started(pipeline: Pipeline, cache: ScrapeCache, sampleInterval: Double, log: Log) throws(CLIError)
        -> (writers: [RemoteWriter], feed: RemoteWriteFeed)
    {
        do throws(SystemError) {
            try RemoteWriteLibraries.load()
        } catch {
            throw .runtime("remote write: \(error.message)")
        }
        var writers: [RemoteWriter] = []
        for url in urls {
            let folder = queueFolder + "/" + Self.folderName(url)
            do throws(SystemError) {
                let queue = try DiskQueue(folder: folder, maxBytes: Int64(queueMax), identity: FNV1a.hash(url.utf8))
                // What opening found is said whole, not rate-limited.
                for note in queue.openingNotes { Output.error("ifmeter serve: " + note) }
                let transport = try CurlTransport(url: url, settings: settings, userAgent: "ifmeter/\(IfmeterCLI.version)")
                let writer = RemoteWriter(
                    url: url, queue: queue, transport: transport, minBackoff: settings.queue.minBackoff, maxBackoff: settings.queue.maxBackoff,
                    capacity: settings.queue.capacity, maxSamplesPerSend: settings.queue.maxSamplesPerSend, log: log)
                try writer.start()
                writers.append(writer)
            } catch {
                throw .runtime("cannot start remote write to \(RemoteWriter.withoutCredentials(url)) (queue \(folder)): \(error.message)")
            }
        }
        let feed = RemoteWriteFeed(
            source: cache, writers: writers, externalLabels: settings.externalLabels, relabel: settings.relabel, every: interval,
            sampleInterval: sampleInterval, maxSamplesPerRecord: settings.queue.maxSamplesPerSend)
        pipeline.add(enricher: feed)
        pipeline.add(sink: feed)
        return (writers, feed)
    }

    /// The queue folder, made (0700) or adopted, and the folder it is in:
    /// each must be one no other user controls, or another local user
    /// could plant segments for root's ifmeter to post with root's
    /// credentials, or links for it to truncate and append to.
    func makeQueueFolder() throws(CLIError) {
        let parent = SafeFile.folder(of: queueFolder)
        do throws(SystemError) {
            try OwnFolder.check(parent, followingLinks: true)
            try OwnFolder.make(queueFolder)
        } catch {
            throw .runtime(
                "cannot keep the remote write queue in \(TerminalText.escaped(queueFolder)): \(TerminalText.escaped(error.call)): \(error.message). Choose a folder of your own with --remote-write-queue."
            )
        }
    }

    /// The labels every pushed series gets unless told otherwise:
    /// `job="ifmeter"` and `instance` the host's name (a scrape's are the
    /// job's name and `host:port`).
    static func identity(host: String) -> [(String, String)] { [("job", "ifmeter"), ("instance", host)] }

    /// A receiver's queue folder: a hash of its URL (FNV-1a, 64 bits).
    static func folderName(_ url: String) -> String {
        let hex = String(FNV1a.hash(url.utf8), radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
