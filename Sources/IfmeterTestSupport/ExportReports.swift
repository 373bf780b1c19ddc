import Foundation
import IfmeterCore

/// Waiting on what `ifmeter export --json FILE` wrote, instead of sleeping
/// and hoping a sample came meanwhile: a test waits for the condition it
/// needs (a first report, so the baseline is taken; the bytes it sent, so
/// they are counted).
package enum ExportReport {
    /// The report at `path`, parsed; nil while there is none (or it is
    /// being replaced).
    package static func read(_ path: String) -> JSONValue? {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        return try? JSONParser.parse(text)
    }

    /// The interface named `name` in a report.
    package static func interface(_ report: JSONValue, _ name: String) -> JSONValue? {
        guard case .array(let list)? = report["interfaces"] else { return nil }
        return list.first { $0["name"]?.stringValue == name }
    }

    /// A counter of an interface's totals (`tx_bytes`, ...), 0 when absent.
    package static func total(_ report: JSONValue, _ name: String, _ counter: String) -> UInt64 {
        interface(report, name)?["totals"]?[counter]?.uint64Value ?? 0
    }

    /// Waits until export wrote a first report: its baseline sample is
    /// taken, so traffic sent from now on is counted.
    @discardableResult
    package static func waitForFirst(_ path: String, timeout: Double = 60) throws -> JSONValue {
        try waitFor("a first export report in \(path)", timeout: timeout) { read(path) }
    }

    /// Waits until the report's totals of `name` reach `atLeast` of
    /// `counter`.
    @discardableResult
    package static func waitForTotal(
        _ path: String, _ name: String, _ counter: String = "tx_bytes", atLeast: UInt64, timeout: Double = 60
    ) throws -> JSONValue {
        try waitFor("\(name)'s \(counter) to reach \(atLeast) in \(path)", timeout: timeout) {
            guard let report = read(path), total(report, name, counter) >= atLeast else { return nil }
            return report
        }
    }
}
