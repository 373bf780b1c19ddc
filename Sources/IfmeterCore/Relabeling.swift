/// One of Prometheus' `relabel_config` rules (as `write_relabel_configs`
/// applies them to pushed series), with Prometheus' semantics: the source
/// labels' values joined by `separator` are matched against `regex`,
/// anchored at both ends; `replacement` and `target_label` expand `$1`,
/// `${1}`, `$name` and `${name}` as Go's regexp does. Actions: replace
/// (the default), keep, drop, labeldrop, labelkeep, labelmap, lowercase,
/// uppercase, keepequal and dropequal.
public final class RelabelRule: @unchecked Sendable {
    // Immutable after init; Regex is only read.
    public enum Action: String, Sendable, CaseIterable {
        case replace, keep, drop, labeldrop, labelkeep, labelmap, lowercase, uppercase, keepequal, dropequal
    }

    public let action: Action
    public let sourceLabels: [String]
    public let separator: String
    public let pattern: String
    public let targetLabel: String
    public let replacement: String
    private let regex: Regex<AnyRegexOutput>

    /// Why a rule cannot be made, in words for the config's line.
    public struct Invalid: Error, Sendable, Equatable {
        public var message: String
    }

    public init(
        action: Action = .replace, sourceLabels: [String] = [], separator: String = ";", regex: String = "(.*)", targetLabel: String = "",
        replacement: String = "$1"
    ) throws(Invalid) {
        self.action = action
        self.sourceLabels = sourceLabels
        self.separator = separator
        pattern = regex
        self.targetLabel = targetLabel
        self.replacement = replacement
        do {
            self.regex = try Regex("^(?:" + regex + ")$")
        } catch {
            throw Invalid(message: "regex '\(regex)' does not compile: \(error)")
        }
        for name in sourceLabels where !Self.validName(name) {
            throw Invalid(message: "'\(name)' in source_labels is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)")
        }
        switch action {
        case .replace:
            guard !targetLabel.isEmpty else { throw Invalid(message: "action replace needs target_label") }
            guard Self.validTemplateName(targetLabel) else {
                throw Invalid(message: "'\(targetLabel)' is not a label name (or one made of $1, ${name} references)")
            }
        case .lowercase, .uppercase, .keepequal, .dropequal:
            guard Self.validName(targetLabel) else { throw Invalid(message: "action \(action.rawValue) needs a target_label that is a label name") }
        case .keep, .drop, .labeldrop, .labelkeep, .labelmap:
            break
        }
    }

    /// The labels after this rule; nil when the rule drops the series.
    public func apply(_ labels: [(String, String)]) -> [(String, String)]? {
        var set = labels
        func get(_ name: String) -> String { set.first { $0.0 == name }?.1 ?? "" }
        func put(_ name: String, _ value: String) {
            set.removeAll { $0.0 == name }
            // An empty value is no label (Prometheus' labels.Builder).
            if !value.isEmpty { set.append((name, value)) }
        }
        let value = sourceLabels.map(get).joined(separator: separator)
        switch action {
        case .drop:
            if value.wholeMatch(of: regex) != nil { return nil }
        case .keep:
            if value.wholeMatch(of: regex) == nil { return nil }
        case .dropequal:
            if get(targetLabel) == value { return nil }
        case .keepequal:
            if get(targetLabel) != value { return nil }
        case .replace:
            guard let match = value.wholeMatch(of: regex) else { break }
            let target = Self.expand(targetLabel, match)
            guard Self.validName(target) else { break }
            put(target, Self.expand(replacement, match))
        case .lowercase:
            put(targetLabel, value.lowercased())
        case .uppercase:
            put(targetLabel, value.uppercased())
        case .labeldrop:
            set.removeAll { $0.0.wholeMatch(of: regex) != nil }
        case .labelkeep:
            set.removeAll { $0.0.wholeMatch(of: regex) == nil }
        case .labelmap:
            for (name, labelValue) in set {
                guard let match = name.wholeMatch(of: regex) else { continue }
                let mapped = Self.expand(replacement, match)
                if Self.validName(mapped) { put(mapped, labelValue) }
            }
        }
        return set
    }

    /// Applies `rules` in order; nil when one of them drops the series.
    public static func apply(_ rules: [RelabelRule], to labels: [(String, String)]) -> [(String, String)]? {
        var current = labels
        for rule in rules {
            guard let next = rule.apply(current) else { return nil }
            current = next
        }
        return current
    }

    /// Go's `Regexp.Expand`: `$$` is `$`; `$name` takes the longest run of
    /// letters, digits and `_`; `${name}` the braces' content; a number
    /// names a group by index; an unknown or unmatched group is empty; a
    /// `$` that starts no reference stays as it is.
    static func expand(_ template: String, _ match: Regex<AnyRegexOutput>.Match) -> String {
        var out = ""
        let chars = Array(template)
        var i = 0
        func isNameChar(_ c: Character) -> Bool { c == "_" || (c.isASCII && (c.isLetter || c.isNumber)) }
        while i < chars.count {
            guard chars[i] == "$" else {
                out.append(chars[i])
                i += 1
                continue
            }
            if i + 1 < chars.count, chars[i + 1] == "$" {
                out.append("$")
                i += 2
                continue
            }
            var j = i + 1
            let braced = j < chars.count && chars[j] == "{"
            if braced { j += 1 }
            let nameStart = j
            while j < chars.count, isNameChar(chars[j]) { j += 1 }
            let name = String(chars[nameStart..<j])
            if name.isEmpty || (braced && (j >= chars.count || chars[j] != "}")) {
                out.append("$")
                i += 1
                continue
            }
            if braced { j += 1 }
            if name.allSatisfy({ $0.isASCII && $0.isNumber }) {
                if let n = Int(name), n < match.output.count, let text = match.output[n].substring { out += text }
            } else if let text = match.output[name]?.substring {
                out += text
            }
            i = j
        }
        return out
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`.
    public static func validName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first == "_" || (first.isASCII && first.properties.isAlphabetic) else { return false }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ($0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0))) }
    }

    /// A target_label that is a name once its `$1`/`${name}` references are
    /// filled: Prometheus' `relabelTarget` expression, with Go's ASCII `\w`.
    static func validTemplateName(_ text: String) -> Bool {
        text.wholeMatch(of: targetPattern) != nil
    }

    nonisolated(unsafe) static let targetPattern = try! Regex(#"(?:(?:[a-zA-Z_]|\$(?:\{[0-9A-Za-z_]+\}|[0-9A-Za-z_]+))+[0-9A-Za-z_]*)+"#)
}
