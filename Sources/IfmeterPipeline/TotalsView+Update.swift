import IfmeterModel

extension TotalsView {
    /// Takes an update's changes (the totals it carries).
    public mutating func apply(_ update: borrowing PipelineUpdate) {
        apply(changed: update.changed, forgotten: update.forgotten)
    }
}
