import IfmeterCore
import IfmeterSystem
/// A small command-line parser in swift-argument-parser's style: declared
/// options, generated `USAGE:`/`OPTIONS:` help, validation before running,
/// and errors as `Error: ...` with a hint.

/// How a command ended badly. The exit codes are sysexits': 64 for usage,
/// 65 for bad data, 1 for a runtime failure.
package enum CLIError: Error, Sendable, Equatable {
    /// A flag, an option's value or an argument is wrong.
    case usage(String, command: String)
    /// An input's content is wrong (a trace line, a file's data).
    case data(String)
    /// Something failed while running (a system call, a write).
    case runtime(String)
    /// The command has said everything it had to and ends with this status
    /// (`usage --check`: 3 over a quota, 4 unknown; `route`: 3 when traffic
    /// leaves outside the tunnels).
    case status(Int32)

    package var exitCode: Int32 {
        switch self {
        case .usage: 64
        case .data: 65
        case .runtime: 1
        case .status(let code): code
        }
    }

    /// The one line printed on stderr.
    package var line: String {
        switch self {
        case .usage(let message, let command):
            "Error: \(message). See '\(command) --help'."
        case .data(let message):
            "Error: \(message)"
        case .runtime(let message):
            "Error: \(message)"
        case .status:
            ""
        }
    }
}

/// One option or flag a command accepts.
package struct OptionSpec: Sendable {
    /// `--interval`; a short name like `-o` goes in `short`.
    package var long: String
    package var short: String?
    /// `duration` for `--interval <duration>`; nil for a flag.
    package var valueName: String?
    package var help: String
    /// Shown as `(default: ...)`.
    package var defaultText: String?
    /// May be given more than once (values are collected).
    package var repeatable: Bool
    /// Left out of `--help` (test and benchmark knobs).
    package var hidden: Bool
    /// The fixed set of values the option takes, when it has one (kinds,
    /// formats, sources): completions offer them, man pages list them.
    package var choices: [String]
    /// What a free value names (a file, an interface), for completions;
    /// nil: guessed from `valueName` (see `ValueCompletion`).
    package var completion: ValueCompletion?

    package init(
        _ long: String, short: String? = nil, value: String? = nil, help: String, default defaultText: String? = nil,
        repeatable: Bool = false, hidden: Bool = false, choices: [String] = [], completion: ValueCompletion? = nil
    ) {
        self.long = long
        self.short = short
        self.valueName = value
        self.help = help
        self.defaultText = defaultText
        self.repeatable = repeatable
        self.hidden = hidden
        self.choices = choices
        self.completion = completion
    }

    var isFlag: Bool { valueName == nil }

    var synopsis: String {
        let name = short.map { "\($0)|\(long)" } ?? long
        return valueName.map { "\(name) <\($0)>" } ?? name
    }
}

/// An option a command reads: declared once, as a `Flag`, an `Option` or a
/// `ListOption`, whose `spec` goes into `CommandSpec.options` (help, man
/// pages, completions and the config file are made from it) and which
/// `ParsedArguments` is read by, without spelling its name again.
package protocol OptionHandle: Sendable {
    var spec: OptionSpec { get }
}

/// A flag: given or not (`p[CommonOptions.bits]`).
package struct Flag: OptionHandle {
    package private(set) var spec: OptionSpec

    package init(_ long: String, short: String? = nil, help: String, hidden: Bool = false) {
        spec = OptionSpec(long, short: short, help: help, hidden: hidden)
    }

    /// The same flag, read alike, described otherwise for another command.
    package func helping(_ help: String) -> Flag {
        var copy = self
        copy.spec.help = help
        return copy
    }
}

/// An option that takes one value, given at most once
/// (`p[CommonOptions.interval]`: the value, nil when not given).
package struct Option: OptionHandle {
    package private(set) var spec: OptionSpec

    package init(
        _ long: String, short: String? = nil, value: String, help: String, default defaultText: String? = nil, hidden: Bool = false,
        choices: [String] = [], completion: ValueCompletion? = nil
    ) {
        spec = OptionSpec(
            long, short: short, value: value, help: help, default: defaultText, hidden: hidden, choices: choices, completion: completion)
    }

    /// The same option, read alike, described otherwise for another command.
    package func helping(_ help: String) -> Option {
        var copy = self
        copy.spec.help = help
        return copy
    }
}

/// An option that may be given more than once, its values separated by
/// commas too (`p[CommonOptions.include]`: every value, in order).
package struct ListOption: OptionHandle {
    package private(set) var spec: OptionSpec

    package init(
        _ long: String, short: String? = nil, value: String, help: String, default defaultText: String? = nil, hidden: Bool = false,
        choices: [String] = [], completion: ValueCompletion? = nil
    ) {
        spec = OptionSpec(
            long, short: short, value: value, help: help, default: defaultText, repeatable: true, hidden: hidden, choices: choices,
            completion: completion)
    }

    /// The same option, read alike, described otherwise for another command.
    package func helping(_ help: String) -> ListOption {
        var copy = self
        copy.spec.help = help
        return copy
    }
}

