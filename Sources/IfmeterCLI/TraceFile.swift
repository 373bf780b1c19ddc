#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A trace file being recorded.
final class TraceFile {
    let fd: Int32
    let path: String

    init(creating path: String) throws(CLIError) {
        var fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
        if fd < 0, errno == ELOOP {
            // A link named on the command line (like /dev/stdout) is
            // followed only when this user or root owns it: another user
            // could have planted it.
            var st = stat()
            if lstat(path, &st) == 0, st.st_uid != geteuid(), st.st_uid != 0 {
                throw .runtime("cannot create '\(path)': it is a symbolic link owned by uid \(st.st_uid), another user; refusing to follow it")
            }
            fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        }
        guard fd >= 0 else {
            throw .runtime("cannot create '\(path)': \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        self.path = path
    }

    func sync() throws(CLIError) {
        if fsync(fd) != 0, errno != EINVAL {
            throw .runtime("cannot sync '\(path)': \(String(cString: strerror(errno)))")
        }
    }

    func close() {
        _ = Glibc.close(fd)
    }
}

/// Reads a file or stdin a line at a time, in 64 KiB pieces: memory stays
/// that of the longest line, whatever the file's length.
final class LineReader {
    let fd: Int32
    let name: String
    private let owned: Bool
    private var buffer: [UInt8] = []
    private var start = 0
    private var atEnd = false

    init(fd: Int32, name: String) {
        self.fd = fd
        self.name = name
        owned = false
    }

    /// Opens `path`. Missing files are usage errors (the argument names
    /// nothing); other failures are runtime errors.
    init(opening path: String, command: String) throws(CLIError) {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            let code = errno
            if code == ENOENT { throw .usage("no such file '\(path)'", command: command) }
            throw .runtime("cannot open '\(path)': \(String(cString: strerror(code)))")
        }
        var st = stat()
        if fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFDIR {
            Glibc.close(fd)
            throw .usage("'\(path)' is a folder, not a file", command: command)
        }
        self.fd = fd
        name = path
        owned = true
    }

    deinit { if owned { Glibc.close(fd) } }

    /// The next line without its `\n`; nil at the end.
    func next() throws(CLIError) -> ArraySlice<UInt8>? {
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
            // Keep the unfinished line, read more after it (into a
            // scratch buffer, appended as one copy: no 64 KiB of zeros
            // written and cut off per read).
            buffer.removeSubrange(0..<start)
            start = 0
            let n = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 1 << 16) { scratch in
                let n = read(fd, scratch.baseAddress!, scratch.count)
                if n > 0 { buffer.append(contentsOf: UnsafeBufferPointer(rebasing: scratch[..<n])) }
                return n
            }
            if n < 0 {
                if errno == EINTR { continue }
                throw .runtime("cannot read '\(name)': \(String(cString: strerror(errno)))")
            }
            if n == 0 { atEnd = true }
        }
    }
}
