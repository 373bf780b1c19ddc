import IfmeterCore
import IfmeterSystem

/// Man pages in roff (man(7) macros), generated from the same option specs
/// as `--help` and the completions: ifmeter(1) and one page per subcommand,
/// ifmeter-live(1), ifmeter-serve(1), ... (`ifmeter --generate-manpage DIR`).

/// Escaping for roff text lines.
enum Roff {
    /// Escapes `text` for a roff text line: a backslash becomes `\e`, a
    /// character outside ASCII `\[uXXXX]`, and the hyphens of a word that
    /// starts with one (an option: `--max-rate`) `\-`. A line that would
    /// start with `.` or `'` (a control line) starts with `\&`.
    static func text(_ text: String) -> String {
        var out = ""
        var dashWord = false
        var atWordStart = true
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\":
                out += "\\e"
            case "-":
                if atWordStart { dashWord = true }
                out += dashWord ? "\\-" : "-"
            case _ where !scalar.isASCII:
                out += "\\[u" + hex(scalar.value) + "]"
            case "\n":
                out += "\n"
            default:
                out.unicodeScalars.append(scalar)
            }
            let boundary =
                scalar == " " || scalar == "\n" || scalar == "(" || scalar == "'" || scalar == "\""
                || scalar == "[" || scalar == "," || scalar == "|" || scalar == "="
            if boundary { dashWord = false }
            atWordStart = boundary
        }
        return out.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix(".") || line.hasPrefix("'") ? "\\&" + line : String(line)
        }.joined(separator: "\n")
    }

    /// Bold, for a name typed as it is (`\fB...\fR`).
    static func bold(_ s: String) -> String { "\\fB" + text(s) + "\\fR" }
    /// Italic, for a placeholder.
    static func italic(_ s: String) -> String { "\\fI" + text(s) + "\\fR" }
    /// A name with a dash, escaped as one (`ifmeter\-serve`).
    static func name(_ s: String) -> String {
        var out = ""
        for c in s { out += c == "-" ? "\\-" : String(c) }
        return out
    }

    static func hex(_ value: UInt32) -> String {
        let digits = Array("0123456789ABCDEF")
        var s = ""
        var v = value
        repeat {
            s = String(digits[Int(v & 0xF)]) + s
            v >>= 4
        } while v > 0
        return String(repeating: "0", count: max(0, 4 - s.count)) + s
    }

    /// Paragraphs of hard-wrapped help text, each joined into one line.
    static func paragraphs(_ text: String) -> [String] {
        var result: [String] = []
        var current: [Substring] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.drop { $0 == " " }
            if trimmed.isEmpty {
                if !current.isEmpty { result.append(current.joined(separator: " ")) }
                current = []
            } else {
                current.append(trimmed)
            }
        }
        if !current.isEmpty { result.append(current.joined(separator: " ")) }
        return result
    }

    /// A date as YYYY-MM-DD from seconds since 1970 (UTC).
    static func date(epoch: Int64) -> String {
        // Days to civil date (Howard Hinnant's algorithm).
        let z = epoch / 86_400 + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        let year = yoe + era * 400 + (month <= 2 ? 1 : 0)
        func two(_ n: Int64) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(year)-\(two(month))-\(two(day))"
    }
}

/// One man page: its file name and roff text.
struct ManPage: Sendable, Equatable {
    var fileName: String
    var text: String
}

/// The man pages: a pure function of the specs (and of the date given,
/// empty unless SOURCE_DATE_EPOCH sets one, so builds are reproducible).
struct ManPages {
    let root: CommandSpec
    let commands: [CommandSpec]
    let date: String

    init(root: CommandSpec = IfmeterCLI.rootSpec, commands: [CommandSpec] = IfmeterCLI.commands.map { $0.spec }, date: String = "") {
        self.root = root
        self.commands = commands
        self.date = date
    }

    var pages: [ManPage] {
        [ManPage(fileName: "ifmeter.1", text: rootPage)]
            + commands.map { ManPage(fileName: "ifmeter-\(CompletionScript.subcommand($0)).1", text: page(for: $0)) }
    }

    func header(_ name: String, _ abstract: String) -> String {
        """
        .TH \(Roff.name(name.uppercased())) 1 "\(date)" "ifmeter \(IfmeterCLI.version)" "User Commands"
        .nh
        .ad l
        .SH NAME
        \(Roff.name(name)) \\- \(Roff.text(abstract))

        """
    }

