// Stand-ins for IfmeterSampling's Darwin-only files, for scripts/portable-check
// only: the same declarations, bodies that trap. Shared code calls them, so
// the portable build needs them; Darwin cannot be imported here, so their
// real bodies are never compiled on Linux. A declaration here must be the
// Darwin file's, line for line (Tests/IfmeterTests/PortableCheckTests).
import IfmeterCore
import IfmeterSystem

// GetifaddrsDarwin.swift
extension GetifaddrsSampler {
    static func entries(kernelStats: Bool) throws(SystemError) -> [Entry] {
        fatalError("a stand-in for GetifaddrsDarwin.swift; never run")
    }
}

// InterfaceList2Darwin.swift
extension InterfaceListSampler {
    public convenience init(options: SamplerOptions = SamplerOptions()) {
        fatalError("a stand-in for InterfaceList2Darwin.swift; never run")
    }
}
