#if os(Linux)
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore

/// Which network namespaces a source samples.
public enum NamespaceSelection: Sendable, Hashable {
    /// These named ones (`ip netns`), followed when they go and come back.
    case named([String])
    /// The own namespace and every named one, followed as they are created
    /// and removed.
    case all
}

/// Samples several network namespaces as one source: one sampler and one
/// notification socket per namespace, every interface and event marked
/// with its namespace (`netns`; empty for the own one), so series are keyed
/// by (namespace, name). Namespaces are looked for in /run/netns at every
/// sample: a new one is opened, and one that went away counts its
/// interfaces as deleted, with their counters read one last time (the
/// namespace lives on while its sockets are open, so these finals are seen).
///
/// Entering a namespace needs CAP_SYS_ADMIN.
public final class NamespaceSet: CounterSource {
    public let sourceName: String
    public let selection: NamespaceSelection
    private let kind: SourceKind
    private let options: SamplerOptions
    private var members: [Member] = []
    /// Per member (by name): the kernel's ids of the other members'
    /// namespaces as that member numbers them, for veth peers.
    private var peerIDs: [String: [Int32: String]] = [:]
    /// Events of members that went away, for the next reading.
    private var pending = LinkEvents()
    /// Tells when /run/netns changed, so that a sample costs no look there.
    private let watch = DirectoryWatch("/run/netns")
    /// A namespace file was there but could not be entered yet.
    private var unsettled = false

    private final class Member {
        let name: String
        let source: any CounterSource
        /// The namespace file, kept open: it names the namespace for
        /// RTM_GETNSID, and its inode tells a namespace recreated under
        /// the same name.
        let fd: Int32
        let inode: UInt64

        init(name: String, source: any CounterSource, fd: Int32, inode: UInt64) {
            self.name = name
            self.source = source
            self.fd = fd
            self.inode = inode
        }

        deinit { close(fd) }
    }

    /// Opens the namespaces there are now; fails when a named one cannot
    /// be entered (with the privilege it needs) or does not exist.
    public init(_ selection: NamespaceSelection, kind: SourceKind, options: SamplerOptions) throws(SystemError) {
        self.selection = selection
        self.kind = kind
        var inside = options
        inside.namespaces = nil
        self.options = inside
        sourceName = kind.rawValue
        if case .named(let names) = selection {
            for name in names { members.append(try open(name)) }
            members.sort { $0.name < $1.name }
        } else {
            _ = try follow()
        }
    }

    /// The namespaces sampled now, the own one as "".
    public var namespaces: [String] { members.map(\.name) }

    public var eventDescriptors: [Int32] { members.flatMap(\.source.eventDescriptors) }

    @discardableResult
    public func readEvents() -> Bool {
        var deleted = false
        for member in members where member.source.readEvents() { deleted = true }
        return deleted
    }

    public func read() throws(SystemError) -> SourceReading {
        _ = try follow()
        var events = pending
        pending = LinkEvents()
        var interfaces: [InterfaceSample] = []
        var time: Double?
        for member in members {
            let reading = try member.source.read()
            // The sample is taken when the last namespace was read.
            time = max(time ?? reading.sample.time, reading.sample.time)
            append(reading, of: member.name, to: &events, &interfaces)
        }
        completePeers(&events.deleted)
        let t = time ?? monotonicSeconds()
        events.clamp(to: t)
        // Gathered namespace by namespace: merged in time order.
        events.sortByTime()
        return SourceReading(events: events, sample: Sample(time: t, interfaces: interfaces))
    }

    private func append(_ reading: SourceReading, of netns: String, to events: inout LinkEvents, _ interfaces: inout [InterfaceSample]) {
        interfaces.reserveCapacity(interfaces.count + reading.sample.interfaces.count)
        for var interface in reading.sample.interfaces {
            interface.netns = netns
            interfaces.append(interface)
        }
        for var event in reading.events.deleted {
            event.interface.netns = netns
            events.deleted.append(event)
        }
        for var event in reading.events.renamed {
            event.netns = netns
            events.renamed.append(event)
        }
        events.created += reading.events.created.map { SeriesKey(netns: netns, name: $0.name) }
        events.overruns += reading.events.overruns
    }

    // MARK: membership

    /// Opens the namespaces that came, closes those that went (their
    /// interfaces counted as deleted, into `pending`). Returns whether the
    /// members changed. /run/netns is looked at again only when its watch
    /// says something changed there (or, without a watch, at every call).
    private func follow() throws(SystemError) -> Bool {
        guard watch.changed() || unsettled else { return false }
        unsettled = false
        let wanted: [String]
        switch selection {
        case .named(let names): wanted = names
        case .all: wanted = [""] + listDirectory("/run/netns").sorted()
        }
        var changed = false
        var kept: [Member] = []
        for member in members {
            if wanted.contains(member.name), member.name.isEmpty || identity(of: member.name) == member.inode {
                kept.append(member)
            } else {
                retire(member)
                changed = true
            }
        }
        for name in wanted where !kept.contains(where: { $0.name == name }) {
            guard identity(of: name) != nil else { continue }
            do {
                kept.append(try open(name))
                changed = true
            } catch {
                // Gone between the listing and the opening, or not yet a
                // namespace (`ip netns add` creates the file, then mounts
                // the namespace on it): look again at the next sample.
                if error.errno == ENOENT || error.errno == EINVAL {
                    unsettled = true
                    continue
                }
                throw error
            }
        }
        if changed {
            members = kept.sorted { $0.name < $1.name }
            peerIDs = [:]
        }
        return changed
    }

