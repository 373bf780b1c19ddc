#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
import CNetlink
import Glibc
import IfmeterCore
import IfmeterSystem

/// Samples several network namespaces as one source: one sampler and one
/// notification socket per namespace, every interface and event marked
/// with its namespace (`netns`; empty for the own one), so series are keyed
/// by (namespace, name).
///
/// /run/netns is followed as it changes, not only at samples: its inotify
/// watch is one of the source's event descriptors, so a namespace is
/// entered within milliseconds of `ip netns add`, and holding it open keeps
/// it alive after `ip netns del` until it is read one last time: its
/// interfaces count as deleted with those finals, however short its life
/// between two samples. An instance that came and went before it could be
/// entered is said (`LinkEvents.namespaces`): its namespace's totals become lower
/// bounds, never exact while short.
///
/// Entering a namespace needs CAP_SYS_ADMIN.
public final class NamespaceSet: CounterSource {
    public let sourceName: String
    public let selection: NamespaceSelection
    private let kind: SourceKind
    private var options: SamplerOptions
    private var members: [Member] = []
    /// Per member (by name): the kernel's ids of the other members'
    /// namespaces as that member numbers them, for veth peers.
    private var peerIDs: [String: [Int32: String]] = [:]
    /// Events of members that went away, for the next reading.
    private var pending = LinkEvents()
    /// Tells when /run/netns changed, so that a sample costs no look there.
    private let watch = DirectoryWatch("/run/netns")
    /// A namespace file was there but could not be entered yet (`ip netns
    /// add` creates the file, then mounts the namespace on it): looked at
    /// again when this timer fires, sooner than the next sample.
    private var unsettled = false
    private let retry = RetryTimer()
    /// Instances of each name created (inotify) and not entered yet.
    private var awaiting: [String: Int] = [:]
    /// Namespace instances that came and went unread, for the next reading.
    private var lost: [NamespaceEvent] = []
    /// The last counters of the interfaces of namespaces that went, and
    /// how the members that stay numbered those namespaces: a veth's peer
    /// in the own namespace is deleted only when the namespace that held
    /// the other end is gone, after its last reading.
    private var retired = RetiredFinals()

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
            for name in names {
                members.append(try open(name))
                entered(name)
            }
            members.sort { $0.name < $1.name }
        } else {
            _ = try follow()
        }
    }

    /// The namespaces sampled now, the own one as "".
    public var namespaces: [String] { members.map(\.name) }

    /// Each member's notification socket, the /run/netns watch, and the
    /// timer that looks again at a namespace not mounted yet.
    public var eventDescriptors: [Int32] {
        members.flatMap(\.source.eventDescriptors) + [watch.fd, retry.fd].filter { $0 >= 0 }
    }

    /// Reads every member's notifications, and follows /run/netns at once:
    /// a namespace that came is entered, one that went is read one last
    /// time. Returns whether a deletion came (or a namespace went).
    @discardableResult
    public func readEvents() -> Bool {
        retry.drain()
        let before = pending.deleted.count + pending.namespaces.count { $0.kind == .lost }
        // A failure to enter one is said by the next read.
        _ = try? follow()
        var deleted = pending.deleted.count + pending.namespaces.count { $0.kind == .lost } > before
        for member in members where member.source.readEvents() { deleted = true }
        return deleted
    }

    /// New `--kind-of` rules, for every member and those to come.
    public func setKindOverrides(_ overrides: KindOverrides) {
        options.kindOverrides = overrides
        for member in members { member.source.setKindOverrides(overrides) }
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
        let news = watch.changes()
        guard news.any || unsettled else { return false }
        unsettled = false
        let wanted: [String]
        switch selection {
        case .named(let names): wanted = names
        case .all:
            // The own namespace may have a name too (ifmeter started with
            // `ip netns exec`): sampled once, as the own.
            let own = identity(of: "")
            wanted = [""] + listDirectory("/run/netns").sorted().filter { identity(of: $0) != own }
        }
        for name in news.created where wanted.contains(name) || selection == .all { awaiting[name, default: 0] += 1 }
        var changed = false
        var kept: [Member] = []
        for member in members {
            if wanted.contains(member.name), member.name.isEmpty || identity(of: member.name) == member.inode {
                kept.append(member)
            } else {
                retire(member, staying: members.filter { $0 !== member && wanted.contains($0.name) })
                changed = true
            }
        }
        var failure: SystemError?
        for name in wanted where !kept.contains(where: { $0.name == name }) {
            guard identity(of: name) != nil else { continue }
            do {
                kept.append(try open(name))
                if let n = awaiting[name] { awaiting[name] = n > 1 ? n - 1 : nil }
                entered(name)
                changed = true
            } catch {
                // Gone between the listing and the opening, or not yet a
                // namespace (`ip netns add` creates the file, then mounts
                // the namespace on it): look again soon.
                if error.errno == ENOENT || error.errno == EINVAL {
                    unsettled = true
                    continue
                }
                failure = error
            }
        }
        // Instances created and gone before they could be entered, or more
        // of them than were entered: unread.
        for (name, count) in awaiting {
            let present = identity(of: name)
            let entered = present != nil && kept.contains { $0.name == name && $0.inode == present }
            if present == nil || entered {
                awaiting[name] = nil
                for _ in 0..<count { lost.append(NamespaceEvent(time: monotonicSeconds(), netns: name, kind: .lost)) }
            } else if count > 1 {
                // Still waiting for one to be mounted; the others went.
                awaiting[name] = 1
                for _ in 1..<count { lost.append(NamespaceEvent(time: monotonicSeconds(), netns: name, kind: .lost)) }
            }
        }
        if news.overflowed {
            // The watch lost events: any named namespace may have had an
            // instance that came and went unseen.
            for name in Set(wanted + members.map(\.name)) where !name.isEmpty {
                lost.append(NamespaceEvent(time: monotonicSeconds(), netns: name, kind: .lost))
            }
        }
        if !lost.isEmpty {
            pending.namespaces += lost
            lost = []
        }
        if unsettled { retry.arm() } else { retry.reset() }
        if changed {
            members = kept.sorted { $0.name < $1.name }
            peerIDs = [:]
        }
        if let failure { throw failure }
        return changed
    }

    /// Says that an instance of a named namespace was entered: its
    /// interfaces are new instances (their indexes start over).
    private func entered(_ name: String) {
        guard !name.isEmpty else { return }
        pending.namespaces.append(NamespaceEvent(time: monotonicSeconds(), netns: name, kind: .entered))
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
                inside.sysfs = nil // sysfs shows this namespace's links
                inside.netnsName = name // --kind-of's NS/NAME patterns
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
    /// while this holds it open). Those finals, and the ids the members
    /// that stay gave the namespace, are kept for a while: the peers of its
    /// veths are deleted only when it is gone, and their deletions are
    /// completed from them. A last reading that fails leaves its
    /// namespace's totals lower bounds.
    private func retire(_ member: Member, staying: [Member]) {
        guard let last = try? member.source.read() else {
            pending.namespaces.append(NamespaceEvent(time: monotonicSeconds(), netns: member.name, kind: .lost))
            return
        }
        var events = LinkEvents(), interfaces: [InterfaceSample] = []
        append(last, of: member.name, to: &events, &interfaces)
        pending.deleted += events.deleted
        pending.overruns += events.overruns
        for interface in interfaces {
            pending.deleted.append(DeletionEvent(time: last.sample.time, interface: interface))
        }
        var ids: [String: Int32] = [:]
        for other in staying {
            guard let sampler = other.source as? NetlinkSampler, let id = sampler.namespaceID(of: member.fd), id >= 0 else { continue }
            ids[other.name] = id
        }
        retired.add(namespace: member.name, finals: interfaces, ids: ids, at: last.sample.time)
    }

    // MARK: veth peers in other namespaces

    private func completePeers(_ events: inout [DeletionEvent]) {
        retired.expire(before: monotonicSeconds() - RetiredFinals.lifetime)
        guard events.contains(where: { $0.peer?.netnsID != nil }) else {
            VethPeers.complete(&events)
            return
        }
        // A retired namespace's id may be a new member's already (the
        // kernel gives ids again): both are tried, the member's first.
        VethPeers.complete(
            &events,
            namespaces: { id, from in [self.namespace(id, seenFrom: from), self.retired.namespace(id, seenFrom: from)].compactMap { $0 } },
            finals: { netns, index in self.retired.finals(netns: netns, index: index) })
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
/// that a caller looks at it only when it changed, and learns which names
/// came. Where the folder is not there (no named namespace yet) or cannot
/// be watched, every call says "changed" until a watch can be set, so
/// nothing is missed.
final class DirectoryWatch {
    private let path: String
    /// Readable when something changed (for a waiter to watch); -1 without
    /// inotify.
    let fd: Int32
    private var watching = false

    struct Changes {
        /// Something may have changed: look at the folder.
        var any = false
        /// Names created or moved in, in the order they came (a name twice
        /// for two instances).
        var created: [String] = []
        /// The kernel's queue overflowed: changes were lost.
        var overflowed = false
    }

    init(_ path: String) {
        self.path = path
        fd = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
    }

    deinit { if fd >= 0 { close(fd) } }

    /// What changed since the last call. The first call says "changed".
    func changes() -> Changes {
        guard fd >= 0 else { return Changes(any: true) }
        guard watching else {
            let mask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF)
            watching = inotify_add_watch(fd, path, mask) >= 0
            return Changes(any: true)
        }
        var changes = Changes()
        var buffer = [UInt8](repeating: 0, count: 4096)
        let header = MemoryLayout<inotify_event>.size
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            changes.any = true
            var offset = 0
            while offset + header <= n {
                let event = buffer.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: inotify_event.self) }
                // The folder itself went: set the watch again when it is back.
                if event.mask & UInt32(IN_IGNORED | IN_DELETE_SELF | IN_MOVE_SELF) != 0 { watching = false }
                if event.mask & UInt32(IN_Q_OVERFLOW) != 0 { changes.overflowed = true }
                if event.mask & UInt32(IN_CREATE | IN_MOVED_TO) != 0, event.len > 0, offset + header + Int(event.len) <= n {
                    let name = buffer[(offset + header)..<(offset + header + Int(event.len))].prefix { $0 != 0 }
                    changes.created.append(String(decoding: name, as: UTF8.self))
                }
                offset += header + Int(event.len)
            }
        }
        return changes
    }
}

