import IfmeterServe
import IfmeterSystem
import Synchronization
import Testing

/// The dashboards' event channel in process: a listener waits (its
/// connection suspended) until a publish resumes it, reads only the newest
/// event, and reads the end when the channel stops.
@Suite struct EventChannelTests {
    final class Listener: Sendable {
        let suspended = Mutex(0)
        let resumed = Mutex(0)

        func next(_ channel: EventChannel, after seen: Int) -> EventChannel.Next {
            channel.next(after: seen, suspend: { suspended.withLock { $0 += 1 } }, resume: { self.resumed.withLock { $0 += 1 } })
        }
    }

    func text(_ next: EventChannel.Next) -> (Int, String)? {
        guard case .event(let number, let body) = next else { return nil }
        return (number, String(decoding: body.bytes, as: UTF8.self))
    }

    @Test func aListenerWaitsUntilAPublishAndIsResumedOnce() throws {
        let channel = EventChannel()
        let listener = Listener()
        guard case .wait = listener.next(channel, after: 0) else {
            Issue.record("nothing published: the listener waits")
            return
        }
        #expect(listener.suspended.withLock { $0 } == 1 && listener.resumed.withLock { $0 } == 0)
        channel.publish(HTTPBody(Array(#"{"a":1}"#.utf8)))
        #expect(listener.resumed.withLock { $0 } == 1)
        let first = try #require(text(listener.next(channel, after: 0)))
        #expect(first.0 == 1 && first.1 == "event: sample\ndata: {\"a\":1}\n\n")
        // Read: it waits again, and a second publish resumes it again, once.
        guard case .wait = listener.next(channel, after: first.0) else {
            Issue.record("read already: the listener waits")
            return
        }
        channel.publish(HTTPBody(Array("2".utf8)))
        channel.publish(HTTPBody(Array("3".utf8)))
        #expect(listener.resumed.withLock { $0 } == 2)
        // A slow listener skips to the newest.
        let newest = try #require(text(listener.next(channel, after: first.0)))
        #expect(newest.0 == 3 && newest.1 == "event: sample\ndata: 3\n\n")
    }

    @Test func theCapacityBoundsTheListenersAndALeaverFreesAPlace() {
        let channel = EventChannel(capacity: 3)
        #expect((0..<3).allSatisfy { _ in channel.join() })
        #expect(!channel.join())
        #expect(channel.listeners == 3)
        channel.leave()
        #expect(channel.join())
    }

    @Test func aStopEndsEveryStreamAndResumesThoseWaiting() {
        let channel = EventChannel()
        let listeners = (0..<4).map { _ in Listener() }
        #expect(channel.join())
        for listener in listeners {
            guard case .wait = listener.next(channel, after: 0) else {
                Issue.record("each waits")
                return
            }
        }
        channel.stop()
        #expect(listeners.allSatisfy { $0.resumed.withLock { $0 } == 1 })
        for listener in listeners {
            guard case .end = listener.next(channel, after: 0) else {
                Issue.record("after a stop, the end")
                return
            }
        }
        #expect(!channel.join(), "a stopped channel takes no listener")
        channel.publish(HTTPBody(Array("late".utf8)))
        #expect(listeners.allSatisfy { $0.resumed.withLock { $0 } == 1 }, "nobody is resumed twice")
    }

    /// One address takes at most its share (a quarter); another address
    /// still joins while it holds it, and a leaver frees its own share.
    @Test func oneAddressTakesAQuarterAndAnotherStillJoins() {
        let channel = EventChannel(capacity: 8)
        #expect(channel.perClient == 2)
        let a = PeerAddress(family: .ipv4, bytes: [127, 0, 0, 2])
        let b = PeerAddress(family: .ipv4, bytes: [127, 0, 0, 3])
        #expect(channel.join(client: a) == .joined)
        #expect(channel.join(client: a) == .joined)
        #expect((0..<10).allSatisfy { _ in channel.join(client: a) == .clientFull }, "260 tries or 10: still two")
        #expect(channel.join(client: b) == .joined)
        #expect(channel.listeners == 3)
        channel.leave(client: a)
        #expect(channel.join(client: a) == .joined)
        #expect(channel.join(client: b) == .joined)
        // The whole channel full: every address is refused, its own share or not.
        #expect(channel.listeners == 4)
        let others = (4...8).map { PeerAddress(family: .ipv4, bytes: [127, 0, 0, UInt8($0)]) }
        #expect(others.prefix(4).allSatisfy { channel.join(client: $0) == .joined })
        #expect(channel.listeners == 8)
        #expect(channel.join(client: others[4]) == .full)
    }
}
