import IfmeterCore
import IfmeterServe
import IfmeterSystem

/// `ifmeter --generate-manpage [DIR]` and `ifmeter --generate-completion
/// SHELL`: the man pages and completion scripts, from the option specs;
/// `--generate-config` and `--generate-runbook`: the config file and the
/// alerts' runbook (`make install` runs them all).
enum Generate {
    static let manpage = Option(
        "--generate-manpage", value: "dir",
        help:
            "Write the man pages (ifmeter.1 and ifmeter-COMMAND.1 for each command) into this folder, made if missing (default: the current folder).")
    static let completion = Option(
        "--generate-completion", value: "shell", help: "Print the completion script for this shell.",
        choices: CompletionShell.allCases.map(\.rawValue))

    static let config = Flag(
        "--generate-config", help: "Print the config file with every setting of serve and export commented out (what the package ships).")

    static let runbook = Flag(
        "--generate-runbook",
        help: "Print the alerts' runbook (Markdown: the page serve answers at /runbooks, which every alert's runbook_url points at).")

    static let options = [manpage.spec, completion.spec, config.spec, runbook.spec]

    /// Runs a `--generate-...` request; false when `arguments` is not one.
    static func run(_ arguments: [String]) throws(CLIError) -> Bool {
        guard let first = arguments.first else { return false }
        var name = first
        var values = Array(arguments.dropFirst())
        if let eq = first.firstIndex(of: "=") {
            name = String(first[..<eq])
            values.insert(String(first[first.index(after: eq)...]), at: 0)
        }
        guard let option = options.first(where: { $0.long == name }) else { return false }
        func usage(_ message: String) -> CLIError { .usage(message, command: "ifmeter") }
        if let extra = values.dropFirst().first { throw usage("unexpected argument '\(extra)' after '\(option.long)'") }
        switch option.long {
        case manpage.spec.long:
            try writeManPages(into: values.first ?? ".")
        case config.spec.long:
            if let extra = values.first { throw usage("unexpected argument '\(extra)' after '\(option.long)'") }
            try Output.put(ConfigFile.example)
        case runbook.spec.long:
            if let extra = values.first { throw usage("unexpected argument '\(extra)' after '\(option.long)'") }
            try Output.put(Runbooks.markdown + "\n")
        default:
            guard let text = values.first else {
                throw usage("missing value for '\(option.synopsis)': one of \(option.choices.joined(separator: ", "))")
            }
            guard let shell = CompletionShell(rawValue: text) else {
                throw usage("unknown shell '\(text)' for '\(option.long)'; use \(option.choices.joined(separator: ", "))")
            }
            try Output.put(CompletionScript().script(for: shell))
        }
        return true
    }

    /// The pages' date: SOURCE_DATE_EPOCH's, or none (reproducible).
    static var pageDate: String {
        guard let text = environment("SOURCE_DATE_EPOCH"), let seconds = Int64(text) else { return "" }
        return Roff.date(epoch: seconds)
    }

    static func writeManPages(into directory: String) throws(CLIError) {
        do throws(SystemError) {
            try makeDirectory(directory)
        } catch {
            throw .runtime("cannot make the folder '\(directory)': \(error.message)")
        }
        for page in ManPages(date: pageDate).pages {
            let path = directory + "/" + page.fileName
            do throws(SystemError) {
                try writeFile(path, Array(TerminalText.escaped(page.text, keeping: "\n").utf8))
            } catch {
                throw .runtime("cannot write '\(path)': \(error.message)")
            }
        }
    }
}