    /// `.TP` entries for options: names, value, help, default, values.
    static func options(_ options: [OptionSpec]) -> String {
        var s = ""
        for option in options where !option.hidden {
            s += ".TP\n"
            s += CompletionScript.names(option).map(Roff.bold).joined(separator: ", ")
            if let value = option.valueName { s += " " + Roff.italic(value) }
            s += "\n"
            var help = option.help
            if let d = option.defaultText { help += " Default: \(d)." }
            if !option.choices.isEmpty {
                help += (option.repeatable ? " Any of: " : " One of: ") + option.choices.joined(separator: ", ") + "."
            }
            if option.repeatable { help += " Repeat it or separate values with commas." }
            s += Roff.text(help) + "\n"
        }
        return s
    }

    static let exitStatus = exitStatus(for: nil)

    /// EXIT STATUS, as true of `spec` (the overview's for nil): its own
    /// example of a usage error, and the statuses only it gives.
    static func exitStatus(for spec: CommandSpec?) -> String {
        let sub = spec.map(CompletionScript.subcommand)
        let has = { (option: String) in spec?.options.contains { $0.long == option } ?? true }
        let example =
            has("--interval")
            ? "an invalid value (such as \\fB\\-\\-interval 0\\fR)"
            : has("--format") ? "an invalid value (such as \\fB\\-\\-format yaml\\fR)" : "an invalid value"
        var runtime = "Runtime failure: a system call failed, a file could not be written"
        if sub == nil || ["serve", "export", "live"].contains(sub ?? "") {
            runtime += " (with \\fB\\-\\-state\\fR: the state file is in use by another sampler, or its last save failed)"
        }
        var extra = ""
        if sub == nil || sub == "usage" {
            extra += """
                .TP
                .B 3
                \(sub == nil ? "usage \\-\\-check: " : "With \\fB\\-\\-check\\fR: ")a planned interface is over its quota or a limit (a lower bound over it is over for certain).
                .TP
                .B 4
                \(sub == nil ? "usage \\-\\-check: " : "With \\fB\\-\\-check\\fR: ")under cannot be proven: a lower bound under the quota, or a state file not saved for more than two save intervals.
                .TP
                .B 5
                \(sub == nil ? "usage \\-\\-check: " : "With \\fB\\-\\-check\\fR: ")under now, but a cycle is projected over its quota by its end at its average rate so far (an estimate).

                """
        }
        if sub == nil || sub == "route" {
            extra += """
                .TP
                .B 3
                \(sub == nil ? "route: " : "")ordinary traffic leaves outside the tunnels.

                """
        }
        return """
            .SH EXIT STATUS
            .TP
            .B 0
            Success.
            .TP
            .B 64
            Usage error: an unknown option or subcommand, \(example), a missing file.
            .TP
            .B 65
            Bad data: an input's content is wrong (a malformed trace line, named with its line number; a state file that is not ifmeter's or is corrupt, named with its row).
            .TP
            .B 1
            \(runtime).
            \(extra).PP
            Errors are one line on standard error, starting with \\(lqError:\\(rq and saying what was wrong; usage errors add where to find help.

            """
    }

    func seeAlso(except name: String) -> String {
        let pages = (["ifmeter"] + commands.map { "ifmeter-" + CompletionScript.subcommand($0) }).filter { $0 != name }
        return ".SH SEE ALSO\n" + pages.map { ".BR \(Roff.name($0)) (1)" }.joined(separator: ",\n") + "\n"
    }

    func page(for spec: CommandSpec) -> String {
        let sub = CompletionScript.subcommand(spec)
        var s = header("ifmeter-\(sub)", spec.abstract)
        s += ".SH SYNOPSIS\n\\fBifmeter \(Roff.name(sub))\\fR"
        for p in spec.positionals { s += p.optional ? " [\\fI\(Roff.text(p.name))\\fR]" : " \\fI\(Roff.text(p.name))\\fR" }
        s += " [\\fIoptions\\fR]\n"
        s += ".SH DESCRIPTION\n" + Roff.text(spec.abstract) + "\n"
        for paragraph in Roff.paragraphs(spec.discussion ?? "") { s += ".PP\n" + Roff.text(paragraph) + "\n" }
        s += ".PP\n" + Roff.text(Caveat.sentence) + " See \\fBifmeter\\fR(1).\n"
        if !spec.positionals.isEmpty {
            s += ".SH ARGUMENTS\n"
            for p in spec.positionals { s += ".TP\n" + Roff.italic(p.name) + "\n" + Roff.text(p.help) + "\n" }
        }
        s += ".SH OPTIONS\n" + Self.options(spec.options)
        s += Self.exitStatus(for: spec)
        if let examples = Self.examples[sub] {
            s += ".SH EXAMPLES\n"
            for (command, explanation) in examples {
                s += ".TP\n" + Roff.bold(command) + "\n" + Roff.text(explanation) + "\n"
            }
        }
        s += seeAlso(except: "ifmeter-\(sub)")
        return s
    }

