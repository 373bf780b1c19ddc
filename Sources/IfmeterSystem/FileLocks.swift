#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// ifmeter's lock on a file it writes (its state file): flock on the
/// file's own inode, so a symbolic link or another name of the same file
/// finds it taken, and the lock goes with the process however it ends.
public enum FileLock {
    public enum Failure: Error, Sendable {
        /// What is at the path is not a regular file (or is a link).
        case notRegular
        /// Another process holds the lock.
        case inUse
        case system(SystemError)
    }

    /// Opens `path` without following a link, creating it when missing, and
    /// takes the exclusive lock, waiting up to a second (readers hold a
    /// shared lock for a moment). Checks after locking that the path still
    /// names the file (moved or replaced meanwhile: opened again). Returns
    /// the descriptor, which holds the lock, and whether this made the file.
    /// `waiting`: false tries the lock once (an editor, which goes on
    /// without it).
    public static func openExclusive(_ path: String, waiting: Bool = true) throws(Failure) -> (fd: Int32, created: Bool) {
        for _ in 0..<3 {
            let fd: Int32, created: Bool
            do {
                // 0600 whatever the umask: usage history is nobody
                // else's to read (SQLite gives its -wal and -shm the
                // file's own mode).
                (fd, created) = try SafeFile.open(path, flags: O_RDWR | O_CREAT, mode: 0o600)
            } catch {
                if error.errno == ELOOP || error.errno == SafeFile.notRegularErrno { throw .notRegular }
                throw .system(error)
            }
            var locked = false
            for _ in 0..<(waiting ? 20 : 1) {
                if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                    locked = true
                    break
                }
                usleep(50_000)
            }
            guard locked else {
                // Even one this call created is the lock holder's now.
                close(fd)
                throw .inUse
            }
            var opened = stat(), named = stat()
            if fstat(fd, &opened) == 0, lstat(path, &named) == 0, opened.st_dev == named.st_dev, opened.st_ino == named.st_ino {
                return (fd, created)
            }
            release(fd)
        }
        throw .inUse
    }

    /// Opens an existing `path` for reading and writing without following
    /// a link and without the lock (another process holds it).
    public static func openUnlocked(_ path: String) throws(SystemError) -> Int32 {
        try SafeFile.open(path, flags: O_RDWR).fd
    }

    /// Whether a writer holds the lock on the regular file at `path` (not
    /// followed when a link): a shared lock cannot be had. A reader's
    /// shared lock is no writer's. Opens and closes a descriptor of that
    /// file: never call it on a file this process writes.
    public static func heldByWriter(_ path: String) -> Bool {
        let fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard FileStatus(descriptor: fd)?.kind == .regular else { return false }
        if flock(fd, LOCK_SH | LOCK_NB) == 0 {
            _ = flock(fd, LOCK_UN)
            return false
        }
        return true
    }

    /// Whether `fd` holds the exclusive lock (taking it again through the
    /// same open file succeeds and changes nothing).
    public static func holdsExclusive(_ fd: Int32) -> Bool { flock(fd, LOCK_EX | LOCK_NB) == 0 }

    /// Takes the shared lock if no writer holds the file; true when taken.
    public static func tryShared(_ fd: Int32) -> Bool { flock(fd, LOCK_SH | LOCK_NB) == 0 }

    public static func unlock(_ fd: Int32) { _ = flock(fd, LOCK_UN) }

    /// Unlocks and closes.
    public static func release(_ fd: Int32) {
        unlock(fd)
        close(fd)
    }
}

/// The first `count` bytes of an open file (fewer when it is shorter; none
/// when it cannot be read).
public func readPrefix(_ fd: Int32, count: Int) -> [UInt8] {
    var buffer = [UInt8](repeating: 0, count: count)
    let n = pread(fd, &buffer, count, 0)
    return n > 0 ? Array(buffer[0..<n]) : []
}

/// A file opened for reading, never blocking on a FIFO and refused unless
/// it is a regular file.
public func openRegularForReading(_ path: String, followingLinks: Bool = true) throws(SystemError) -> Int32 {
    let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (followingLinks ? 0 : O_NOFOLLOW))
    guard fd >= 0 else { throw SystemError.system("open(\(path))") }
    guard let status = FileStatus(descriptor: fd), status.kind == .regular else {
        close(fd)
        throw SystemError(call: "open(\(path))", errno: SafeFile.notRegularErrno, message: "it is not a regular file")
    }
    return fd
}

extension FileStatus {
    /// What an open descriptor is (fstat).
    public init?(descriptor fd: Int32) {
        var st = stat()
        guard fstat(fd, &st) == 0 else { return nil }
        self.init(st)
    }
}

/// Removes regular files, never through a link (a failed start's).
public func removeRegularFiles(_ paths: [String]) {
    for path in paths where FileStatus(path)?.kind == .regular { unlink(path) }
}

/// The path with every link resolved; nil when it does not resolve.
public func realPath(_ path: String) -> String? {
    guard let real = realpath(path, nil) else { return nil }
    defer { free(real) }
    return String(cString: real)
}

/// A private folder (0700, made with mkdtemp), removed with what is in it
/// when the value goes away.
public final class TemporaryFolder {
    public let path: String

    public init(prefix: String) throws(SystemError) {
        var template = Array("/tmp/\(prefix)-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw SystemError.system("mkdtemp(/tmp)") }
        path = String(cString: made)
    }

    deinit {
        for name in listDirectory(path) { unlink(path + "/" + name) }
        rmdir(path)
    }
}

/// Copies what `source` holds, from its start, into a new file `target`
/// (0600, created exclusively, never through a link).
public func copyFile(from source: Int32, named name: String, to target: String) throws(SystemError) {
    let out = open(target, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600)
    guard out >= 0 else { throw SystemError.system("open(\(target))") }
    defer { close(out) }
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    var offset: off_t = 0
    while true {
        let n = pread(source, &buffer, buffer.count, offset)
        if n < 0, errno == EINTR { continue }
        guard n >= 0 else { throw SystemError.system("pread(\(name))") }
        if n == 0 { return }
        try writeAll(Array(buffer[..<n]), to: out)
        offset += off_t(n)
    }
}