/// A timer descriptor that becomes readable a moment after `arm`: 10 ms,
/// then twice as long each time it is armed again without a `reset`, up to
/// a second (a namespace file that never gets mounted costs little).
final class RetryTimer {
    let fd = cifm_timer_create()
    private var delay = 0.01
    private var armed = false

    deinit { if fd >= 0 { close(fd) } }

    func arm() {
        guard fd >= 0, !armed else { return }
        armed = cifm_timer_set(fd, UInt64(delay * 1e9)) == 0
        delay = min(delay * 2, 1)
    }

    func reset() {
        delay = 0.01
        guard armed else { return }
        _ = cifm_timer_set(fd, 0)
        armed = false
    }

    /// Takes the expiry, if it came, so the descriptor is quiet again.
    func drain() {
        guard fd >= 0 else { return }
        var expirations: UInt64 = 0
        if read(fd, &expirations, 8) == 8 { armed = false }
    }
}

/// The last counters of the interfaces of namespaces that went, and the
/// ids the staying members gave those namespaces, kept `lifetime` seconds:
/// long enough for the deletion of a veth's peer that the namespace's end
/// takes with it.
struct RetiredFinals {
    static let lifetime = 30.0

    private struct Entry {
        var namespace: String
        var time: Double
        var finals: [Int: Counters]
        /// Member name -> the id it gives the namespace.
        var ids: [String: Int32]
    }

    private var entries: [Entry] = []

    mutating func add(namespace: String, finals interfaces: [InterfaceSample], ids: [String: Int32], at time: Double) {
        var finals: [Int: Counters] = [:]
        for interface in interfaces { if let index = interface.index { finals[index] = interface.counters } }
        entries.append(Entry(namespace: namespace, time: time, finals: finals, ids: ids))
    }

    mutating func expire(before time: Double) {
        if entries.first.map({ $0.time < time }) == true { entries.removeAll { $0.time < time } }
    }

    /// The retired namespace that member `from` numbered `id`, the latest
    /// first (ids are reused).
    func namespace(_ id: Int32, seenFrom from: String) -> String? {
        entries.last { $0.ids[from] == id }?.namespace
    }

    func finals(netns: String, index: Int) -> Counters? {
        entries.last { $0.namespace == netns }?.finals[index]
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