    static let examples: [String: [(String, String)]] = [
        "live": [("ifmeter live --kind wifi,ethernet", "Watch only Wi-Fi and Ethernet interfaces.")],
        "list": [("ifmeter list --format json", "Every interface with its index, kind, evidence, width, speed and state, as JSON.")],
        "sample": [
            ("ifmeter sample --count 3 --include 'veth*,tun*'", "Three one-second intervals of the veth and tun interfaces."),
            ("ifmeter sample --watch --bits", "Intervals until interrupted, rates in bits per second."),
        ],
        "record": [("ifmeter record --count 3 --interval 500ms -o demo.jsonl", "Record three intervals as a trace.")],
        "replay": [("ifmeter replay demo.jsonl --format text", "The delta engine's report of a trace, as a table.")],
        "serve": [
            (
                "ifmeter serve --state /var/lib/ifmeter/state.db",
                "What ifmeter-serve.service runs: metrics on http://127.0.0.1:9874/metrics, totals kept across restarts."
            ),
            ("ifmeter serve --listen '[::]:9874' --compat node", "Listen on every address, with node_exporter's families too."),
        ],
        "export": [("ifmeter export --json report.json --every 10s", "Replace report.json every 10 seconds.")],
        "usage": [("ifmeter usage --state /var/lib/ifmeter/state.db --monthly", "Monthly totals that the service kept.")],
    ]

