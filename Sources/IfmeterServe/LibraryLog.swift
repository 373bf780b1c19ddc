import IfmeterSystem

/// What libmicrohttpd says in serve's log. A page that was closed (a tab,
/// a laptop lid) leaves its event stream's socket closed by the peer, and
/// the next event sent on it fails: libmicrohttpd says "Failed to send the
/// chunked response body ... Error: The connection was forcibly closed by
/// remote peer" (or "... no longer available for sending", EPIPE). That is
/// normal, not an error, and is kept out of the log; a chunk that fails
/// for any other reason is still said. Tested in process
/// (`LibraryLogTests`) and against Chromium (`RequestsThatLieTests`).
enum LibraryLog {
    /// libmicrohttpd 0.9.75's words (connection.c: `str_conn_error_`) for
    /// a peer that closed or reset the connection.
    static let peerGone = ["The connection was forcibly closed by remote peer", "The socket is no longer available for sending"]

    /// Whether `line` only says that a page went away while its stream
    /// was being sent.
    static func isPageGone(_ line: String) -> Bool {
        guard line.hasPrefix("Failed to send the chunked response body"), let error = line.ranges(of: "Error: ").last else { return false }
        var reason = line[error.upperBound...]
        while reason.last?.isWhitespace == true { reason = reason.dropLast() }
        return peerGone.contains(String(reason))
    }

    /// The site a line of libmicrohttpd's is held back by: its messages
    /// all come through one callback, so each class of them (its words
    /// without digits, as far as 80 characters: "Error accepting
    /// connection", "Failed to send ...") is a site of its own, at most
    /// one line per 10 s each, as Log holds back the sites of ifmeter's
    /// own code.
    static func site(_ line: String) -> LogSite {
        LogSite(file: "libmicrohttpd: " + String(line.lazy.filter { !$0.isNumber }.prefix(80)), line: 0)
    }
}
