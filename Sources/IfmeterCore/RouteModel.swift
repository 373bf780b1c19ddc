/// Where ordinary traffic leaves, and how much went around a tunnel.
///
/// A tunnel that is up proves nothing about where packets go; the kernel's
/// routing decision and the counters do. A probe is an address the kernel
/// is asked about (no packet is sent): the interface its packets would leave
/// by, and whether that is a tunnel. The outside estimate is, per tunnel and
/// direction, over a window:
///
///     outside = underlay bytes - tunnel bytes - tunnel packets x overhead
///
/// floored at 0, where the overhead is what the underlay counts per tunnel
/// packet beyond the tunnel's own count (the outer IP and UDP headers, and
/// the underlay's link header). It is the traffic that used the underlay
/// without the tunnel: local network traffic, the tunnel's own control
/// traffic, and leaks.

/// One probe's routing decision.
public struct ProbeRoute: Sendable, Hashable {
    public var probe: String
    /// The interface its packets would leave by; nil when there is no route.
    public var interface: String?
    public var classification: Classification?
    public var gateway: String?
    /// Why there is no route, when there is none.
    public var failure: String?

    public init(probe: String, interface: String? = nil, classification: Classification? = nil, gateway: String? = nil, failure: String? = nil) {
        self.probe = probe
        self.interface = interface
        self.classification = classification
        self.gateway = gateway
        self.failure = failure
    }

    public var viaTunnel: Bool { classification?.kind == .tunnel }
    /// Its packets would leave, and not through a tunnel.
    public var leavesOutside: Bool { interface != nil && !viaTunnel }
}

/// A tunnel and the interface that carries it.
public struct TunnelUnderlay: Sendable, Hashable {
    public var tunnel: String
    public var underlay: String?
    /// How the underlay was found: `--underlay`, the route to the endpoint,
    /// or the best default route outside the tunnels.
    public var evidence: String
    public var overheadBytes: Int
    /// Another tunnel uses the same underlay: each one's estimate also
    /// holds the other's packets.
    public var sharedUnderlay: Bool

    public init(tunnel: String, underlay: String?, evidence: String, overheadBytes: Int, sharedUnderlay: Bool = false) {
        self.tunnel = tunnel
        self.underlay = underlay
        self.evidence = evidence
        self.overheadBytes = overheadBytes
        self.sharedUnderlay = sharedUnderlay
    }

    /// The default overhead per tunnel packet: the outer headers of the
    /// tunnel's kind (a plain tun carried over UDP: 28 bytes of IPv4 and
    /// UDP; WireGuard: 60), plus the underlay's link header (14 on
    /// Ethernet-like links, 0 on raw-IP links such as a cellular modem's).
    public static func defaultOverhead(tunnel: Classification?, underlayARPHRD: Int?) -> Int {
        let outer = tunnel?.evidence.contains("wireguard") == true ? 60 : 28
        let link = underlayARPHRD == 1 ? 14 : 0 // ARPHRD_ETHER
        return outer + link
    }
}

/// The outside estimate of one tunnel over a window.
public struct OutsideEstimate: Sendable, Hashable {
    public var seconds: Double
    public var tunnelBytes: (rx: UInt64, tx: UInt64)
    public var tunnelPackets: (rx: UInt64, tx: UInt64)
    public var underlayBytes: (rx: UInt64, tx: UInt64)
    public var outsideBytes: (rx: UInt64, tx: UInt64)
    /// The worse of the two interfaces' qualities.
    public var quality: Quality
    /// A lower-bound input or a shared underlay: the figure may be off
    /// either way.
    public var uncertain: Bool

    public static func == (a: OutsideEstimate, b: OutsideEstimate) -> Bool {
        a.seconds == b.seconds && a.tunnelBytes == b.tunnelBytes && a.tunnelPackets == b.tunnelPackets
            && a.underlayBytes == b.underlayBytes && a.outsideBytes == b.outsideBytes && a.quality == b.quality && a.uncertain == b.uncertain
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(outsideBytes.rx)
        hasher.combine(outsideBytes.tx)
    }

