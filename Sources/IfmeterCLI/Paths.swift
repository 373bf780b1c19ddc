import IfmeterCore
import IfmeterSystem

/// A file path given on the command line that ifmeter writes: checked once,
/// at start, before anything is opened or sampled.
enum CommandLinePath {
    /// `--allow-foreign-files`: a file owned by another user, or writable
    /// by others, is used all the same (set once, when the command line is
    /// read).
    nonisolated(unsafe) static var allowForeign = false

    static let allowForeignFiles = Flag(
        "--allow-foreign-files",
        help:
            "Use a state, output or config file owned by another user, or writable by others (refused by default: that user could change it under ifmeter)."
    )

    /// A config file, or a file it names (`what`: "the config file", "the
    /// web config", ...), that another user could change: refused as a
    /// state file is (exit 1), the file and what is wrong in one line.
    static func refusedSettings(_ what: String, at location: String, _ message: String) -> CLIError {
        .runtime(
            "cannot use \(what) \(TerminalText.escaped(location)): \(TerminalText.escaped(message)); refusing it (--allow-foreign-files uses it anyway)"
        )
    }

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
    /// `ownFolder`: the file is read back and written for as long as ifmeter
    /// runs (the state file), so its folder, when it exists, must be one no
    /// other user controls (`checkOwnFolder`).
    static func output(
        _ path: String, option: String, command: String, writing: Writing, sideSuffixes: [String] = [], ownFolder: Bool = false
    ) throws(CLIError) -> String {
        guard path != "-" else { return path }
        guard !path.isEmpty, !path.hasSuffix("/") else {
            throw .usage("invalid value '\(TerminalText.escaped(path))' for '\(option) <file>': expected a file name", command: command)
        }
        try checkFolders(of: path, option: option)
        let resolved = try resolve(path, option: option, command: command)
        if ownFolder { try checkOwnFolder(SafeFile.folder(of: resolved), for: path, option: option) }
        for name in [resolved] + sideSuffixes.map({ resolved + $0 }) {
            try checkTarget(name, given: name == resolved ? path : name, option: option, command: command, writing: writing)
        }
        return resolved
    }

    /// A folder ifmeter keeps files in that it reads back (the state file's,
    /// the remote write queue's): owned by this user or root and writable
    /// by no one else unless sticky (`OwnFolder.check`); otherwise that
    /// user could move the file away or plant another. A folder not made
    /// yet is said when it is made. `--allow-foreign-files` uses it anyway.
    static func checkOwnFolder(_ folder: String, for path: String, option: String) throws(CLIError) {
        guard !allowForeign, let status = FileStatus(folder, followingLinks: true) else { return }
        do throws(SystemError) {
            try OwnFolder.check(status, path: folder)
        } catch {
            throw .runtime(
                "cannot use \(TerminalText.escaped(path)) for \(option): its folder \(TerminalText.escaped(folder)): \(error.message); refusing it (give a folder of your own, or --allow-foreign-files)"
            )
        }
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
            guard let cwd = currentDirectory() else { return }
            folder = folder == "." ? cwd : cwd + "/" + folder
        }
        var prefix = ""
        for part in folder.split(separator: "/") {
            prefix += "/" + part
            // A missing folder is said when the file is made.
            guard let status = FileStatus(prefix) else { return }
            guard status.kind == .symbolicLink else { continue }
            guard status.owner == effectiveUserID || status.owner == 0 else {
                throw .runtime(
                    "cannot use \(TerminalText.escaped(path)) for \(option): \(TerminalText.escaped(prefix)), on the way, is a symbolic link owned by uid \(status.owner), another user, who could point it elsewhere; refusing to follow it. Give the path without it."
                )
            }
        }
    }

    private static func checkTarget(_ path: String, given: String, option: String, command: String, writing: Writing) throws(CLIError) {
        guard let status = FileStatus(path) else { return } // made by ifmeter
        let shown = TerminalText.escaped(given)
        guard status.kind == .regular else {
            throw .usage(
                "'\(shown)' for '\(option)' is \(status.kind.words), not a regular file: give the name of a file to write (or none yet)",
                command: command)
        }
        if !allowForeign {
            if status.owner != effectiveUserID {
                throw .runtime(
                    "cannot use \(shown) for \(option): it is owned by uid \(status.owner), another user, who could change it under ifmeter; refusing it (--allow-foreign-files uses it anyway)"
                )
            }
            if status.writableByAll {
                throw .runtime(
                    "cannot use \(shown) for \(option): it is writable by every user (mode 0\(String(status.permissions, radix: 8))), who could change it under ifmeter; refusing it (chmod o-w, or --allow-foreign-files)"
                )
            }
        }
        if writing == .inPlace, status.links > 1 {
            throw .runtime(
                "cannot use \(shown) for \(option): it has \(status.links) hard links, and writing it would write every one of them; refusing it (give a file of its own)"
            )
        }
    }
}
