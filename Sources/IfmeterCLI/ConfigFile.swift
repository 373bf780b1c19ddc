import IfmeterConfig
import IfmeterCore
import IfmeterSystem

/// The config file: every setting of serve and export in one YAML file
/// (`--config FILE`; the packaged service reads /etc/ifmeter/ifmeter.yml).
/// Its keys are the commands' long options without the dashes, at the top
/// (for each command that has the option) or under `serve:` or `export:`
/// (for that command alone); a list gives a repeatable option's values,
/// `true` turns a flag on. A flag on the command line overrides the file:
/// an option given there takes none of the file's values.
///
///     interval: 1s
///     state: /var/lib/ifmeter/state.db
///     include: [eth*, wlan*]
///     serve:
///       listen: 127.0.0.1:9874
///       remote-write: [https://prom.example/api/v1/write]
struct ConfigFile {
    static let defaultPath = "/etc/ifmeter/ifmeter.yml"

    /// `--config FILE`, on serve and export.
    static let option = Option(
        "--config", value: "file",
        help: "Read settings from this YAML file (the service's: /etc/ifmeter/ifmeter.yml); flags given here override it.")

    /// The commands a config file sets, by section name.
    static var sections: [(name: String, spec: CommandSpec)] { [("serve", ServeCommand.spec), ("export", ExportCommand.spec)] }

    /// Options a file may not set: what names the file, and what only a
    /// person at a terminal asks for.
    static let commandLineOnly: Set<String> = [option.spec.long, CommandSpec.helpFlag.spec.long, CommandLinePath.allowForeignFiles.spec.long]

    /// The file the package ships: every setting of serve and export,
    /// commented out, with its help and default (`--generate-config`).
    static var example: String {
        func settable(_ spec: CommandSpec) -> [OptionSpec] {
            spec.options.filter { !$0.hidden && !commandLineOnly.contains($0.long) }
        }
        let serve = settable(ServeCommand.spec), export = settable(ExportCommand.spec)
        let both = serve.filter { o in export.contains { $0.long == o.long } }
        func lines(_ options: [OptionSpec], indent: String) -> String {
            var out = ""
            for o in options.sorted(by: { $0.long < $1.long }) {
                let key = String(o.long.dropFirst(2))
                for line in wordWrap(o.help, width: 72 - indent.count) { out += "\(indent)# \(line)\n" }
                let value: String
                if o.isFlag {
                    value = "false"
                } else if o.repeatable {
                    value = "[\(o.valueName ?? "value")]"
                } else {
                    value = o.defaultText ?? "<\(o.valueName ?? "value")>"
                }
                out += "\(indent)#\(key): \(value)\n"
            }
            return out
        }
        return """
            # ifmeter's config file: the settings of 'ifmeter serve' (the
            # ifmeter-serve service reads this file) and of 'ifmeter export
            # --config FILE'. Each key is a long option without its dashes; a
            # list gives a repeatable option's values; true turns a flag on.
            # Flags on the command line override the file (the service gives
            # --state /var/lib/ifmeter/state.db, its StateDirectory).
            # Check it with: ifmeter config check /etc/ifmeter/ifmeter.yml
            # (then: systemctl reload ifmeter-serve). Every setting below is
            # commented out, with its default or the kind of value it takes.

            # Settings of both commands:
            \(lines(both, indent: ""))
            # Settings of serve alone:
            #serve:
            \(lines(serve.filter { o in !both.contains { $0.long == o.long } }, indent: "  "))
            # Settings of export alone:
            #export:
            \(lines(export.filter { o in !both.contains { $0.long == o.long } }, indent: "  "))
            """
    }

    /// One setting, where it came from.
    struct Setting {
        /// The key as written (`listen`), and its section (nil: the top).
        var key: String
        var section: String?
        var line: Int
        /// The values, as the command line would give them; a flag's is
        /// empty.
        var values: [String]
    }

    let path: String
    var settings: [Setting] = []

