import IfmeterCore

/// Paths of files ifmeter writes, as given on the command line.
enum CommandLinePath {
    /// A symbolic link given on the command line is resolved here, once, at
    /// start, and said in one line on stderr: from then on ifmeter writes
    /// the file it named then, and follows no link (one planted later is
    /// never followed). A link owned by another user, who could have
    /// planted it, is refused.
    static func resolve(_ path: String, option: String, command: String) throws(CLIError) -> String {
        guard path != "-" else { return path }
        do {
            guard let resolved = try SafeFile.resolveLink(path) else { return path }
            Output.error("\(command): \(option) \(path) is a symbolic link; using \(resolved)")
            return resolved
        } catch {
            throw .runtime("cannot use \(path) for \(option): \(error.call): \(error.message)")
        }
    }
}
