/// A failed system or library call: the call (with what it was called on),
/// errno when the failure has one, and the system's words for it, as
/// swift-system's `Errno` carries them. Every layer that calls C throws
/// this, so callers decide by `errno`, never by the text.
public struct SystemError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The call that failed, such as `open(/run/netns/a)` or `nl_connect`.
    public var call: String
    /// errno, when the failure has one.
    public var errno: Int32?
    /// The system's (or the library's) words: `strerror(errno)`, `nl_geterror`.
    public var message: String

    public init(call: String, errno: Int32? = nil, message: String) {
        self.call = call
        self.errno = errno
        self.message = message
    }

    public var description: String {
        if let errno { return "\(call): \(message) (errno \(errno))" }
        return "\(call): \(message)"
    }
}