    /// Reads and checks the file: every key an option of its section's
    /// command (or, at the top, of serve or export), every value of the
    /// shape its option takes. Errors name the file, the line and the key
    /// (exit 65); a file that cannot be read is a usage error (64).
    static func load(_ path: String) throws(CLIError) -> ConfigFile {
        do throws(ConfigLoadError) {
            return try YAML.load(path, foreignAllowed: CommandLinePath.allowForeign) { root, _ throws(ConfigError) in
                var file = ConfigFile(path: path)
                for entry in try root?.mapping("the config file") ?? [] {
                    if let section = sections.first(where: { $0.name == entry.key }) {
                        for inner in try entry.mapping() {
                            file.settings.append(try setting(inner, section: section.name, specs: [section.spec]))
                        }
                    } else {
                        file.settings.append(try setting(entry, section: nil, specs: sections.map(\.spec)))
                    }
                }
                return file
            }
        } catch {
            switch error {
            case .unreadable(let cause):
                throw .usage("cannot read the config file \(path): \(cause.message)", command: "ifmeter")
            case .invalid(let location, let message):
                throw .data("\(location): \(message); see 'ifmeter config check' and docs/config.md")
            case .refused(let location, let message):
                throw CommandLinePath.refusedSettings("the config file", at: location, message)
            }
        }
    }

    /// The option `key` names in any of `specs`.
    static func option(_ key: String, in specs: [CommandSpec]) -> OptionSpec? {
        for spec in specs {
            if let option = spec.options.first(where: { $0.long == "--" + key && !$0.hidden }), !commandLineOnly.contains(option.long) {
                return option
            }
        }
        return nil
    }

    static func setting(_ entry: YAMLEntry, section: String?, specs: [CommandSpec]) throws(ConfigError) -> Setting {
        guard let option = option(entry.key, in: specs) else {
            let whose = section.map { "ifmeter \($0)" } ?? "serve or export"
            // A line that reads as no setting's name is never repeated: it
            // could be a secret file's (a shadow file given as the config).
            guard entry.isNameLike else {
                throw ConfigError(
                    line: entry.line, column: entry.column,
                    message:
                        "this line is not a setting of \(whose) (its text is not repeated here); expected 'key: value', each key a long option without its dashes"
                )
            }
            let known = Set(
                specs.flatMap { $0.options.filter { !$0.hidden && !commandLineOnly.contains($0.long) }.map { String($0.long.dropFirst(2)) } })
            // A misspelt section first: 'sever' is 'serve', not an option.
            let sectionHint =
                section == nil
                ? sections.map(\.name).first { Suggestion.editDistance(Array(entry.key.lowercased()), Array($0)) <= 2 } : nil
            let hint = (sectionHint ?? Suggestion.closest(to: entry.key, among: known.sorted())).map { " (did you mean '\($0)'?)" } ?? ""
            throw ConfigError(line: entry.line, message: "'\(entry.key)' is not a setting of \(whose)\(hint)")
        }
        var values: [String] = []
        if option.isFlag {
            guard try entry.bool() else { return Setting(key: entry.key, section: section, line: entry.line, values: ["false"]) }
        } else if case .sequence(let items) = entry.value.value {
            guard option.repeatable else {
                throw ConfigError(line: entry.line, message: "'\(entry.key)' takes one value, not a list")
            }
            for item in items { values.append(try item.string("an item of '\(entry.key)'")) }
            if values.isEmpty { throw ConfigError(line: entry.line, message: "'\(entry.key)' is an empty list; leave it out instead") }
        } else {
            let value = try entry.string()
            if entry.value.isNull { throw ConfigError(line: entry.line, message: "'\(entry.key)' has no value; give one or leave it out") }
            values = [value]
        }
        return Setting(key: entry.key, section: section, line: entry.line, values: values)
    }

    /// The settings that apply to `spec`'s command: its section's, then the
    /// top's it has an option for (a section's setting wins over the top's).
    func settings(for spec: CommandSpec) -> [Setting] {
        let name = String(spec.name.dropFirst("ifmeter ".count))
        let own = settings.filter { $0.section == name }
        let top = settings.filter { s in
            s.section == nil && spec.options.contains { $0.long == "--" + s.key } && !own.contains { $0.key == s.key }
        }
        return own + top
    }

