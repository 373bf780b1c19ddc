import IfmeterCore

/// Every format a report of the delta engine (`ifmeter replay`) can be
/// written in: the one list `replay --format` offers, its help, man page
/// and completions. A new format is a `ReportRenderer` in a file of its own
/// and one line here (docs/architecture.md, "Adding to ifmeter").
package enum ReportFormats {
    /// How a renderer is made from the options every format may honour.
    package struct Format: Sendable {
        package let name: String
        package let make: @Sendable (_ bits: Bool) -> any ReportRenderer
    }

    package static let all: [Format] = [
        Format(name: "json") { _ in JSONReportRenderer() },
        Format(name: "text") { bits in TextReportRenderer(bits: bits) },
    ]

    package static var names: [String] { all.map(\.name) }

    /// The renderer of `name`; nil for a name no format has.
    package static func renderer(_ name: String, bits: Bool) -> (any ReportRenderer)? {
        all.first { $0.name == name }?.make(bits)
    }
}
