import Dispatch

/// A turn for tests that see every namespace on the machine (`--all-netns`)
/// and tests that make hundreds of interfaces: run together, the first
/// samples, renders and follows the second's thousand interfaces too, and
/// its deadlines judge a serve loaded by another test's scale. Each takes
/// the turn for its whole run (`take()`, then `defer { give() }`).
package enum MachineWideInterfaces {
    private static let turn = DispatchSemaphore(value: 1)

    package static func take() { turn.wait() }
    package static func give() { turn.signal() }
}
