import IfmeterCore
import IfmeterSystem

/// The state file of commands that read or change one (usage, plan):
/// `--state`, else `$IFMETER_STATE`, else /var/lib/ifmeter/state.db for
/// root and `$XDG_STATE_HOME/ifmeter/state.db` (or
/// ~/.local/state/ifmeter/state.db) for anyone else. serve, export and
/// live keep no state without `--state`: they do not use this default.
enum DefaultState {
    /// `--state` of usage, plan and state: the sampling commands' option,
    /// described for a file they read or change.
    static let option = CommonOptions.state.helping("The state file.")

    /// The default path and where it came from, from an environment and a uid.
    static func path(environment: [String: String], uid: UInt32) -> (path: String, reason: String) {
        if let path = environment["IFMETER_STATE"], !path.isEmpty { return (path, "from $IFMETER_STATE") }
        if uid == 0 { return ("/var/lib/ifmeter/state.db", "the default for root") }
        if let xdg = environment["XDG_STATE_HOME"], xdg.hasPrefix("/") {
            return (xdg + "/ifmeter/state.db", "the default, under $XDG_STATE_HOME")
        }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? "/"
        return ((home == "/" ? "" : home) + "/.local/state/ifmeter/state.db", "the default, under ~/.local/state")
    }

    static var environment: [String: String] {
        var out: [String: String] = [:]
        for key in ["IFMETER_STATE", "XDG_STATE_HOME", "HOME"] {
            if let value = IfmeterSystem.environment(key) { out[key] = value }
        }
        return out
    }

    /// `--state`, or the default, said in one line on stderr.
    static func resolve(_ p: ParsedArguments) -> String {
        if let path = p[option] { return path }
        let (path, reason) = path(environment: environment, uid: realUserID)
        Output.error("ifmeter: using the state file \(TerminalText.escaped(path)) (\(reason); give --state to choose).")
        return path
    }

    /// Creates the folders of a default path (0755), as mkdir -p.
    static func makeFolders(for path: String) {
        makeDirectories(SafeFile.folder(of: path))
    }
}
