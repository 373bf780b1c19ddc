#if os(Linux) && !IFMETER_PORTABLE_CHECK
import CIfmeterLinux
import Glibc
import IfmeterCore
import IfmeterSystem

/// Runs work inside a named network namespace (`/run/netns/NAME`, as
/// `ip netns add` makes) without moving the whole process there.
///
/// Namespaces belong to threads: `perform` starts a helper thread, moves it
/// into the namespace with setns(2), runs `body` there and waits for it.
/// Sockets opened in `body` stay in the namespace wherever they are used
/// later, so a sampler created in `body` samples that namespace from any
/// thread. (getifaddrs opens a fresh socket on every call, so sampling with
/// it must itself happen in `body`.)
public enum NetworkNamespace {
    /// The file `ip netns` keeps for a namespace name.
    public static func path(_ name: String) -> String { "/run/netns/" + name }

    public static func perform<T>(in name: String, _ body: () throws -> T) throws -> T {
        let fd = open(path(name), O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw SystemError.system("open(\(path(name)))") }
        defer { close(fd) }
        return try perform(inDescriptor: fd, name: name, body)
    }

    /// `perform` in the namespace an open namespace file refers to.
    public static func perform<T>(inDescriptor fd: Int32, name: String, _ body: () throws -> T) throws -> T {
        try withoutActuallyEscaping(body) { body in
            let job = Job(fd: fd, name: name, body: body)
            let unmanaged = Unmanaged.passRetained(job)
            var thread = pthread_t()
            let rc = pthread_create(
                &thread, nil,
                { raw in
                    let job = Unmanaged<AnyObject>.fromOpaque(raw!).takeRetainedValue() as! JobProtocol
                    job.run()
                    return nil
                }, unmanaged.toOpaque())
            if rc != 0 {
                unmanaged.release()
                throw SystemError.system("pthread_create", code: rc)
            }
            pthread_join(thread, nil)
            return try job.result!.get()
        }
    }

    private protocol JobProtocol: AnyObject { func run() }

    /// The work handed to the helper thread, and what came of it.
    private final class Job<T>: JobProtocol {
        let fd: Int32
        let name: String
        let body: () throws -> T
        var result: Result<T, any Error>?

        init(fd: Int32, name: String, body: @escaping () throws -> T) {
            self.fd = fd
            self.name = name
            self.body = body
        }

        func run() {
            guard cifm_setns_net(fd) == 0 else {
                result = .failure(SystemError.system("setns(\(name), CLONE_NEWNET)"))
                return
            }
            result = Result { try body() }
        }
    }
}
#endif