    /// The namespace file's inode; nil when it is not there.
    private func identity(of name: String) -> UInt64? {
        var st = stat()
        guard stat(name.isEmpty ? "/proc/self/ns/net" : NetworkNamespace.path(name), &st) == 0 else { return nil }
        return UInt64(st.st_ino)
    }

    private func open(_ name: String) throws(SystemError) -> Member {
        let path = name.isEmpty ? "/proc/self/ns/net" : NetworkNamespace.path(name)
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError.system("open(\(path))") }
        var st = stat()
        fstat(fd, &st)
        guard name.isEmpty || cifm_is_nsfs(fd) != 0 else {
            // The file of a namespace being added, not mounted yet.
            close(fd)
            throw SystemError(call: "open(\(path))", errno: EINVAL, message: "not a network namespace (yet)")
        }
        do {
            let source: any CounterSource
            if name.isEmpty {
                source = try makeCounterSource(kind, options: options)
            } else {
                var inside = options
                inside.sysfs = nil  // sysfs shows this namespace's links
                source = try NetworkNamespace.perform(inDescriptor: fd, name: name) { try makeCounterSource(kind, options: inside) }
                if let portable = source as? GetifaddrsSampler { portable.namespace = name }
            }
            return Member(name: name, source: source, fd: fd, inode: UInt64(st.st_ino))
        } catch {
            close(fd)
            if let error = error as? SystemError { throw error }
            throw SystemError(call: "setns(\(name))", message: "\(error)")
        }
    }

    /// A namespace went: its interfaces are read one last time and counted
    /// as deleted with those finals (they are exact: the namespace lives on
    /// until its sockets close).
    private func retire(_ member: Member) {
        guard let last = try? member.source.read() else { return }
        var events = LinkEvents(), interfaces: [InterfaceSample] = []
        append(last, of: member.name, to: &events, &interfaces)
        pending.deleted += events.deleted
        pending.overruns += events.overruns
        for interface in interfaces {
            pending.deleted.append(DeletionEvent(time: last.sample.time, interface: interface))
        }
    }

    // MARK: veth peers in other namespaces

    private func completePeers(_ events: inout [DeletionEvent]) {
        guard events.contains(where: { $0.peer?.netnsID != nil }) else {
            VethPeers.complete(&events)
            return
        }
        VethPeers.complete(&events) { id, from in self.namespace(id, seenFrom: from) }
    }

    /// The member a namespace id names, as member `from` numbers them.
    private func namespace(_ id: Int32, seenFrom from: String) -> String? {
        if peerIDs[from] == nil || peerIDs[from]?[id] == nil {
            guard let member = members.first(where: { $0.name == from }),
                  let sampler = member.source as? NetlinkSampler
            else { return nil }
            var ids: [Int32: String] = [:]
            for other in members where other.name != from {
                if let nsid = sampler.namespaceID(of: other.fd), nsid >= 0 { ids[nsid] = other.name }
            }
            peerIDs[from] = ids
        }
        return peerIDs[from]?[id]
    }
}

/// Watches a folder for entries created, removed or renamed (inotify), so
/// that a caller looks at it only when it changed. Where the folder is not
/// there (no named namespace yet) or cannot be watched, every call says
/// "changed" until a watch can be set, so nothing is missed.
final class DirectoryWatch {
    private let path: String
    private let fd: Int32
    private var watching = false

    init(_ path: String) {
        self.path = path
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
    }

    deinit { if fd >= 0 { close(fd) } }

    /// Whether the folder may have changed since the last call. The first
    /// call says yes.
    func changed() -> Bool {
        guard fd >= 0 else { return true }
        guard watching else {
            let mask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
            watching = inotify_add_watch(fd, path, mask) >= 0
            return true
        }
        var any = false
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            any = true
            var offset = 0
            while offset + MemoryLayout<inotify_event>.size <= n {
                let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
                // The folder itself went: set the watch again when it is back.
                if event.mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 { watching = false }
                offset += MemoryLayout<inotify_event>.size + Int(event.len)
            }
        }
        return any
    }
}

extension NetlinkSampler {
    /// The id this sampler's namespace gives the namespace `fd` refers to
    /// (RTM_GETNSID); nil when it has none.
    func namespaceID(of fd: Int32) -> Int32? {
        var header = rtgenmsg()
        header.rtgen_family = UInt8(AF_UNSPEC)
        guard let request = try? NetlinkMessage(type: Int32(RTM_GETNSID), flags: NLM_F_REQUEST, header) else { return nil }
        guard (try? request.put(u32: UInt32(bitPattern: fd), attribute: Int32(NETNSA_FD))) != nil else { return nil }
        return try? requestSocket.ask(request, name: "RTM_GETNSID") { message -> Int32? in
            guard message.type == Int32(RTM_NEWNSID),
                  let nsid = message.attributes(after: rtgenmsg.self)?.first(Int32(NETNSA_NSID))?.u32
            else { return nil }
            return Int32(bitPattern: nsid)
        } ?? nil
    }
}
#endif
