#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// write(2), named apart from `AtomicFile.write`.
func systemWrite(_ fd: Int32, _ buffer: UnsafeRawPointer, _ count: Int) -> Int {
    write(fd, buffer, count)
}

/// Replaces a file's contents atomically: readers see the old file or the
/// new one, never a part. Writes a temporary file in the same folder
/// (`.NAME.tmp-PID-RANDOM`, created exclusively, never through a link),
/// fsyncs it, renames it over the target, and fsyncs the folder.
public enum AtomicFile {
    public static func write(_ bytes: [UInt8], to path: String) throws(SystemError) {
        try write(to: path) { (put: (UnsafeRawBufferPointer) throws(SystemError) -> Void) throws(SystemError) in
            var failure: SystemError?
            bytes.withUnsafeBytes { raw in
                do throws(SystemError) { try put(raw) } catch { failure = error }
            }
            if let failure { throw failure }
        }
    }

    /// Writes what `produce` hands to `put`, piece by piece, then replaces
    /// the file: the whole is never held in memory.
    public static func write(
        to path: String,
        _ produce: (_ put: (UnsafeRawBufferPointer) throws(SystemError) -> Void) throws(SystemError) -> Void
    ) throws(SystemError) {
        let folder = Self.folder(of: path)
        // A new file of an unpredictable name, created exclusively: a link
        // planted in the folder is never followed. rename() then replaces
        // whatever is at `path` (a link there included) without following it.
        let (fd, temporary) = try SafeFile.createTemporary(for: path)
        var ok = false
        var closed = false
        defer {
            if !closed { close(fd) }
            if !ok { unlink(temporary) }
        }
        try produce { (piece: UnsafeRawBufferPointer) throws(SystemError) in
            var offset = 0
            while offset < piece.count {
                let n = systemWrite(fd, piece.baseAddress! + offset, piece.count - offset)
                if n < 0 {
                    if errno == EINTR { continue }
                    throw fail("write(\(temporary))")
                }
                offset += n
            }
        }
        if fsync(fd) != 0 { throw fail("fsync(\(temporary))") }
        closed = true
        if close(fd) != 0 { throw fail("close(\(temporary))") }
        if rename(temporary, path) != 0 { throw fail("rename(\(temporary), \(path))") }
        ok = true
        let dir = open(folder, O_RDONLY | O_CLOEXEC)
        if dir >= 0 {
            _ = fsync(dir)
            close(dir)
        }
    }

    /// Checks, before anything runs, that `path`'s folder exists and is
    /// writable, by creating and removing a probe file there.
    public static func checkWritable(_ path: String) throws(SystemError) {
        let folder = Self.folder(of: path)
        var st = stat()
        guard stat(folder, &st) == 0 else { throw fail("stat(\(folder))") }
        guard (st.st_mode & S_IFMT) == S_IFDIR else {
            throw SystemError.system("stat(\(folder))", code: ENOTDIR)
        }
        let (fd, probe) = try SafeFile.createTemporary(for: folder + "/ifmeter-probe", mode: 0o600)
        close(fd)
        unlink(probe)
    }

    /// Removes what writers of `path` killed mid-write left (see
    /// `SafeFile.removeLeftovers`); returns the names removed.
    @discardableResult
    public static func removeLeftovers(of path: String) -> [String] {
        SafeFile.removeLeftovers(for: path)
    }

    public static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let folder = String(path[..<slash])
        return folder.isEmpty ? "/" : folder
    }

    /// errno as the call left it: the one errno helper (`SystemError.system`).
    static func fail(_ call: String) -> SystemError { SystemError.system(call) }
}
