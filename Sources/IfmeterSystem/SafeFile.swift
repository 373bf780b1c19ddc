#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// Creating and opening the files ifmeter writes without following a
/// symbolic link someone else could plant in their folder: temporary files
/// get unpredictable names and are created exclusively, existing files are
/// opened with O_NOFOLLOW and must be regular files.
public enum SafeFile {
    /// The errno of "that is not a regular file" (a FIFO, a device, a folder).
    public static let notRegularErrno = EINVAL

    /// `.NAME.tmp-PID-HEX`: the prefix, from a target's path.
    public static func temporaryPrefix(for path: String) -> String {
        "." + name(of: path) + ".tmp-"
    }

    /// Creates a new, empty temporary file beside `path` (O_CREAT | O_EXCL |
    /// O_NOFOLLOW, an unpredictable name): nothing that already exists
    /// there, a planted link included, is ever opened.
    public static func createTemporary(for path: String, mode: mode_t = 0o644) throws(SystemError) -> (fd: Int32, path: String) {
        let folder = folder(of: path)
        let prefix = temporaryPrefix(for: path) + String(getpid()) + "-"
        var attempt = 0
        while true {
            let random = UInt64.random(in: 0...UInt64.max)
            let hex = String(random, radix: 16)
            let temporary = folder + "/" + prefix + String(repeating: "0", count: 16 - hex.count) + hex
            let fd = systemOpen(temporary, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode)
            if fd >= 0 { return (fd, temporary) }
            attempt += 1
            if errno != EEXIST || attempt >= 16 { throw fail("open(\(temporary))") }
        }
    }

    /// Opens `path` without following a link (O_NOFOLLOW, with `flags`,
    /// O_CREAT among them when wanted) and checks that it is a regular file.
    /// Returns the descriptor and whether this call created the file.
    public static func open(
        _ path: String, flags: Int32, mode: mode_t = 0o644
    ) throws(SystemError) -> (fd: Int32, created: Bool) {
        var created = false
        var fd: Int32 = -1
        if flags & O_CREAT != 0 {
            // Exclusive first, to know whether this call made it.
            fd = systemOpen(path, (flags & ~O_TRUNC) | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, mode)
            if fd >= 0 {
                created = true
            } else if errno != EEXIST {
                throw fail("open(\(path))")
            }
        }
        if fd < 0 {
            // O_NONBLOCK: a FIFO planted there does not hang the open.
            fd = systemOpen(path, (flags & ~O_CREAT) | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0)
            guard fd >= 0 else {
                if errno == ELOOP {
                    throw SystemError(call: "open(\(path))", errno: ELOOP, message: "it is a symbolic link, not followed")
                }
                throw fail("open(\(path))")
            }
        }
        var st = stat()
        guard fstat(fd, &st) == 0 else {
            let error = fail("fstat(\(path))")
            close(fd)
            throw error
        }
        guard (st.st_mode & S_IFMT) == S_IFREG else {
            close(fd)
            throw SystemError(call: "open(\(path))", errno: notRegularErrno, message: "it is not a regular file")
        }
        // Back to blocking writes for a regular file.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        return (fd, created)
    }

    /// Removes temporary files that ifmeter processes which no longer run
    /// left beside `path` (`.NAME.tmp-PID` and `.NAME.tmp-PID-HEX`): only
    /// regular files of this user, never through a link. Returns the names
    /// removed.
    @discardableResult
    public static func removeLeftovers(for path: String) -> [String] {
        let folder = folder(of: path)
        let prefix = temporaryPrefix(for: path)
        guard let dir = opendir(folder) else { return [] }
        defer { closedir(dir) }
        var removed: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
                String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard name.hasPrefix(prefix) else { continue }
            let rest = name.dropFirst(prefix.count)
            let parts = rest.split(separator: "-", omittingEmptySubsequences: false)
            guard parts.count == 1 || (parts.count == 2 && parts[1].count == 16 && parts[1].allSatisfy(\.isHexDigit)),
                let pid = Int32(parts[0]), pid > 0, String(pid) == parts[0]
            else { continue }
            // Alive (or not ours to signal): leave it.
            if kill(pid, 0) == 0 || errno != ESRCH { continue }
            var st = stat()
            let full = folder + "/" + name
            guard lstat(full, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, st.st_uid == geteuid() else { continue }
            if unlink(full) == 0 { removed.append(name) }
        }
        return removed
    }

    /// What a symbolic link at `path` resolves to, when it is one; nil
    /// when `path` is no link (or does not exist). A link owned by another
    /// user than this one or root is refused: anyone who can write in the
    /// folder could have planted it.
    public static func resolveLink(_ path: String) throws(SystemError) -> String? {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFLNK else { return nil }
        guard st.st_uid == geteuid() || st.st_uid == 0 else {
            throw SystemError(
                call: "lstat(\(path))", errno: EPERM,
                message: "a symbolic link owned by uid \(st.st_uid), another user, who could have planted it; refusing to follow it")
        }
        if let real = realpath(path, nil) {
            defer { free(real) }
            return String(cString: real)
        }
        guard errno == ENOENT else { throw fail("realpath(\(path))") }
        // A link to a file not made yet: its folder must exist.
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { throw fail("readlink(\(path))") }
        let bytes = buffer[..<n].map { UInt8(bitPattern: $0) }
        var target = String(decoding: bytes, as: UTF8.self)
        if !target.hasPrefix("/") { target = folder(of: path) + "/" + target }
        guard let realFolder = realpath(folder(of: target), nil) else { throw fail("realpath(\(folder(of: target)))") }
        defer { free(realFolder) }
        let resolved = String(cString: realFolder) + "/" + name(of: target)
        guard lstat(resolved, &st) != 0 else {
            throw SystemError(call: "lstat(\(resolved))", errno: ELOOP, message: "a link to a link that does not resolve")
        }
        return resolved
    }

    public static func folder(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        let folder = String(path[..<slash])
        return folder.isEmpty ? "/" : folder
    }

    public static func name(of path: String) -> String {
        path.split(separator: "/").last.map(String.init) ?? path
    }

    /// errno as the call left it: the one errno helper (`SystemError.system`).
    static func fail(_ call: String) -> SystemError { SystemError.system(call) }
}

/// open(2), named apart from `SafeFile.open`.
private func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t) -> Int32 {
    open(path, flags, mode)
}
