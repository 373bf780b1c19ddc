import IfmeterCore
import IfmeterModel

/// node_exporter 1.5's netclass families (its default, sysfs-reading mode),
/// served by `--compat node` from the link catalog's facts: what netlink
/// carries from the link messages, what only sysfs has from sysfs.
extension ExpositionTables {
    enum NetclassValue {
        /// A number, or nil to leave the interface out (node_exporter leaves
        /// out what it cannot read).
        case number(@Sendable (ExpositionRow, LinkAttributes, NetclassFacts) -> Int64?)
        /// `node_network_info`.
        case info
    }

    /// In node_exporter's order (by name), with its types.
    static let netclassFamilies: [(property: String, kind: SeriesKind, value: NetclassValue)] = [
        ("address_assign_type", .gauge, .number { _, _, f in f.sysfs.addressAssignType.map(Int64.init) }),
        // sysfs answers `carrier` and `dormant` only while the link is up.
        ("carrier", .gauge, .number { _, _, f in f.running ? f.carrier.map(Int64.init) : nil }),
        ("carrier_changes_total", .counter, .number { _, _, f in Int64(f.carrierChanges) }),
        ("carrier_down_changes_total", .counter, .number { _, _, f in Int64(f.carrierDownCount) }),
        ("carrier_up_changes_total", .counter, .number { _, _, f in Int64(f.carrierUpCount) }),
        ("device_id", .gauge, .number { _, _, f in f.sysfs.devID.map(Int64.init) }),
        ("dormant", .gauge, .number { _, _, f in f.running ? (f.dormant ? 1 : 0) : nil }),
        ("flags", .gauge, .number { _, _, f in Int64(f.flags) }),
        ("iface_id", .gauge, .number { i, _, _ in i.index.map(Int64.init) }),
        ("iface_link", .gauge, .number { _, _, f in Int64(f.ifaceLink) }),
        ("iface_link_mode", .gauge, .number { _, _, f in Int64(f.linkMode) }),
        ("info", .gauge, .info),
        ("mtu_bytes", .gauge, .number { _, a, _ in a.mtu.map(Int64.init) }),
        ("name_assign_type", .gauge, .number { _, _, f in f.sysfs.nameAssignType.map(Int64.init) }),
        ("net_dev_group", .gauge, .number { _, _, f in Int64(f.group) }),
        ("protocol_type", .gauge, .number { _, a, _ in a.arphrdType.map(Int64.init) }),
        // Mbit/s to bytes/s as node_exporter does: -1 (unknown) is -125000.
        ("speed_bytes", .gauge, .number { _, _, f in f.sysfs.speedMbps.map { Int64($0) * 1_000_000 / 8 } }),
        ("transmit_queue_length", .gauge, .number { _, _, f in Int64(f.transmitQueueLength) }),
        ("up", .gauge, .number { _, a, _ in a.operstate.map { $0 == "up" ? 1 : 0 } }),
    ]

    static func netclassHelp(_ property: String) -> String {
        switch property {
        case "info": "Non-numeric data from /sys/class/net/<iface>, value is always 1."
        case "up": "Value is 1 if operstate is 'up', 0 otherwise."
        default: "Network device property: \(property)"
        }
    }
}

extension ExpositionWriter {
    /// The netclass families of the interfaces whose attributes carry
    /// netclass facts (a netlink sampler asked for them), under
    /// node_exporter's names, labels and HELP text.
    mutating func writeNetclass(_ interfaces: [ExpositionRow]) {
        let rows = interfaces.compactMap { i -> (ExpositionRow, LinkAttributes, NetclassFacts)? in
            guard let attributes = i.attributes, let facts = attributes.netclass else { return nil }
            return (i, attributes, facts)
        }
        guard !rows.isEmpty else { return }
        for family in ExpositionTables.netclassFamilies {
            let name = "node_network_" + family.property
            switch family.value {
            case .info:
                header("node_network_info", .gauge, help: ExpositionTables.netclassHelp(family.property))
                for (i, attributes, facts) in rows {
                    var labels = [
                        ("address", NetclassFacts.spell(facts.address)),
                        ("broadcast", NetclassFacts.spell(facts.broadcast)),
                        ("device", i.name),
                        ("duplex", facts.sysfs.duplex ?? ""),
                        ("ifalias", facts.ifalias ?? ""),
                        ("operstate", attributes.operstate ?? ""),
                    ]
                    if !i.netns.isEmpty { labels.append(("netns", i.netns)) }
                    labeledSample("node_network_info", labels.sorted { $0.0 < $1.0 }, .unsigned(1))
                }
            case .number(let value):
                let values = rows.compactMap { row in value(row.0, row.1, row.2).map { (row.0, $0) } }
                guard !values.isEmpty else { continue }
                let counter = family.kind == .counter
                header(counter ? String(name.dropLast("_total".count)) : name, family.kind, help: ExpositionTables.netclassHelp(family.property))
                for (i, number) in values {
                    var labels = [("device", i.name)]
                    if !i.netns.isEmpty { labels.append(("netns", i.netns)) }
                    labeledSample(name, labels, .signed(number))
                }
            }
        }
    }
}
