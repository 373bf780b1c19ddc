import IfmeterCore
import IfmeterModel

extension ExpositionWriter {
    mutating func writeRemoteWrite(_ statuses: [RemoteWriteStatus]) {
        guard !statuses.isEmpty else { return }
        let note = Caveat.health
        header("ifmeter_remote_write_queue_bytes", .gauge, unit: "bytes", help: "Bytes of samples waiting in the remote write queue on disk. \(note)")
        for s in statuses { labeledSample("ifmeter_remote_write_queue_bytes", [("url", s.url)], .unsigned(s.queueBytes)) }
        header("ifmeter_remote_write_queue_samples", .gauge, help: "Samples waiting in the remote write queue on disk. \(note)")
        for s in statuses { labeledSample("ifmeter_remote_write_queue_samples", [("url", s.url)], .unsigned(s.queueSamples)) }
        header("ifmeter_remote_write_samples_sent", .counter, help: "Samples the receiver accepted. \(note)")
        for s in statuses { labeledSample("ifmeter_remote_write_samples_sent_total", [("url", s.url)], .unsigned(s.sent)) }
        header(
            "ifmeter_remote_write_samples_retried", .counter,
            help: "Samples in requests tried again after a 5xx, a 429 or a network error (each try counts). \(note)")
        for s in statuses { labeledSample("ifmeter_remote_write_samples_retried_total", [("url", s.url)], .unsigned(s.retried)) }
        header(
            "ifmeter_remote_write_samples_dropped", .counter,
            help:
                "Samples never sent: reason queue_full (the queue was at its bound: the oldest went), rejected (the receiver answered 4xx), write_failed (the queue on disk could not take them: a full disk, an I/O error) or corrupt (lost to damage in the queue's files). \(note)"
        )
        for s in statuses {
            labeledSample("ifmeter_remote_write_samples_dropped_total", [("reason", "corrupt"), ("url", s.url)], .unsigned(s.droppedCorrupt))
            labeledSample("ifmeter_remote_write_samples_dropped_total", [("reason", "queue_full"), ("url", s.url)], .unsigned(s.droppedQueueFull))
            labeledSample("ifmeter_remote_write_samples_dropped_total", [("reason", "rejected"), ("url", s.url)], .unsigned(s.droppedRejected))
            labeledSample("ifmeter_remote_write_samples_dropped_total", [("reason", "write_failed"), ("url", s.url)], .unsigned(s.droppedUnwritable))
        }
        header(
            "ifmeter_remote_write_samples_duplicate", .counter,
            help:
                "Samples in a request posted again (after a failed try, or a kill before its acknowledgement) that the receiver refused with a 400: most likely it had them from the earlier try. \(note)"
        )
        for s in statuses { labeledSample("ifmeter_remote_write_samples_duplicate_total", [("url", s.url)], .unsigned(s.duplicate)) }
        header(
            "ifmeter_remote_write_sent_bytes", .counter, unit: "bytes",
            help:
                "Bytes of snappy-compressed request bodies sent to the receiver, each try counted: what pushing costs on the link, before HTTP and TLS. \(note)"
        )
        for s in statuses { labeledSample("ifmeter_remote_write_sent_bytes_total", [("url", s.url)], .unsigned(s.sentBytes)) }
        header(
            "ifmeter_remote_write_last_success_timestamp_seconds", .gauge, unit: "seconds",
            help: "Unix time of the last request the receiver accepted (0: none yet). \(note)")
        for s in statuses {
            labeledSample("ifmeter_remote_write_last_success_timestamp_seconds", [("url", s.url)], .double(s.lastSuccess ?? 0))
        }
    }
}
