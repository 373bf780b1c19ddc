import Foundation

/// What tests read of a Markdown document: its prose (outside fenced
/// code) and its headings' anchors, as GitHub makes them. The README's
/// links and the alerts' runbook URLs are checked against these.
package enum Markdown {
    /// The lines outside fenced code blocks, with their 1-based numbers.
    package static func prose(_ text: String) -> [(number: Int, line: String)] {
        var fenced = false
        var result: [(Int, String)] = []
        for (i, line) in text.components(separatedBy: "\n").enumerated() {
            if line.hasPrefix("```") {
                fenced.toggle()
                continue
            }
            if !fenced { result.append((i + 1, line)) }
        }
        return result
    }

    /// GitHub's anchor for a heading: lower case, punctuation dropped,
    /// spaces made hyphens; a repeated heading gets `-1`, `-2`, ...
    package static func anchors(_ text: String) -> Set<String> {
        var seen: [String: Int] = [:]
        var result: Set<String> = []
        for (_, line) in prose(text) where line.hasPrefix("#") {
            let title = line.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces)
            let slug = String(
                title.lowercased().unicodeScalars.compactMap { c -> Character? in
                    if c == " " { return "-" }
                    if c == "-" || c == "_" || CharacterSet.alphanumerics.contains(c) { return Character(c) }
                    return nil
                })
            let n = seen[slug, default: 0]
            seen[slug] = n + 1
            result.insert(n == 0 ? slug : "\(slug)-\(n)")
        }
        return result
    }
}