/// A positional argument.
package struct PositionalSpec: Sendable {
    package var name: String
    package var help: String
    package var optional: Bool
    /// The words it takes (`set`, `list`, `remove`), for completions; empty
    /// when it takes any.
    package var choices: [String]
    /// It names an interface or a glob of names (completions offer them).
    package var isInterface: Bool

    package init(_ name: String, help: String, optional: Bool = false, choices: [String] = [], isInterface: Bool = false) {
        self.name = name
        self.help = help
        self.optional = optional
        self.choices = choices
        self.isInterface = isInterface
    }
}

/// What a command accepts, and how to describe it.
package struct CommandSpec: Sendable {
    /// The full command name, `ifmeter sample`.
    package var name: String
    package var abstract: String
    package var discussion: String?
    package var options: [OptionSpec]
    package var positionals: [PositionalSpec]

    /// `--help`, which every command has.
    package static let helpFlag = Flag("--help", short: "-h", help: "Show help information.")

    package init(
        name: String, abstract: String, discussion: String? = nil, options: [OptionSpec],
        positionals: [PositionalSpec] = []
    ) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.options = options + [Self.helpFlag.spec]
        self.positionals = positionals
    }

    /// The `--help` text.
    package var help: String {
        var lines = ["OVERVIEW: \(abstract)", ""]
        if let discussion {
            lines.append(discussion)
            lines.append("")
        }
        var usage = "USAGE: \(name)"
        for p in positionals { usage += p.optional ? " [<\(p.name)>]" : " <\(p.name)>" }
        let visible = options.filter { !$0.hidden }
        if visible.count > 1 { usage += " [<options>]" }
        lines.append(usage)
        lines.append("")
        if !positionals.isEmpty {
            lines.append("ARGUMENTS:")
            for p in positionals { lines += Self.row("<\(p.name)>", p.help) }
            lines.append("")
        }
        lines.append("OPTIONS:")
        for o in visible {
            var help = o.help
            if let d = o.defaultText { help += " (default: \(d))" }
            if o.repeatable { help += " Repeat or separate with commas." }
            let name = o.short.map { "\($0), \(o.long)" } ?? o.long
            lines += Self.row(o.valueName.map { "\(name) <\($0)>" } ?? name, help)
        }
        return lines.joined(separator: "\n") + "\n"
    }

    private static func row(_ left: String, _ help: String) -> [String] {
        let width = 28
        let words = help.split(separator: " ")
        var out: [String] = []
        var current = ""
        for word in words {
            if current.count + word.count + 1 > 50, !current.isEmpty {
                out.append(current)
                current = String(word)
            } else {
                current += current.isEmpty ? String(word) : " " + word
            }
        }
        if !current.isEmpty { out.append(current) }
        if out.isEmpty { out = [""] }
        var lines: [String] = []
        if left.count + 2 >= width {
            lines.append("  \(left)")
            lines += out.map { String(repeating: " ", count: width) + $0 }
        } else {
            lines.append("  " + left + String(repeating: " ", count: width - 2 - left.count) + out[0])
            lines += out.dropFirst().map { String(repeating: " ", count: width) + $0 }
        }
        return lines
    }
}

