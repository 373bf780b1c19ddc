import IfmeterCore
import IfmeterModel
import IfmeterOutput
import IfmeterPipeline
import IfmeterSystem
import Synchronization

/// One receiver: its queue on disk and the thread that sends it, oldest
/// first, retrying per Remote-Write 1.0.
package final class RemoteWriter: Sendable {
    /// The URL without credentials: the `url` label.
    package let label: String
    package let queue: DiskQueue
    let transport: any RemoteWriteTransport
    /// Its own sites (`Log.separate`): one receiver's failures never hide another's.
    let log: Log
    /// Bytes of queued records (compressed) per request.
    let batchBytes: Int
    let minBackoff: Double
    let maxBackoff: Double
    /// `queue_config`'s capacity: samples held in memory while a post is
    /// in flight before pushes go to disk.
    let capacity: Int?
    /// `queue_config`'s max_samples_per_send: samples in one request.
    let maxSamplesPerSend: Int?
    private let wake = WakeEvent()
    private let stopping = Atomic<Bool>(false)
    private let running = Atomic<Bool>(false)

    struct Counts: Sendable {
        var sent: UInt64 = 0
        var retried: UInt64 = 0
        var rejected: UInt64 = 0
        var duplicate: UInt64 = 0
        var sentBytes: UInt64 = 0
        var lastSuccess: Double?
        /// Samples of the last request accepted.
        var lastSent: UInt64 = 0
        /// Samples that could not be written to the queue (a full disk, an
        /// I/O error) and were in memory nowhere else.
        var unwritable: UInt64 = 0
    }

    private let counts = Mutex(Counts())

    /// Pushes not on disk: while the queue on disk is empty and the
    /// receiver keeps up, a push goes from memory, and nothing is written.
    struct Memory: Sendable {
        /// Pushes taken since the post in flight began (or waiting for one).
        var records: [(payload: [UInt8], samples: UInt32)] = []
        /// The post in flight from memory: its exact body and samples.
        var flying: (body: [UInt8], samples: UInt64)?
        /// Where that body went on disk, as one record marked in flight,
        /// when it had to be written there before the post ended.
        var spilled: DiskQueue.Position?
        /// Pushes go to disk until the queue drains.
        var toDisk = false
    }

    private let memory = Mutex(Memory())

    package init(
        url: String, queue: DiskQueue, transport: any RemoteWriteTransport, batchBytes: Int = 4 << 20, minBackoff: Double = 0.1,
        maxBackoff: Double = 5, capacity: Int? = nil, maxSamplesPerSend: Int? = nil, log: Log
    ) {
        self.capacity = capacity
        self.maxSamplesPerSend = maxSamplesPerSend
        label = Self.withoutCredentials(url)
        self.queue = queue
        self.transport = transport
        self.batchBytes = batchBytes
        self.minBackoff = minBackoff
        self.maxBackoff = maxBackoff
        self.log = log.separate()
    }

    /// The URL as the `url` label and the log say it: without a user name
    /// or password (`user:pass@`) and without its query and fragment, where
    /// receivers take API keys (`?api_key=...`).
    package static func withoutCredentials(_ url: String) -> String {
        let (scheme, authority, rest) = parts(url)
        var path = rest
        if let cut = path.firstIndex(where: { $0 == "?" || $0 == "#" }) { path = path[..<cut] }
        let host = authority.lastIndex(of: "@").map { authority[authority.index(after: $0)...] } ?? authority
        return String(scheme) + String(host) + String(path)
    }

    /// Whether the URL names a user (and maybe a password) before its host.
    package static func hasUserInfo(_ url: String) -> Bool { parts(url).authority.contains("@") }

    /// `scheme://`, the authority, and the rest (path, query, fragment).
    static func parts(_ url: String) -> (scheme: Substring, authority: Substring, rest: Substring) {
        guard let range = url.firstRange(of: "://") else { return ("", "", url[...]) }
        let after = url[range.upperBound...]
        let end: String.Index = after.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? after.endIndex
        return (url[..<range.upperBound], after[..<end], after[end...])
    }

    package var status: RemoteWriteStatus {
        var status = RemoteWriteStatus(url: label)
        let q = queue.counts
        status.queueBytes = q.bytes
        status.queueSamples = q.samples
        status.droppedQueueFull = q.droppedFull
        status.droppedCorrupt = q.droppedCorrupt
        counts.withLock { c in
            status.sent = c.sent
            status.retried = c.retried
            status.droppedRejected = c.rejected
            status.duplicate = c.duplicate
            status.sentBytes = c.sentBytes
            status.droppedUnwritable = c.unwritable
            status.lastSuccess = c.lastSuccess
        }
        return status
    }

    /// Queues one push's series (snappy-compressed) and wakes the sender.
    /// The push stays in memory while the sender is idle and nothing waits
    /// on disk; otherwise it is synced to disk before this returns, after
    /// any push in flight (which may yet fail).
    package func enqueue(payload: [UInt8], samples: UInt32) {
        guard let compressed = RemoteWriteLibraries.compress(payload) else {
            counts.withLock { $0.unwritable += UInt64(samples) }
            log.warning("remote write \(label): snappy failed; \(samples) samples not queued (counted as dropped, reason write_failed)")
            return
        }
        memory.withLock { m in
            // Past the capacity, what waits in memory goes to disk too.
            let held = m.records.reduce(UInt64(samples)) { $0 + UInt64($1.samples) }
            if m.toDisk || !queue.isEmpty || m.flying != nil || capacity.map({ held > UInt64($0) }) == true {
                spill(&m)
                if write(compressed, samples) == nil { lost(UInt64(samples)) }
            } else {
                m.records.append((compressed, samples))
            }
        }
        wake.signal()
    }

    /// Everything in memory to disk, in order, and pushes after it too:
    /// the post in flight first, as the one record it posted, marked in
    /// flight (if the receiver had it, a copy is refused alone). A push
    /// that cannot be written is lost, and counted; the post in flight only
    /// once it failed (`flyingFailed`): until then it may yet arrive.
    private func spill(_ m: inout Memory, flyingFailed: Bool = false) {
        m.toDisk = true
        if let flying = m.flying, m.spilled == nil {
            m.spilled = write(flying.body, UInt32(clamping: flying.samples))
            if let position = m.spilled {
                do throws(SystemError) {
                    try queue.markInFlight(position)
                } catch {
                    log.warning("remote write \(label): cannot record the request in flight: \(error.message)")
                }
            } else if flyingFailed {
                lost(flying.samples)
            }
        }
        for r in m.records where write(r.payload, r.samples) == nil { lost(UInt64(r.samples)) }
        m.records = []
    }

    private func write(_ payload: [UInt8], _ samples: UInt32) -> DiskQueue.Position? {
        do throws(SystemError) {
            return try queue.append(payload: payload, samples: samples)
        } catch {
            log.warning("remote write \(label): cannot queue \(samples) samples: \(error.message); dropped (counted as dropped, reason write_failed)")
            return nil
        }
    }

    /// Samples in memory nowhere else that the queue could not take.
    private func lost(_ samples: UInt64) {
        counts.withLock { $0.unwritable += samples }
    }

    /// Starts the sender thread.
    package func start() throws(SystemError) {
        guard !running.exchange(true, ordering: .acquiringAndReleasing) else { return }
        do throws(SystemError) {
            try startThread { self.run() }
        } catch {
            running.store(false, ordering: .releasing)
            throw error
        }
    }

    /// Waits up to `timeout` seconds for the pushes held in memory to be
    /// posted (a stop's last push, its stale markers): while the receiver
    /// keeps up they arrive now; otherwise `stop` writes them to disk.
    package func drain(timeout: Double) {
        let deadline = monotonicSeconds() + timeout
        while monotonicSeconds() < deadline, running.load(ordering: .acquiring) {
            let idle = memory.withLock { $0.records.isEmpty && $0.flying == nil && !$0.toDisk }
            if idle { return }
            wake.signal()
            sleepSeconds(0.01)
        }
    }

    /// Stops the sender after its request in flight; what is queued stays,
    /// pushes in memory (the one in flight too) written to disk first.
    package func stop() {
        stopping.store(true, ordering: .releasing)
        memory.withLock { m in
            if m.flying != nil || !m.records.isEmpty { spill(&m) }
        }
        wake.signal()
    }

    var stopped: Bool { stopping.load(ordering: .acquiring) }

    func run() {
        var attempt = 0
        var failingSince: Double?
        /// Since the receiver came back: how long it was gone and the
        /// samples sent before it, until what waited has gone out.
        var recovering: (down: Double, sentBefore: UInt64)?
        while !stopped {
            switch sendOnce() {
            case nil:
                if let r = recovering {
                    let replayed = counts.withLock { $0.sent } - r.sentBefore
                    log.info(
                        "remote write \(label): the receiver is back after \(Units.duration(r.down)) of failures; \(replayed) samples that waited were sent"
                    )
                    recovering = nil
                }
                wake.wait(1)
            case .sent?, .drop?:
                if let since = failingSince {
                    // The request that just went is among what waited.
                    recovering = (monotonicSeconds() - since, counts.withLock { $0.sent - $0.lastSent })
                }
                attempt = 0
                failingSince = nil
            case .retry(let retryAfter)?:
                attempt += 1
                if failingSince == nil { failingSince = monotonicSeconds() }
                var remaining = RetryPolicy.delay(attempt: attempt, retryAfter: retryAfter, minimum: minBackoff, maximum: maxBackoff)
                while remaining > 0 && !stopped {
                    let slice = min(remaining, 0.25)
                    sleepSeconds(slice)
                    remaining -= slice
                }
            }
        }
        running.store(false, ordering: .releasing)
    }

    package enum Attempt: Sendable, Equatable {
        case sent
        case drop
        case retry(retryAfter: Double?)
    }

    /// Sends the oldest batch once (from disk, else from memory); nil when
    /// nothing waits.
    package func sendOnce() -> Attempt? {
        if let batch = queue.peek(maxBytes: batchBytes, maxSamples: maxSamplesPerSend.map(UInt64.init) ?? .max) { return send(batch) }
        let taken = memory.withLock { m -> (body: [UInt8], samples: UInt64)? in
            // A push may have gone to disk since the peek.
            guard queue.isEmpty, !stopped else { return nil }
            m.toDisk = false
            guard !m.records.isEmpty else { return nil }
            var bytes = 0, count = 0, samples = 0
            for r in m.records {
                if count > 0 && (bytes + r.payload.count > batchBytes || samples + Int(r.samples) > maxSamplesPerSend ?? .max) { break }
                bytes += r.payload.count
                samples += Int(r.samples)
                count += 1
            }
            let picked = m.records.prefix(count)
            guard let body = Self.body(picked.map(\.payload)) else { return nil }
            m.records.removeFirst(count)
            m.flying = (body, picked.reduce(UInt64(0)) { $0 + UInt64($1.samples) })
            m.spilled = nil
            return m.flying
        }
        guard let taken else { return nil }
        let attempt = post(taken.body, samples: taken.samples, resent: false)
        memory.withLock { m in
            defer {
                m.flying = nil
                m.spilled = nil
            }
            if case .retry = attempt {
                // Failed: to disk, in order, and from there on (spill marks
                // it in flight).
                spill(&m, flyingFailed: true)
            } else if let position = m.spilled {
                // Sent or refused, but on disk meanwhile: settled there
                // (unless the bound dropped it first).
                do throws(SystemError) {
                    // Dropped for room meanwhile: not a loss if it was sent.
                    if try !queue.commit(through: position), attempt == .sent { queue.delivered(droppedSamples: taken.samples) }
                } catch {
                    log.warning("remote write \(label): cannot record progress: \(error.message)")
                }
            }
        }
        return attempt
    }

    /// Posts a batch from disk, recording it in flight first; settles it.
    func send(_ batch: DiskQueue.Batch) -> Attempt {
        guard let body = Self.body(batch) else {
            log.warning("remote write \(label): snappy failed")
            return .retry(retryAfter: nil)
        }
        do throws(SystemError) {
            try queue.markInFlight(batch)
        } catch {
            log.warning("remote write \(label): cannot record the request in flight: \(error.message); retrying")
            return .retry(retryAfter: nil)
        }
        let attempt = post(body, samples: batch.samples, resent: batch.resent)
        if case .retry = attempt { return attempt }
        commit(batch)
        return attempt
    }

    /// One POST and what it means: counted and logged.
    func post(_ body: [UInt8], samples: UInt64, resent: Bool) -> Attempt {
        let outcome = transport.post(body)
        counts.withLock { $0.sentBytes += UInt64(max(0, outcome.uploadedBytes)) }
        switch RetryPolicy.classify(outcome) {
        case .sent:
            counts.withLock {
                $0.sent += samples
                $0.lastSent = samples
                $0.lastSuccess = wallClock()
            }
            return .sent
        case .drop where resent && outcome.status == 400:
            counts.withLock { $0.duplicate += samples }
            log.warning(
                "remote write \(label): the receiver refused \(samples) samples posted again (HTTP \(outcome.status): \(Self.oneLine(outcome.message))); most likely it had them from the earlier try"
            )
            return .drop
        case .drop:
            counts.withLock { $0.rejected += samples }
            log.warning(
                "remote write \(label): the receiver refused \(samples) samples (HTTP \(outcome.status): \(Self.oneLine(outcome.message))); dropped"
            )
            return .drop
        case .retry:
            counts.withLock { $0.retried += samples }
            let what = outcome.status == 0 ? outcome.message : "HTTP \(outcome.status): \(Self.oneLine(outcome.message))"
            log.warning("remote write \(label): \(what); retrying")
            return .retry(retryAfter: outcome.retryAfter)
        }
    }

    /// A request's body: the one record's snappy block as it is, or the
    /// records' series joined into one block.
    package static func body(_ batch: DiskQueue.Batch) -> [UInt8]? { body(batch.payloads) }

    static func body(_ payloads: [[UInt8]]) -> [UInt8]? {
        if payloads.count == 1 { return payloads[0] }
        var joined: [UInt8] = []
        for part in payloads {
            guard let series = RemoteWriteLibraries.uncompress(part) else { return nil }
            joined += series
        }
        return RemoteWriteLibraries.compress(joined)
    }

    private func commit(_ batch: DiskQueue.Batch) {
        do throws(SystemError) {
            try queue.commit(batch)
        } catch {
            log.warning("remote write \(label): cannot record progress: \(error.message)")
        }
    }

    static func oneLine(_ text: String) -> String {
        String(text.prefix(200).map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}

/// Pushes the series a text scrape of the source (serve's scrape cache)
/// gets to each writer's queue:
/// a sample at least `every` seconds after the last one pushed (half a
/// sampling interval early counts, so jitter skips none), every sample when
/// `every` is not longer than the sampling interval. Add it as an enricher
/// (it shows the writers' status in the exposition) and as a sink after
/// the scrape feed.
package final class RemoteWriteFeed: PipelineEnricher, PipelineSink {
    let source: any SeriesSource
    package let writers: [RemoteWriter]
    let every: Double
    let sampleInterval: Double
    private let lastPushed = Mutex<Double?>(nil)
    private let encoder: Mutex<PushState>

    /// The encoder, and the interfaces gone whose final value was pushed.
    struct PushState {
        var encoder: SeriesEncoder
        /// Each interface gone, with the final figures pushed for it.
        var finalPushed: [SeriesKey: Counters] = [:]
    }

    /// At most this many samples in one record (and so one request);
    /// nil: a push is one record.
    let maxSamplesPerRecord: Int?

    package init(
        source: any SeriesSource, writers: [RemoteWriter], externalLabels: [(String, String)], relabel: [RelabelRule] = [], every: Double = 0,
        sampleInterval: Double = 1, maxSamplesPerRecord: Int? = nil
    ) {
        self.source = source
        self.writers = writers
        self.every = every
        self.sampleInterval = sampleInterval
        self.maxSamplesPerRecord = maxSamplesPerRecord
        encoder = Mutex(PushState(encoder: SeriesEncoder(externalLabels: externalLabels, relabel: relabel)))
        source.setRemoteWrite(writers.map(\.status))
    }

    /// Whether the sample at `wallTime` is pushed.
    package func due(_ wallTime: Double) -> Bool {
        guard every > sampleInterval else { return true }
        return lastPushed.withLock { last in
            // A clock set back pushes at once.
            if let l = last, wallTime >= l, wallTime - l < every - sampleInterval / 2 { return false }
            last = wallTime
            return true
        }
    }

    package func enrich(_ update: borrowing PipelineUpdate) {
        source.setRemoteWrite(writers.map(\.status))
    }

    package func receive(_ update: borrowing PipelineUpdate) {
        guard case .sampled = update.outcome, due(update.wallTime) else { return }
        let (payload, count) = encode(timestampMs: Int64((update.wallTime * 1000).rounded()))
        enqueue(payload, count)
    }

    /// The loop ended (a stop): every series ends, so its stale marker goes
    /// out, through the queue, before the writers stop.
    package func finished() {
        let (payload, count) = encoder.withLock { $0.encoder.encodeEnd(timestampMs: Int64((wallClock() * 1000).rounded())) }
        if count > 0 { enqueue(payload, count) }
    }

    /// To every writer, in records of at most `maxSamplesPerRecord`.
    private func enqueue(_ payload: [UInt8], _ count: UInt32) {
        let parts =
            maxSamplesPerRecord.map { count > UInt32($0) ? RemoteWriteEncoding.split(payload, maxSeries: $0) : [(payload, count)] }
            ?? [(payload, count)]
        for writer in writers {
            for part in parts { writer.enqueue(payload: part.bytes, samples: part.count) }
        }
    }

    /// The source's series as WriteRequest entries, stamped `timestampMs`:
    /// encoded as they are visited, never rendered to text. An interface
    /// gone (deleted, or missing from the sample) is pushed once more, with
    /// its final value, and left out from the next push on, so that push
    /// carries its stale marker: a receiver's instant queries drop it
    /// within one push, as a scrape of node_exporter would, instead of
    /// after `--series-lifetime` (which /metrics keeps: a scraper must see
    /// the final value). One that comes back resumes: its totals never
    /// went down.
    package func encode(timestampMs: Int64) -> ([UInt8], UInt32) {
        encoder.withLock { state in
            var finals: [SeriesKey: Counters] = [:]
            let encoded = state.encoder.encode(timestampMs: timestampMs) { visitor in
                source.visitSeries(&visitor) { row in
                    guard !row.present else { return true }
                    // Pushed while its final figures are new: once for each
                    // time it goes (a name that comes back and goes again
                    // between two pushes has new ones).
                    finals[row.key] = row.counters
                    return state.finalPushed[row.key] != row.counters
                }
            }
            // Only the interfaces still gone are remembered.
            state.finalPushed = finals
            return encoded
        }
    }
}
