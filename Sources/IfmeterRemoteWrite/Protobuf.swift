/// The few protobuf encodings a remote write request needs (varints,
/// length-delimited fields, doubles), written by hand: a WriteRequest is
/// three small messages.
///
///     message WriteRequest { repeated TimeSeries timeseries = 1; }
///     message TimeSeries { repeated Label labels = 1; repeated Sample samples = 2; }
///     message Label { string name = 1; string value = 2; }
///     message Sample { double value = 1; int64 timestamp = 2; }
package struct ProtobufWriter: Sendable {
    package var bytes: [UInt8] = []

    package init() {}

    package mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    package mutating func tag(_ field: Int, wire: Int) { varint(UInt64(field << 3 | wire)) }

    package mutating func bytesField(_ field: Int, _ value: some Collection<UInt8>) {
        tag(field, wire: 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    package mutating func stringField(_ field: Int, _ value: String) { bytesField(field, value.utf8) }

    package mutating func doubleField(_ field: Int, _ value: Double) {
        tag(field, wire: 1)
        let bits = value.bitPattern
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
    }

    package mutating func int64Field(_ field: Int, _ value: Int64) {
        tag(field, wire: 0)
        varint(UInt64(bitPattern: value))
    }
}

/// One series' sample, as remote write sends it.
package enum RemoteWriteEncoding {
    /// A WriteRequest's `timeseries` entry (field 1, tag and length
    /// included) with one sample: WriteRequests are such entries one after
    /// another, so records of the queue concatenate into a request.
    /// `labels` must be sorted by name and hold `__name__`.
    package static func appendTimeSeries(to out: inout ProtobufWriter, labels: [(String, String)], value: Double, timestampMs: Int64) {
        let fields = labelFields(labels)
        fields.withUnsafeBufferPointer { appendTimeSeries(to: &out, labelFields: $0, value: value, timestampMs: timestampMs) }
    }

    /// A TimeSeries' label fields (tag 1, length, Label), in order.
    package static func labelFields(_ labels: [(String, String)]) -> [UInt8] {
        var out = ProtobufWriter()
        for (name, value) in labels {
            var label = ProtobufWriter()
            label.stringField(1, name)
            label.stringField(2, value)
            out.bytesField(1, label.bytes)
        }
        return out.bytes
    }

    /// A `timeseries` entry from its label fields as encoded, one sample.
    package static func appendTimeSeries(
        to out: inout ProtobufWriter, labelFields: UnsafeBufferPointer<UInt8>, value: Double, timestampMs: Int64
    ) {
        // Sample: tag, 8-byte double, tag, varint.
        let sampleLength = 1 + 8 + 1 + ProtobufWriter.varintLength(UInt64(bitPattern: timestampMs))
        let seriesLength = labelFields.count + 1 + ProtobufWriter.varintLength(UInt64(sampleLength)) + sampleLength
        out.tag(1, wire: 2)
        out.varint(UInt64(seriesLength))
        out.bytes.append(contentsOf: labelFields)
        out.tag(2, wire: 2)
        out.varint(UInt64(sampleLength))
        out.doubleField(1, value)
        out.int64Field(2, timestampMs)
    }
}

extension RemoteWriteEncoding {
    /// Cuts a run of `timeseries` entries (one sample each) into runs of at
    /// most `maxSeries`, at entry boundaries: `max_samples_per_send`.
    package static func split(_ entries: [UInt8], maxSeries: Int) -> [(bytes: [UInt8], count: UInt32)] {
        var parts: [(bytes: [UInt8], count: UInt32)] = []
        var start = 0, at = 0, count: UInt32 = 0
        while at < entries.count {
            // Tag 1, wire type 2 (0x0A), then the length as a varint.
            var length = 0, shift = 0, i = at + 1
            while i < entries.count {
                let byte = entries[i]
                length |= Int(byte & 0x7F) << shift
                i += 1
                if byte & 0x80 == 0 { break }
                shift += 7
            }
            at = min(entries.count, i + length)
            count += 1
            if count == UInt32(maxSeries) {
                parts.append((Array(entries[start..<at]), count))
                start = at
                count = 0
            }
        }
        if count > 0 { parts.append((Array(entries[start..<at]), count)) }
        return parts
    }
}

extension ProtobufWriter {
    /// Bytes of `value` as a varint.
    static func varintLength(_ value: UInt64) -> Int {
        var v = value
        var n = 1
        while v >= 0x80 {
            v >>= 7
            n += 1
        }
        return n
    }
}
