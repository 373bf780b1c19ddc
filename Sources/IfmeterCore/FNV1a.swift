/// FNV-1a, 64 bits: a fast hash of bytes that stays the same from run to
/// run and version to version (Swift's `Hasher` is seeded per process), for
/// names on disk and keys kept between samples.
public enum FNV1a {
    @inlinable
    public static func hash(_ bytes: some Sequence<UInt8>) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3 }
        return hash
    }
}
