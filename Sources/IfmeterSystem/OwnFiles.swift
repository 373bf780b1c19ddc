#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// Folders ifmeter keeps its own files in (the state file's, the remote
/// write queue's), checked as the files in them are: another user who
/// controls such a folder could plant, move or replace what ifmeter reads
/// back and writes (docs/hardening.md, "Folders").
public enum OwnFolder {
    /// Whether `path` is a folder no other user controls: a real folder
    /// (not a symbolic link), owned by the user ifmeter runs as or by root,
    /// and writable by no one else, unless it is sticky (as /tmp is: others
    /// may add names there, but not move or remove ifmeter's). The error
    /// says what is wrong in words an operator can act on.
    /// `followingLinks`: the folder a link there names is checked (a link
    /// given by the operator, resolved once); otherwise a link is refused.
    public static func check(_ path: String, followingLinks: Bool = false) throws(SystemError) {
        var st = stat()
        guard (followingLinks ? stat(path, &st) : lstat(path, &st)) == 0 else {
            throw SystemError.system("\(followingLinks ? "stat" : "lstat")(\(path))")
        }
        try check(FileStatus(st), path: path)
    }

    /// The same check on what lstat said.
    public static func check(_ status: FileStatus, path: String) throws(SystemError) {
        let me = effectiveUserID
        guard status.kind == .directory else {
            throw SystemError(
                call: "lstat(\(path))", errno: ENOTDIR,
                message: "it is \(status.kind.words), not a folder" + (status.kind == .symbolicLink ? " (a link is not followed here)" : ""))
        }
        guard status.owner == me || status.owner == 0 else {
            throw SystemError(
                call: "lstat(\(path))", errno: EPERM,
                message: "the folder is owned by uid \(status.owner), another user, who could plant or move files in it")
        }
        let sticky = status.permissions & 0o1000 != 0
        guard status.permissions & 0o022 == 0 || sticky else {
            throw SystemError(
                call: "lstat(\(path))", errno: EPERM,
                message:
                    "the folder is writable by \(status.permissions & 0o002 != 0 ? "every user" : "its group") (mode 0\(String(status.permissions, radix: 8))) and not sticky, so others could move or replace files in it"
            )
        }
    }

    /// Makes the folder (`mode`, 0700 by default) when it is missing, then
    /// checks it, made now or found: one another user made first is refused,
    /// never adopted. Returns whether this call made it.
    @discardableResult
    public static func make(_ path: String, mode: UInt32 = 0o700) throws(SystemError) -> Bool {
        var made = false
        if mkdir(path, mode_t(mode)) == 0 {
            made = true
        } else if errno != EEXIST {
            throw SystemError.system("mkdir(\(path))")
        }
        try check(path)
        return made
    }

    /// fsyncs the folder, so that names made or removed in it survive a
    /// power cut.
    public static func sync(_ path: String) throws(SystemError) {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError.system("open(\(path))") }
        defer { close(fd) }
        if fsync(fd) != 0 { throw SystemError.system("fsync(\(path))") }
    }

    /// Renames `name` to `newName` in `folder` (never across folders).
    public static func rename(_ name: String, to newName: String, in folder: String) throws(SystemError) {
        if systemRename(folder + "/" + name, folder + "/" + newName) != 0 {
            throw SystemError.system("rename(\(folder)/\(name), \(newName))")
        }
    }

    /// Removes a file (never a folder; a link itself, not its target).
    public static func remove(_ name: String, in folder: String) throws(SystemError) {
        if unlink(folder + "/" + name) != 0, errno != ENOENT { throw SystemError.system("unlink(\(folder)/\(name))") }
    }

    /// Each name in the folder with what lstat says of it (nil when it went
    /// meanwhile): nothing is opened, so a FIFO or a device there is only
    /// looked at.
    public static func entries(_ path: String) throws(SystemError) -> [(name: String, status: FileStatus?)] {
        guard let dir = opendir(path) else { throw SystemError.system("opendir(\(path))") }
        defer { closedir(dir) }
        var out: [(String, FileStatus?)] = []
        while let entry = readdir(dir) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                $0.withMemoryRebound(to: CChar.self, capacity: 256) { String(cString: $0) }
            }
            if name == "." || name == ".." { continue }
            out.append((name, FileStatus(path + "/" + name)))
        }
        return out
    }
}

