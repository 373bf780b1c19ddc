import IfmeterCore
import IfmeterPipeline
import IfmeterRemoteWrite
import IfmeterRoute
import IfmeterStore
import IfmeterSystem

/// serve's remote write: the writers and the feed that pushes to them,
/// replaced whole when a reload changes them.
package final class RemoteWriteSet {
    package var writers: [RemoteWriter] = []
    package var feed: RemoteWriteFeed?

    package init() {}

    /// Ends every series (its stale marker), lets what is in memory go out
    /// for up to 2 s, then stops; the queues keep the rest on disk.
    package func stop(ending pipeline: Pipeline? = nil) {
        if let pipeline, let feed {
            feed.finished()
            pipeline.remove(feed)
        }
        for writer in writers { writer.drain(timeout: 2) }
        for writer in writers { writer.stop() }
        writers = []
        feed = nil
    }
}

/// What a reload of serve's settings changes, typed: the command reads its
/// file and command line again and says here what differs; nil (or false)
/// is "unchanged". `ServeReloader` applies it.
package struct ServeReload {
    /// Why something of a reload could not be done, in words for the log.
    package struct Failure: Error {
        package let words: String
        package init(_ words: String) { self.words = words }
    }

    /// Starts remote write with the fresh settings (after the running one
    /// stopped): its writers and feed, nil when none is configured now.
    package typealias RemoteWriteStarter = (Pipeline) throws(Failure) -> (writers: [RemoteWriter], feed: RemoteWriteFeed)?

    /// The interface filter (`--include`, `--exclude`, `--kind`).
    package var filter: InterfaceFilter?
    /// `--kind-of`: every link classified again at the next sample.
    package var kindOverrides: KindOverrides?
    /// Changed remote write settings: the start and the URLs (shown
    /// without credentials) it pushes to; no URLs stops it.
    package var remoteWrite: (start: RemoteWriteStarter, urls: [String])?
    /// Whether the probes or tunnel options changed, and the new ones
    /// (nil: no probes any more).
    package var routesChanged = false
    package var routes: RouteSettings?
    /// Changed `--keep-hours`/`--keep-days`, and how the line says them.
    package var retention: (retention: Retention, words: String)?
    /// The web config read again (nil: none); its users apply, its TLS may not change.
    package var webConfig: WebConfig?
    /// The changed settings a reload cannot apply (said to need a restart).
    package var restart: Set<String> = []

    package init() {}
}

