import IfmeterSystem
import IfmeterTestSupport
import Testing

@testable import IfmeterServe

/// libmicrohttpd says all its messages through one callback: each class of
/// them is a site of its own in serve's log (issue 46), so one flood of a
/// kind never hides a line of another, and lines that differ only in
/// numbers are held back as one.
@Suite struct LibraryLogSiteTests {
    @Test func eachClassOfTheLibrarysMessagesIsASiteOfItsOwn() {
        let said = CapturedLog(prefix: "ifmeter serve: ", every: 10)
        func library(_ line: String) { said.log.write(.warning, line, site: LibraryLog.site(line)) }
        library("Error accepting connection: Too many open files")
        library("Failed to create a thread: Resource temporarily unavailable (1 of 4)")
        library("Failed to create a thread: Resource temporarily unavailable (2 of 4)")
        library("Error accepting connection: Too many open files")
        #expect(
            said.lines == [
                "ifmeter serve: Error accepting connection: Too many open files",
                "ifmeter serve: Failed to create a thread: Resource temporarily unavailable (1 of 4)",
            ])
        said.advance(10)
        library("Failed to create a thread: Resource temporarily unavailable (3 of 4)")
        #expect(
            said.lines.last
                == "ifmeter serve: Failed to create a thread: Resource temporarily unavailable (3 of 4) (and 1 more messages like it in the last 10 s)"
        )
    }
}
