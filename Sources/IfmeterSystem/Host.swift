#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The kernel's boot id (`/proc/sys/kernel/random/boot_id`); it changes at
/// every boot. Nil where there is none.
public func readBootID(_ path: String = "/proc/sys/kernel/random/boot_id") -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 128)
    let n = read(fd, &buffer, buffer.count)
    guard n > 0 else { return nil }
    var text = String(decoding: buffer[..<n], as: UTF8.self)
    while text.last == "\n" || text.last == " " { text.removeLast() }
    return text.isEmpty ? nil : text
}

/// The machine's host name.
public func hostName() -> String {
    var buffer = [CChar](repeating: 0, count: 256)
    guard gethostname(&buffer, buffer.count - 1) == 0 else { return "unknown" }
    return buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
}

/// Whether text for people may use UTF-8: the locale's character set, by
/// POSIX's order (`LC_ALL`, then `LC_CTYPE`, then `LANG`; the first set and
/// not empty decides). None set is the C locale: ASCII.
public func localeUsesUTF8(_ lookup: (String) -> String? = environment) -> Bool {
    for name in ["LC_ALL", "LC_CTYPE", "LANG"] {
        guard let value = lookup(name), !value.isEmpty else { continue }
        let charset = value.split(separator: ".", maxSplits: 1).dropFirst().first.map { $0.split(separator: "@").first ?? "" } ?? ""
        let normal = charset.lowercased().filter { $0 != "-" && $0 != "_" }
        return normal == "utf8"
    }
    return false
}

/// The canonical name the resolver gives `name` (getaddrinfo's
/// AI_CANONNAME: `/etc/hosts`' first name for an address, or DNS's), nil
/// when it gives none or the same. It may wait for DNS: call it off any
/// path that must not wait.
public func canonicalHostName(_ name: String) -> String? {
    var hints = streamHints(flags: AI_CANONNAME)
    var result: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(name, nil, &hints, &result) == 0, let first = result else { return nil }
    defer { freeaddrinfo(result) }
    guard let canonical = first.pointee.ai_canonname else { return nil }
    let text = String(cString: canonical)
    return text.isEmpty || text == name ? nil : text
}
