import IfmeterCore
import IfmeterStore
import IfmeterSystem

/// `ifmeter state remove NAME` and `ifmeter state rename OLD NEW`: looking
/// after a state file's history, also while serve, live or export write it
/// (vnStat's --remove and --rename).
struct StateCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter state",
        abstract: "Remove an interface's history from a state file, or merge one name's into another's.",
        discussion: """
            ACTIONS:
              remove NAME      Forget NAME: its usage rows and its totals.
              rename OLD NEW   Merge what OLD recorded into NEW, hour by hour (eth0
                               became enp3s0 after an upgrade); OLD's totals are
                               forgotten.
            Names are stored names: NAME, or NS/NAME for another namespace's
            interface ('ifmeter usage' lists them). While serve, live or export
            write the file, the change is a request that the running ifmeter
            applies within a sample (it saves first, so nothing counted is lost
            or counted twice) and says in its log; this command waits for it.
            An interface still present starts again from its next sample.
            Without --state: $IFMETER_STATE, else /var/lib/ifmeter/state.db for
            root, else $XDG_STATE_HOME/ifmeter/state.db or
            ~/.local/state/ifmeter/state.db.
            """,
        options: [
            OptionSpec("--state", value: "path", help: "The state file."),
            CommandLinePath.allowForeignSpec,
        ],
        positionals: [
            PositionalSpec("action", help: "remove or rename.", choices: ["remove", "rename"]),
            PositionalSpec("name", help: "The stored name (rename: the old one).", isInterface: true),
            PositionalSpec("new", help: "rename: the name that takes the history.", optional: true),
        ])

    let change: StateChange
    let path: String

    init(_ p: ParsedArguments) throws(CLIError) {
        guard let action = p.positionals.first else { throw p.usage("missing action: give 'remove' or 'rename'") }
        let names = Array(p.positionals.dropFirst())
        for name in names where name.isEmpty || name.utf8.count > 255 || name.contains(where: { $0.isNewline }) {
            throw p.usage("invalid name '\(TerminalText.escaped(name))': a stored interface name, NAME or NS/NAME")
        }
        switch action {
        case "remove":
            guard names.count == 1 else { throw p.usage("'state remove' takes one name") }
            change = .remove(names[0])
        case "rename":
            guard names.count == 2 else { throw p.usage("'state rename' takes the old name and the new one") }
            guard names[0] != names[1] else { throw p.usage("'state rename' needs two different names") }
            change = .rename(from: names[0], to: names[1])
        default:
            throw p.usage("unknown action '\(TerminalText.escaped(action))' (remove or rename)")
        }
        path = DefaultState.resolve(p)
    }

    func run() throws(CLIError) {
        let resolved = try CommandLinePath.output(
            path, option: "--state", command: Self.spec.name, writing: .inPlace, sideSuffixes: ["-wal", "-shm"], ownFolder: true)
        guard FileStatus(resolved, followingLinks: true) != nil else {
            throw .usage(StoreError.missing(path: resolved).description, command: Self.spec.name)
        }
        let names: [String]
        do {
            names = try StateStore.storedInterfaces(path: resolved).names
        } catch {
            throw CLIError.reading(error, command: Self.spec.name)
        }
        guard names.contains(change.source) else {
            throw .usage(
                "no history of '\(TerminalText.escaped(change.source))' in \(TerminalText.escaped(resolved)); 'ifmeter usage --state \(TerminalText.escaped(resolved))' lists the names",
                command: Self.spec.name)
        }
        let id: Int64?
        do {
            let store = try StateStore(path: resolved, host: hostName(), bootID: readBootID() ?? "unknown", now: wallClock(), role: .editor)
            id = try store.request(change)
        } catch {
            throw error.isBadData ? CLIError.reading(error, command: Self.spec.name) : .runtime(error.description)
        }
        let done: String =
            switch change {
            case .remove(let name): "Removed the history of '\(TerminalText.escaped(name))'"
            case .rename(let from, let to): "Merged the history of '\(TerminalText.escaped(from))' into '\(TerminalText.escaped(to))'"
            }
        guard let id else { return try Output.put(done + ".\n") }
        // A sampler writes the file: it applies the request within a sample.
        let deadline = monotonicSeconds() + 30
        while monotonicSeconds() < deadline {
            if (try? StateStore.requestWaiting(path: resolved, id: id)) == false {
                return try Output.put(done + " (applied by the ifmeter writing the file).\n")
            }
            sleepSeconds(0.05)
        }
        throw .runtime(
            "the ifmeter writing \(TerminalText.escaped(resolved)) has not applied the change within 30 s; it stays queued, and is applied when it samples again"
        )
    }
}
