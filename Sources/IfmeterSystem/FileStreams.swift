#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// A file being written from its start (a trace being recorded): created
/// or truncated, never through a link another user owns.
public final class TraceFile {
    public let fd: Int32
    public let path: String

    public init(creating path: String) throws(SystemError) {
        var fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if fd < 0, errno == ELOOP {
            // A link named on the command line (like /dev/stdout) is
            // followed only when this user or root owns it: another user
            // could have planted it.
            var st = stat()
            if lstat(path, &st) == 0, st.st_uid != geteuid(), st.st_uid != 0 {
                throw SystemError(
                    call: "open(\(path))", errno: EPERM,
                    message: "it is a symbolic link owned by uid \(st.st_uid), another user; refusing to follow it")
            }
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        }
        guard fd >= 0 else { throw SystemError.system("open(\(path))") }
        self.fd = fd
        self.path = path
    }

    public func sync() throws(SystemError) {
        if fsync(fd) != 0, errno != EINVAL { throw SystemError.system("fsync(\(path))") }
    }

    public func close() {
        #if canImport(Glibc)
        _ = Glibc.close(fd)
        #else
        _ = Darwin.close(fd)
        #endif
    }
}

/// Reads a file or stdin a line at a time, in 64 KiB pieces: memory stays
/// that of the longest line, whatever the file's length.
public final class LineReader {
    public let fd: Int32
    public let name: String
    private let owned: Bool
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false

    public init(fd: Int32, name: String) {
        self.fd = fd
        self.name = name
        owned = false
    }

    /// Opens `path`; a folder is refused (EISDIR).
    public init(opening path: String) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError.system("open(\(path))") }
        var st = stat()
        if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
            _ = closeDescriptor(fd)
            throw SystemError(call: "open(\(path))", errno: EISDIR, message: "it is a folder, not a file")
        }
        self.fd = fd
        name = path
        owned = true
    }

    deinit { if owned { _ = closeDescriptor(fd) } }

    /// The next line without its `\n`; nil at the end.
    public func next() throws(SystemError) -> ArraySlice<UInt8>? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 0x0A) {
                defer { start = newline + 1 }
                return buffer[start..<newline]
            }
            if atEnd {
                guard start < buffer.count else { return nil }
                defer { start = buffer.count }
                return buffer[start...]
            }
            try fill()
        }
    }

    /// Keeps the unfinished line and reads more after it (into a scratch
    /// buffer, appended as one copy: no 64 KiB of zeros written and cut
    /// off per read).
    private func fill() throws(SystemError) {
        buffer.removeSubrange(0..<start)
        start = 0
        while true {
            let n = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1 << 16) { scratch in
                let n = read(fd, scratch.baseAddress!, scratch.count)
                if n > 0 { buffer.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[..<n])) }
                return n
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError.system("read(\(name))")
            }
            if n == 0 { atEnd = true }
            return
        }
    }
}

/// close(2), named apart from the types' own `close`.
@discardableResult
public func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }
