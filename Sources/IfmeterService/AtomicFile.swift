#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// write(2), named apart from `AtomicFile.write`.
func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}

/// A file write that failed, with the call and errno's text.
public struct FileWriteError: Error, Sendable, CustomStringConvertible {
    public var message: String
    public var description: String { message }
}

/// Replaces a file's contents atomically: readers see the old file or the
/// new one, never a part. Writes a temporary file in the same folder,
/// fsyncs it, renames it over the target, and fsyncs the folder.
public enum AtomicFile {
    public static func write(_ bytes: [UInt8], to path: String) throws(FileWriteError) {
        let folder = Self.folder(of: path)
        let name = path.split(separator: "/").last.map(String.init) ?? path
        let temporary = folder + "/." + name + ".tmp-" + String(getpid())
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw fail("cannot create \(temporary)") }
        var ok = false
        defer {
            if !ok { unlink(temporary) }
        }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { systemWrite(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 {
                if errno == EINTR { continue }
                let error = fail("cannot write \(temporary)")
                close(fd)
                throw error
            }
            offset += n
        }
        if fsync(fd) != 0 {
            let error = fail("cannot sync \(temporary)")
            close(fd)
            throw error
        }
        if close(fd) != 0 { throw fail("cannot close \(temporary)") }
        if rename(temporary, path) != 0 { throw fail("cannot rename \(temporary) to \(path)") }
        ok = true
        let dir = open(folder, O_RDONLY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }

    /// Checks, before anything runs, that `path`'s folder exists and is
    /// writable, by creating and removing a probe file there.
    public static func checkWritable(_ path: String) throws(FileWriteError) {
        let folder = Self.folder(of: path)
        var st = stat()
        guard stat(folder, &st) == 0 else { throw fail("the folder \(folder) for \(path) does not exist") }
        guard (st.st_mode & S_IFMT) == S_IFDIR else { throw FileWriteError(message: "\(folder) is not a folder") }
        let probe = folder + "/.ifmeter-probe-" + String(getpid())
        let fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw fail("cannot write in \(folder)") }
        close(fd)
        unlink(probe)
    }

    public static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let folder = String(path[..<slash])
        return folder.isEmpty ? "/" : folder
    }

    private static func fail(_ what: String) -> FileWriteError {
        FileWriteError(message: "\(what): \(String(cString: strerror(errno)))")
    }
}
