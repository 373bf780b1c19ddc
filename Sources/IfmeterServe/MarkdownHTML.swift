import IfmeterOutput

/// The Markdown the runbook is written in, as HTML: headings (each with
/// the `id` GitHub gives it, so a link's fragment is the same on GitHub,
/// in docs/ and on serve's page), paragraphs, fenced code blocks, and
/// within text `` `code` ``, `**strong**` and `[text](target)`. That is
/// all `Runbooks.markdown` uses; anything else is shown as the text it
/// is. Every character of the source is escaped: nothing in it becomes
/// markup but what these rules make. A link becomes one only when it
/// leads somewhere from the page (`http:`, `https:` or a fragment of
/// the page); a relative one (`metrics.md`, a file of the repository) is
/// shown as its text.
enum MarkdownHTML {
    static func render(_ markdown: String) -> String {
        var html = ""
        var paragraph: [Substring] = []
        var fence: [Substring]?
        var slugs: [String: Int] = [:]
        func flush() {
            guard !paragraph.isEmpty else { return }
            html += "<p>" + inline(paragraph.joined(separator: "\n")) + "</p>\n"
            paragraph = []
        }
        for line in markdown.split(separator: "\n", omittingEmptySubsequences: false) {
            if var code = fence {
                if line.hasPrefix("```") {
                    html += "<pre><code>" + escaped(code.joined(separator: "\n")) + "</code></pre>\n"
                    fence = nil
                } else {
                    code.append(line)
                    fence = code
                }
                continue
            }
            if line.hasPrefix("```") {
                flush()
                fence = []
            } else if let (level, title) = heading(line) {
                flush()
                let slug = anchor(title, seen: &slugs)
                html += "<h\(level) id=\"\(escaped(slug))\">" + inline(title) + "</h\(level)>\n"
            } else if line.allSatisfy({ $0 == " " }) {
                flush()
            } else {
                paragraph.append(line)
            }
        }
        flush()
        if let code = fence { html += "<pre><code>" + escaped(code.joined(separator: "\n")) + "</code></pre>\n" }
        return html
    }

    /// `# Title` to `###### Title`: its level and title.
    static func heading(_ line: Substring) -> (Int, Substring)? {
        let level = line.prefix { $0 == "#" }.count
        guard (1...6).contains(level), line.dropFirst(level).first == " " else { return nil }
        return (level, line.dropFirst(level + 1))
    }

    /// GitHub's anchor of a heading: lower case, spaces as hyphens, every
    /// character but letters, digits, `-` and `_` left out; a second
    /// heading of the same anchor gets `-1`, a third `-2`.
    static func anchor(_ title: Substring, seen: inout [String: Int]) -> String {
        let slug = String(
            title.lowercased().compactMap { c -> Character? in
                if c == " " { return "-" }
                return c == "-" || c == "_" || c.isLetter || c.isNumber ? c : nil
            })
        let n = seen[slug, default: 0]
        seen[slug] = n + 1
        return n == 0 ? slug : "\(slug)-\(n)"
    }

    /// Text with its code spans, strong emphasis and links.
    static func inline(_ text: some StringProtocol) -> String {
        var html = ""
        var rest = Substring(text)
        while let c = rest.first {
            if c == "`", let end = rest.dropFirst().firstIndex(of: "`") {
                html += "<code>" + escaped(rest[rest.index(after: rest.startIndex)..<end]) + "</code>"
                rest = rest[rest.index(after: end)...]
            } else if rest.hasPrefix("**"), let end = rest.dropFirst(2).firstRange(of: "**") {
                html += "<strong>" + inline(rest[rest.index(rest.startIndex, offsetBy: 2)..<end.lowerBound]) + "</strong>"
                rest = rest[end.upperBound...]
            } else if c == "[", let link = link(rest) {
                html += link.html
                rest = link.rest
            } else {
                html += escaped(String(c))
                rest = rest.dropFirst()
            }
        }
        return html
    }

    /// `[text](target)` at the start of `text`: the link (or its text
    /// alone, for a target the page cannot lead to) and what follows it.
    static func link(_ text: Substring) -> (html: String, rest: Substring)? {
        guard let close = text.firstRange(of: "]("), let end = text[close.upperBound...].firstIndex(of: ")") else { return nil }
        let inside = text[text.index(after: text.startIndex)..<close.lowerBound]
        guard !inside.contains(where: { $0 == "[" || $0 == "]" }) else { return nil }
        let label = inline(inside)
        let target = text[close.upperBound..<end]
        let rest = text[text.index(after: end)...]
        let followed = target.hasPrefix("https://") || target.hasPrefix("http://") || target.hasPrefix("#")
        guard followed, !target.contains(where: { $0 == " " || $0.isNewline }) else { return (label, rest) }
        return ("<a href=\"\(escaped(target))\">" + label + "</a>", rest)
    }

    /// Markup's characters as references, control and invisible ones as
    /// `\x1b`-style escapes (`UsageChart.xml`); a newline stays one.
    static func escaped(_ text: some StringProtocol) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { UsageChart.xml(String($0)) }.joined(separator: "\n")
    }
}
