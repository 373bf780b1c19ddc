import IfmeterCore

/// Connections the scrape endpoint closed to protect itself, since it
/// started: for missing the request deadline; kept alive after a response
/// and sending no request line by the deadline (idle, as a scraper between
/// scrapes: not a slow request); to make room (the oldest waiting
/// connection of a client at its limit, or of all at the overall one); and
/// to keep the memory of responses being sent within its budget (the
/// oldest of them, a reader too slow to finish).
public struct HTTPConnectionCounts: Sendable, Hashable {
    public var deadline: UInt64
    public var idle: UInt64
    public var evicted: UInt64
    public var budget: UInt64

    public init(deadline: UInt64, idle: UInt64, evicted: UInt64, budget: UInt64 = 0) {
        self.deadline = deadline
        self.idle = idle
        self.evicted = evicted
        self.budget = budget
    }
}

/// How many times serve answered a path with a status of 5xx: a failure on
/// its side (the state file unreadable for the usage tables, a picture not
/// drawn, a render that failed), never the request's fault.
public struct HTTPServerErrorCount: Sendable, Hashable {
    public var path: String
    public var status: Int
    public var count: UInt64

    public init(path: String, status: Int, count: UInt64) {
        self.path = path
        self.status = status
        self.count = count
    }
}

/// What `serve --remote-write` shows of one receiver: its queue on disk and
/// what became of the samples (docs/metrics.md, "Remote write").
public struct RemoteWriteStatus: Sendable, Hashable {
    /// The receiver's URL, without credentials.
    public var url: String
    /// Bytes of samples waiting in the queue, and how many samples.
    public var queueBytes: UInt64 = 0
    public var queueSamples: UInt64 = 0
    public var sent: UInt64 = 0
    /// Samples in requests that failed and were tried again (each try counts).
    public var retried: UInt64 = 0
    /// Dropped because the queue was full (its oldest went first).
    public var droppedQueueFull: UInt64 = 0
    /// Dropped because the receiver refused them (a 4xx other than 429).
    public var droppedRejected: UInt64 = 0
    /// Lost because the queue could not take them (a full disk, an I/O
    /// error) while they were in memory nowhere else.
    public var droppedUnwritable: UInt64 = 0
    /// Lost to damage in the queue's files (found when the queue opened).
    public var droppedCorrupt: UInt64 = 0
    /// In a request posted again (after a failed try or a kill before its
    /// acknowledgement) that the receiver refused: most likely it had them.
    public var duplicate: UInt64 = 0
    /// Bytes of snappy-compressed request bodies that went out (each try
    /// counts, a part of one on an error).
    public var sentBytes: UInt64 = 0
    /// Unix time of the last accepted request.
    public var lastSuccess: Double?

    public init(url: String) { self.url = url }
}

/// A 5xx answer's path and status: what serve counts its failures by.
public struct HTTPServerErrorKey: Hashable, Sendable {
    public let path: String
    public let status: Int

    public init(path: String, status: Int) {
        self.path = path
        self.status = status
    }
}
