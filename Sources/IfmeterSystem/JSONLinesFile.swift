#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// A JSON Lines file that only ever holds whole lines: each line goes out
/// in one write, a failed write is cut back off, and an unfinished last line
/// (a process killed mid-write) is removed when the file is opened again.
/// Past `maxSize` it rotates: PATH becomes PATH.1, PATH.1 becomes PATH.2,
/// and so on up to PATH.keep.
public final class JSONLinesFile {
    public let path: String
    public let maxSize: Int
    public let keep: Int
    /// Bytes of an unfinished last line removed on opening, if any.
    public private(set) var repairedBytes: Int?
    private var fd: Int32
    private var size: Int

    public init(path: String, maxSize: Int, keep: Int) throws(SystemError) {
        self.path = path
        self.maxSize = maxSize
        self.keep = keep
        fd = -1
        size = 0
        try openFile()
    }

    deinit { if fd >= 0 { close(fd) } }

    private func openFile() throws(SystemError) {
        // Never through a link (one planted after the start, or at a
        // rotation), and only a regular file.
        fd = try SafeFile.open(path, flags: O_RDWR | O_CREAT | O_APPEND).fd
        var st = stat()
        fstat(fd, &st)
        size = Int(st.st_size)
        if size > 0 {
            // Find the last newline; anything after it is an unfinished line.
            var end = size
            var byte: UInt8 = 0
            var scanned = 0
            while end > 0 {
                guard pread(fd, &byte, 1, off_t(end - 1)) == 1 else { break }
                if byte == 0x0A { break }
                end -= 1
                scanned += 1
            }
            if end < size {
                guard ftruncate(fd, off_t(end)) == 0 else { throw Self.fail("ftruncate(\(path))") }
                repairedBytes = size - end
                size = end
            }
        }
    }

    /// Closes the file and opens `path` again (for logrotate, after SIGHUP:
    /// the file moved away stays whole, a new one is started).
    public func reopen() throws(SystemError) {
        if fd >= 0 { close(fd) }
        fd = -1
        size = 0
        try openFile()
    }

    /// Appends one line (with its `\n`).
    public func append(_ line: String) throws(SystemError) {
        let bytes = Array(line.utf8)
        // A reopen that failed is tried again.
        if fd < 0 { try openFile() }
        if size > 0, size + bytes.count > maxSize { try rotate() }
        let before = size
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { systemWrite(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                let error = Self.fail("write(\(path))")
                // Leave no part of the line behind.
                _ = ftruncate(fd, off_t(before))
                throw error
            }
            offset += n
        }
        if fsync(fd) != 0, errno != EINVAL {
            let error = Self.fail("fsync(\(path))")
            _ = ftruncate(fd, off_t(before))
            throw error
        }
        size = before + bytes.count
    }

    private func rotate() throws(SystemError) {
        close(fd)
        fd = -1
        if keep > 0 {
            for n in stride(from: keep - 1, through: 1, by: -1) {
                rename("\(path).\(n)", "\(path).\(n + 1)")
            }
            guard rename(path, "\(path).1") == 0 else {
                let error = Self.fail("rename(\(path), \(path).1)")
                try openFile()
                throw error
            }
        } else {
            unlink(path)
        }
        try openFile()
        let dir = open(AtomicFile.folder(of: path), O_RDONLY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }

    /// errno as the call left it: the one errno helper (`SystemError.system`).
    static func fail(_ call: String) -> SystemError { SystemError.system(call) }
}
