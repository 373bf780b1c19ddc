import Foundation
@testable import IfmeterCLI
import IfmeterCore
import IfmeterTestSupport
import Testing

/// The man pages' roff and the option specs' value sets, without installing.
@Suite(.blocking) struct GeneratedDocsTests {
    @Test func roffEscapesWhatRoffWouldRead() {
        #expect(Roff.text(#"a\b"#) == #"a\eb"#)
        #expect(Roff.text(".SH not a macro") == #"\&.SH not a macro"#)
        #expect(Roff.text("'quote") == #"\&'quote"#)
        #expect(Roff.text("x\n.y") == "x\n\\&.y")
        #expect(Roff.text("≥ 5") == #"\[u2265] 5"#)
        #expect(Roff.text("--max-rate per-app -i") == #"\-\-max\-rate per-app \-i"#)
    }

    /// Help text full of what roff treats specially comes out of groff as
    /// it went in, with no warning.
    @Test func hostileHelpTextSurvivesGroff() throws {
        let tricky = [
            ".SH INJECTED", "'also a control line", #"back\slash and \fB not bold"#, "\"quoted\" ≥ ≈ ~ ·",
            "-leading dash", "100% [brackets] {braces}",
        ]
        let spec = CommandSpec(
            name: "ifmeter demo", abstract: tricky[0], discussion: tricky.joined(separator: "\n\n"),
            options: tricky.enumerated().map { OptionSpec("--option-\($0.offset)", value: "value", help: $0.element) })
        let page = try #require(ManPages(commands: [spec]).pages.last)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-roff-\(UUID().uuidString).1")
        try page.text.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        let rendered = try run(["groff", "-man", "-ww", "-Tutf8", "-P-cbou", file.path])
        #expect(rendered.err.isEmpty, "\(rendered.err)")
        // One line each: a rendered line holds the whole help text.
        let text = rendered.out.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ") }
            .joined(separator: " ")
        for help in tricky { #expect(text.contains(help), "\(help)") }
        #expect(!text.contains("INJECTED\n"), "no section of its own")
    }

    @Test func sourceDateEpochBecomesTheDate() {
        #expect(Roff.date(epoch: 0) == "1970-01-01")
        #expect(Roff.date(epoch: 951_782_400) == "2000-02-29")
        #expect(Roff.date(epoch: 1_796_083_199) == "2026-11-30")
    }

    /// Every value a spec offers is one its command accepts, and a value
    /// outside the set is refused naming the option.
    @Test func choicesAreWhatCommandsAccept() throws {
        var checked = 0
        for command in IfmeterCLI.commands {
            // A command that needs more than its options (a file, --state)
            // cannot say anything about one option alone.
            guard (try? command.init(ParsedArguments.parse([], spec: command.spec))) != nil else { continue }
            for option in command.spec.options where !option.choices.isEmpty {
                var values = option.choices
                if option.repeatable { values.append(option.choices.joined(separator: ",")) }
                for value in values {
                    #expect(throws: Never.self, "\(command.spec.name) \(option.long) \(value)") {
                        _ = try command.init(ParsedArguments.parse([option.long, value], spec: command.spec))
                    }
                    checked += 1
                }
                do {
                    _ = try command.init(ParsedArguments.parse([option.long, "not-a-choice"], spec: command.spec))
                    Issue.record("\(command.spec.name) \(option.long) accepted not-a-choice")
                } catch {
                    #expect(error.exitCode == 64 && error.line.contains(option.long), "\(error.line)")
                }
            }
        }
        #expect(checked > 10)
    }

    @Test func generateRefusesBadRequests() throws {
        let shell = try ifmeter(["--generate-completion", "tcsh"])
        #expect(shell.status == 64 && shell.out.isEmpty)
        #expect(shell.err.hasPrefix("Error: unknown shell 'tcsh'") && shell.err.filter { $0 == "\n" }.count == 1, "\(shell.err)")
        let none = try ifmeter(["--generate-completion"])
        #expect(none.status == 64 && none.err.contains("bash, zsh, fish"))
        let extra = try ifmeter(["--generate-manpage", "a", "b"])
        #expect(extra.status == 64 && extra.err.contains("unexpected argument 'b'"))
        let unwritable = try ifmeter(["--generate-manpage", "/proc/no-such-folder/man"])
        #expect(unwritable.status == 1 && unwritable.err.hasPrefix("Error: cannot make the folder"), "\(unwritable.err)")
    }

    @Test func generatedOutputIsDeterministic() throws {
        for shell in CompletionShell.allCases {
            let first = try ifmeter(["--generate-completion", shell.rawValue])
            #expect(first.status == 0 && first.out == CompletionScript().script(for: shell))
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ifmeter-man-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        #expect(try ifmeter(["--generate-manpage=\(folder.path)"]).status == 0)
        for page in ManPages(date: Generate.pageDate).pages {
            #expect(try String(contentsOf: folder.appendingPathComponent(page.fileName), encoding: .utf8) == page.text)
        }
    }
}