    /// The arguments the file adds for `spec`'s command: each of its
    /// settings whose option the command line does not give.
    func arguments(for spec: CommandSpec, besides given: ParsedArguments) -> [String] {
        var out: [String] = []
        for s in settings(for: spec) where !given.has(long: "--" + s.key) {
            if s.values == ["false"], spec.options.first(where: { $0.long == "--" + s.key })?.isFlag == true { continue }
            if s.values.isEmpty {
                out.append("--" + s.key)
            } else {
                for value in s.values { out += ["--" + s.key, value] }
            }
        }
        return out
    }

    /// `path:line` of the setting an error about option `--key` names:
    /// only among those the command line did not override (a bad flag is
    /// the command line's, exit 64).
    func location(of message: String, spec: CommandSpec, besides given: ParsedArguments) -> Setting? {
        settings(for: spec).filter { !given.has(long: "--" + $0.key) }.first {
            message.contains("'--" + $0.key + "'") || message.contains("'--" + $0.key + " ")
        }
    }

    /// Parses `arguments` (the command line, without the command's name)
    /// with the file's settings added, and builds the command: an error in
    /// one of the file's values names the file, its line and key (65).
    func command(_ type: any Command.Type, _ given: ParsedArguments, arguments: [String]) throws(CLIError) -> any Command {
        try built(type, given, arguments: arguments).command
    }

    /// The command and the arguments it was built from (the file's and the
    /// command line's): what a reload compares option by option.
    func built(_ type: any Command.Type, _ given: ParsedArguments, arguments: [String]) throws(CLIError)
        -> (command: any Command, parsed: ParsedArguments)
    {
        let added = self.arguments(for: type.spec, besides: given)
        do {
            var parsed = try ParsedArguments.parse(added + arguments, spec: type.spec)
            parsed.fromConfigFile = Set(settings(for: type.spec).map { "--" + $0.key }.filter { !given.has(long: $0) })
            return (try type.init(parsed), parsed)
        } catch {
            guard case .usage(let message, _) = error, let setting = location(of: message, spec: type.spec, besides: given) else { throw error }
            let section = setting.section.map { $0 + "." } ?? ""
            throw .data("\(path):\(setting.line): \(section)\(setting.key): \(message); fix it, or see 'ifmeter config check \(path)'")
        }
    }
}

/// `ifmeter config check [FILE]`: reads a config file as serve and export
/// would, without running either, and prints the settings each would run
/// with; a mistake names the file, its line and key (65).
struct ConfigCommand: Command {
    static let spec = CommandSpec(
        name: "ifmeter config",
        abstract: "Check a config file and print the settings serve and export would run with.",
        discussion: """
            ACTIONS:
              check [FILE]  Read FILE (default /etc/ifmeter/ifmeter.yml) as serve
                            and export do with --config FILE, check every key and
                            value, and print each command's settings and where
                            they come from. Exit 0 when it is good, 65 naming the
                            file, line and key of the first mistake, 1 when it
                            (or a file it names) is one another user could
                            change (--allow-foreign-files uses it anyway).
            Keys are serve's and export's long options without the dashes: at
            the top for each command that has the option, under 'serve:' or
            'export:' for that command alone. A list gives a repeatable
            option's values; true turns a flag on. Flags on the command line
            override the file. See docs/config.md.
            """,
        options: [CommandLinePath.allowForeignFiles.spec],
        positionals: [
            PositionalSpec("action", help: "check."),
            PositionalSpec("file", help: "The config file (default /etc/ifmeter/ifmeter.yml).", optional: true),
        ])

    let path: String

    init(_ p: ParsedArguments) throws(CLIError) {
        guard let action = p.positionals.first else { throw p.usage("missing action: give 'check'") }
        guard action == "check" else { throw p.usage("unknown action '\(TerminalText.escaped(action))' (the one action is 'check')") }
        guard p.positionals.count <= 2 else { throw p.usage("'check' takes one file") }
        path = p.positionals.count == 2 ? p.positionals[1] : ConfigFile.defaultPath
    }

