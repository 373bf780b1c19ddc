import IfmeterCore

/// Connections the scrape endpoint closed to protect itself, since it
/// started: for missing the request deadline; kept alive after a response
/// and sending no request line by the deadline (idle, as a scraper between
/// scrapes: not a slow request); to make room (the oldest waiting
/// connection of a client at its limit, or of all at the overall one); and
/// to keep the memory of responses being sent within its budget (the
/// oldest of them, a reader too slow to finish).
package struct HTTPConnectionCounts: Sendable, Hashable {
    package var deadline: UInt64
    package var idle: UInt64
    package var evicted: UInt64
    package var budget: UInt64

    package init(deadline: UInt64, idle: UInt64, evicted: UInt64, budget: UInt64 = 0) {
        self.deadline = deadline
        self.idle = idle
        self.evicted = evicted
        self.budget = budget
    }
}

/// How many times serve answered a path with a status of 5xx: a failure on
/// its side (the state file unreadable for the usage tables, a picture not
/// drawn, a render that failed), never the request's fault.
package struct HTTPServerErrorCount: Sendable, Hashable {
    package var path: String
    package var status: Int
    package var count: UInt64

    package init(path: String, status: Int, count: UInt64) {
        self.path = path
        self.status = status
        self.count = count
    }
}

/// What `serve --remote-write` shows of one receiver: its queue on disk and
/// what became of the samples (docs/metrics.md, "Remote write").
package struct RemoteWriteStatus: Sendable, Hashable {
    /// The receiver's URL, without credentials.
    package var url: String
    /// Bytes of samples waiting in the queue, and how many samples.
    package var queueBytes: UInt64 = 0
    package var queueSamples: UInt64 = 0
    package var sent: UInt64 = 0
    /// Samples in requests that failed and were tried again (each try counts).
    package var retried: UInt64 = 0
    /// Dropped because the queue was full (its oldest went first).
    package var droppedQueueFull: UInt64 = 0
    /// Dropped because the receiver refused them (a 4xx other than 429).
    package var droppedRejected: UInt64 = 0
    /// Lost because the queue could not take them (a full disk, an I/O
    /// error) while they were in memory nowhere else.
    package var droppedUnwritable: UInt64 = 0
    /// Lost to damage in the queue's files (found when the queue opened).
    package var droppedCorrupt: UInt64 = 0
    /// In a request posted again (after a failed try or a kill before its
    /// acknowledgement) that the receiver refused: most likely it had them.
    package var duplicate: UInt64 = 0
    /// Bytes of snappy-compressed request bodies that went out (each try
    /// counts, a part of one on an error).
    package var sentBytes: UInt64 = 0
    /// Unix time of the last accepted request.
    package var lastSuccess: Double?

    package init(url: String) { self.url = url }
}

/// A 5xx answer's path and status: what serve counts its failures by.
package struct HTTPServerErrorKey: Hashable, Sendable {
    package let path: String
    package let status: Int

    package init(path: String, status: Int) {
        self.path = path
        self.status = status
    }
}
