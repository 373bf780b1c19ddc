#if os(Linux)
import IfmeterCore
import IfmeterOutput
import IfmeterPipeline
import IfmeterSampling
import IfmeterSystem

/// What the route commands ask: probes, each tunnel's underlay, endpoint
/// and overhead where given, and the one namespace whose routing tables
/// are asked (nil: the own one).
package struct RouteSettings: Sendable {
    package var probes: [(text: String, address: IPAddress)]
    package var underlays: [String: String]
    package var endpoints: [String: IPAddress]
    package var overheads: [String: Int]
    package var namespace: String?

    package init(
        probes: [(text: String, address: IPAddress)], underlays: [String: String], endpoints: [String: IPAddress],
        overheads: [String: Int], namespace: String?
    ) {
        self.probes = probes
        self.underlays = underlays
        self.endpoints = endpoints
        self.overheads = overheads
        self.namespace = namespace
    }

    /// A router in the namespace asked about.
    package func router(watch: Bool) throws(SystemError) -> Router {
        if let namespace {
            do {
                return try NetworkNamespace.perform(in: namespace) { try Router(watch: watch) }
            } catch let error as SystemError {
                throw error
            } catch {
                throw SystemError(call: "setns(\(namespace))", message: "\(error)")
            }
        }
        return try Router(watch: watch)
    }
}

/// The two routing questions an analysis asks: where one address would
/// go, and which default routes there are. `Router` asks the kernel; tests
/// give a table of their own.
package protocol RouteTable {
    func lookup(_ address: IPAddress) throws(SystemError) -> RouteDecision
    func defaultRoutes() throws(SystemError) -> [DefaultRoute]
}

extension Router: RouteTable {}

/// Probes and underlays resolved against one sample's interfaces and the
/// kernel's routes. Used by `route`, and by `serve --probe` at every route
/// change.
package struct RouteAnalysis {
    let router: any RouteTable
    let interfaces: [InterfaceSample]
    let options: RouteSettings

    package init(router: any RouteTable, interfaces: [InterfaceSample], options: RouteSettings) {
        self.router = router
        self.interfaces = interfaces
        self.options = options
    }
    var underlays: [String: String] { options.underlays }
    var endpoints: [String: IPAddress] { options.endpoints }
    var overheads: [String: Int] { options.overheads }

    func interface(index: Int?) -> InterfaceSample? {
        guard let index else { return nil }
        return interfaces.first { $0.index == index }
    }

    func probe(_ text: String, _ address: IPAddress) throws(SystemError) -> ProbeRoute {
        let decision = try router.lookup(address)
        guard decision.failure == nil, let index = decision.interfaceIndex else {
            return ProbeRoute(probe: text, failure: decision.failure?.message ?? "no route")
        }
        let link = interface(index: index)
        return ProbeRoute(
            probe: text, interface: link?.name ?? "ifindex \(index)", classification: link?.classification,
            gateway: decision.gateway?.description)
    }

    /// The interface of the best default route whose interface is not a
    /// tunnel (IPv4 first, the main table first, then the lowest metric).
    func bestDefaultOutsideTunnels() throws(SystemError) -> (name: String, evidence: String)? {
        let routes = try router.defaultRoutes()
            .filter { interface(index: $0.interfaceIndex).map { $0.classification?.kind != .tunnel } ?? false }
            .sorted { ($0.ipv6 ? 1 : 0, $0.table == 254 ? 0 : 1, $0.metric) < ($1.ipv6 ? 1 : 0, $1.table == 254 ? 0 : 1, $1.metric) }
        return routes.first.flatMap { route in
            interface(index: route.interfaceIndex).map {
                ($0.name, "default route outside the tunnels (\(route.ipv6 ? "IPv6" : "IPv4"), metric \(route.metric), table \(route.table))")
            }
        }
    }

    /// Each tunnel's underlay, by the first rule that names one.
    package func tunnels() throws(SystemError) -> [TunnelUnderlay] {
        let tunnels = interfaces.filter { $0.classification?.kind == .tunnel }.sorted { $0.key < $1.key }
        guard !tunnels.isEmpty else { return [] }
        // The best default route outside the tunnels, asked once, and only
        // when a tunnel has neither --underlay nor --endpoint.
        let needsDefault = tunnels.contains { underlays[$0.name] == nil && endpoints[$0.name] == nil }
        let fallback = needsDefault ? try bestDefaultOutsideTunnels() : nil
        var found: [TunnelUnderlay] = []
        for tunnel in tunnels {
            var underlay: String?
            var evidence: String
            if let named = underlays[tunnel.name] {
                underlay = named
                evidence = "--underlay"
            } else if let endpoint = endpoints[tunnel.name] {
                let decision = try router.lookup(endpoint)
                underlay = interface(index: decision.interfaceIndex)?.name
                evidence = underlay == nil ? "no route to the endpoint \(endpoint)" : "route to the endpoint \(endpoint)"
            } else if let fallback {
                underlay = fallback.name
                evidence = fallback.evidence
            } else {
                evidence = "no default route outside the tunnels"
            }
            let arphrd = underlay.flatMap { name in interfaces.first { $0.name == name }?.attributes?.arphrdType }
            found.append(
                TunnelUnderlay(
                    tunnel: tunnel.name, underlay: underlay, evidence: evidence,
                    overheadBytes: overheads[tunnel.name] ?? TunnelUnderlay.defaultOverhead(tunnel: tunnel.classification, underlayARPHRD: arphrd)))
        }
        // Two tunnels on one underlay: each estimate holds the other's packets.
        let counts = Dictionary(grouping: found.compactMap(\.underlay), by: { $0 }).mapValues(\.count)
        for n in found.indices where (found[n].underlay.flatMap { counts[$0] } ?? 0) > 1 { found[n].sharedUnderlay = true }
        return found
    }

    package func probes() throws(SystemError) -> [ProbeRoute] {
        var routes: [ProbeRoute] = []
        for (text, address) in options.probes { routes.append(try probe(text, address)) }
        return routes
    }

    package func report(deltas: [InterfaceDelta]?) throws(SystemError) -> RouteReport {
        let routes = try probes()
        let byName = Dictionary((deltas ?? []).map { ($0.name, $0) }, uniquingKeysWith: { a, _ in a })
        let tunnels = try tunnels().map { t -> (underlay: TunnelUnderlay, estimate: OutsideEstimate?) in
            guard deltas != nil, let tunnel = byName[t.tunnel], let underlay = t.underlay.flatMap({ byName[$0] }) else { return (t, nil) }
            return (t, OutsideEstimate(tunnel: tunnel, underlay: underlay, overhead: t.overheadBytes, sharedUnderlay: t.sharedUnderlay))
        }
        return RouteReport(probes: routes, tunnels: tunnels)
    }
}
#endif