    func run() throws(CLIError) {
        let file = try ConfigFile.load(path)
        var out = "\(path): good.\n"
        for (name, spec) in ConfigFile.sections {
            let type: any Command.Type = name == "serve" ? ServeCommand.self : ExportCommand.self
            // export runs only where the file sets it up (it needs a
            // target): an export: section, or a key only export has.
            let exportOnly = { (s: ConfigFile.Setting) in
                s.section == nil && !ServeCommand.spec.options.contains { $0.long == "--" + s.key }
            }
            if name == "export", !file.settings.contains(where: { $0.section == "export" || exportOnly($0) }) {
                out += "\nifmeter export: not set up in this file (no export: section, no key only export has)\n"
                continue
            }
            // Built as the command would be (every value validated), not
            // run; serve as the unit runs it, with its --state.
            var unit = name == "serve" ? [CommonOptions.state.spec.long, "/var/lib/ifmeter/state.db"] : []
            // export without a target in the file takes one on its command
            // line: its other values are checked all the same.
            let targets = ["json", "json-lines", "textfile"]
            if name == "export", !file.settings(for: spec).contains(where: { targets.contains($0.key) }) {
                unit = ["--json", "-"]
                out += "\nnote: no json, json-lines or textfile for export in this file: give one on its command line\n"
            }
            let given = try ParsedArguments.parse(unit, spec: spec)
            // Its targets too, as export checks them before writing.
            _ = try (file.command(type, given, arguments: unit) as? ExportCommand)?.checkedTargets()
            var settings = file.settings(for: spec)
            if name == "serve", let state = settings.first(where: { $0.key == "state" }) {
                out += "\nnote: line \(state.line): the service's unit gives --state /var/lib/ifmeter/state.db, which overrides 'state'\n"
                settings.removeAll { $0.key == "state" }
            }
            out += "\nifmeter \(name)" + (settings.isEmpty ? ": no settings (the defaults)\n" : "\n")
            for s in settings {
                let values = s.values.isEmpty ? "true" : s.values.joined(separator: ", ")
                out += "  \(s.key): \(TerminalText.escaped(values))  (line \(s.line)\(s.section == nil ? "" : ", under \(name):"))\n"
            }
        }
        try Output.put(Output.forPeople(out))
    }
}

/// What serve needs to read its config file again on SIGHUP: the file, and
/// the command line that overrides it.
struct ConfigReload {
    let path: String
    let given: ParsedArguments
    let arguments: [String]
    /// The arguments the running serve was built from.
    var running: ParsedArguments

    /// Options a reload applies to a running serve; any other that changed
    /// needs a restart and is said so.
    static let filterOptions: Set<String> = ["--include", "--exclude", "--kind"]
    /// `--kind-of`: every link is classified again at the next sample.
    static let kindOptions: Set<String> = ["--kind-of"]
    static var remoteWriteOptions: Set<String> { Set(RemoteWriteOptions.specs.map(\.long)) }
    /// `--keep-hours`, `--keep-days`: from the save the reload makes.
    static var retentionOptions: Set<String> { [RetentionOptions.keepHours.spec.long, RetentionOptions.keepDays.spec.long] }
    /// `--probe` and the tunnel options: the route feed is built again.
    static var routeOptions: Set<String> { Set(RouteOptions.specsWithoutDefaultProbes.map(\.long)) }
    /// The web config's basic auth users apply at once; its TLS settings
    /// need a restart (libmicrohttpd takes them when it starts).
    static let webConfigOptions: Set<String> = ["--web-config"]

    /// The file read again, serve built from it (every value checked), and
    /// which options differ from the running ones.
    func reread() throws(CLIError) -> (serve: ServeCommand, parsed: ParsedArguments, changed: Set<String>) {
        let (command, parsed) = try ConfigFile.load(path).built(ServeCommand.self, given, arguments: arguments)
        guard let serve = command as? ServeCommand else { throw .runtime("reloading \(path): not serve's settings") }
        var changed = Set<String>()
        for option in ServeCommand.spec.options where option.long != ConfigFile.option.spec.long {
            if parsed.differs(from: running, on: option.long) { changed.insert(option.long) }
        }
        return (serve, parsed, changed)
    }
}
