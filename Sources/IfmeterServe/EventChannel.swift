import IfmeterSystem
import Synchronization

/// Server-Sent Events to any number of listeners: each gets the newest
/// event when it is ready for one, so a slow one skips what it missed
/// instead of queueing it (memory is one event, shared, whatever the
/// listeners). A listener with nothing new to read waits: `next` takes
/// what suspends its connection and what resumes it, and a publish
/// resumes every one waiting. Tested in process (EventChannelTests).
package final class EventChannel: Sendable {
    /// What a listener reads next.
    package enum Next: Sendable {
        /// An event, whole (`data: ...` and its blank line), and its number.
        case event(Int, HTTPBody)
        /// Nothing newer than what it read: `suspend` was called, and the
        /// `resume` given will be, once, when there is.
        case wait
        /// The channel stopped: the stream ends.
        case end
    }

    private struct State: Sendable {
        var number = 0
        var event: HTTPBody?
        var waiting: [@Sendable () -> Void] = []
        var listeners = 0
        var byClient: [PeerAddress: Int] = [:]
        var stopped = false
    }

    private let state = Mutex(State())
    /// At most this many listeners at once (a page each): more are refused.
    package let capacity: Int
    /// At most this many of them from one client address, so that one
    /// address cannot take every place (a quarter, as for connections).
    package let perClient: Int

    package init(capacity: Int = 256, perClient: Int? = nil) {
        self.capacity = capacity
        self.perClient = perClient ?? max(1, capacity / 4)
    }

    /// Listeners now.
    package var listeners: Int { state.withLock { $0.listeners } }

    /// What `join` says.
    package enum Join: Sendable, Equatable {
        case joined
        /// `capacity` listen already (or the channel stopped).
        case full
        /// `perClient` listen from this client's address already.
        case clientFull
    }

    /// A new listener from `client` (nil: an address unknown, counted only
    /// against the capacity), unless the channel, or this client's share
    /// of it, is full, or it stopped.
    package func join(client: PeerAddress?) -> Join {
        state.withLock { state in
            guard !state.stopped, state.listeners < capacity else { return .full }
            if let client {
                guard state.byClient[client, default: 0] < perClient else { return .clientFull }
                state.byClient[client, default: 0] += 1
            }
            state.listeners += 1
            return .joined
        }
    }

    /// A new listener of no known address.
    package func join() -> Bool { join(client: nil) == .joined }

    /// A listener went (its connection closed); `client` as it joined.
    package func leave(client: PeerAddress? = nil) {
        state.withLock { state in
            state.listeners -= 1
            if let client, let n = state.byClient[client] { state.byClient[client] = n > 1 ? n - 1 : nil }
        }
    }

    /// Sends `data` (one line: no line breaks) to every listener.
    package func publish(_ data: HTTPBody) {
        var event = Array("event: sample\ndata: ".utf8)
        event.reserveCapacity(event.count + data.count + 2)
        if let base = data.base { event.append(contentsOf: UnsafeRawBufferPointer(start: base, count: data.count)) }
        event.append(contentsOf: Array("\n\n".utf8))
        let body = HTTPBody(event)
        let waiting = state.withLock { state -> [@Sendable () -> Void] in
            guard !state.stopped else { return [] }
            state.number += 1
            state.event = body
            defer { state.waiting = [] }
            return state.waiting
        }
        for resume in waiting { resume() }
    }

    /// The event after number `seen` (0: none read yet), or a wait, under
    /// the channel's lock so that a publish cannot slip between the check
    /// and the suspension.
    package func next(after seen: Int, suspend: () -> Void, resume: @escaping @Sendable () -> Void) -> Next {
        state.withLock { state in
            if state.stopped { return .end }
            if state.number > seen, let event = state.event { return .event(state.number, event) }
            suspend()
            state.waiting.append(resume)
            return .wait
        }
    }

    /// Ends every stream: those waiting are resumed and read the end.
    package func stop() {
        let waiting = state.withLock { state -> [@Sendable () -> Void] in
            state.stopped = true
            defer { state.waiting = [] }
            return state.waiting
        }
        for resume in waiting { resume() }
    }
}