/// A file of ifmeter's own, open: created or opened without following a
/// link, without taking a terminal and without blocking on a FIFO, and
/// then checked to be a regular file of this user with one name, writable
/// by no one else. Closed when the value goes away.
public final class OwnFile: @unchecked Sendable {
    // The descriptor is only read after init; calls on it are thread-safe.
    public let fd: Int32
    public let path: String

    /// How the file is opened.
    public enum Mode: Sendable {
        /// Reading only; the file must exist.
        case read
        /// Appending, creating it (0600) when missing.
        case append
        /// Appending to a new file (0600): a name already taken is an error.
        case create
        /// Reading and writing in place, creating it (0600) when missing.
        case update
    }

    public init(_ path: String, _ mode: Mode) throws(SystemError) {
        let flags: Int32 =
            switch mode {
            case .read: O_RDONLY
            case .append: O_WRONLY | O_APPEND | O_CREAT
            case .create: O_WRONLY | O_APPEND | O_CREAT | O_EXCL
            case .update: O_RDWR | O_CREAT
            }
        let fd = open(path, flags | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == ELOOP {
                throw SystemError(call: "open(\(path))", errno: ELOOP, message: "it is a symbolic link, not followed")
            }
            throw SystemError.system("open(\(path))")
        }
        guard let status = FileStatus(descriptor: fd) else {
            let error = SystemError.system("fstat(\(path))")
            close(fd)
            throw error
        }
        if let problem = Self.problem(status) {
            close(fd)
            throw SystemError(call: "open(\(path))", errno: EPERM, message: problem)
        }
        // A regular file: writes block as usual.
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        self.fd = fd
        self.path = path
    }

    deinit { close(fd) }

    /// Why a file is not one of ifmeter's own (nil when it is): not a
    /// regular file, another user's, more than one name, or writable by
    /// others. Said without opening it when `status` came from lstat.
    public static func problem(_ status: FileStatus) -> String? {
        if status.kind != .regular { return "it is \(status.kind.words), not a regular file" }
        if status.owner != effectiveUserID { return "it is owned by uid \(status.owner), not by this user (uid \(effectiveUserID))" }
        if status.links != 1 { return "it has \(status.links) hard links" }
        if status.permissions & 0o022 != 0 { return "it is writable by others (mode 0\(String(status.permissions, radix: 8)))" }
        return nil
    }

    /// The size now.
    public func size() throws(SystemError) -> Int64 {
        guard let status = FileStatus(descriptor: fd) else { throw SystemError.system("fstat(\(path))") }
        return status.size
    }

    /// Up to `count` bytes from `offset` (fewer at the end of the file).
    public func read(at offset: Int64, count: Int) throws(SystemError) -> [UInt8] {
        var failure: SystemError?
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, used in
            used = 0
            while used < count {
                let n = pread(fd, buffer.baseAddress! + used, count - used, off_t(offset) + off_t(used))
                if n < 0 {
                    if errno == EINTR { continue }
                    failure = SystemError.system("pread(\(path))")
                    return
                }
                if n == 0 { return }
                used += n
            }
        }
        if let failure { throw failure }
        return bytes
    }

    /// Writes all of `bytes` (at the end, for an appending file) and syncs
    /// the data (fdatasync).
    public func writeSynced(_ bytes: [UInt8]) throws(SystemError) {
        try writeAll(bytes, to: fd)
        if fdatasync(fd) != 0 { throw SystemError.system("fdatasync(\(path))") }
    }

    /// Writes `bytes` at `offset`, in place, and syncs the data.
    public func writeSynced(_ bytes: [UInt8], at offset: Int64) throws(SystemError) {
        var done = 0
        while done < bytes.count {
            let n = bytes.withUnsafeBytes { pwrite(fd, $0.baseAddress! + done, bytes.count - done, off_t(offset) + off_t(done)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw SystemError.system("pwrite(\(path))")
            }
            done += n
        }
        if fdatasync(fd) != 0 { throw SystemError.system("fdatasync(\(path))") }
    }

    /// Cuts the file to `length` bytes and syncs it.
    public func truncate(to length: Int64) throws(SystemError) {
        if ftruncate(fd, off_t(length)) != 0 { throw SystemError.system("ftruncate(\(path))") }
        if fdatasync(fd) != 0 { throw SystemError.system("fdatasync(\(path))") }
    }
}

/// rename(2), named apart from `OwnFolder.rename`.
private func systemRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }

/// Removes a name (a link itself, never its target).
public func removeFile(_ path: String) throws(SystemError) {
    if unlink(path) != 0 { throw SystemError.system("unlink(\(path))") }
}

