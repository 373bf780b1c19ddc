import IfmeterCore
import IfmeterStore

/// What `usage` says when its filter leaves nothing of a state file that
/// holds interfaces: which patterns and kinds matched none, and the names
/// the file holds (an empty table with "no usage recorded yet" would read
/// as an empty file).
struct UsageFilterNote {
    let filter: InterfaceFilter
    let names: [String]
    let kinds: [String: InterfaceKind]

    /// `names` and `kinds`: what the file holds (`UsageDocument.known`).
    init(filter: InterfaceFilter, names: [String], kinds: [String: InterfaceKind]) {
        self.filter = filter
        self.names = names
        self.kinds = kinds
    }

    /// One warning per kind of `--kind` that no stored interface has (as
    /// `--include` warns of a pattern that matches none).
    func warnKinds(what: String) {
        guard let wanted = filter.kinds else { return }
        let present = Set(kinds.values)
        for kind in wanted.sorted(by: { $0.rawValue < $1.rawValue }) where !present.contains(kind) {
            let known = present.map(\.rawValue).sorted()
            Output.error(
                "Warning: --kind '\(kind.rawValue)' matches no interface in \(what)"
                    + (known.isEmpty ? "." : " (its kinds: \(known.joined(separator: ", "))).")
            )
        }
    }

    /// The line shown instead of "No usage recorded yet" when the file
    /// holds interfaces and the filter kept none; nil otherwise.
    func text(path: String) -> String? {
        guard !filter.isEmpty, !names.isEmpty else { return nil }
        var given: [String] = filter.include.map { "--include '\(TerminalText.escaped($0))'" }
        given += filter.exclude.map { "--exclude '\(TerminalText.escaped($0))'" }
        if let wanted = filter.kinds { given.append("--kind " + wanted.map(\.rawValue).sorted().joined(separator: ",")) }
        if let namespaces = filter.namespaces { given.append("--netns " + namespaces.sorted().joined(separator: ",")) }
        func list(_ names: [String]) -> String {
            let listed = names.prefix(20).map { name in
                TerminalText.escaped(name) + (kinds[name].map { " (\($0.rawValue))" } ?? "")
            }
            return listed.joined(separator: ", ") + (names.count > 20 ? ", and \(names.count - 20) more" : "")
        }
        // Interfaces the filter did match, recorded but with no usage to
        // show: said as they are, not as a filter that matched nothing.
        let matched = names.filter { name in
            guard filter.kinds != nil else { return filter.admits(StateStore.key(name)) }
            return kinds[name].map { filter.admits(StateStore.key(name), kind: $0) } ?? false
        }
        if !matched.isEmpty {
            return "No usage recorded in \(TerminalText.escaped(path)) for \(list(matched)): the filter (\(given.joined(separator: " "))) "
                + "matched \(matched.count == 1 ? "it" : "them"), recorded but idle (nothing counted yet)."
        }
        let listed = [list(names)]
        let more = ""
        return "The filter (\(given.joined(separator: " "))) matched none of the interfaces recorded in \(TerminalText.escaped(path)): "
            + listed.joined(separator: ", ") + more + ".\nHint: check the spelling, or leave the filter out to see them all."
    }
}
