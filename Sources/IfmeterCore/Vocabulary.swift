// What every output says about its figures, in one place: the estimate
// caveat in its lengths, the quality marks and their legend, the notes on
// what happened to an interface, and the physical/tunnel summary. Text
// reports, the live view, JSON and the Prometheus HELP lines all take their
// words from here.

/// The caveat every output carries: interface counters are estimates of
/// traffic, not an accounting of it.
public enum Caveat {
    /// One sentence, the long form: text report footers and JSON `caveats`.
    public static let estimate =
        "Estimates from interface counters: they include protocol overhead (headers, retransmissions) and are not per-app accounting."
    public static let lowerBound =
        "≥ marks a lower bound: some traffic could not be seen (a counter reset, or an interface recreated without a deletion event); the true value is at least the figure."
    public static let wrapCorrected =
        "~ marks a figure corrected for a 32-bit counter wrap; a figure without a mark is an exact reading of the counters."
    /// The v1.2 gap rule in words, for output of 32-bit counters (the app
    /// library's readings): a lower bound with no reset or recreation.
    public static let longGap =
        "≥ also marks 32-bit counters read so long after the reading before that a whole wrap (4 GiB) could have passed unseen."
    /// Every long caveat, in order.
    public static let all = [estimate, lowerBound, wrapCorrected]

    /// The medium form, for help texts and pages: what the figures are.
    public static let sentence =
        "Figures are estimates from interface counters: they include protocol overhead and are not per-app accounting."
    /// The medium form with what the marks mean, for the live view's help.
    public static let paragraph =
        sentence
        + " No mark: exact counters; ~ corrected for a 32-bit wrap; ≥ a lower bound (traffic was lost to a reset or an unseen recreation). "
        + TrafficSummary.explanation

    /// The short form, for Prometheus HELP lines.
    public static let short = "An estimate from interface counters: protocol overhead included, not per-app."
    /// The short form for families about ifmeter itself.
    public static let health =
        "(ifmeter's own health; its interface figures are estimates from interface counters, protocol overhead included, not per-app.)"
    /// The short form with the marks, for one header line of plain output.
    public static let inline =
        "Figures are estimates from interface counters (protocol overhead included, not per-app); ≥ lower bound, ~ wrap-corrected."
    /// A lower bound, in words, for a page without the marks.
    public static let lowerBoundSentence = "A total that lost traffic is a lower bound"

    /// The caveat line of a screen `width` columns wide (the live view's
    /// last line): the words for the figures, then only the marks shown
    /// (`≈` and `?` mark the route line's outside figures, which are
    /// differences of two links).
    public static func line(
        fitting width: Int, lowerBound: Bool = false, wrapCorrected: Bool = false, derived: Bool = false, uncertain: Bool = false
    ) -> String {
        var text =
            width >= 94
            ? "estimates from interface counters (overhead incl., not per-app)"
            : width >= 60 ? "estimates from interface counters, not per-app" : "estimates from counters, not per-app"
        if lowerBound { text += width >= 140 ? " · ≥ lower bound (traffic was lost)" : " · ≥ lower bound" }
        if wrapCorrected { text += width >= 140 ? " · ~ corrected for a 32-bit counter wrap" : " · ~ wrap-corrected" }
        if derived { text += " · ≈ outside: estimated" }
        if uncertain { text += " · ? outside: uncertain" }
        return text
    }
}

extension Quality {
    /// The mark printed before a figure of this quality: none for an exact
    /// reading (a mark there read as "approximately"), `~` for a figure
    /// corrected for a wrap, `≥` for a lower bound.
    public var mark: String {
        switch self {
        case .exact: ""
        case .wrapCorrected: "~"
        case .lowerBound: "≥"
        }
    }

    /// `figure` with this quality's mark before it, and a space between.
    public func marked(_ figure: String) -> String { mark.isEmpty ? figure : mark + " " + figure }
}

extension Caveat {
    /// The caveat for a text output, explaining only the marks it shows.
    public static func legend(shown: Set<Quality>) -> [String] {
        var lines = [estimate]
        if shown.contains(.lowerBound) { lines.append(lowerBound) }
        if shown.contains(.wrapCorrected) { lines.append("~ marks a figure corrected for a 32-bit counter wrap.") }
        if shown.contains(.lowerBound) || shown.contains(.wrapCorrected) {
            lines.append("Figures without a mark are exact readings of the counters.")
        }
        return lines
    }
}

extension DeltaChange {
    /// A few words for a table's NOTE column; empty for a steady interval.
    public var note: String {
        switch self {
        case .baseline: "baseline"
        case .steady: ""
        case .appeared: "new"
        case .wrap: "32-bit wrap corrected"
        case .reset: "counter reset"
        case .recreated: "recreated"
        case .deleted: "deleted"
        case .restarted: "restarted after a reboot"
        }
    }

    /// A line for an interface's event list; nil when nothing happened.
    public var eventText: String? {
        switch self {
        case .wrap: "32-bit counter wrapped (corrected)"
        case .reset: "counters reset (lower bound)"
        case .recreated: "recreated"
        case .deleted: "deleted"
        case .appeared: "appeared"
        case .restarted: "counters restarted (reboot while stopped)"
        case .baseline, .steady: nil
        }
    }
}

extension EventCounts {
    /// `1 wrap, 2 recreations`, or `-`.
    public var summary: String {
        var parts: [String] = []
        func add(_ n: Int, _ one: String, _ many: String) { if n > 0 { parts.append("\(n) \(n == 1 ? one : many)") } }
        add(wraps, "wrap", "wraps")
        add(resets, "reset", "resets")
        add(recreations, "recreation", "recreations")
        add(deletions, "deletion", "deletions")
        return parts.isEmpty ? "-" : parts.joined(separator: ", ")
    }
}

/// Physical traffic (Wi-Fi, cellular, Ethernet) and tunnel traffic, kept
/// apart: a tunnel's packets ride inside a physical link, so adding the two
/// would count them twice.
public struct TrafficSummary: Sendable, Hashable {
    public var physicalRx: Double = 0
    public var physicalTx: Double = 0
    public var tunnelRx: Double = 0
    public var tunnelTx: Double = 0

    public init() {}

    /// Adds one interface's figures (bytes, or bytes per second).
    public mutating func add(_ kind: InterfaceKind, rx: Double, tx: Double) {
        if kind.isPhysical {
            physicalRx += rx
            physicalTx += tx
        } else if kind == .tunnel {
            tunnelRx += rx
            tunnelTx += tx
        }
    }

    /// Why the two are apart, in one sentence (JSON `summary.note`).
    public static let note =
        "Tunnel traffic rides inside physical traffic (wifi, cellular, ethernet): the two are shown apart and never added."
    /// The same for a help text.
    public static let explanation =
        "Tunnel traffic rides inside physical traffic, so the summary shows it apart instead of adding it."
    /// After the tunnel figures on a wide line, and on a narrow one.
    public static let wideNote = "(inside physical, not added)"
    public static let narrowNote = "(inside)"
}

/// Greedy word wrap at `width` columns (one column per scalar), for help
/// texts built from the sentences above.
public func wordWrap(_ text: String, width: Int) -> [String] {
    var lines: [String] = []
    var line = ""
    for word in text.split(separator: " ") {
        let candidate = line.isEmpty ? String(word) : line + " " + word
        if candidate.unicodeScalars.count > width, !line.isEmpty {
            lines.append(line)
            line = String(word)
        } else {
            line = candidate
        }
    }
    if !line.isEmpty { lines.append(line) }
    return lines
}
