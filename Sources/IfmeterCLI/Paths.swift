#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore
import IfmeterSystem

/// A file path given on the command line that ifmeter writes: checked once,
/// at start, before anything is opened or sampled.
enum CommandLinePath {
    /// `--allow-foreign-files`: a file owned by another user, or writable
    /// by others, is used all the same (set once, when the command line is
    /// read).
    nonisolated(unsafe) static var allowForeign = false

    static let allowForeignSpec = OptionSpec(
        "--allow-foreign-files",
        help: "Write a state or output file owned by another user, or writable by others (refused by default: that user could change it under ifmeter).")

    /// How a file is written: replaced whole (a temporary renamed over it:
    /// --json, --textfile, --svg) or written in place (opened and appended
    /// or updated: --state, --json-lines, record -o).
    enum Writing {
        case replaced, inPlace
    }

    /// Checks `path` and returns the path to write:
    /// - it is a file name: not empty, not a folder;
    /// - every folder on the way is looked at once: a symbolic link among
    ///   them that another user (not root) owns is refused, since that user
    ///   could point it elsewhere at any time;
    /// - a symbolic link at the path itself is resolved once and said on
    ///   stderr (one another user owns is refused);
    /// - what is there must be a regular file, or nothing: a device, FIFO,
    ///   socket or folder is refused (a rename over /dev/null, or over a
    ///   device node planted in /tmp, would replace it);
    /// - a file owned by another user, or writable by others, is refused
    ///   unless `--allow-foreign-files`;
    /// - a file written in place must have one link: writing a hard link
    ///   writes every name of the file.
    /// `sideSuffixes`: files written beside it, checked alike (SQLite's).
    static func output(
        _ path: String, option: String, command: String, writing: Writing, sideSuffixes: [String] = []
    ) throws(CLIError) -> String {
        guard path != "-" else { return path }
        guard !path.isEmpty, !path.hasSuffix("/") else {
            throw .usage("invalid value '\(TerminalText.escaped(path))' for '\(option) <file>': expected a file name", command: command)
        }
        try checkFolders(of: path, option: option)
        let resolved = try resolve(path, option: option, command: command)
        for name in [resolved] + sideSuffixes.map({ resolved + $0 }) {
            try checkTarget(name, given: name == resolved ? path : name, option: option, command: command, writing: writing)
        }
        return resolved
    }

    /// A symbolic link given on the command line is resolved here, once, at
    /// start, and said in one line on stderr: from then on ifmeter writes
    /// the file it named then, and follows no link (one planted later is
    /// never followed). A link owned by another user, who could have
    /// planted it, is refused.
    static func resolve(_ path: String, option: String, command: String) throws(CLIError) -> String {
        guard path != "-" else { return path }
        do {
            guard let resolved = try SafeFile.resolveLink(path) else { return path }
            Output.error("\(command): \(option) \(path) is a symbolic link; using \(resolved)")
            return resolved
        } catch {
            throw .runtime("cannot use \(path) for \(option): \(error.call): \(error.message)")
        }
    }

    /// Every folder on the way to `path`, from the root: a symbolic link
    /// owned by another user than this one or root is refused.
    static func checkFolders(of path: String, option: String) throws(CLIError) {
        var folder = SafeFile.folder(of: path)
        if !folder.hasPrefix("/") {
            guard let raw = getcwd(nil, 0) else { return }
            let cwd = String(cString: raw)
            free(raw)
            folder = folder == "." ? cwd : cwd + "/" + folder
        }
        var prefix = ""
        for part in folder.split(separator: "/") {
            prefix += "/" + part
            var st = stat()
            guard lstat(prefix, &st) == 0 else { return }  // a missing folder is said when the file is made
            guard (st.st_mode & S_IFMT) == S_IFLNK else { continue }
            guard st.st_uid == geteuid() || st.st_uid == 0 else {
                throw .runtime(
                    "cannot use \(TerminalText.escaped(path)) for \(option): \(TerminalText.escaped(prefix)), on the way, is a symbolic link owned by uid \(st.st_uid), another user, who could point it elsewhere; refusing to follow it. Give the path without it.")
            }
        }
    }

    private static func checkTarget(_ path: String, given: String, option: String, command: String, writing: Writing) throws(CLIError) {
        var st = stat()
        guard lstat(path, &st) == 0 else { return }  // made by ifmeter
        let shown = TerminalText.escaped(given)
        let type = st.st_mode & S_IFMT
        guard type == S_IFREG else {
            let what = switch type {
            case S_IFCHR: "a character device"
            case S_IFBLK: "a block device"
            case S_IFIFO: "a FIFO"
            case S_IFSOCK: "a socket"
            case S_IFDIR: "a folder"
            case S_IFLNK: "a symbolic link"
            default: "not a regular file"
            }
            throw .usage("'\(shown)' for '\(option)' is \(what), not a regular file: give the name of a file to write (or none yet)", command: command)
        }
        if !allowForeign {
            if st.st_uid != geteuid() {
                throw .runtime(
                    "cannot use \(shown) for \(option): it is owned by uid \(st.st_uid), another user, who could change it under ifmeter; refusing it (--allow-foreign-files uses it anyway)")
            }
            if st.st_mode & S_IWOTH != 0 {
                throw .runtime(
                    "cannot use \(shown) for \(option): it is writable by every user (mode 0\(String(st.st_mode & 0o7777, radix: 8))), who could change it under ifmeter; refusing it (chmod o-w, or --allow-foreign-files)")
            }
        }
        if writing == .inPlace, st.st_nlink > 1 {
            throw .runtime(
                "cannot use \(shown) for \(option): it has \(st.st_nlink) hard links, and writing it would write every one of them; refusing it (give a file of its own)")
        }
    }
}
