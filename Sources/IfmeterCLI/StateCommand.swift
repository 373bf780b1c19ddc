import IfmeterCore
import IfmeterStore
import IfmeterSystem

/// `ifmeter state remove NAME`, `rename OLD NEW`, `alias NAME ALIAS` and
/// `unalias NAME`: looking after a state file's history, also while serve,
/// live or export write it (vnStat's --remove, --rename and --setalias).
struct StateCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter state",
        abstract: "Remove an interface's history from a state file, merge one name's into another's, or give it an alias.",
        discussion: """
            ACTIONS:
              remove NAME      Forget NAME: its usage rows and its totals.
              rename OLD NEW   Merge what OLD recorded into NEW, hour by hour (eth0
                               became enp3s0 after an upgrade); OLD's totals are
                               forgotten; its alias goes too, unless NEW has one.
              alias NAME ALIAS Show ALIAS beside NAME (1 to 64 characters): in
                               usage, the live view and /metrics
                               (ifmeter_interface_info's alias label).
              unalias NAME     Remove NAME's alias.
            Names are stored names: NAME, or NS/NAME for another namespace's
            interface ('ifmeter usage' lists them). While serve, live or export
            write the file, remove and rename are a request that the running
            ifmeter applies within a sample (it saves first, so nothing counted
            is lost or counted twice) and says in its log; this command waits for
            it. An alias is written at once (no sampler writes it), and the
            running ifmeter shows it from its next sample.
            An interface still present starts again from its next sample.
            Without --state: $IFMETER_STATE, else /var/lib/ifmeter/state.db for
            root, else $XDG_STATE_HOME/ifmeter/state.db or
            ~/.local/state/ifmeter/state.db.
            """,
        options: [
            DefaultState.option.spec,
            CommandLinePath.allowForeignFiles.spec,
        ],
        positionals: [
            PositionalSpec("action", help: "remove, rename, alias or unalias.", choices: ["remove", "rename", "alias", "unalias"]),
            PositionalSpec("name", help: "The stored name (rename: the old one).", isInterface: true),
            PositionalSpec("new", help: "rename: the name that takes the history; alias: the alias.", optional: true),
        ])

    /// What to do: a change of history, or an alias set (nil: removed).
    enum Action {
        case history(StateChange)
        case alias(name: String, alias: String?)
    }

    let action: Action
    let path: String
    /// The stored name the action is about.
    var source: String {
        switch action {
        case .history(let change): change.source
        case .alias(let name, _): name
        }
    }

    init(_ p: ParsedArguments) throws(CLIError) {
        guard let verb = p.positionals.first else { throw p.usage("missing action: give 'remove', 'rename', 'alias' or 'unalias'") }
        var names = Array(p.positionals.dropFirst())
        if verb == "alias", names.count == 2 {
            let alias = names.removeLast()
            if let (offset, byte) = RawArguments.invalidUTF8(in: alias) {
                throw p.usage(
                    "invalid alias (the <new> argument): byte \(offset + 1) (0x\(String(byte, radix: 16, uppercase: true))) is not UTF-8; give the alias in UTF-8"
                )
            }
            guard StateStore.isValidAlias(alias) else {
                throw p.usage(
                    "invalid alias '\(TerminalText.escaped(alias))': 1 to \(StateStore.longestAlias) characters, no control characters (remove one with 'ifmeter state unalias NAME')"
                )
            }
            try Self.checkNames(names, p)
            action = .alias(name: names[0], alias: alias)
            path = DefaultState.resolve(p)
            return
        }
        try Self.checkNames(names, p)
        let change: StateChange
        switch verb {
        case "alias":
            throw p.usage("'state alias' takes the stored name and its alias: ifmeter state alias enp3s0 uplink")
        case "unalias":
            guard names.count == 1 else { throw p.usage("'state unalias' takes one name") }
            action = .alias(name: names[0], alias: nil)
            path = DefaultState.resolve(p)
            return
        case "remove":
            guard names.count == 1 else { throw p.usage("'state remove' takes one name") }
            change = .remove(names[0])
        case "rename":
            guard names.count == 2 else { throw p.usage("'state rename' takes the old name and the new one") }
            guard names[0] != names[1] else { throw p.usage("'state rename' needs two different names") }
            change = .rename(from: names[0], to: names[1])
        default:
            throw p.usage("unknown action '\(TerminalText.escaped(verb))' (remove, rename, alias or unalias)")
        }
        action = .history(change)
        path = DefaultState.resolve(p)
    }

    static func checkNames(_ names: [String], _ p: ParsedArguments) throws(CLIError) {
        for name in names where name.isEmpty || name.utf8.count > 255 || name.contains(where: { $0.isNewline }) {
            throw p.usage("invalid name '\(TerminalText.escaped(name))': a stored interface name, NAME or NS/NAME")
        }
    }

    func run() throws(CLIError) {
        let resolved = try CommandLinePath.output(
            path, option: DefaultState.option.spec.long, command: Self.spec.name, writing: .inPlace, sideSuffixes: ["-wal", "-shm"], ownFolder: true)
        guard FileStatus(resolved, followingLinks: true) != nil else {
            throw .usage(StoreError.missing(path: resolved).description, command: Self.spec.name)
        }
        let names: [String]
        do {
            names = try StateStore.storedInterfaces(path: resolved).names
        } catch {
            throw CLIError.reading(error, command: Self.spec.name)
        }
        guard names.contains(source) else {
            throw .usage(
                "no history of '\(TerminalText.escaped(source))' in \(TerminalText.escaped(resolved)); 'ifmeter usage --state \(TerminalText.escaped(resolved))' lists the names",
                command: Self.spec.name)
        }
        let id: Int64?
        do {
            let store = try StateStore(path: resolved, host: hostName(), bootID: readBootID() ?? "unknown", now: wallClock(), role: .editor)
            switch action {
            case .alias(let name, let alias):
                try store.setAlias(name, alias)
                id = nil
            case .history(let change):
                id = try store.request(change)
            }
        } catch {
            throw error.isBadData ? CLIError.reading(error, command: Self.spec.name) : .runtime(error.description)
        }
        guard case .history(let change) = action else {
            guard case .alias(let name, let alias) = action else { return }
            let said =
                alias.map { "'\(TerminalText.escaped(name))' is shown as '\(TerminalText.escaped($0))'" }
                ?? "'\(TerminalText.escaped(name))' has no alias"
            return try Output.put(Output.forPeople(said + ".\n"))
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