    var rootPage: String {
        var s = header("ifmeter", "measure network traffic per interface, and say how sure the figures are")
        s += ".SH SYNOPSIS\n"
        s += "\\fBifmeter\\fR [\\fIcommand\\fR] [\\fIoptions\\fR]\n.br\n"
        for option in root.options where !option.hidden {
            s += "\\fBifmeter\\fR " + Roff.bold(option.long) + (option.valueName.map { " " + Roff.italic($0) } ?? "") + "\n.br\n"
        }
        s += """
            .SH DESCRIPTION
            \\fBifmeter\\fR reads per-interface counters (bytes, packets, errors, drops) from the kernel and turns them into per-interval deltas, rates and totals.
            It tells a 32-bit counter wrap from a counter reset and from an interface that was deleted and recreated under the same name, and it says which of those happened.
            With no command, on a terminal, it starts \\fBifmeter live\\fR; elsewhere it prints its help.
            .SS Estimates, not accounting
            \(Roff.text(Caveat.estimate))
            .IP \\(bu 2
            They include protocol overhead (Ethernet, IP and transport headers, retransmissions), so they are larger than what applications sent.
            .IP \\(bu 2
            They are not per-app accounting: an interface does not know which process a packet belongs to.
            .IP \\(bu 2
            \(Roff.text(Caveat.lowerBound))
            .IP \\(bu 2
            \(Roff.text(Caveat.wrapCorrected))
            .PP
            Every output says so: text output in a footer, JSON with \\fB"estimate": true\\fR and the caveats, and each interface's \\fBquality\\fR (\\fBexact\\fR, \\fBwrap\\-corrected\\fR, \\fBlower\\-bound\\fR).
            .SH COMMANDS

            """
        for spec in commands {
            let sub = CompletionScript.subcommand(spec)
            s += ".TP\n\\fB\(Roff.name(sub))\\fR\n" + Roff.text(spec.abstract) + " See \\fBifmeter\\-\(Roff.name(sub))\\fR(1).\n"
        }
        s += """
            .PP
            Every command takes \\fB\\-\\-help\\fR. Filters work on every command that reports interfaces (all but \\fBroute\\fR, \\fBplan\\fR, \\fBstate\\fR and \\fBconfig\\fR): \\fB\\-\\-include\\fR and \\fB\\-\\-exclude\\fR glob patterns on the name, \\fB\\-\\-kind\\fR on the kind.
            Durations read as 500ms, 0.5s, 2m or plain seconds.
            .SH OPTIONS

            """
        s += Self.options(root.options)
        s += Self.exitStatus
        s += """
            .SH ENVIRONMENT
            .TP
            .B NO_COLOR
            When set and not empty, the live view uses no colour.
            .TP
            .B TERM
            When \\fBdumb\\fR, the live view uses no colour.
            .TP
            .B IFMETER_LIBMICROHTTPD
            The libmicrohttpd library that \\fBserve\\fR loads when it starts (default: libmicrohttpd.so.12).
            .TP
            .B LC_ALL\\fR, \\fBLC_CTYPE\\fR, \\fBLANG
            The first one set decides the character set: without UTF-8 (\\fBLANG=C\\fR, or none set), text output, messages and the live view use ASCII (\\fB>=\\fR for a lower bound, \\fB#\\fR and \\fB\\-\\fR for bars); JSON, CSV and traces stay UTF-8.
            .TP
            .B IFMETER_STATE
            The state file that \\fBusage\\fR and \\fBplan\\fR read without \\fB\\-\\-state\\fR (else /var/lib/ifmeter/state.db for root, else $XDG_STATE_HOME/ifmeter/state.db or ~/.local/state/ifmeter/state.db).
            .TP
            .B SOURCE_DATE_EPOCH
            The date (seconds since 1970) that \\fB\\-\\-generate\\-manpage\\fR writes in the pages' headers; without it, none.
            .SH FILES
            .TP
            .I /var/lib/ifmeter/state.db
            The state file of \\fBifmeter\\-serve.service\\fR (SQLite): totals, their quality, the usage per local hour (from which the daily, monthly, yearly and cycle tables are summed) and the plans, kept across restarts and reboots.
            With \\fBDynamicUser=yes\\fR, systemd keeps it in \\fI/var/lib/private/ifmeter\\fR and makes \\fI/var/lib/ifmeter\\fR a link to it.
            Read it with \\fBifmeter usage \\-\\-state /var/lib/ifmeter/state.db\\fR.
            .TP
            .I /lib/systemd/system/ifmeter\\-serve.service
            The service (\\fIPREFIX\\fB/lib/systemd/system\\fR for a prefix other than \\fI/usr\\fR, such as \\fI/usr/local\\fR), described below.
            .TP
            .I /sys/class/net
            Interface facts: kind evidence, speed, counter width.
            .TP
            .I /run/netns
            Named network namespaces, for \\fB\\-\\-netns\\fR and \\fB\\-\\-all\\-netns\\fR.
            .TP
            .I /proc/sys/kernel/random/boot_id
            The kernel's boot id, kept in the state file to tell a restart from a reboot.
            .SH SYSTEMD SERVICE
            \\fBifmeter\\-serve.service\\fR runs \\fBifmeter serve \\-\\-state /var/lib/ifmeter/state.db\\fR: Prometheus metrics on http://127.0.0.1:9874/metrics (loopback only), totals kept across restarts.
            Enable it with \\fBsystemctl enable \\-\\-now ifmeter\\-serve\\fR; its settings are in \\fI/etc/ifmeter/ifmeter.yml\\fR (see \\fBifmeter\\-config\\fR(1): to listen elsewhere, set \\fBlisten:\\fR under \\fBserve:\\fR there); change the unit with \\fBsystemctl edit ifmeter\\-serve\\fR (\\fBIPAddressAllow=\\fR with the networks that may scrape).
            Sampling the host's own network namespace needs no privilege, so the service runs with none:

            """
        for (directive, explanation) in Self.unitDirectives {
            s += ".TP\n.B \(Roff.name(directive))\n" + Roff.text(explanation) + "\n"
        }
        s += """
            .PP
            \\fBsystemd\\-analyze security ifmeter\\-serve.service\\fR rates this unit \\(lqOK\\(rq.
            \\fB\\-\\-netns\\fR and \\fB\\-\\-all\\-netns\\fR need CAP_SYS_ADMIN and do not work in this unit.
            .SH EXAMPLES
            .TP
            .B ifmeter
            The live view, on a terminal.
            .TP
            .B ifmeter sample \\-\\-count 5 \\-\\-kind tunnel
            Five intervals of the tunnels' traffic.
            .TP
            .B systemctl enable \\-\\-now ifmeter\\-serve
            Start the service now and at every boot; then \\fBcurl http://127.0.0.1:9874/metrics\\fR.
            .TP
            .B ifmeter \\-\\-generate\\-completion bash > ifmeter
            A bash completion script (\\fBmake install\\fR installs them for bash, zsh and fish).

            """
        s += seeAlso(except: "ifmeter")
        s += ".BR systemctl (1),\n.BR systemd.exec (5),\n.BR systemd\\-analyze (1),\n.BR ip\\-netns (8)\n"
        return s
    }

