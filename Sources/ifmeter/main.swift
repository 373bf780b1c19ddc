import IfmeterCLI
import IfmeterSystem

tuneMemoryAllocator()
exitProcess(IfmeterCLI.main(Array(CommandLine.arguments.dropFirst())))