    /// `underlay - tunnel - packets x overhead`, floored at 0.
    public static func outside(underlay: UInt64, tunnel: UInt64, packets: UInt64, overhead: Int) -> UInt64 {
        let (perPacket, o1) = packets.multipliedReportingOverflow(by: UInt64(max(0, overhead)))
        let (used, o2) = tunnel.addingReportingOverflow(perPacket)
        if o1 || o2 { return 0 }
        return underlay > used ? underlay - used : 0
    }

    /// The estimate from the two interfaces' deltas over the same window.
    public init(tunnel: InterfaceDelta, underlay: InterfaceDelta, overhead: Int, sharedUnderlay: Bool) {
        seconds = tunnel.seconds ?? underlay.seconds ?? 0
        tunnelBytes = (tunnel.counters.rxBytes, tunnel.counters.txBytes)
        tunnelPackets = (tunnel.counters.rxPackets, tunnel.counters.txPackets)
        underlayBytes = (underlay.counters.rxBytes, underlay.counters.txBytes)
        outsideBytes = (
            Self.outside(
                underlay: underlay.counters.rxBytes, tunnel: tunnel.counters.rxBytes, packets: tunnel.counters.rxPackets, overhead: overhead),
            Self.outside(underlay: underlay.counters.txBytes, tunnel: tunnel.counters.txBytes, packets: tunnel.counters.txPackets, overhead: overhead)
        )
        quality = max(tunnel.quality, underlay.quality)
        uncertain = sharedUnderlay || quality == .lowerBound
    }

    public init(
        seconds: Double, tunnelBytes: (rx: UInt64, tx: UInt64), tunnelPackets: (rx: UInt64, tx: UInt64),
        underlayBytes: (rx: UInt64, tx: UInt64), outsideBytes: (rx: UInt64, tx: UInt64), quality: Quality, uncertain: Bool
    ) {
        self.seconds = seconds
        self.tunnelBytes = tunnelBytes
        self.tunnelPackets = tunnelPackets
        self.underlayBytes = underlayBytes
        self.outsideBytes = outsideBytes
        self.quality = quality
        self.uncertain = uncertain
    }
}

/// What `serve --probe` adds to the exposition.
public struct RouteExposition: Sendable, Hashable {
    public var egress: [ProbeRoute]
    public var outside: [OutsideTotal]

    public init(egress: [ProbeRoute] = [], outside: [OutsideTotal] = []) {
        self.egress = egress
        self.outside = outside
    }
}

/// A tunnel's outside estimate summed since serve started: each interval's
/// estimate, floored at 0, added up (so it never goes down).
public struct OutsideTotal: Sendable, Hashable {
    public var tunnel: String
    public var underlay: String
    public var rxBytes: UInt64 = 0
    public var txBytes: UInt64 = 0
    public var uncertain = false

    public init(tunnel: String, underlay: String) {
        self.tunnel = tunnel
        self.underlay = underlay
    }

    /// Which tunnel over which underlay a total is for.
    public struct Key: Sendable, Hashable {
        public var tunnel: String
        public var underlay: String

        public init(tunnel: String, underlay: String) {
            self.tunnel = tunnel
            self.underlay = underlay
        }
    }

    public var key: Key { Key(tunnel: tunnel, underlay: underlay) }
}

/// The route part of the live view's summary line: where the first probe
/// with a route leaves, and the outside rate of the last interval.
public struct RouteSummary: Sendable, Hashable {
    public var probe: String
    /// nil: no probe has a route.
    public var interface: String?
    public var viaTunnel: Bool
    public var outsideRx: Double?
    public var outsideTx: Double?
    public var uncertain: Bool
    /// Whether there is any tunnel: without one, leaving "outside the
    /// tunnels" is no warning.
    public var tunnels: Bool
    /// There are tunnels, and none has an underlay now (no --underlay, no
    /// --endpoint, no default route outside the tunnels): nothing to
    /// measure the outside on.
    public var underlayUnknown: Bool

    public init(
        probe: String, interface: String?, viaTunnel: Bool, outsideRx: Double? = nil, outsideTx: Double? = nil, uncertain: Bool = false,
        tunnels: Bool = true, underlayUnknown: Bool = false
    ) {
        self.tunnels = tunnels
        self.underlayUnknown = underlayUnknown
        self.probe = probe
        self.interface = interface
        self.viaTunnel = viaTunnel
        self.outsideRx = outsideRx
        self.outsideTx = outsideTx
        self.uncertain = uncertain
    }
}
