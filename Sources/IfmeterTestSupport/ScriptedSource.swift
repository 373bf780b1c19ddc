import IfmeterCore
import IfmeterSystem

/// A counter source that plays a script: readings and failures, in order,
/// so the pipeline is tested without root or a kernel.
package final class ScriptedSource: CounterSource {
    package enum Step: Sendable {
        case reading(SourceReading)
        case failure(SystemError)
    }

    package let sourceName = "scripted"
    package private(set) var steps: [Step]
    package private(set) var position = 0

    package init(_ steps: [Step]) { self.steps = steps }

    package func read() throws(SystemError) -> SourceReading {
        guard position < steps.count else { throw SystemError(call: "scripted read", message: "the script has ended") }
        defer { position += 1 }
        switch steps[position] {
        case .reading(let reading): return reading
        case .failure(let error): throw error
        }
    }
}

extension ScriptedSource.Step {
    /// A sample at `t` of interfaces given as (name, index, rx, tx), with
    /// packets a hundredth of the bytes; deletions and overruns before it.
    package static func sample(
        _ t: Double, _ interfaces: [(String, Int, UInt64, UInt64)], kind: InterfaceKind = .ethernet,
        deleted: [DeletionEvent] = [], overruns: Int = 0
    ) -> Self {
        .reading(
            SourceReading(
                events: LinkEvents(deleted: deleted, overruns: overruns),
                sample: Sample(
                    time: t,
                    interfaces: interfaces.map { name, index, rx, tx in
                        scriptedInterface(name, index, rx, tx, kind: kind)
                    })))
    }

    package static func failed(_ message: String = "scripted failure") -> Self {
        .failure(SystemError(call: "scripted read", errno: 5, message: message))
    }
}

/// One scripted interface reading: packets are a hundredth of the bytes.
package func scriptedInterface(_ name: String, _ index: Int, _ rx: UInt64, _ tx: UInt64, kind: InterfaceKind = .ethernet) -> InterfaceSample {
    InterfaceSample(
        name: name, index: index, classification: Classification(kind: kind, evidence: "scripted"),
        counters: Counters(rxBytes: rx, txBytes: tx, rxPackets: rx / 100, txPackets: tx / 100))
}

/// A deletion event with final counters, as `scriptedInterface` builds them.
package func scriptedDeletion(_ t: Double, _ name: String, _ index: Int, _ rx: UInt64, _ tx: UInt64) -> DeletionEvent {
    DeletionEvent(time: t, interface: scriptedInterface(name, index, rx, tx))
}
