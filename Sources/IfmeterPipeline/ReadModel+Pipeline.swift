import IfmeterModel

extension TotalsView {
    /// Takes an update's changes (the totals it carries).
    package mutating func apply(_ update: borrowing PipelineUpdate) {
        apply(changed: update.changed, forgotten: update.forgotten)
    }
}

extension ModelUpdate {
    /// What the read model takes of a pipeline update.
    package init(_ update: borrowing PipelineUpdate) {
        self.init(
            sequence: update.sequence, sampled: update.outcome == .sampled, time: update.time, wallTime: update.wallTime,
            seconds: update.seconds, changed: update.changed, forgotten: update.forgotten, deltas: update.deltas, health: update.health)
    }
}
