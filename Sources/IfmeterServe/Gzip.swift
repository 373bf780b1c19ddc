import CIfmeterHTTP
import CZlib
import IfmeterSystem

/// The window the scrape's gzip streams are deflated with (16 KiB):
/// inflating one needs no bigger one.
package let gzipWindowBits: Int32 = 14

/// gzip compression of text given in pieces; the compressed whole grows in
/// one malloc'd buffer, the text itself is never held. zlib level 1: text
/// this repetitive still shrinks about twentyfold.
package final class GzipWriter {
    private let deflater: Deflater
    /// Bytes written so far (the inflated size).
    package private(set) var inputBytes: UInt64 = 0
    private var failed = false
    private var finished = false

    /// `expectedSize`: the compressed size to make room for at once (such
    /// as the last one's), so the buffer does not grow by doubling.
    package init?(level: Int32 = 1, expectedSize: Int = 0) {
        // A 16 KiB window and memLevel 7: half zlib's default state (about
        // 130 KB instead of 260), for exposition text whose repeats lie
        // within a few lines of each other.
        guard let deflater = Deflater(level: level, windowBits: gzipWindowBits, memLevel: 7, capacity: max(0, expectedSize))
        else { return nil }
        self.deflater = deflater
    }

    package func write(_ bytes: UnsafeRawBufferPointer) {
        guard !finished, !failed, !bytes.isEmpty else { return }
        if !deflater.run(bytes, flush: Z_NO_FLUSH) { failed = true }
        inputBytes += UInt64(bytes.count)
    }

    /// The compressed whole; nil when zlib failed.
    package func finish() -> HTTPBody? {
        guard !finished else { return nil }
        finished = true
        guard !failed, deflater.run(UnsafeRawBufferPointer(start: nil, count: 0), flush: Z_FINISH) else { return nil }
        return deflater.take(cutting: true).map { HTTPBody(mallocated: $0.pointer, count: $0.count, windowBits: gzipWindowBits) }
    }
}

/// gzip-compresses `bytes` (zlib level 1: text this repetitive still
/// shrinks about tenfold). Nil when zlib fails.
package func gzip(_ bytes: [UInt8], level: Int32 = 1) -> HTTPBody? {
    guard let deflater = Deflater(level: level, windowBits: 15, memLevel: 8, capacity: 0) else { return nil }
    let done = bytes.withUnsafeBytes { deflater.run($0, flush: Z_FINISH) }
    guard done, let output = deflater.take(cutting: false) else { return nil }
    return HTTPBody(mallocated: output.pointer, count: output.count)
}

/// A zlib deflate stream (with a gzip header and trailer) into one
/// malloc'd buffer, grown by a quarter: past malloc's mmap threshold
/// realloc moves no bytes, and a buffer grown by doubling held up to twice
/// the output at its end.
private final class Deflater {
    // zlib's state points back to the stream: it stays at one address.
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var output: UnsafeMutableRawPointer?
    private var capacity = 0

    init?(level: Int32, windowBits: Int32, memLevel: Int32, capacity: Int) {
        stream.initialize(to: z_stream())
        // +16: a gzip header and trailer.
        guard cifm_deflate_init(stream, level, windowBits + 16, memLevel) == Z_OK else {
            stream.deallocate()
            return nil
        }
        if capacity > 0, let memory = reallocateMallocated(nil, count: capacity) {
            output = memory
            self.capacity = capacity
        }
    }

    deinit {
        deflateEnd(stream)
        stream.deallocate()
        if let output { freeMallocated(output) }
    }

    private var used: Int { Int(stream.pointee.total_out) }

    /// Makes room for at least `more` bytes of output.
    private func reserve(_ more: Int) -> Bool {
        if capacity - used >= more { return true }
        var grown = capacity > 0 ? capacity : 64 * 1024
        // (+ 1: a room of under 4 bytes grows by a quarter of nothing.)
        while grown - used < more { grown += grown / 4 + 1 }
        guard let memory = reallocateMallocated(output, count: grown) else { return false }
        output = memory
        capacity = grown
        return true
    }

    /// Deflates `input` (all of it), finishing the stream with `Z_FINISH`.
    func run(_ input: UnsafeRawBufferPointer, flush: Int32) -> Bool {
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        while true {
            guard reserve(32 * 1024), let output else { return false }
            stream.pointee.next_out = (output + used).assumingMemoryBound(to: Bytef.self)
            stream.pointee.avail_out = uInt(capacity - used)
            let rc = deflate(stream, flush)
            if rc == Z_STREAM_END { return true }
            if rc != Z_OK && rc != Z_BUF_ERROR { return false }
            if flush == Z_NO_FLUSH && stream.pointee.avail_in == 0 { return true }
        }
    }

    /// Hands the output over (cut to its size when asked and worth it: it
    /// is kept until the next sample).
    func take(cutting: Bool) -> (pointer: UnsafeMutableRawPointer, count: Int)? {
        guard let memory = output else { return nil }
        output = nil
        let count = used
        if cutting, count > 0, capacity - count >= 4096, let cut = reallocateMallocated(memory, count: count) {
            return (cut, count)
        }
        return (memory, count)
    }
}

/// A gzip body inflated piece by piece as libmicrohttpd asks for it, so
/// the whole is never held. `heldBytes` is what it holds meanwhile: its
/// state, zlib's, and the window zlib allocates at the first inflate.
final class Inflater {
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private let zlibBytes = UnsafeMutablePointer<Int>.allocate(capacity: 1)
    private let body: HTTPBody
    private var done = false
    let heldBytes: Int

    init?(_ body: HTTPBody) {
        self.body = body
        let windowBits = (9...15).contains(body.windowBits) ? body.windowBits : 15
        stream.initialize(to: z_stream())
        zlibBytes.initialize(to: 0)
        stream.pointee.opaque = UnsafeMutableRawPointer(zlibBytes)
        stream.pointee.zalloc = { opaque, items, size in
            let bytes = Int(items) * Int(size)
            opaque?.assumingMemoryBound(to: Int.self).pointee += bytes
            return UnsafeMutableRawPointer.allocate(byteCount: max(1, bytes), alignment: 16)
        }
        stream.pointee.zfree = { _, address in address?.deallocate() }
        guard cifm_inflate_init(stream, windowBits + 16) == Z_OK else {
            stream.deallocate()
            zlibBytes.deallocate()
            return nil
        }
        stream.pointee.next_in = UnsafeMutablePointer(mutating: body.base?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(body.count)
        heldBytes = MemoryLayout<z_stream>.size + 64 + zlibBytes.pointee + (1 << Int(windowBits))
    }

    deinit {
        inflateEnd(stream)
        stream.deallocate()
        zlibBytes.deallocate()
    }

    /// Up to `max` bytes into `buffer`: how many, 0 at the end, nil when
    /// the body is broken.
    func read(into buffer: UnsafeMutableRawPointer, max: Int) -> Int? {
        if done { return 0 }
        stream.pointee.next_out = buffer.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = uInt(max)
        let rc = inflate(stream, Z_NO_FLUSH)
        let produced = max - Int(stream.pointee.avail_out)
        if rc == Z_STREAM_END {
            done = true
        } else if rc != Z_OK && !(rc == Z_BUF_ERROR && produced > 0) {
            return nil
        }
        if produced == 0 { return done ? 0 : nil }
        return produced
    }
}
