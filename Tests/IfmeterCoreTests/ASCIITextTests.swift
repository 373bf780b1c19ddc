import IfmeterCore
import Testing

/// The ASCII stand-ins docs/live-view.md names, and columns kept.
@Suite struct ASCIITextTests {
    @Test func eachCharacterHasTheStandInTheDocsName() {
        #expect(ASCIIText.folded("≥ 5 MiB") == ">= 5 MiB")
        #expect(ASCIIText.folded("~ 5 MiB") == "~ 5 MiB")
        #expect(ASCIIText.folded("▁▂▃▄▅▆▇█") == "----####")
        #expect(ASCIIText.folded("↓1 KiB/s ↑2 KiB/s") == "v1 KiB/s ^2 KiB/s")
        #expect(ASCIIText.folded("a · b") == "a - b")
        #expect(ASCIIText.folded("···") == "...")
        #expect(ASCIIText.folded("› lo") == "> lo")
        #expect(ASCIIText.folded("waiting…") == "waiting...")
        #expect(ASCIIText.folded("tun0 → eth0") == "tun0 -> eth0")
        #expect(ASCIIText.folded("plain ascii") == "plain ascii")
        #expect(ASCIIText.folded("wlän0") == "wlän0", "a name from the kernel is left as it is")
    }

    /// A right-aligned column keeps its width: `≥` takes a space of the
    /// padding before it when there are two.
    @Test func aRightAlignedColumnKeepsItsWidth() {
        let rows = ["    ≥ 5 MiB  x", "     12 MiB  x", "  ≥ 100 KiB  x"]
        let folded = rows.map(ASCIIText.folded)
        #expect(folded == ["   >= 5 MiB  x", "     12 MiB  x", " >= 100 KiB  x"])
        #expect(Set(folded.map(\.count)).count == 1)
    }
}
