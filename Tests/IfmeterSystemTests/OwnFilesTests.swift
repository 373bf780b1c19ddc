import Foundation
import IfmeterCore
import IfmeterSystem
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The checks on ifmeter's own folders and files (the state file's, the
/// remote write queue's), in process: each way another user could plant,
/// move or replace a file is refused with words an operator can act on.
/// Another owner is a changed `FileStatus`, so no second user is needed.
@Suite struct OwnFilesTests {
    /// A fresh folder of this user's, removed at the end.
    final class Scratch {
        let path: String
        init() throws {
            path = NSTemporaryDirectory() + "ifmeter-system-\(getpid())-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
        func file(_ name: String, _ text: String = "x", mode: Int = 0o600) throws -> String {
            let file = path + "/" + name
            try Data(text.utf8).write(to: URL(fileURLWithPath: file))
            try FileManager.default.setAttributes([.posixPermissions: mode], ofItemAtPath: file)
            return file
        }
    }

    /// What the SystemError `body` throws says (nil: it threw nothing).
    func message(_ body: () throws -> Void) -> String? {
        do {
            try body()
            return nil
        } catch let error as SystemError {
            return error.message
        } catch {
            return "not a SystemError: \(error)"
        }
    }

    @Test func aFolderOfThisUserWritableByNoOneElseIsAccepted() throws {
        let scratch = try Scratch()
        #expect(message { try OwnFolder.check(scratch.path) } == nil)
        // Made now, or found and checked: made reports which.
        let inner = scratch.path + "/queue"
        #expect(try OwnFolder.make(inner))
        #expect(try !OwnFolder.make(inner))
        #expect(FileStatus(inner)?.permissions == 0o700)
    }

    @Test func aFolderOthersCanWriteIsRefusedUnlessSticky() throws {
        let scratch = try Scratch()
        var status = try #require(FileStatus(scratch.path))
        status.permissions = 0o777
        #expect(message { try OwnFolder.check(status, path: scratch.path) }?.contains("writable by every user (mode 0777) and not sticky") == true)
        status.permissions = 0o770
        #expect(message { try OwnFolder.check(status, path: scratch.path) }?.contains("writable by its group") == true)
        // /tmp's way: others may add names, not move or remove ifmeter's.
        status.permissions = 0o1777
        #expect(message { try OwnFolder.check(status, path: scratch.path) } == nil)
    }

    @Test func anotherUsersFolderIsRefusedAndRootsIsAccepted() throws {
        let scratch = try Scratch()
        var status = try #require(FileStatus(scratch.path))
        status.owner = effectiveUserID == 4242 ? 4243 : 4242
        #expect(message { try OwnFolder.check(status, path: scratch.path) }?.contains("owned by uid \(status.owner), another user") == true)
        status.owner = 0
        #expect(message { try OwnFolder.check(status, path: scratch.path) } == nil)
    }

    @Test func aLinkOrAFileInsteadOfAFolderIsRefused() throws {
        let scratch = try Scratch()
        let link = scratch.path + "/link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: scratch.path)
        #expect(message { try OwnFolder.check(link) } == "it is a symbolic link, not a folder (a link is not followed here)")
        #expect(message { try OwnFolder.check(link, followingLinks: true) } == nil, "a link the operator gave is resolved once")
        let file = try scratch.file("state.db")
        #expect(message { try OwnFolder.check(file) } == "it is a regular file, not a folder")
        #expect(message { try OwnFolder.make(file) } == "it is a regular file, not a folder")
    }

    @Test func aFileOfAnotherKindOwnerOrWithTwoNamesIsNotOneOfOurOwn() throws {
        let scratch = try Scratch()
        let file = try scratch.file("state.db")
        let status = try #require(FileStatus(file))
        #expect(OwnFile.problem(status) == nil)
        var other = status
        other.owner = effectiveUserID == 4242 ? 4243 : 4242
        #expect(OwnFile.problem(other) == "it is owned by uid \(other.owner), not by this user (uid \(effectiveUserID))")
        other = status
        other.permissions = 0o620
        #expect(OwnFile.problem(other) == "it is writable by others (mode 0620)")
        // A hard link: another name could be renamed over or read elsewhere.
        try linkPath(file, to: scratch.path + "/second")
        #expect(OwnFile.problem(try #require(FileStatus(file))) == "it has 2 hard links")
        #expect(message { _ = try OwnFile(file, .read) } == "it has 2 hard links")
    }

