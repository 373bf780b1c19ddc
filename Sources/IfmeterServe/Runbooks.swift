/// The alerts' runbook: what each alert of `dist/prometheus/ifmeter-rules.yml`
/// means and what to do. This text is its one source: serve answers it
/// as a page at `/runbooks` (each alert's heading an anchor, the fragment
/// its `runbook_url` names), `ifmeter --generate-runbook` prints it, and
/// docs/alerts.md is that output (`RunbookTests` keeps them equal; after
/// an edit here, `ifmeter --generate-runbook > docs/alerts.md`).
package enum Runbooks {
    package static let markdown = #"""
        # Alerts: what each one means and what to do

        Back to the [README](../README.md); the rules are in
        [`dist/prometheus/ifmeter-rules.yml`](../dist/prometheus/ifmeter-rules.yml)
        ([metrics.md](metrics.md#rules-and-alerts) says how to load them).

        Every alert carries `runbook_url`, a link to its section of this page as
        the alerting host's own serve answers it:
        `http://INSTANCE:9874/runbooks#ALERT`, where INSTANCE is the host part of
        the alert's `instance` label (`{{ stripPort $labels.instance }}`: a
        pushing host's name, or a scraped target's host without its port) and
        9874 serve's default port (an instance that is an IPv6 address loses
        its brackets there: such a fleet sets the base itself, below). serve
        answers `/runbooks` (this page as HTML, each alert's heading an
        anchor) on every address it listens on, behind
        the same Host check and basic auth as `/metrics`. The link opens where an
        on-call person's browser reaches that serve: the packaged service listens
        on 127.0.0.1 only, so give it `--listen` on an address they reach (a
        one-label name such as `gw1` and the machine's own names pass the
        Host check; another name needs `--allow-host`), or point the rules at a page you
        publish: set the base once, when installing, with
        `make install RUNBOOK_BASE=https://wiki.example/ifmeter-alerts` (the rules
        and their promtool suite get `https://wiki.example/ifmeter-alerts#ALERT`),
        or in a copy of the rules with
        `sed -i 's|\(runbook_url: "\)[^"#]*#|\1https://wiki.example/ifmeter-alerts#|' ifmeter-rules.yml`.
        A serve on another port is the same edit. This page is
        `ifmeter --generate-runbook`, and `make install` puts it in
        `share/ifmeter/alerts.md` too.

        Every alert names its host by `instance` (and `job`): Prometheus sets them
        on scraped series, and `serve --remote-write` sets them on what it pushes
        (`job="ifmeter"`, `instance` the host's name, unless its config or
        `--external-label` says otherwise), so an alert pages the host it is about,
        whichever way its figures arrive. The figures are estimates from interface
        counters: protocol overhead included, not per application.

        ## IfmeterPlanQuotaNearlyUsed

        **What it means.** A plan (`ifmeter plan set IF --quota SIZE`) has used 80%
        or more of its quota in the current billing cycle, but not all of it.

        **Confirm on the host.** `ifmeter usage --check` says OVER, UNDER or
        UNKNOWN for each plan; `ifmeter usage --cycle --include IF` shows the cycle
        day by day and projects its end.

        **What to do.** Slow down or move traffic off the link before the quota is
        gone, or buy more. When `ifmeter_plan_used_lower_bound` is 1, the real use
        is higher than the figure.

        ## IfmeterPlanQuotaProjectedOver

        **What it means.** A plan's use is under 80% of its quota, but at its
        average rate so far this cycle it would pass the quota by the cycle's end
        (`ifmeter_plan_projected_bytes`, an estimate: the use so far times the
        cycle's length over the time elapsed). It waits an hour: a burst early in
        a cycle projects high for a while. Once use reaches 80%,
        IfmeterPlanQuotaNearlyUsed takes over.

        **Confirm on the host.** `ifmeter usage --check` exits 5 and prints a
        `PROJECTED OVER` line; `ifmeter usage --cycle` shows the projection.

        **What to do.** Slow the traffic down or move it off this link, or buy
        more before it runs out.

        ## IfmeterPlanQuotaUsed

        **What it means.** A plan has used all of its quota this cycle: more
        traffic may be billed extra, throttled or cut off.

        **Confirm on the host.** `ifmeter usage --check` exits 3 and says OVER.

        **What to do.** Stop what is not essential on the link, or top the plan
        up. If the quota itself changed, set it again with `ifmeter plan set IF
        --quota SIZE`.

        ## IfmeterInterfaceTotalsLowerBound

        **What it means.** ifmeter could not see some of an interface's traffic (a
        counter reset, a recreation without a deletion event, a link notification
        overrun, a namespace it could not read): its totals, and a plan's use that
        counts them, are at least what they say.

        **Confirm on the host.** `ifmeter list` marks the interface `≥`;
        `ifmeter_interface_resets_total`, `_recreations_total` and
        `ifmeter_link_event_overruns_total` say which cause.

        **What to do.** Nothing is wrong with the rates after the loss. Find what
        resets or recreates the interface if it repeats; the mark stays until serve
        restarts.

        ## IfmeterSampleErrors

        **What it means.** Sampling has failed in every 5 minutes for 15 minutes:
        the figures are not being updated.

        **Confirm on the host.** `journalctl -u ifmeter-serve` has the error;
        `ifmeter sample` run by hand shows whether netlink answers.

        **What to do.** Check that the service still has what it needs (the
        namespaces it samples, netlink); restart it once the cause is fixed.

        ## IfmeterSampleOverrunning

        **What it means.** A sample takes 80% or more of the sampling interval on
        average: samples run late or are skipped.

        **Confirm on the host.** `ifmeter_last_sample_duration_seconds` on the
        host's /metrics; `top` for what loads the machine.

        **What to do.** Give serve a longer `--interval`, sample fewer interfaces or
        namespaces (filters, `--netns` instead of `--all-netns`), or find the load.

        ## IfmeterSamplesStale

        **What it means.** serve answers scrapes, but its last sample is older
        than 3 intervals and a minute: every figure is frozen.

        **Confirm on the host.** `curl -s localhost:9874/metrics | grep
        last_sample_timestamp` against `date +%s`.

        **What to do.** Read serve's log and restart it. If sampling is fine, the
        host's clock is more than a minute off Prometheus's: fix NTP.

        ## IfmeterStateNotSaved

        **What it means.** Every save of the state file has failed for 5 minutes
        and more: a full disk, a deleted folder, an I/O error. serve keeps
        counting and retries every 30 s, but what it counted since the last good
        save is only in memory: a reboot or a power cut loses it, and `usage`
        lacks it until a save works.

        **Confirm on the host.** serve's log names the file and the cause once
        (`saving state to ... failed: ...`); `ifmeter_state_save_failures_total`
        counts the tries, `ifmeter_state_last_save_timestamp_seconds` is the last
        good one.

        **What to do.** Free the disk (`df` on the state folder) or restore the
        folder (owned by ifmeter's user, not writable by others). The next try
        says `works again`. A state file deleted or replaced under serve is
        written anew at its path with everything counted (what was put there is
        moved to `PATH.replaced-TIME`). A service stopped while the save fails
        exits 1 and says what the file lacks.

        ## IfmeterHostSilent

        **What it means.** Nothing has come from the host for 5 minutes and more:
        no scrape answered and no push arrived. The host, its link or the service
        is down. The alert lasts for as long as the host is silent (the recording
        rule `job_instance:ifmeter_last_seen:timestamp_seconds` keeps each host's
        last time).

        **Confirm on the host.** `systemctl status ifmeter-serve`; from
        Prometheus, `up{instance="HOST"}` for a scraped host. A pushing host's log
        says whether its pushes fail (then `IfmeterRemoteWriteSilent` fires too,
        where the host is also scraped).

        **What to do.** Bring the host, its link or the service back. A pushing
        host's samples wait in its queue on disk and arrive with their own times.
        A host retired on purpose keeps this alert firing until its last-seen
        series is deleted: `curl -X POST -g
        'http://PROMETHEUS:9090/api/v1/admin/tsdb/delete_series?match[]=job_instance:ifmeter_last_seen:timestamp_seconds{instance="HOST"}'`
        (the admin API must be enabled), or silence it in Alertmanager.

        ## IfmeterLinkEventOverruns

        **What it means.** Link notifications overflowed ifmeter's socket buffer in
        the last hour (a burst of link changes, such as many containers starting);
        ifmeter resynchronized, and interfaces that went away meanwhile got
        lower-bound totals.

        **Confirm on the host.** `ifmeter_link_event_overruns_total` on /metrics.

        **What to do.** Nothing for a one-off. If it repeats, find what creates and
        deletes links so fast.

        ## IfmeterReceiveErrors

        **What it means.** More than 1% of the packets an interface received were
        errors, for 15 minutes: a bad cable, a duplex mismatch, interference on a
        radio link, a failing NIC.

        **Confirm on the host.** `ip -s -s link show IF` splits the errors (CRC,
        frame, FIFO, missed); `ethtool -S IF` shows the driver's own counters.

        **What to do.** Replace or reseat the cable, check both ends' speed and
        duplex, move the radio, or replace the NIC.

        ## IfmeterTransmitErrors

        **What it means.** More than 1% of the packets an interface sent failed,
        for 15 minutes: carrier lost while sending, a failing NIC or driver.

        **Confirm on the host.** `ip -s -s link show IF` (aborted, carrier, FIFO,
        heartbeat, window errors); `journalctl -k` for the driver's messages.

        **What to do.** Check the link and its peer; update or replace the driver
        or the NIC.

        ## IfmeterReceiveDrops

        **What it means.** The host dropped more than 1% of what an interface
        received, for 15 minutes: it does not keep up (full receive rings or
        backlog, a busy CPU), or it throws away packets it has no use for (an
        unknown protocol, a VLAN it does not carry).

        **Confirm on the host.** `ip -s -s link show IF`; `/proc/net/softnet_stat`
        (its second column counts backlog drops); `ethtool -g IF` for the ring
        sizes.

        **What to do.** Raise the ring sizes (`ethtool -G`) or
        `net.core.netdev_max_backlog`, spread interrupts over more cores, or stop
        what floods the link.

        ## IfmeterTransmitDrops

        **What it means.** More than 1% of an interface's outgoing packets were
        dropped, for 15 minutes: a queue discipline or a full transmit queue
        throws traffic away (shaping, a link slower than what is sent to it).

        **Confirm on the host.** `tc -s qdisc show dev IF` shows which queue drops.

        **What to do.** Send less, shape it earlier, or give the link more room.

        ## IfmeterInterfaceFlapping

        **What it means.** An interface's carrier came and went more than 4 times
        in 10 minutes: a loose cable, a failing port or transceiver, a modem losing
        coverage, or a peer that keeps restarting. Each change interrupts traffic.

        **Confirm on the host.** `journalctl -k` shows the link going up and down;
        `ifmeter_interface_carrier_changes_total` counts them.

        **What to do.** Reseat or replace the cable or transceiver, check the peer
        and, for a modem, its signal.

        ## IfmeterRouteOutsideTunnel

        **What it means.** The kernel routes packets to a probe out of an interface
        that is not a tunnel, while the host has a tunnel (or had one within the
        hour): ordinary traffic bypasses the VPN. A probe with no route does not
        fire.

        **Confirm on the host.** `ifmeter route --probe PROBE` and `ip route get
        PROBE` show where it leaves; `ip rule` the policy rules.

        **What to do.** Bring the tunnel back up or fix the routes and policy
        rules, and check the kill switch.

        ## IfmeterTrafficAroundTunnel

        **What it means.** More than 10 kB/s leave a tunnel's underlay beside the
        tunnel, for 10 minutes. Some is expected (the local network, the tunnel's
        own handshakes); more points to a leak, a split route or a wrong
        `--overhead`. Uncertain estimates do not fire.

        **Confirm on the host.** `ifmeter route --over 10s` shows where it goes.

        **What to do.** Find the traffic (the route check, `ss -tunp`), and fix
        the route or the overhead.

        ## IfmeterRemoteWriteDropping

        **What it means.** Samples a host pushed were dropped in the last 15
        minutes, for the reason in the `reason` label: `queue_full` (an outage
        outlasted the queue on disk), `rejected` (the receiver answered 4xx),
        `write_failed` (the queue's disk could not take a push) or `corrupt` (the
        queue's files were damaged). The interface totals are not lost: the next
        push carries them; only points in between are.

        **Confirm on the host.** serve's log says which receiver and why;
        `ifmeter_remote_write_queue_bytes` how full the queue is.

        **What to do.** `queue_full`: a larger `--remote-write-queue-max` or a
        longer `--remote-write-interval`. `rejected`: fix the credentials, URL or
        limit the log names. `write_failed`: free the disk. `corrupt`: look at the
        files serve set aside (`*.corrupt-*` in the queue folder).

        ## IfmeterRemoteWriteSilent

        **What it means.** A receiver has accepted no request from the host for 15
        minutes and more: the host is down, its link is, or every push fails. The
        alert lasts as long as the pushes fail.

        **Confirm on the host.** serve's log says why (a cellular gateway out of
        coverage is the usual case).

        **What to do.** Fix the link or the receiver. The samples wait in the queue
        on disk and arrive with their own times, up to the queue's bound.
        """#

    /// The page's body, rendered once.
    static let body = MarkdownHTML.render(markdown)

    /// `/runbooks`: the runbook as a page of this server's own (the
    /// dashboard's stylesheet; no script).
    static func page(version: String) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="color-scheme" content="light dark">
        <title>ifmeter: alerts</title>
        <link rel="stylesheet" href="/dashboard.css">
        </head><body>
        <header><p><a href="/">ifmeter</a> <span class="version">\(version)</span></p></header>
        <main class="runbook">
        \(body)</main>
        </body></html>

        """
    }
}
