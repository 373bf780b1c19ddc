#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import IfmeterCore

/// A value guarded by a lock, with a condition to wait on until it changes:
/// pthread's mutex and condition variable, timed on the monotonic clock (a
/// wall clock step neither cuts a wait short nor stretches it). The one
/// thread primitive of ifmeter's own threads, a timer included: a thread
/// waits with a timeout for a change another makes with `update`.
public final class ConditionLock<Value: Sendable>: @unchecked Sendable {
    // The mutex and condition live at fixed addresses (pthread's rule) and
    // guard `value`; every access to it holds the mutex.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        // Darwin has no pthread_condattr_setclock: its waits are relative
        // (waitOnce).
        #if canImport(Darwin)
        pthread_cond_init(condition, nil)
        #else
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        defer { pthread_condattr_destroy(&attributes) }
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        #endif
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    /// Reads or changes the value under the lock, waking no one.
    public func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Changes the value under the lock and wakes every waiter.
    public func update<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        return try body(&value)
    }

    /// Waits until `ready` holds or `seconds` pass (at once when not
    /// positive), then runs `body` on the value under the lock; `ready`
    /// tells `body` whether it held.
    public func wait<R>(
        seconds: Double, until ready: (Value) -> Bool, then body: (inout Value, _ ready: Bool) throws -> R
    ) rethrows -> R {
        let deadline = Self.deadline(after: seconds)
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !ready(value) {
            if !waitOnce(until: deadline) { break }
        }
        return try body(&value, ready(value))
    }

    /// One wait on the condition (the mutex held); false once the deadline
    /// has passed.
    private func waitOnce(until deadline: timespec) -> Bool {
        #if canImport(Darwin)
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let left = Double(deadline.tv_sec - now.tv_sec) + Double(deadline.tv_nsec - now.tv_nsec) / 1e9
        guard left > 0 else { return false }
        var relative = timespec(tv_sec: Int(left), tv_nsec: Int((left - Double(Int(left))) * 1e9))
        return pthread_cond_timedwait_relative_np(condition, mutex, &relative) != ETIMEDOUT
        #else
        var deadline = deadline
        return pthread_cond_timedwait(condition, mutex, &deadline) != ETIMEDOUT
        #endif
    }

    private static func deadline(after seconds: Double) -> timespec {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        // At most a year: the sum stays far from overflow.
        let seconds = min(max(seconds, 0), 365 * 86400)
        let nanoseconds = Int((seconds * 1e9).rounded(.down))
        deadline.tv_sec += nanoseconds / 1_000_000_000
        deadline.tv_nsec += nanoseconds % 1_000_000_000
        if deadline.tv_nsec >= 1_000_000_000 {
            deadline.tv_sec += 1
            deadline.tv_nsec -= 1_000_000_000
        }
        return deadline
    }
}

/// A wake-up flag: one thread sleeps on it for up to a timeout, others set
/// it (the sender's wait between pushes and retries).
public final class WakeEvent: Sendable {
    private let flag = ConditionLock(false)

    public init() {}

    /// Sets the flag and wakes the waiter.
    public func signal() { flag.update { $0 = true } }

    /// Waits until signalled or `seconds` pass; true if signalled (the flag
    /// is cleared either way).
    @discardableResult public func wait(_ seconds: Double) -> Bool {
        flag.wait(seconds: seconds, until: { $0 }) { set, _ in
            defer { set = false }
            return set
        }
    }
}

/// Starts a detached thread running `body` (pthread_create); throws with
/// pthread's error when the thread cannot be made.
public func startThread(_ body: @escaping @Sendable () -> Void) throws(SystemError) {
    final class Start {
        let body: @Sendable () -> Void
        init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    }
    let start = Unmanaged.passRetained(Start(body))
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    // Glibc's pthread_t is an integer, Darwin's a pointer.
    #if canImport(Darwin)
    var thread: pthread_t?
    #else
    var thread = pthread_t()
    #endif
    let rc = pthread_create(
        &thread, &attributes,
        { raw in
            #if canImport(Darwin)
            let start = Unmanaged<Start>.fromOpaque(raw).takeRetainedValue()
            #else
            let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
            #endif
            start.body()
            return nil
        }, start.toOpaque())
    guard rc == 0 else {
        start.release()
        throw .system("pthread_create", code: rc)
    }
}