    @Test func aLinkOrAFIFOIsRefusedWhenOpenedWithoutBlocking() throws {
        let scratch = try Scratch()
        let target = try scratch.file("target")
        let link = scratch.path + "/link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: target)
        #expect(message { _ = try OwnFile(link, .update) } == "it is a symbolic link, not followed")
        let fifo = scratch.path + "/fifo"
        #expect(mkfifo(fifo, 0o600) == 0)
        // Opened without blocking: a FIFO with no writer would hang a read.
        #expect(message { _ = try OwnFile(fifo, .read) } == "it is a FIFO, not a regular file")
    }

    @Test func anOwnFileWritesInPlaceReadsBackAndTruncates() throws {
        let scratch = try Scratch()
        let path = scratch.path + "/queue.seg"
        let file = try OwnFile(path, .update)
        try file.writeSynced(Array("hello world".utf8))
        try file.writeSynced(Array("W".utf8), at: 6)
        #expect(try file.read(at: 0, count: 64) == Array("hello World".utf8))
        try file.truncate(to: 5)
        #expect(try file.size() == 5)
        #expect(FileStatus(path)?.permissions == 0o600)
        #expect(message { _ = try OwnFile(path, .create) } != nil, "create refuses a name already taken")
    }

    @Test func anAtomicWriteReplacesTheWholeFileAndNeverFollowsALink() throws {
        let scratch = try Scratch()
        let path = try scratch.file("out.json", "old")
        try AtomicFile.write(Array("new".utf8), to: path)
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "new")
        // A link planted at the name is replaced, its target untouched.
        let target = try scratch.file("elsewhere", "keep")
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.createSymbolicLink(atPath: path, withDestinationPath: target)
        try AtomicFile.write(Array("mine".utf8), to: path)
        #expect(FileStatus(path)?.kind == .regular)
        #expect(try String(contentsOfFile: target, encoding: .utf8) == "keep")
        // A failure while writing leaves the old contents and no temporary file.
        let failed = message {
            try AtomicFile.write(to: path) { (put: (UnsafeRawBufferPointer) throws(SystemError) -> Void) throws(SystemError) in
                var failure: SystemError?
                Array("half".utf8).withUnsafeBytes { raw in
                    do throws(SystemError) { try put(raw) } catch { failure = error }
                }
                if let failure { throw failure }
                throw SystemError(call: "render", errno: EIO, message: "the render failed")
            }
        }
        #expect(failed == "the render failed")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "mine")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path).sorted() == ["elsewhere", "out.json"])
    }

    /// A settings file (a config, a key it names) is judged through every
    /// link, each link's owner counted: a link of this user's that leads
    /// through a link another user owns (`nobody`'s, so root is needed to
    /// make it) is refused as that link is, however it is written (a
    /// relative target, `..`); a file its group may write is refused; one
    /// that is not there is left to the read that follows.
    @Test(.enabled(if: geteuid() == 0, "root gives a link to nobody"))
    func aSettingsFileIsJudgedThroughEveryLink() throws {
        let scratch = try Scratch()
        #expect(mkdir(scratch.path + "/real", 0o755) == 0)
        let good = scratch.path + "/real/c.yml"
        try Data("x".utf8).write(to: URL(fileURLWithPath: good))
        #expect(chmod(good, 0o644) == 0)
        #expect(message { try SettingsFile.check(good) } == nil)
        // This user's links, relative and through '..': taken.
        #expect(symlink("real/../real/c.yml", scratch.path + "/mine.yml") == 0)
        #expect(message { try SettingsFile.check(scratch.path + "/mine.yml") } == nil)
        // nobody's link to the folder, reached through this user's link.
        #expect(symlink("real", scratch.path + "/nobodys") == 0 && lchown(scratch.path + "/nobodys", 65534, 65534) == 0)
        #expect(symlink(scratch.path + "/nobodys/c.yml", scratch.path + "/through.yml") == 0)
        #expect(
            message { try SettingsFile.check(scratch.path + "/through.yml") }
                == "a symbolic link owned by uid 65534, another user, who could point it elsewhere")
        let group = try scratch.file("group.yml", mode: 0o664)
        #expect(message { try SettingsFile.check(group) }?.hasPrefix("it is writable by its group (mode 0664)") == true)
        #expect(message { try SettingsFile.check(scratch.path + "/missing.yml") } == nil)
    }
}
