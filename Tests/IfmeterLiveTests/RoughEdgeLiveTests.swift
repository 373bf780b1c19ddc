import IfmeterCore
@testable import IfmeterLive
import Testing

/// The live view's rough edges a new user hit (issue 23), each
/// reproduced first.
@Suite struct RoughEdgeLiveTests {
    /// At start the rows are ranked by name (the first sample has no
    /// rates); the selection must not stick to that first row once the
    /// busiest takes the top, or a small screen scrolls the busiest away.
    @Test func theSelectionStartsOnTheBusiestAndKeepsItInView() {
        var model = steadyModel([("aidle", 0, 0), ("bidle", 0, 0), ("cidle", 0, 0), ("zbusy", 500_000, 900_000)], steps: 4)
        #expect(model.visible.first?.name == "zbusy")
        #expect(model.selected?.name == "zbusy", "the cursor is on the top row")
        let screen = visibleText(LiveRenderer(color: false).render(model, width: 40, height: 10))
        #expect(screen.contains { $0.hasPrefix("› zbusy") }, "\(screen)")
        // Moved by the user, it stays with that interface.
        _ = model.handle(.down)
        #expect(model.selected?.name == "aidle" && !model.selectionFollowsTop)
        _ = model.handle(.home)
        #expect(model.selected?.name == "zbusy" && model.selectionFollowsTop)
    }

    /// "last hour in 40 s steps" is labelled back to -1h, not -1h30m: a
    /// graph wider than the span's history has no labels past it.
    @Test func theTimeAxisEndsWhereTheDataDoes() {
        let hour = LiveRenderer.timeAxis(columns: 132, resolution: 40, labelWidth: 8, covered: LiveSpan.hour.capacity)
        #expect(hour.contains("-1h") && !hour.contains("-1h30m") && !hour.contains("-1h20m"), "\(hour)")
        let day = LiveRenderer.timeAxis(columns: 140, resolution: 900, labelWidth: 8, covered: LiveSpan.day.capacity)
        #expect(!day.contains("-36h") && !day.contains("-30h") && !day.contains("-26h"), "\(day)")
        #expect(day.contains("-24h") || day.contains("-1d") || day.contains("-18h"), "\(day)")
        // Through the renderer: the detail pane of the hour span, 160 wide.
        var model = steadyModel([("va", 1000, 2000)], steps: 3)
        _ = model.handle(.enter)
        _ = model.handle(.character("t"))
        #expect(model.span == .hour)
        let screen = visibleText(LiveRenderer(color: false).render(model, width: 160, height: 40))
        #expect(screen.contains { $0.contains("last hour in 40 s steps") }, "\(screen)")
        #expect(!screen.contains { $0.contains("-1h30m") || $0.contains("-1h20m") }, "\(screen)")
    }

    /// f, Ctrl-U, Enter left an invisible ^U in the filter. Ctrl-U clears
    /// the draft, as in a shell; other control characters are not taken.
    @Test func theFilterPromptTakesNoControlCharacters() {
        var model = steadyModel([("va", 1, 1), ("vb", 1, 1)], steps: 2)
        _ = model.handle(.character("f"))
        _ = model.handle(.character("\u{15}"))
        _ = model.handle(.enter)
        #expect(model.filter == "" && model.visible.count == 2)
        _ = model.handle(.character("f"))
        for c in ["v", "\u{7}", "\u{1}", "\u{200B}", "z", "\u{15}", "v", "a"] { _ = model.handle(.character(Character(c))) }
        _ = model.handle(.enter)
        #expect(model.filter == "va")
        #expect(model.visible.map(\.name) == ["va"])
        #expect(KeyDecoder.decode([0x66, 0x15, 0x0D]) == [.character("f"), .character("\u{15}"), .enter])
    }

    /// Without UTF-8 (LANG=C) the screen is ASCII: `>=` for `≥`, `#` and
    /// `-` for bars, and every row keeps the terminal's width.
    @Test func anASCIIScreenDrawsNothingElse() {
        var model = steadyModel([("fast", 286_720, 2_936_013), ("slow", 24_576, 245_760)])
        for (width, height) in [(120, 30), (80, 24), (40, 10)] {
            let screen = visibleText(LiveRenderer(color: false, ascii: true).render(model, width: width, height: height))
            for line in screen {
                #expect(line.unicodeScalars.allSatisfy { $0.isASCII }, "\(width)x\(height): \(line)")
                #expect(line.count == width, "\(width)x\(height): \(line.count) columns: \(line)")
            }
            if width >= 80 { #expect(screen.contains { $0.contains("#") }, "bars at \(width)x\(height)") }
        }
        _ = model.handle(.enter)
        _ = model.handle(.character("?"))
        let help = visibleText(LiveRenderer(color: false, ascii: true).render(model, width: 100, height: 40))
        #expect(help.allSatisfy { $0.unicodeScalars.allSatisfy { $0.isASCII } }, "\(help)")
    }
}
