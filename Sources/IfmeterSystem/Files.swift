#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// What is at a path, as lstat (or stat) says it: for checks above the
/// system layer, which decide by these facts, not by C structures.
public struct FileStatus: Sendable, Hashable {
    public enum Kind: Sendable, Hashable {
        case regular, directory, symbolicLink, characterDevice, blockDevice, fifo, socket, other

        /// `a character device`, `a FIFO`, ...: for messages.
        public var words: String {
            switch self {
            case .regular: "a regular file"
            case .directory: "a folder"
            case .symbolicLink: "a symbolic link"
            case .characterDevice: "a character device"
            case .blockDevice: "a block device"
            case .fifo: "a FIFO"
            case .socket: "a socket"
            case .other: "not a regular file"
            }
        }
    }

    public var kind: Kind
    public var owner: UInt32
    public var group: UInt32
    /// The permission bits (0o7777).
    public var permissions: UInt32
    public var links: UInt64
    public var size: Int64
    /// Which file it is: the same device and inode are the same file,
    /// whatever its name now.
    public var device: UInt64
    public var inode: UInt64
    /// When its content last changed (Unix time, nanosecond resolution
    /// where the file system has it).
    public var modified: Double

    /// Anyone may write it (o+w).
    public var writableByAll: Bool { permissions & 0o002 != 0 }

    /// What is at `path`, without following a last symbolic link unless
    /// `followingLinks`; nil when nothing is there (or it cannot be looked at).
    public init?(_ path: String, followingLinks: Bool = false) {
        var st = stat()
        guard (followingLinks ? stat(path, &st) : lstat(path, &st)) == 0 else { return nil }
        self.init(st)
    }

    init(_ st: stat) {
        kind =
            switch st.st_mode & S_IFMT {
            case S_IFREG: .regular
            case S_IFDIR: .directory
            case S_IFLNK: .symbolicLink
            case S_IFCHR: .characterDevice
            case S_IFBLK: .blockDevice
            case S_IFIFO: .fifo
            case S_IFSOCK: .socket
            default: .other
            }
        owner = UInt32(st.st_uid)
        group = UInt32(st.st_gid)
        permissions = UInt32(st.st_mode & 0o7777)
        links = UInt64(st.st_nlink)
        size = Int64(st.st_size)
        device = UInt64(st.st_dev)
        inode = UInt64(st.st_ino)
        #if canImport(Darwin)
        modified = Double(st.st_mtimespec.tv_sec) + Double(st.st_mtimespec.tv_nsec) / 1e9
        #else
        modified = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
        #endif
    }
}

/// The user ifmeter runs as (effective) and the one that started it.
public var effectiveUserID: UInt32 { UInt32(geteuid()) }
public var realUserID: UInt32 { UInt32(getuid()) }

/// The working folder; nil when it cannot be read.
public func currentDirectory() -> String? {
    guard let raw = getcwd(nil, 0) else { return nil }
    defer { free(raw) }
    return String(cString: raw)
}

/// Makes a folder (`mode`); one already there is no failure.
public func makeDirectory(_ path: String, mode: UInt32 = 0o755) throws(SystemError) {
    if mkdir(path, mode_t(mode)) != 0, errno != EEXIST { throw SystemError.system("mkdir(\(path))") }
}

/// Makes every missing folder of an absolute path, as mkdir -p (failures
/// are left to whoever opens a file there, who says them).
public func makeDirectories(_ path: String, mode: UInt32 = 0o755) {
    guard path.hasPrefix("/") else { return }
    var partial = ""
    for part in path.split(separator: "/") {
        partial += "/" + part
        _ = mkdir(partial, mode_t(mode))
    }
}

/// Writes `bytes` to `path`, creating or truncating it (0644): for files
/// ifmeter generates for an installer (man pages), not for its own state.
public func writeFile(_ path: String, _ bytes: [UInt8]) throws(SystemError) {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw SystemError.system("open(\(path))") }
    defer { close(fd) }
    try writeAll(bytes, to: fd)
}

/// Whether something is at `path`, following links (access F_OK).
public func exists(_ path: String) -> Bool { access(path, F_OK) == 0 }

/// Raises the soft limit on open files toward `wanted` (within the hard
/// limit), so a connection limit, not the descriptor limit, decides.
public func raiseOpenFileLimit(to wanted: Int) {
    var limit = rlimit()
    guard getrlimit(openFilesResource, &limit) == 0 else { return }
    let target = min(rlim_t(wanted), limit.rlim_max)
    if limit.rlim_cur < target {
        limit.rlim_cur = target
        _ = setrlimit(openFilesResource, &limit)
    }
}

#if canImport(Glibc)
private let openFilesResource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
private let openFilesResource = RLIMIT_NOFILE
#endif

/// Ends the process with `code` (after atexit handlers).
public func exitProcess(_ code: Int32) -> Never { exit(code) }

/// The whole of a text file. Anything but a regular file (a FIFO, a
/// device, a folder) is refused at once: opened without blocking (a FIFO
/// with no writer would hold the start forever), then looked at.
public func readTextFile(_ path: String) throws(SystemError) -> String {
    String(decoding: try readFileBytes(path), as: UTF8.self)
}

/// The whole of a file of at most 1 MiB, as bytes (`readTextFile`'s
/// checks): for a reader that must see bytes that are not UTF-8.
public func readFileBytes(_ path: String) throws(SystemError) -> [UInt8] {
    let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)
    guard fd >= 0 else {
        throw SystemError.system("open(\(path))", code: errno)
    }
    defer { close(fd) }
    var info = stat()
    guard fstat(fd, &info) == 0 else {
        throw SystemError.system("fstat(\(path))", code: errno)
    }
    guard info.st_mode & S_IFMT == S_IFREG else {
        throw SystemError(call: "fstat(\(path))", message: "not a regular file (\(FileStatus(info).kind.words))")
    }
    guard info.st_size <= 1 << 20 else {
        throw SystemError(call: "fstat(\(path))", message: "larger than 1 MiB")
    }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(fd, &buffer, buffer.count)
        if n < 0 {
            if errno == EINTR { continue }
            throw SystemError.system("read(\(path))", code: errno)
        }
        if n == 0 { break }
        bytes.append(contentsOf: buffer[..<n])
        if bytes.count > 1 << 20 {
            throw SystemError(call: "read(\(path))", message: "larger than 1 MiB")
        }
    }
    return bytes
}