/// Arguments after parsing, before a command validates them.
package struct ParsedArguments: Sendable {
    package let spec: CommandSpec
    /// What was given, by long name: read through the handles below.
    private var values: [String: [String]] = [:]
    private var flags: Set<String> = []
    package var positionals: [String] = []
    /// The options a config file gave (the command line did not): the
    /// files they name are checked as the state file is.
    package var fromConfigFile: Set<String> = []
    /// `--help` or `-h` was given.
    package var wantsHelp: Bool { self[CommandSpec.helpFlag] }

    init(spec: CommandSpec) { self.spec = spec }

    /// The flag was given.
    package subscript(_ flag: Flag) -> Bool { flags.contains(flag.spec.long) }

    /// The option's value, nil when it was not given.
    package subscript(_ option: Option) -> String? { values[option.spec.long]?.last }

    /// Every value given for the option, comma-separated ones split, empty
    /// ones left out.
    package subscript(_ option: ListOption) -> [String] {
        (values[option.spec.long] ?? []).flatMap { $0.split(separator: ",").map(String.init) }.filter { !$0.isEmpty }
    }

    /// Every value given for the option as it was given, before splitting.
    package func given(_ option: ListOption) -> [String] { values[option.spec.long] ?? [] }

    /// The option or flag was given (a list option even with only empty
    /// values).
    package func has(_ option: any OptionHandle) -> Bool {
        values[option.spec.long] != nil || flags.contains(option.spec.long)
    }

    /// The command declares the option.
    package func declares(_ option: any OptionHandle) -> Bool { spec.options.contains { $0.long == option.spec.long } }

    // By a name known only when running (a config file's key, every option
    // of a spec); a command reads its own options by handle.

    /// The option named `long` was given.
    func has(long: String) -> Bool { values[long] != nil || flags.contains(long) }

    /// The option named `long` was given otherwise in `other` (other values,
    /// or given in one and not the other).
    func differs(from other: ParsedArguments, on long: String) -> Bool {
        values[long] != other.values[long] || flags.contains(long) != other.flags.contains(long)
    }

    /// Takes what `other` gave for the option named `long`, as if given so.
    mutating func take(_ long: String, from other: ParsedArguments) {
        values[long] = other.values[long]
        if other.flags.contains(long) { flags.insert(long) } else { flags.remove(long) }
    }

    package func usage(_ message: String) -> CLIError { .usage(message, command: spec.name) }

    /// Parses `arguments` (without the command's own name) against `spec`.
    package static func parse(_ arguments: [String], spec: CommandSpec) throws(CLIError) -> ParsedArguments {
        var parsed = ParsedArguments(spec: spec)
        var i = 0
        var onlyPositionals = false
        func find(_ name: String) -> OptionSpec? {
            spec.options.first { $0.long == name || $0.short == name }
        }
        while i < arguments.count {
            let arg = arguments[i]
            i += 1
            if onlyPositionals || arg == "-" || !arg.hasPrefix("-") {
                parsed.positionals.append(arg)
                continue
            }
            if arg == "--" {
                onlyPositionals = true
                continue
            }
            var name = arg
            var inline: String?
            if arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") {
                name = String(arg[..<eq])
                inline = String(arg[arg.index(after: eq)...])
            }
            guard let option = find(name) else {
                let known = spec.options.filter { !$0.hidden }.map(\.long) + [CommandSpec.helpFlag.spec.long]
                let hint = Suggestion.closest(to: name, among: known).map { " (did you mean '\($0)'?)" } ?? ""
                throw parsed.usage("unknown option '\(name)'\(hint)")
            }
            if option.isFlag {
                if inline != nil { throw parsed.usage("'\(option.long)' takes no value") }
                parsed.flags.insert(option.long)
                continue
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard i < arguments.count else {
                    throw parsed.usage("missing value for '\(option.synopsis)'")
                }
                value = arguments[i]
                i += 1
                if value.hasPrefix("--"), find(value) != nil {
                    throw parsed.usage("missing value for '\(option.synopsis)'")
                }
            }
            if !option.repeatable, parsed.values[option.long] != nil {
                throw parsed.usage("'\(option.long)' given more than once")
            }
            parsed.values[option.long, default: []].append(value)
        }
        if parsed.wantsHelp { return parsed }
        let required = spec.positionals.filter { !$0.optional }
        if parsed.positionals.count < required.count {
            throw parsed.usage("missing argument <\(required[parsed.positionals.count].name)>")
        }
        if parsed.positionals.count > spec.positionals.count {
            throw parsed.usage("unexpected argument '\(parsed.positionals[spec.positionals.count])'")
        }
        return parsed
    }
}

/// "Did you mean": the known word closest to a mistyped one, when it is
/// close enough to be a typo (a few edits, or a prefix of one).
enum Suggestion {
    static func closest(to word: String, among candidates: [String]) -> String? {
        let target = Array(word.lowercased())
        var best: (String, Int)?
        for candidate in candidates {
            let c = Array(candidate.lowercased())
            let distance =
                c.count > target.count && c.starts(with: target) && target.count >= 4
                ? 1 : editDistance(target, c)
            let allowed = max(1, min(3, c.count / 3))
            if distance <= allowed, distance < (best?.1 ?? .max) { best = (candidate, distance) }
        }
        return best?.0
    }

    /// Levenshtein distance, with a swap of two neighbours counted as one.
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var d = [[Int]](repeating: [Int](repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in 0...a.count { d[i][0] = i }
        for j in 0...b.count { d[0][j] = j }
        for i in 1...a.count {
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
            }
        }
        return d[a.count][b.count]
    }
}

/// The process's arguments as the kernel gave them: Swift's
/// `CommandLine.arguments` reads a byte that is not UTF-8 as U+FFFD,
/// silently, so an argument kept as given (an alias) is looked at here.
enum RawArguments {
    /// The first byte that is not UTF-8 in the argument that reads as
    /// `argument` (its offset and value); nil when it is all UTF-8.
    static func invalidUTF8(in argument: String) -> (offset: Int, byte: UInt8)? {
        guard argument.unicodeScalars.contains("\u{FFFD}") else { return nil }
        for index in 0..<Int(CommandLine.argc) {
            guard let raw = CommandLine.unsafeArgv[index] else { continue }
            var bytes: [UInt8] = []
            var p = raw
            while p.pointee != 0 {
                bytes.append(UInt8(bitPattern: p.pointee))
                p += 1
            }
            if let bad = UTF8Text.firstInvalid(bytes), String(decoding: bytes, as: UTF8.self) == argument { return (bad.offset, bad.byte) }
        }
        return nil
    }
}
