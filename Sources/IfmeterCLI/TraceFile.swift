#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A trace file being recorded.
final class TraceFile {
    let fd: Int32
    let path: String

    init(creating path: String) throws(CLIError) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else {
            throw .runtime("cannot create '\(path)': \(String(cString: strerror(errno)))")
        }
        self.fd = fd
        self.path = path
    }

    func sync() throws(CLIError) {
        if fsync(fd) != 0, errno != EINVAL {
            throw .runtime("cannot sync '\(path)': \(String(cString: strerror(errno)))")
        }
    }

    func close() {
        _ = Glibc.close(fd)
    }
}

/// Reads all of stdin.
func readStandardInput() throws(CLIError) -> [UInt8] {
    var data: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress!, $0.count) }
        if n < 0 {
            if errno == EINTR { continue }
            throw .runtime("cannot read stdin: \(String(cString: strerror(errno)))")
        }
        if n == 0 { return data }
        data.append(contentsOf: chunk[..<n])
    }
}
