#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCLI
#if os(Linux)
import CIfmeterLinux

cifm_tune_malloc()
#endif

exit(IfmeterCLI.main(Array(CommandLine.arguments.dropFirst())))
