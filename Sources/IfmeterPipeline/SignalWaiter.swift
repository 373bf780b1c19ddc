import IfmeterCore
import IfmeterSystem

/// Waits between samples until a stop signal (SIGINT, SIGTERM, SIGQUIT),
/// or until `stop` says so (a subscriber's output failed). On SIGHUP (when
/// installed) `hangup` runs: by default it saves the state.
package struct SignalWaiter: PipelineWaiter {
    var stop: () -> Bool
    var hangup: (Pipeline) -> Void

    package init(stop: @escaping () -> Bool = { false }, hangup: @escaping (Pipeline) -> Void = { $0.saveNow() }) {
        self.stop = stop
        self.hangup = hangup
    }

    package mutating func wait(until deadline: Double, _ pipeline: Pipeline) -> Bool {
        let source = pipeline.source
        let hangup = self.hangup
        return !stop()
            && sleepUntil(
                deadline, watching: { source.eventDescriptors }, readable: { pipeline.readEvents() }, hangup: { hangup(pipeline) })
            && !stop()
    }
}
