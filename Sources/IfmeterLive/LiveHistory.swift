import IfmeterCore
import IfmeterSystem

/// How long a detail graph looks back; `t` (or Tab) cycles through them.
package enum LiveSpan: Int, Sendable, CaseIterable {
    /// One column per sample: the last `LiveModel.historyLength` intervals.
    case recent
    /// 40 s columns: the last hour.
    case hour
    /// 15 min columns: the last day.
    case day

    var next: LiveSpan { LiveSpan(rawValue: (rawValue + 1) % LiveSpan.allCases.count)! }

    /// Seconds one column stands for (the recent span's is the interval).
    package func resolution(interval: Double) -> Double {
        switch self {
        case .recent: interval
        case .hour: BucketHistory.hourBucket
        case .day: BucketHistory.dayBucket
        }
    }

    /// How many columns the span keeps.
    package var capacity: Int {
        switch self {
        case .recent: LiveModel.historyLength
        case .hour: BucketHistory.hourCapacity
        case .day: BucketHistory.dayCapacity
        }
    }

    /// `last 2m`, `last hour`, `last day`.
    package func title(interval: Double) -> String {
        switch self {
        case .recent: "last " + LiveRenderer.shortDuration(interval * Double(LiveModel.historyLength))
        case .hour: "last hour"
        case .day: "last day"
        }
    }
}

/// How the row sparklines are scaled; `a` switches.
package enum LiveScale: String, Sendable {
    /// Every row on one scale: bars compare across rows.
    case shared
    /// Each row on its own peak: the shape of a quiet row shows.
    case perRow
    /// Every row on one logarithmic scale (of 1 + bytes per second): a
    /// quiet row shows beside a busy one, and the rows still compare.
    case log

    /// The next one `a` switches to.
    package var next: LiveScale {
        switch self {
        case .shared: .perRow
        case .perRow: .log
        case .log: .shared
        }
    }
}

/// What the list's rate columns count; `b` switches. The bars and totals
/// stay in bytes.
package enum LiveRateUnit: Sendable {
    case bytes, bits, packets

    /// The next one `b` switches to.
    package var next: LiveRateUnit {
        switch self {
        case .bytes: .bits
        case .bits: .packets
        case .packets: .bytes
        }
    }
}

/// Average rates over fixed buckets of (wall clock) time, for the longer
/// spans: a ring of `capacity` completed buckets plus the one being filled.
/// Floats: 4 bytes a value, two values a bucket, whatever the run's length.
package struct BucketHistory: Sendable {
    /// 40 s steps: the hour fits 90 columns; 15 min steps: the day fits 96.
    package static let hourBucket = 40.0
    package static let hourCapacity = 90
    package static let dayBucket = 900.0
    package static let dayCapacity = 96

    package let bucketSeconds: Double
    package let capacity: Int
    private var rx: [Float] = []
    private var tx: [Float] = []
    private var start = 0
    /// The bucket being filled (its number since the epoch), and what it holds.
    private var current: Int?
    private var rxBytes = 0.0, txBytes = 0.0, seconds = 0.0

    package init(bucketSeconds: Double, capacity: Int) {
        self.bucketSeconds = bucketSeconds
        self.capacity = capacity
    }

    /// Adds one interval (`seconds` long, ending at `time`) at these rates.
    /// Buckets no interval fell in are kept as unknown (NaN), not zero.
    package mutating func add(rx rxRate: Double, tx txRate: Double, seconds: Double, at time: Double) {
        guard seconds > 0, rxRate.isFinite, txRate.isFinite else { return }
        let bucket = Int((time / bucketSeconds).rounded(.down))
        if let current, bucket != current {
            if bucket > current {
                push(self.seconds > 0 ? Float(rxBytes / self.seconds) : .nan, self.seconds > 0 ? Float(txBytes / self.seconds) : .nan)
                for _ in 0..<min(capacity, bucket - current - 1) { push(.nan, .nan) }
            }
            rxBytes = 0
            txBytes = 0
            self.seconds = 0
        }
        current = bucket
        rxBytes += rxRate * seconds
        txBytes += txRate * seconds
        self.seconds += seconds
    }

    private mutating func push(_ r: Float, _ t: Float) {
        if rx.count < capacity {
            rx.append(r)
            tx.append(t)
        } else {
            rx[start] = r
            tx[start] = t
            start = (start + 1) % capacity
        }
    }

    /// Completed buckets, plus the one being filled.
    package var count: Int { rx.count + (current == nil ? 0 : 1) }

    /// The newest `n` averages (the bucket being filled last), oldest first;
    /// NaN for a bucket with no sample.
    package func suffix(_ n: Int, tx wantTx: Bool) -> [Double] {
        let partial = current.map { _ in seconds > 0 ? (wantTx ? txBytes : rxBytes) / seconds : Double.nan }
        let fromRing = min(rx.count, n - (partial == nil ? 0 : 1))
        var out: [Double] = []
        out.reserveCapacity(fromRing + 1)
        if fromRing > 0 {
            let ring = wantTx ? tx : rx
            let first = ring.count < capacity ? ring.count - fromRing : (start + capacity - fromRing) % capacity
            for k in 0..<fromRing { out.append(Double(ring[(first + k) % ring.count])) }
        }
        if let partial, n > 0 { out.append(partial) }
        return out
    }
}

