import Foundation

/// A remote write receiver for tests (Python's http.server in a test
/// namespace): it answers as its `behaviour` says and writes down every
/// request, so a test reads what arrived instead of trusting the sender's
/// own counters.
package final class RemoteWriteReceiver: @unchecked Sendable {
    package enum Behaviour: String, Sendable {
        /// 204 to a POST to /api/v1/write.
        case accept
        /// 307 from any other path to /api/v1/write (then 204 there).
        case redirect
        /// 200 with a chunked body that never ends (until the client goes).
        case endlessBody = "endless"
    }

    package let folder: String
    package let port: UInt16
    private let process: Background

    /// The receiver's script: one line per request in `requests`
    /// (`METHOD PATH STATUS BODY-BYTES-IN RESPONSE-BYTES-OUT`), each body
    /// in `body-N` (N from 1), the headers in `headers-N`.
    static let script = #"""
        import http.server, socketserver, sys
        folder, port, behaviour = sys.argv[1], int(sys.argv[2]), sys.argv[3]
        count = [0]
        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            def log_message(self, *a): pass
            def note(self, status, body, out):
                with open(folder + "/requests", "a") as f:
                    f.write("%s %s %d %d %d\n" % (self.command, self.path, status, len(body), out))
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                count[0] += 1
                n = count[0]
                with open("%s/body-%d" % (folder, n), "wb") as f: f.write(body)
                with open("%s/headers-%d" % (folder, n), "w") as f: f.write(str(self.headers))
                if behaviour == "redirect" and self.path != "/api/v1/write":
                    self.send_response(307)
                    self.send_header("Location", "/api/v1/write")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    self.note(307, body, 0)
                    return
                if behaviour == "endless":
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    chunk = b"x" * 65536
                    out = 0
                    try:
                        while out < (1 << 34):
                            self.wfile.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                            out += len(chunk)
                    except (BrokenPipeError, ConnectionResetError):
                        pass
                    self.note(200, body, out)
                    self.close_connection = True
                    return
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()
                self.note(204, body, 0)
        class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True
            allow_reuse_address = True
        S(("127.0.0.1", port), H).serve_forever()
        """#

    /// Starts the receiver in `namespace` on 127.0.0.1:`port`, writing
    /// into `folder` (which must exist), and waits until it listens.
    package init(in namespace: String, port: UInt16, folder: String, behaviour: Behaviour = .accept) throws {
        self.folder = folder
        self.port = port
        try Self.script.write(toFile: folder + "/receiver.py", atomically: true, encoding: .utf8)
        process = try Background(
            ["ip", "netns", "exec", namespace, "python3", folder + "/receiver.py", folder, String(port), behaviour.rawValue],
            name: "rw-receiver-\(port)")
        _ = try waitFor("the receiver on port \(port)") { () -> Bool? in
            try process.requireRunning()
            return (try? run(["ip", "netns", "exec", namespace, "ss", "-Hltn", "sport = :\(port)"]).out.isEmpty == false) == true ? true : nil
        }
    }

    deinit { _ = process.stop() }

    /// One line per request, oldest first.
    package var requests: [(method: String, path: String, status: Int, bodyBytes: Int, sentBytes: Int)] {
        let text = (try? String(contentsOfFile: folder + "/requests", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            let f = line.split(separator: " ")
            guard f.count == 5, let status = Int(f[2]), let body = Int(f[3]), let out = Int(f[4]) else { return nil }
            return (String(f[0]), String(f[1]), status, body, out)
        }
    }

    /// The body of request `n` (from 1), as it arrived (snappy-compressed).
    package func body(_ n: Int) -> [UInt8] {
        (try? [UInt8](Data(contentsOf: URL(fileURLWithPath: "\(folder)/body-\(n)")))) ?? []
    }

    /// The headers of request `n`, as Python printed them.
    package func headers(_ n: Int) -> String {
        (try? String(contentsOfFile: "\(folder)/headers-\(n)", encoding: .utf8)) ?? ""
    }
}
