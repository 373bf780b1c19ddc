import IfmeterCore
import IfmeterPipeline
import IfmeterStore
import IfmeterTestSupport
import Testing

@testable import IfmeterServe

/// serve's reload lives in IfmeterServe (issue 46): given what changed,
/// typed, with no command line, it applies it to a running pipeline and
/// says in one line what it applied and what needs a restart.
@Suite struct ServeReloaderTests {
    /// The interfaces of each sampled update.
    final class Seen: PipelineSink {
        var names: [[String]] = []
        func receive(_ update: borrowing PipelineUpdate) {
            if update.outcome == .sampled { names.append(update.deltas.map(\.name).sorted()) }
        }
    }

    func running() -> (Pipeline, Seen) {
        let source = ScriptedSource(
            (0..<4).map { n in .sample(Double(10 + n), [("eth0", 2, UInt64(n) * 1_000, 0), ("wg0", 4, UInt64(n) * 500, 0)]) })
        let pipeline = Pipeline(
            source: source, configuration: PipelineConfiguration(interval: 1, sampleLimit: 4),
            clock: PipelineClock(monotonic: { 0 }, wall: { 1_796_040_000 }))
        let seen = Seen()
        pipeline.add(sink: seen)
        return (pipeline, seen)
    }

    func reloader(_ said: CapturedLog, webConfig: WebConfig? = nil) -> ServeReloader {
        ServeReloader(path: "/etc/ifmeter/ifmeter.yml", pushing: RemoteWriteSet(), webConfig: webConfig, log: said.log, publishRoutes: { _ in })
    }

    @Test func aTypedReloadIsAppliedAndSaidInOneLine() {
        let said = CapturedLog(prefix: "ifmeter serve: ", every: 10, burst: 10)
        let (pipeline, seen) = running()
        let reloader = reloader(said, webConfig: WebConfig(tls: nil, users: [:]))
        pipeline.step()
        pipeline.step()
        let before = seen.names

        var reload = ServeReload()
        reload.filter = InterfaceFilter(include: ["eth*"])
        reload.kindOverrides = KindOverrides([KindOverrides.Rule(pattern: "wg*", kind: .ethernet)])
        var started = 0
        reload.remoteWrite = (
            start: { _ throws(ServeReload.Failure) in
                started += 1
                return nil
            }, urls: []
        )
        // Without a state file, retention has nothing to apply to.
        reload.retention = (Retention(hours: 48, days: 400), "keep-hours 48, keep-days 400")
        reload.webConfig = WebConfig(tls: nil, users: ["alice": "$2y$04$abcdefghijklmnopqrstuu5m1o/B3Vm6JNT0YdpBVq0kyW9wW9Tku"])
        reload.restart = ["--listen"]
        let applied = reloader.apply(reload, to: pipeline)
        pipeline.step()
        pipeline.finish()

        #expect(applied == ServeReloader.Applied(retention: false, webConfig: true))
        #expect(started == 1)
        // From the next sample, only what the new filter takes.
        #expect(before.last == ["eth0", "wg0"], "\(before)")
        #expect(seen.names.count == before.count + 1 && seen.names.last == ["eth0"], "\(seen.names)")
        #expect(
            said.lines == [
                "ifmeter serve: reloaded /etc/ifmeter/ifmeter.yml: kinds (--kind-of); filters; remote write stopped; basic auth users alice applied; --listen changed but need a restart (systemctl restart ifmeter-serve): the running values stay"
            ])
    }

    @Test func whatCannotBeAppliedIsSaidAndTheRunningValuesStay() {
        let said = CapturedLog(prefix: "ifmeter serve: ", every: 10, burst: 10)
        let (pipeline, _) = running()
        let reloader = reloader(said)
        reloader.failed("/etc/ifmeter/ifmeter.yml:3:1: unknown key 'lisen'")

        var reload = ServeReload()
        reload.remoteWrite = (start: { _ throws(ServeReload.Failure) in throw ServeReload.Failure("the queue folder is gone") }, urls: ["http://x/"])
        reload.webConfig = WebConfig(tls: HTTPTLSSettings(certificatePEM: "cert", keyPEM: "key"), users: [:])
        let applied = reloader.apply(reload, to: pipeline)
        #expect(applied == ServeReloader.Applied(retention: false, webConfig: false))
        #expect(
            said.lines == [
                "ifmeter serve: reloading /etc/ifmeter/ifmeter.yml after SIGHUP failed: /etc/ifmeter/ifmeter.yml:3:1: unknown key 'lisen'; the running settings stay",
                "ifmeter serve: remote write could not start after SIGHUP: the queue folder is gone; nothing is pushed until it can",
                "ifmeter serve: reloaded /etc/ifmeter/ifmeter.yml: nothing to apply; --web-config's tls_server_config (libmicrohttpd reads certificates and TLS settings only at start) changed but need a restart (systemctl restart ifmeter-serve): the running values stay",
            ])
    }

    /// Each place of the reload says at most 10 lines in 10 s; the next
    /// says how many it held back. Every reload is still applied.
    @Test func aFloodOfReloadsIsAppliedButSaidTenTimesPerPlace() {
        let said = CapturedLog(prefix: "ifmeter serve: ", every: 10, burst: 10)
        let (pipeline, _) = running()
        let reloader = reloader(said)
        var applied = 0
        for n in 0..<25 {
            var reload = ServeReload()
            reload.remoteWrite = (
                start: { _ throws(ServeReload.Failure) in
                    applied += 1
                    return nil
                }, urls: []
            )
            reload.restart = ["--listen \(n)"]
            reloader.apply(reload, to: pipeline)
        }
        #expect(applied == 25)
        #expect(said.lines.count == 10)
        said.advance(10)
        reloader.apply(ServeReload(), to: pipeline)
        #expect(
            said.lines.last
                == "ifmeter serve: reloaded /etc/ifmeter/ifmeter.yml: nothing to apply (and 15 more messages like it in the last 10 s)")
    }
}
