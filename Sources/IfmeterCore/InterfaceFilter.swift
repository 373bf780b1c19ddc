/// Which interfaces a command shows: `--include`/`--exclude` glob patterns
/// on the name and `--kind`.
public struct InterfaceFilter: Sendable, Hashable {
    /// An interface must match one of these when any are given.
    public var include: [String]
    /// An interface matching any of these is left out.
    public var exclude: [String]
    /// When given, only these kinds.
    public var kinds: Set<InterfaceKind>?
    /// When given, only the interfaces of these namespaces ("" is the own).
    public var namespaces: Set<String>?

    public init(
        include: [String] = [], exclude: [String] = [], kinds: Set<InterfaceKind>? = nil, namespaces: Set<String>? = nil
    ) {
        self.include = include
        self.exclude = exclude
        self.kinds = kinds
        self.namespaces = namespaces
    }

    public var isEmpty: Bool { include.isEmpty && exclude.isEmpty && kinds == nil && namespaces == nil }

    /// Whether a name passes the glob patterns.
    public func admits(name: String) -> Bool { admits(SeriesKey(name: name)) }

    /// Whether an interface passes the glob patterns: a pattern matches
    /// its name, or `NS/NAME` for another namespace's interface.
    public func admits(_ key: SeriesKey) -> Bool {
        if let namespaces, !namespaces.contains(key.netns) { return false }
        func matches(_ pattern: String) -> Bool {
            Glob.matches(pattern, key.name) || (!key.netns.isEmpty && Glob.matches(pattern, key.description))
        }
        if !include.isEmpty, !include.contains(where: matches) { return false }
        return !exclude.contains(where: matches)
    }

    /// The `--include` and `--exclude` patterns that match none of `keys`
    /// (by name, or `NS/NAME`): most likely a typo, worth a warning.
    public func unmatchedPatterns(in keys: [SeriesKey]) -> [(option: String, pattern: String)] {
        func matchesAny(_ pattern: String) -> Bool {
            keys.contains { Glob.matches(pattern, $0.name) || (!$0.netns.isEmpty && Glob.matches(pattern, $0.description)) }
        }
        return include.filter { !matchesAny($0) }.map { ("--include", $0) } + exclude.filter { !matchesAny($0) }.map { ("--exclude", $0) }
    }

    public func admits(name: String, kind: InterfaceKind) -> Bool { admits(SeriesKey(name: name), kind: kind) }

    public func admits(_ key: SeriesKey, kind: InterfaceKind) -> Bool {
        if let kinds, !kinds.contains(kind) { return false }
        return admits(key)
    }

    /// The one rule for readings: the kind the source found from kernel
    /// facts, or the platform's name rules when it found none (a trace
    /// without kinds), exactly as the delta engine classifies.
    public func admits(_ interface: InterfaceSample, platform: Platform) -> Bool {
        if isEmpty { return true }
        let kind = interface.kind ?? NameRules.classify(interface.name, platform: platform).kind
        return admits(interface.key, kind: kind)
    }

    /// Leaves in a sample only the interfaces admitted.
    public func apply(to sample: inout Sample, platform: Platform) {
        guard !isEmpty else { return }
        sample.interfaces.removeAll { !admits($0, platform: platform) }
    }

    /// Leaves only the events of interfaces admitted.
    public func apply(to events: inout LinkEvents, platform: Platform) {
        guard !isEmpty else { return }
        events.deleted.removeAll { !admits($0.interface, platform: platform) }
        events.created.removeAll { !admits($0) }
        events.renamed.removeAll {
            !admits(SeriesKey(netns: $0.netns, name: $0.to)) && !admits(SeriesKey(netns: $0.netns, name: $0.from))
        }
        events.namespaces.removeAll { !admitsNamespace($0.netns) }
    }

    /// Whether some interface of the namespace can be admitted (its name
    /// is not known: a lost namespace's interfaces were never seen).
    public func admitsNamespace(_ netns: String) -> Bool {
        namespaces.map { $0.contains(netns) } ?? true
    }

    /// A trace record with only what is admitted; nil for an event left out.
    public func filtered(_ record: TraceRecord, platform: Platform) -> TraceRecord? {
        switch record {
        case .sample(var sample):
            apply(to: &sample, platform: platform)
            return .sample(sample)
        case .deleted(let event):
            return admits(event.interface, platform: platform) ? record : nil
        case .renamed(let event):
            let admitted = admits(SeriesKey(netns: event.netns, name: event.to)) || admits(SeriesKey(netns: event.netns, name: event.from))
            return admitted ? record : nil
        case .namespace(let event):
            return admitsNamespace(event.netns) ? record : nil
        }
    }
}

/// What a person types to find interfaces (the live view's `f`): a glob
/// when it has `*`, `?` or `[`, else a part of the name.
public struct NamePattern: Sendable, Hashable {
    public var text: String

    public init(_ text: String) { self.text = text }

    public func matches(_ name: String) -> Bool {
        if text.isEmpty { return true }
        if text.contains(where: { "*?[".contains($0) }) { return Glob.matches(text, name) }
        return name.contains(text)
    }
}

/// Shell-style glob matching: `*`, `?` and `[...]` classes (`[!...]` negates).
public enum Glob {
    public static func matches(_ pattern: String, _ text: String) -> Bool {
        let p = Array(pattern.unicodeScalars), t = Array(text.unicodeScalars)
        var pi = 0, ti = 0
        var starP = -1, starT = 0
        while ti < t.count {
            if pi < p.count {
                switch p[pi] {
                case "*":
                    starP = pi
                    starT = ti
                    pi += 1
                    continue
                case "?":
                    pi += 1
                    ti += 1
                    continue
                case "[":
                    if let (matched, next) = matchClass(p, pi, t[ti]) {
                        if matched {
                            pi = next
                            ti += 1
                            continue
                        }
                    } else if p[pi] == t[ti] {
                        pi += 1
                        ti += 1
                        continue
                    }
                default:
                    if p[pi] == t[ti] {
                        pi += 1
                        ti += 1
                        continue
                    }
                }
            }
            guard starP >= 0 else { return false }
            pi = starP + 1
            starT += 1
            ti = starT
        }
        while pi < p.count, p[pi] == "*" { pi += 1 }
        return pi == p.count
    }

    /// Matches `c` against the class starting at `p[start] == "["`. Returns
    /// nil when the class is not closed (then `[` is a literal).
    private static func matchClass(_ p: [Unicode.Scalar], _ start: Int, _ c: Unicode.Scalar) -> (Bool, Int)? {
        var i = start + 1
        var negate = false
        if i < p.count, p[i] == "!" || p[i] == "^" {
            negate = true
            i += 1
        }
        var matched = false
        var first = true
        while i < p.count, p[i] != "]" || first {
            first = false
            if i + 2 < p.count, p[i + 1] == "-", p[i + 2] != "]" {
                if p[i].value <= c.value && c.value <= p[i + 2].value { matched = true }
                i += 3
            } else {
                if p[i] == c { matched = true }
                i += 1
            }
        }
        guard i < p.count else { return nil }
        return (matched != negate, i + 1)
    }
}