    /// The service's directives and why each is there (dist/ifmeter-serve.service.in;
    /// a test checks that every directive of the unit is here).
    static let unitDirectives: [(String, String)] = [
        (
            "ExecStart=",
            "ifmeter serve --config /etc/ifmeter/ifmeter.yml --state /var/lib/ifmeter/state.db: its settings from that file (every one commented out as shipped: listens on 127.0.0.1:9874, samples every second, saves every 5 minutes). SIGTERM saves, then stops. Set kind-of: ['wwan*=cellular'] in the file where the kernel's facts give a kind wrongly, like a raw-IP modem that is a tun underneath."
        ),
        (
            "ExecReload=",
            "systemctl reload sends SIGHUP: serve saves its state and reads its config file again (filters, kinds (kind-of), remote write, probes, keep-hours and keep-days, and the web config's basic auth users apply at once; TLS certificates and what else needs a restart is said in the log)."
        ),
        ("Type=exec", "The service is up once ifmeter runs."),
        ("Restart=on-failure", "Started again after a failure, RestartSec= later."),
        ("RestartSec=", "The wait before a restart."),
        ("DynamicUser=yes", "Runs as a user allocated when it starts, with no files elsewhere."),
        ("StateDirectory=ifmeter", "/var/lib/ifmeter, the only writable place, owned by that user; kept when the service stops."),
        ("UMask=0077", "The state file is readable by that user (and root) only."),
        ("LimitNOFILE=", "Room for serve's 1024 connections, so it need not raise its own limit."),
        ("CapabilityBoundingSet=", "Empty: no capability, ever."),
        ("AmbientCapabilities=", "Empty: none is granted."),
        ("NoNewPrivileges=yes", "No set-user-ID program can give it more."),
        ("ProtectSystem=strict", "The whole file system is read-only, but for the state directory."),
        ("ProtectHome=yes", "/home, /root and /run/user are out of sight."),
        ("PrivateTmp=yes", "A /tmp of its own."),
        ("PrivateDevices=yes", "A /dev without devices."),
        ("DevicePolicy=closed", "No device access."),
        ("PrivateUsers=yes", "A user namespace of its own: no other user's files are its."),
        ("ProtectProc=invisible", "Other users' processes are out of sight in /proc."),
        ("ProtectKernelTunables=yes", "/proc/sys and /sys are read-only (ifmeter only reads them)."),
        ("ProtectKernelModules=yes", "No module loading."),
        ("ProtectKernelLogs=yes", "No kernel log."),
        ("ProtectControlGroups=yes", "The control groups are read-only."),
        ("ProtectClock=yes", "The clocks cannot be set."),
        ("ProtectHostname=yes", "The host name cannot be changed."),
        ("RestrictNamespaces=yes", "No namespace can be created or entered (so no --netns here)."),
        ("RestrictRealtime=yes", "No real-time scheduling."),
        ("RestrictSUIDSGID=yes", "No set-user-ID or set-group-ID file can be made."),
        ("LockPersonality=yes", "The execution domain is fixed."),
        ("MemoryDenyWriteExecute=yes", "No memory both writable and executable."),
        ("RemoveIPC=yes", "Its System V and POSIX IPC objects go when it stops."),
        ("KeyringMode=private", "A kernel keyring of its own."),
        (
            "RestrictAddressFamilies=",
            "AF_NETLINK (the counters and link notifications), AF_INET and AF_INET6 (the HTTP endpoint), AF_UNIX (logging): nothing else."
        ),
        ("IPAddressDeny=any", "No IP traffic but what IPAddressAllow= lets through."),
        ("IPAddressAllow=localhost", "Loopback only, as it listens there; widen it with --listen."),
        ("SystemCallArchitectures=native", "Only the native system call ABI."),
        ("SystemCallFilter=", "@system-service, without @privileged and @resources: the calls a service needs and no more."),
        ("SystemCallErrorNumber=EPERM", "A filtered call fails with EPERM instead of killing the service."),
        ("WantedBy=multi-user.target", "systemctl enable starts it at boot."),
    ]
}
