/// The few protobuf encodings a remote write request needs (varints,
/// length-delimited fields, doubles), written by hand: a WriteRequest is
/// three small messages.
///
///     message WriteRequest { repeated TimeSeries timeseries = 1; }
///     message TimeSeries { repeated Label labels = 1; repeated Sample samples = 2; }
///     message Label { string name = 1; string value = 2; }
///     message Sample { double value = 1; int64 timestamp = 2; }
public struct ProtobufWriter: Sendable {
    public var bytes: [UInt8] = []

    public init() {}

    public mutating func varint(_ value: UInt64) {
        var v = value
        while v >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        bytes.append(UInt8(v))
    }

    public mutating func tag(_ field: Int, wire: Int) { varint(UInt64(field << 3 | wire)) }

    public mutating func bytesField(_ field: Int, _ value: some Collection<UInt8>) {
        tag(field, wire: 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    public mutating func stringField(_ field: Int, _ value: String) { bytesField(field, value.utf8) }

    public mutating func doubleField(_ field: Int, _ value: Double) {
        tag(field, wire: 1)
        let bits = value.bitPattern
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
    }

    public mutating func int64Field(_ field: Int, _ value: Int64) {
        tag(field, wire: 0)
        varint(UInt64(bitPattern: value))
    }
}

/// One series' sample, as remote write sends it.
public enum RemoteWriteEncoding {
    /// A WriteRequest's `timeseries` entry (field 1, tag and length
    /// included) with one sample: WriteRequests are such entries one after
    /// another, so records of the queue concatenate into a request.
    /// `labels` must be sorted by name and hold `__name__`.
    public static func appendTimeSeries(to out: inout ProtobufWriter, labels: [(String, String)], value: Double, timestampMs: Int64) {
        var series = ProtobufWriter()
        for (name, labelValue) in labels {
            var label = ProtobufWriter()
            label.stringField(1, name)
            label.stringField(2, labelValue)
            series.bytesField(1, label.bytes)
        }
        var sample = ProtobufWriter()
        sample.doubleField(1, value)
        sample.int64Field(2, timestampMs)
        series.bytesField(2, sample.bytes)
        out.bytesField(1, series.bytes)
    }
}
