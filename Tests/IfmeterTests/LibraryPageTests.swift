import Foundation
import IfmeterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

import Ifmeter

/// docs/library.md's example, run: its second code block (the first is a
/// Package.swift fragment) is `import Ifmeter`, a blank line and the body
/// of `libraryPageExample`, line for line (indented by four spaces here).
func libraryPageExample() throws {
    let meter = try TrafficMeter() // 64-bit sysctl on Apple platforms, getifaddrs on Linux
    let reading = try meter.sample() // the first is the baseline
    for interface in reading.interfaces where interface.name == "en0" {
        print(interface.sinceStart.quality.marked("\(interface.sinceStart.sentBytes) B"))
    }
    print(reading.caveats.joined(separator: "\n"))
}

@Suite struct LibraryPageTests {
    static func blocks(_ path: String) throws -> [[Substring]] {
        let text = try String(contentsOfFile: repositoryRoot.appendingPathComponent(path).path, encoding: .utf8)
        var blocks: [[Substring]] = [], current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line == "```swift" {
                current = []
            } else if current != nil, line == "```" {
                blocks.append(current!)
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    @Test func thePagesExampleIsTheTestedCode() throws {
        let page = try Self.blocks("docs/library.md")
        #expect(page.count == 2)
        let source = try String(contentsOfFile: #filePath, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        let start = try #require(source.firstIndex(of: "func libraryPageExample() throws {")) + 1
        let end = try #require(source[start...].firstIndex(of: "}"))
        let body = source[start..<end].map { $0.hasPrefix("    ") ? $0.dropFirst(4) : $0 }
        #expect(page.last.map(Array.init) == ["import Ifmeter", ""] + body, "docs/library.md's example differs from libraryPageExample()")
    }

    /// The example runs (its lines go to the test's output): the baseline
    /// reads every interface here, and the caveats start with the estimate.
    @Test func thePagesExampleRuns() throws {
        try libraryPageExample()
        let reading = try TrafficMeter().sample()
        #expect(reading.caveats.first?.hasPrefix("Estimates from interface counters") == true)
        #expect(reading["lo"] != nil)
    }
}