/// Names in natural order: runs of digits compare as numbers, so `va2`
/// comes before `va19`; otherwise code point order. Equal-looking names
/// (`va01`, `va1`) fall back to plain code point order.
package enum NaturalOrder {
    package static func less(_ a: String, _ b: String) -> Bool {
        // Read in place: sorting thousands of names copies none.
        var a = a, b = b
        return a.withUTF8 { x in b.withUTF8 { y in less(x, y) } }
    }

    private static func less(_ x: UnsafeBufferPointer<UInt8>, _ y: UnsafeBufferPointer<UInt8>) -> Bool {
        var i = 0, j = 0
        while i < x.count, j < y.count {
            let dx = isDigit(x[i]), dy = isDigit(y[j])
            if dx, dy {
                // Skip leading zeros, then the longer run is the bigger number.
                var si = i, sj = j
                while si < x.count, x[si] == UInt8(ascii: "0") { si += 1 }
                while sj < y.count, y[sj] == UInt8(ascii: "0") { sj += 1 }
                var ei = si, ej = sj
                while ei < x.count, isDigit(x[ei]) { ei += 1 }
                while ej < y.count, isDigit(y[ej]) { ej += 1 }
                if ei - si != ej - sj { return ei - si < ej - sj }
                for k in 0..<(ei - si) where x[si + k] != y[sj + k] { return x[si + k] < y[sj + k] }
                // The same number: go on after both runs.
                var ri = i, rj = j
                while ri < x.count, isDigit(x[ri]) { ri += 1 }
                while rj < y.count, isDigit(y[rj]) { rj += 1 }
                i = ri
                j = rj
                continue
            }
            if x[i] != y[j] { return x[i] < y[j] }
            i += 1
            j += 1
        }
        if x.count - i != y.count - j { return x.count - i < y.count - j }
        // The same but for leading zeros: byte order.
        return x.lexicographicallyPrecedes(y)
    }

    /// The own namespace first, then namespaces and names in natural order.
    package static func less(_ a: SeriesKey, _ b: SeriesKey) -> Bool {
        if !ExactText.equal(a.netns, b.netns) {
            if a.netns.isEmpty || b.netns.isEmpty { return a.netns.isEmpty }
            return less(a.netns, b.netns)
        }
        return less(a.name, b.name)
    }

    @inline(__always) private static func isDigit(_ c: UInt8) -> Bool { c >= 0x30 && c <= 0x39 }
}

/// An interface's addresses, read for the selected interface only (by the
/// terminal driver, when the detail is open), never on the sampling path.
package struct LiveAddresses: Sendable, Equatable {
    package var key: SeriesKey
    /// Unix time they were read.
    package var time: Double
    package var mac: String?
    /// `10.0.0.1/24`
    package var ipv4: [String]
    /// `fe80::1/64`
    package var ipv6: [String]
    /// Why they could not be read, when they could not.
    package var failure: String?

    package init(key: SeriesKey, time: Double, mac: String? = nil, ipv4: [String] = [], ipv6: [String] = [], failure: String? = nil) {
        self.key = key
        self.time = time
        self.mac = mac
        self.ipv4 = ipv4
        self.ipv6 = ipv6
        self.failure = failure
    }
}

extension Quality {
    /// The mark the live view puts before a figure: none for an exact
    /// reading, `~` wrap-corrected, `≥` lower bound.
    package var liveMark: String {
        switch self {
        case .exact: ""
        case .wrapCorrected: "~"
        case .lowerBound: "≥"
        }
    }
}