/// This process's id.
public func currentProcessIdentifier() -> Int32 { getpid() }

/// Gives `path` a second name, `newPath`, which must not exist: nothing
/// there is replaced.
public func linkPath(_ path: String, to newPath: String) throws(SystemError) {
    if link(path, newPath) != 0 { throw SystemError.system("link(\(path), \(newPath))") }
}

/// Sets a file's permission bits (never through a link's target: the
/// caller made the file).
public func setPermissions(_ path: String, _ mode: UInt32) throws(SystemError) {
    if chmod(path, mode_t(mode)) != 0 { throw SystemError.system("chmod(\(path))") }
}

/// Renames a path (a link itself, never its target), replacing what is at
/// `newPath`.
public func renamePath(_ path: String, to newPath: String) throws(SystemError) {
    if systemRename(path, newPath) != 0 { throw SystemError.system("rename(\(path), \(newPath))") }
}

/// The files ifmeter takes its settings from and never writes: the config
/// file, the web and remote write configs, and the certificates, keys,
/// password and token files they name. Whoever can change one can have
/// ifmeter (root, often) write where they like, post with its credentials
/// or serve with their key, so each is checked as the state file is
/// (docs/hardening.md, "Config files are trusted as state files are"):
/// owned by this user or root, writable by no one else, and reached
/// through no symbolic link and no folder another user controls.
public enum SettingsFile {
    /// How many symbolic links a path may go through (the kernel's 40).
    static let maximumLinks = 40

    /// Refuses `path` when another user could change what it says: a
    /// symbolic link on the way (or at the path) owned by another user
    /// than this one or root; a folder on the way that another user owns
    /// or may write (unless sticky, as /tmp is: `OwnFolder.check`); the
    /// file owned by another user, or writable by its group or by all.
    /// What cannot be looked at (a missing file) and what is not a regular
    /// file are left to the read that follows, which says so.
    public static func check(_ path: String) throws(SystemError) {
        guard let real = try resolved(path), let status = FileStatus(real), status.kind == .regular else { return }
        if let problem = problem(status) { throw SystemError(call: "lstat(\(real))", errno: EPERM, message: problem) }
    }

    /// Why a regular file is not one to take settings from (nil when it
    /// is).
    public static func problem(_ status: FileStatus) -> String? {
        if status.owner != effectiveUserID && status.owner != 0 {
            return "it is owned by uid \(status.owner), another user, who could change it under ifmeter"
        }
        if status.permissions & 0o022 != 0 {
            return
                "it is writable by \(status.writableByAll ? "every user" : "its group") (mode 0\(String(status.permissions, radix: 8))), who could change it under ifmeter"
        }
        return nil
    }

    /// The path with every link resolved, each link and each folder on the
    /// way checked; nil when something on the way cannot be looked at.
    static func resolved(_ path: String) throws(SystemError) -> String? {
        var absolute = path
        if !path.hasPrefix("/") {
            guard let cwd = currentDirectory() else { return nil }
            absolute = cwd + "/" + path
        }
        var rest = absolute.split(separator: "/").map(String.init)
        var real = "" // "" is the root
        var links = 0
        if let root = FileStatus("/") { try OwnFolder.check(root, path: "/") }
        while !rest.isEmpty {
            let part = rest.removeFirst()
            if part == "." { continue }
            if part == ".." {
                real = SafeFile.folder(of: real.isEmpty ? "/" : real)
                if real == "/" { real = "" }
                continue
            }
            let candidate = real + "/" + part
            guard let status = FileStatus(candidate) else { return nil }
            if status.kind == .symbolicLink {
                guard status.owner == effectiveUserID || status.owner == 0 else {
                    throw SystemError(
                        call: "lstat(\(candidate))", errno: EPERM,
                        message: "a symbolic link owned by uid \(status.owner), another user, who could point it elsewhere")
                }
                links += 1
                guard links <= maximumLinks, let target = linkTarget(candidate) else { return nil }
                if target.hasPrefix("/") { real = "" }
                rest = target.split(separator: "/").map(String.init) + rest
                continue
            }
            // A folder on the way: one another user controls could have
            // the file moved or replaced.
            if rest.contains(where: { $0 != "." }) { try OwnFolder.check(status, path: candidate) }
            real = candidate
        }
        return real.isEmpty ? "/" : real
    }

    /// What a symbolic link says (nil when it cannot be read).
    static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