/// SIGHUP under `--config`: what changed applies to the running serve: a
/// changed filter or kinds from the next sample, changed remote write
/// settings restart the pushing (queues on disk lose nothing), changed
/// probes and tunnel options rebuild the route feed, changed retention
/// applies at a save made at once, and changed basic auth users from the
/// next request; any other change (the web config's TLS settings and
/// certificates among them) is said to need a restart, and the running
/// value stays. Each reload is said in one line, at most 10 per 10 s from
/// each place that says one (a flood of SIGHUPs is applied, every one,
/// but not said 1,000 times a second).
package final class ServeReloader {
    /// What a reload took, for the command to count as running.
    package struct Applied: Sendable, Equatable {
        package var retention = false
        package var webConfig = false
    }

    let path: String
    let pushing: RemoteWriteSet
    let log: Log
    /// Where route figures go (nil clears them).
    let publishRoutes: @Sendable (RouteExposition?) -> Void
    /// The web config running: its users may change, its TLS may not.
    private var webConfig: WebConfig?
    /// The server whose basic auth a reload replaces (nil: push only).
    package var server: HTTPServer?
    #if os(Linux)
    /// The route feed of `--probe` (nil without probes).
    package var routeFeed: RouteFeed?
    #endif

    /// - Parameters:
    ///   - path: the config file, as the lines name it.
    ///   - log: the reload's lines (serve's gives a burst of 10 per 10 s).
    package init(
        path: String, pushing: RemoteWriteSet, webConfig: WebConfig?, log: Log, publishRoutes: @escaping @Sendable (RouteExposition?) -> Void
    ) {
        self.path = path
        self.pushing = pushing
        self.webConfig = webConfig
        self.log = log
        self.publishRoutes = publishRoutes
    }

    /// The file could not be read again: said, and nothing changes.
    package func failed(_ words: String) {
        log.warning("reloading \(path) after SIGHUP failed: \(words); the running settings stay")
    }

    @discardableResult
    package func apply(_ reload: ServeReload, to pipeline: Pipeline) -> Applied {
        var applied: [String] = []
        var took = Applied()
        var restart = reload.restart
        if let overrides = reload.kindOverrides {
            // The source takes them at its next reading, before the filter
            // below judges kinds.
            pipeline.setKindOverrides(overrides)
            applied.append("kinds (--kind-of)")
        }
        if let filter = reload.filter {
            pipeline.setFilter(filter)
            applied.append("filters")
        }
        if let remoteWrite = reload.remoteWrite {
            pushing.stop(ending: pipeline)
            do throws(ServeReload.Failure) {
                if let started = try remoteWrite.start(pipeline) {
                    pushing.writers = started.writers
                    pushing.feed = started.feed
                }
                applied.append(remoteWrite.urls.isEmpty ? "remote write stopped" : "remote write to " + remoteWrite.urls.joined(separator: ", "))
            } catch {
                log.warning("remote write could not start after SIGHUP: \(error.words); nothing is pushed until it can")
            }
        }
        #if os(Linux)
        if reload.routesChanged {
            if let old = routeFeed { pipeline.remove(old) }
            routeFeed = nil
            publishRoutes(nil)
            do throws(SystemError) {
                if let routes = reload.routes {
                    let feed = try RouteFeed(options: routes, persistence: pipeline.persistence) { [publishRoutes] in publishRoutes($0) }
                    pipeline.add(enricher: feed)
                    routeFeed = feed
                }
                applied.append(reload.routes.map { "probes " + $0.probes.map(\.text).joined(separator: ", ") } ?? "probes removed")
            } catch {
                log.warning("the route feed could not start after SIGHUP: \(error); no route figures until it can")
            }
        }
        #endif
        if let retention = reload.retention, let persistence = pipeline.persistence {
            persistence.setRetention(retention.retention)
            // At once: what the new keeps no longer keep is rolled now.
            pipeline.saveNow()
            applied.append("retention (\(retention.words))")
            took.retention = true
        }
        if applyWebConfig(reload.webConfig, applied: &applied) {
            took.webConfig = true
        } else {
            restart.insert("--web-config's tls_server_config (libmicrohttpd reads certificates and TLS settings only at start)")
        }
        var line = "reloaded \(path): " + (applied.isEmpty ? "nothing to apply" : applied.joined(separator: "; ") + " applied")
        if !restart.isEmpty {
            line +=
                "; \(restart.sorted().joined(separator: ", ")) changed but need a restart (systemctl restart ifmeter-serve): the running values stay"
        }
        log.info(line)
        return took
    }

    /// The web config read again: changed users apply from the next
    /// request; changed TLS settings (certificates included) need a
    /// restart, libmicrohttpd holding them since it started.
    /// Returns false when the TLS settings changed (they stay as running).
    private func applyWebConfig(_ fresh: WebConfig?, applied: inout [String]) -> Bool {
        let sameTLS = fresh?.tls == webConfig?.tls
        let users = fresh?.users ?? [:]
        guard users != (webConfig?.users ?? [:]) else { return sameTLS }
        if let server {
            do throws(SystemError) {
                server.setAuthenticator(users.isEmpty ? nil : try BasicAuthenticator(users: users))
            } catch {
                log.warning("basic auth could not be set up after SIGHUP: \(error.description); the running users stay")
                return sameTLS
            }
        }
        // The running TLS with the new users.
        if var current = webConfig ?? fresh {
            current.tls = webConfig?.tls
            current.users = users
            webConfig = current
        }
        applied.append(users.isEmpty ? "basic auth removed" : "basic auth users \(users.keys.sorted().joined(separator: ", "))")
        return sameTLS
    }
}
