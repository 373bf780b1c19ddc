/// The user's word on interfaces' kinds (`--kind-of PATTERN=KIND`): a raw-IP
/// modem that is a tun underneath (`wwan0`, link kind tun) is cellular, not
/// a tunnel. Each rule is a glob on the interface's name, or on `NS/NAME`
/// for another namespace's interface, as the filters' patterns are; the
/// first rule that matches wins. The evidence says whose word it is.
public struct KindOverrides: Sendable, Hashable {
    public struct Rule: Sendable, Hashable {
        public var pattern: String
        public var kind: InterfaceKind

        public init(pattern: String, kind: InterfaceKind) {
            self.pattern = pattern
            self.kind = kind
        }
    }

    public var rules: [Rule]

    public init(_ rules: [Rule] = []) { self.rules = rules }

    /// The evidence of a kind the user gave.
    public static let evidence = "user:--kind-of"

    public var isEmpty: Bool { rules.isEmpty }

    /// The user's classification of an interface, when a rule matches it.
    public func classification(for key: SeriesKey) -> Classification? {
        guard !rules.isEmpty else { return nil }
        for rule in rules where Glob.matches(rule.pattern, key.name) || (!key.netns.isEmpty && Glob.matches(rule.pattern, key.description)) {
            return Classification(kind: rule.kind, evidence: Self.evidence)
        }
        return nil
    }

    /// Why one `PATTERN=KIND` cannot be read.
    public enum ParseError: Error, Sendable, Hashable {
        case noEquals, emptyPattern, unknownKind(String)
    }

    /// Reads `PATTERN=KIND` (the last `=` splits it: a pattern holds none).
    public static func rule(_ text: String) -> Result<Rule, ParseError> {
        guard let equals = text.lastIndex(of: "=") else { return .failure(.noEquals) }
        let pattern = String(text[..<equals])
        let kindText = String(text[text.index(after: equals)...])
        guard !pattern.isEmpty else { return .failure(.emptyPattern) }
        guard let kind = InterfaceKind(rawValue: kindText) else { return .failure(.unknownKind(kindText)) }
        return .success(Rule(pattern: pattern, kind: kind))
    }
}
