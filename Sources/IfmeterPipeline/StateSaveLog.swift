import IfmeterCore
import IfmeterStore
import IfmeterSystem

/// Says what happens to the state file's saves, one line per cause: a save
/// that fails (and what it leaves out of the file), the first that works
/// again, and a file found deleted or replaced under the writer. Library
/// code prints nothing: `log` writes the line (stderr, or a list a view
/// shows later); each line is said once per change already, so the
/// command gives a log that holds none back (`Log.everyLine`).
package final class StateSaveLog: PipelineSink {
    private let log: Log
    private let zone: LocalZone
    /// The cause last said (SQLite's or the system's words), while failing.
    private var saidCause: String?
    private var failuresWhenSaid: UInt64 = 0

    package init(zone: LocalZone = .system, log: Log) {
        self.zone = zone
        self.log = log
    }

    package func receive(_ update: borrowing PipelineUpdate) {
        guard let status = update.persistence else { return }
        say(status)
    }

    func say(_ status: PersistenceStatus) {
        let path = status.info.path
        for notice in status.notices {
            switch notice {
            case .recreated(let path):
                log.warning("state file \(path) was deleted under this ifmeter (or its folder was): written anew there with everything counted")
            case .changed(.remove(let name)):
                log.info("applied 'ifmeter state remove \(TerminalText.escaped(name))' to \(path): its history and totals are gone")
            case .changed(.rename(let from, let to)):
                log.info(
                    "applied 'ifmeter state rename \(TerminalText.escaped(from)) \(TerminalText.escaped(to))' to \(path): its history is \(TerminalText.escaped(to))'s now"
                )
            case .replaced(let path, let aside):
                log.warning(
                    "state file \(path) was replaced by another file under this ifmeter: that file was moved to \(aside), and this ifmeter's written anew at \(path)"
                )
            }
        }
        if let error = status.lastError {
            let cause = Self.cause(error)
            guard cause != saidCause else { return }
            saidCause = cause
            failuresWhenSaid = status.health.failures
            log.warning(
                "saving state to \(path) failed: \(cause). \(Self.unsaved(status, zone: zone)) kept in memory, not in the file; retrying every \(Units.duration(status.health.retryEvery)) (ifmeter_state_save_failures_total)"
            )
        } else if saidCause != nil {
            saidCause = nil
            log.info("saving state to \(path) works again, after \(status.health.failures - failuresWhenSaid + 1) failed saves")
        }
    }

    /// What was not saved, in words: the traffic since the last good save.
    static func unsaved(_ status: PersistenceStatus, zone: LocalZone) -> String {
        guard let last = status.health.lastSaveTime else { return "Everything counted since this ifmeter started is" }
        return "What was counted since the last good save at \(Self.stamp(last, zone)) is"
    }

    /// RFC 3339 in `zone`, `Z` for UTC.
    static func stamp(_ time: Double, _ zone: LocalZone) -> String {
        let text = zone.rfc3339(Int64(time.rounded(.down)))
        return text.hasSuffix("+00:00") ? String(text.dropLast(6)) + "Z" : text
    }

    /// A failure without the path (the line names it once).
    static func cause(_ error: StoreError) -> String {
        switch error {
        case .sqlite(_, _, let message): message
        case .system(_, let error): "\(error.call): \(error.message)"
        case .noFolder(_, let folder): "its folder \(folder) no longer exists"
        default: error.description
        }
    }

    /// The line a command ends with (exit 1) when its last save failed.
    package static func finalFailure(_ status: PersistenceStatus, zone: LocalZone = .system) -> String? {
        guard let error = status.lastError else { return nil }
        // The last save worked; marking the clean stop after it did not.
        if !status.health.failing {
            return "the state file \(status.info.path) was saved, but marking the clean stop failed (\(cause(error))): "
                + "the next start will take it for a stop without one"
        }
        let unsaved = unsaved(status, zone: zone)
        return
            "the last save of the state file \(status.info.path) failed (\(cause(error))): \(unsaved.prefix(1).lowercased() + unsaved.dropFirst()) not in it"
    }
}
