#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCLI

exit(IfmeterCLI.main(Array(CommandLine.arguments.dropFirst())))
