/// serve's dashboard: one page, its stylesheet and its script, all served
/// from the binary (no CDN, font or script from elsewhere: it works
/// offline, and the Content-Security-Policy allows only these). Every name
/// and label goes into the page as text (`textContent`), never as markup.
/// The page reads `/api/v1/interfaces` once, then follows
/// `/api/v1/events` (a sample per event), and an interface's page reads
/// `/api/v1/usage`. The stream is read with `fetch`, not EventSource
/// (which gives up for good on a 503 and hides its Retry-After): after any
/// failure, a refusal, a lost connection or an end, the page tries again
/// with backoff (the stream's `retry:` doubled at each failure in a row,
/// up to 10 s, plus up to a tenth more at random), and never sooner than
/// a refusal's Retry-After; a sample read starts the backoff again.
enum DashboardAssets {
    /// No script, style, image or connection but this server's own; no
    /// frame, base or form target.
    static let contentSecurityPolicy =
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    /// `usage`: whether serve keeps a state file (`/api/v1/usage` answers).
    static func page(version: String, caveat: String, usage: Bool) -> String {
        """
        <!DOCTYPE html>
        <html lang="en"><head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <meta name="color-scheme" content="light dark">
        <title>ifmeter</title>
        <link rel="stylesheet" href="/dashboard.css">
        <script src="/dashboard.js" defer></script>
        </head><body data-usage="\(usage ? "yes" : "no")">
        <header>
        <h1><a href="#" id="home">ifmeter</a> <span class="version">\(version)</span></h1>
        <p id="status" role="status" aria-live="polite">Connecting…</p>
        <button id="units" type="button" aria-pressed="false" title="Rates in bits per second (as ifmeter --bits) instead of bytes">bit/s</button>
        </header>
        <main id="main">
        <section id="overview" aria-labelledby="overview-title">
        <h2 id="overview-title">Interfaces</h2>
        <div class="table-wrap"><table id="interfaces">
        <thead><tr><th scope="col">Interface</th><th scope="col">Kind</th><th scope="col" class="num">Receive</th><th scope="col" class="num">Send</th><th scope="col" class="num">Received</th><th scope="col" class="num">Sent</th><th scope="col">Last minutes</th></tr></thead>
        <tbody></tbody>
        </table></div>
        <p class="legend"><span class="rx">■</span> received <span class="tx">■</span> sent · <span id="since-all">Received and Sent continue the kernel's counters from when serve first saw each interface</span> · ≥ a lower bound (traffic was lost to a reset) · ~ a 32-bit wrap corrected</p>
        </section>
        <section id="detail" hidden aria-labelledby="detail-title">
        <h2 id="detail-title"></h2>
        <dl id="facts"></dl>
        <div id="graph" class="graph" role="img" aria-label="Rates over the last minutes"></div>
        <div id="route"></div>
        <div id="cycle"></div>
        <div id="tables"></div>
        </section>
        </main>
        <footer>
        <p id="caveat">\(caveat)</p>
        <p>Prometheus: <a href="/metrics">/metrics</a> · JSON: <a href="/api/v1/interfaces">/api/v1/interfaces</a>, <a href="/api/v1/usage">/api/v1/usage</a></p>
        </footer>
        </body></html>

        """
    }

    static let stylesheet = """
        :root { color-scheme: light dark; --fg: #1d1f21; --bg: #ffffff; --muted: #5a5f66; --line: #d8dbe0; --rx: #2f6fd0; --tx: #d9731f; --warn: #b3261e; }
        @media (prefers-color-scheme: dark) {
          :root { --fg: #e6e6e6; --bg: #121417; --muted: #a4a9b1; --line: #30343a; --rx: #6ea2ff; --tx: #ffa352; --warn: #ff8a80; }
        }
        * { box-sizing: border-box; }
        html, body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
        body { max-width: 1200px; margin: 0 auto; padding: 0 12px; overflow-wrap: anywhere; }
        header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 4px 16px; }
        h1 { font-size: 1.4rem; margin: 12px 0 4px; }
        h1 a { color: inherit; text-decoration: none; }
        h2 { font-size: 1.15rem; margin: 16px 0 8px; }
        h3 { font-size: 1rem; margin: 14px 0 6px; }
        .version, #status, .legend, footer { color: var(--muted); font-size: 0.85rem; }
        a { color: var(--rx); }
        button { font: inherit; color: inherit; background: transparent; border: 1px solid var(--line); border-radius: 4px; padding: 1px 8px; cursor: pointer; }
        button[aria-pressed="true"] { background: var(--line); font-weight: bold; }
        a:focus-visible, button:focus-visible { outline: 3px solid var(--tx); outline-offset: 2px; }
        h2[tabindex="-1"]:focus { outline: none; }
        .table-wrap { max-width: 100%; }
        table { border-collapse: collapse; width: 100%; table-layout: auto; }
        th, td { padding: 5px 6px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: middle; }
        th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
        td.name { word-break: break-all; }
        .rx { color: var(--rx); } .tx { color: var(--tx); }
        .gone { color: var(--muted); }
        .mark { color: var(--warn); font-weight: bold; }
        .evidence { color: var(--muted); font-size: 0.8rem; display: block; }
        img { max-width: 100%; height: auto; }
        svg.spark { width: 120px; height: 26px; display: block; }
        .graph svg { width: 100%; height: 160px; display: block; }
        .graph line.axis { stroke: var(--line); }
        .graph text, svg text { fill: var(--muted); font-size: 11px; }
        polyline.rx { stroke: var(--rx); fill: none; stroke-width: 1.5; }
        polyline.tx { stroke: var(--tx); fill: none; stroke-width: 1.5; }
        rect.rx { fill: var(--rx); } rect.tx { fill: var(--tx); }
        line.limit { stroke: var(--warn); stroke-dasharray: 4 3; }
        dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
        dt { color: var(--muted); } dd { margin: 0; }
        .meter { height: 12px; background: var(--line); border-radius: 6px; overflow: hidden; max-width: 420px; }
        .meter > span { display: block; height: 100%; background: var(--rx); }
        .meter.over > span { background: var(--warn); }
        @media (max-width: 640px) {
          thead { display: none; }
          table, tbody, tr, td { display: block; width: 100%; }
          #interfaces tr { border-bottom: 1px solid var(--line); padding: 6px 0; display: grid; grid-template-columns: 1fr 1fr; gap: 0 8px; }
          #interfaces td { border: 0; padding: 1px 0; }
          #interfaces td.name, #interfaces td.spark { grid-column: 1 / -1; }
          #interfaces td.num { text-align: left; }
          #interfaces td[data-label]::before { content: attr(data-label) ": "; color: var(--muted); }
          .usage td, .usage th { padding: 3px 4px; font-size: 0.85rem; }
          .usage thead { display: table-header-group; } .usage table { display: table; } .usage tbody { display: table-row-group; }
          .usage tr { display: table-row; } .usage td, .usage th { display: table-cell; width: auto; }
        }

        """

    static let script = #"""
        "use strict";
        (function () {
          const state = { rows: new Map(), order: [], doc: null, selected: null, generation: null };
          const el = (tag, attrs, text) => {
            const node = document.createElement(tag);
            for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
            if (text !== undefined) node.textContent = text;
            return node;
          };
          const svgNS = "http://www.w3.org/2000/svg";
          const svgEl = (tag, attrs) => {
            const node = document.createElementNS(svgNS, tag);
            for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
            return node;
          };
          // The command line's figures, alike: sizes in IEC units with
          // three significant digits (Units.bytes), rates in bytes per
          // second unless bits are asked for (--bits; here the toggle,
          // remembered by the browser).
          const units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
          const significant = (v) => v < 9.995 ? v.toFixed(2) : v < 99.95 ? v.toFixed(1) : v.toFixed(0);
          function bytes(n) {
            let v = Number(n), u = 0;
            while (v >= 1024 && u < units.length - 1) { v /= 1024; u += 1; }
            return (u === 0 ? String(Math.round(v)) : significant(v)) + " " + units[u];
          }
          let bits = false;
          try { bits = localStorage.getItem("ifmeter.bits") === "1"; } catch (error) { bits = false; }
          function rate(n) {
            if (!bits) return bytes(n) + "/s";
            let v = Number(n) * 8, u = 0;
            const r = ["bit/s", "kbit/s", "Mbit/s", "Gbit/s", "Tbit/s", "Pbit/s", "Ebit/s"];
            while (v >= 1000 && u < r.length - 1) { v /= 1000; u += 1; }
            return (u === 0 ? String(Math.round(v)) : significant(v)) + " " + r[u];
          }
          // Every time in one form, in this browser's local time: 2026-12-08
          // 19:40 (seconds where a sample's time is meant). The JSON gives
          // Unix times and RFC 3339 with their offsets.
          const pad = (n) => String(n).padStart(2, "0");
          function instant(v) { return typeof v === "number" || /^[0-9.]+$/.test(String(v)) ? new Date(Number(v) * 1000) : new Date(String(v)); }
          function when(v, seconds) {
            const d = instant(v);
            if (isNaN(d.getTime())) return String(v);
            return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + pad(d.getHours()) + ":" + pad(d.getMinutes()) + (seconds ? ":" + pad(d.getSeconds()) : "");
          }
          const clock = (v) => when(v, true).slice(11);
          // A period as the tables name it: days, months, years and cycles
          // by their label (serve's local calendar); hours and five minutes
          // by their start.
          const periodName = (p, granularity) => granularity === "hour" || granularity === "fiveminutes" ? when(p.start) : p.period;
          // Since when a total runs, in words.
          // The totals continue the kernel's counters from when serve
          // first saw the interface: said so, not as traffic since then.
          const sinceText = (i) => "the kernel's count when serve first saw it" + (i.since != null ? " (" + when(i.since) + ")" : "") + ", plus all since";
          const nameOf = (i) => i.alias ? i.alias + " (" + keyOf(i) + ")" : keyOf(i);
          const mark = (quality) => quality === "lower-bound" ? "≥ " : quality === "wrap-corrected" ? "~ " : "";
          function keyOf(i) { return i.netns ? i.netns + "/" + i.name : i.name; }
          function status(text) { document.getElementById("status").textContent = text; }

          function spark(history, width, height, big) {
            const svg = svgEl("svg", { viewBox: "0 0 " + width + " " + height, preserveAspectRatio: "none", class: big ? "" : "spark", "aria-hidden": "true" });
            const peak = Math.max(1, ...history.map((h) => Math.max(h[0], h[1])));
            const n = Math.max(1, history.length - 1);
            for (const [index, cls] of [[0, "rx"], [1, "tx"]]) {
              const points = history.map((h, i) => ((i / n) * width).toFixed(1) + "," + (height - 1 - (h[index] / peak) * (height - 3)).toFixed(1));
              svg.appendChild(svgEl("polyline", { class: cls, points: points.join(" ") }));
            }
            if (big) {
              svg.appendChild(svgEl("line", { class: "axis", x1: 0, y1: height - 1, x2: width, y2: height - 1 }));
              const label = svgEl("text", { x: 4, y: 12 });
              label.textContent = "peak " + rate(peak);
              svg.appendChild(label);
            }
            return svg;
          }

          function rowFor(i) {
            const key = keyOf(i);
            let entry = state.rows.get(key);
            if (!entry) {
              const tr = el("tr", { "data-key": key });
              const name = el("td", { class: "name" });
              const link = el("a", { href: "#i=" + encodeURIComponent(key) });
              name.appendChild(link);
              const kind = el("td", { "data-label": "Kind" });
              const cells = ["rx-rate", "tx-rate", "rx-total", "tx-total"].map((c) => el("td", { class: "num " + c, "data-label": { "rx-rate": "Receive", "tx-rate": "Send", "rx-total": "Received", "tx-total": "Sent" }[c] }));
              const sparkCell = el("td", { class: "spark" });
              tr.append(name, kind, ...cells, sparkCell);
              entry = { tr, link, kind, cells, sparkCell, history: [] };
              state.rows.set(key, entry);
            }
            return entry;
          }

          // A sample's event holds only the interfaces that moved since the
          // sample `since`; a page whose figures are of another reads them whole.
          async function onEvent(doc) {
            if (doc.partial && String(doc.since) !== String(state.generation)) {
              try { update(await getJSON("/api/v1/interfaces"), false); } catch (error) { status("Cannot read /api/v1/interfaces: " + error.message); }
              return;
            }
            update(doc, false);
          }

          function update(doc, initial) {
            state.doc = doc;
            state.generation = doc.generation;
            const seen = new Set();
            for (const i of doc.interfaces) {
              const key = keyOf(i);
              seen.add(key);
              const entry = rowFor(i);
              entry.data = i;
              if (initial && i.history) entry.history = i.history.slice();
              else { entry.history.push([i.rx_bytes_per_second, i.tx_bytes_per_second]); if (entry.history.length > 60) entry.history.shift(); }
              entry.link.textContent = nameOf(i);
              entry.tr.classList.toggle("gone", !i.present);
              entry.kind.textContent = i.kind;
              entry.kind.title = "evidence: " + i.evidence;
              entry.cells[0].textContent = rate(i.rx_bytes_per_second);
              entry.cells[1].textContent = rate(i.tx_bytes_per_second);
              entry.cells[2].textContent = mark(i.quality) + bytes(i.rx_bytes);
              entry.cells[3].textContent = mark(i.quality) + bytes(i.tx_bytes);
              entry.cells[2].title = entry.cells[3].title = sinceText(i);
              for (const c of entry.cells) { c.dataset.bytes = ""; }
              entry.cells[0].dataset.bytes = i.rx_bytes_per_second;
              entry.cells[1].dataset.bytes = i.tx_bytes_per_second;
              entry.cells[2].dataset.bytes = i.rx_bytes;
              entry.cells[3].dataset.bytes = i.tx_bytes;
              entry.tr.dataset.quality = i.quality;
              entry.sparkCell.replaceChildren(spark(entry.history, 120, 26, false));
            }
            const gone = doc.partial ? new Set((doc.forgotten || []).map(keyOf)) : null;
            for (const [key, entry] of [...state.rows.entries()]) {
              if (seen.has(key)) continue;
              if (gone ? gone.has(key) : true) { entry.tr.remove(); state.rows.delete(key); continue; }
              // Not moved: the same rates as the last sample.
              entry.history.push([entry.data.rx_bytes_per_second, entry.data.tx_bytes_per_second]);
              if (entry.history.length > 60) entry.history.shift();
              entry.sparkCell.replaceChildren(spark(entry.history, 120, 26, false));
            }
            const body = document.querySelector("#interfaces tbody");
            const ordered = [...state.rows.keys()].sort();
            if (ordered.join("\n") !== state.order.join("\n")) {
              body.replaceChildren(...ordered.map((k) => state.rows.get(k).tr));
              state.order = ordered;
            }
            document.body.dataset.generation = doc.generation;
            const sinces = new Set(doc.interfaces.map((i) => i.since == null ? "" : when(i.since)));
            if (!doc.partial && sinces.size === 1 && !sinces.has("")) document.getElementById("since-all").textContent = "Received and Sent continue the kernel's counters from when serve first saw each interface (" + [...sinces][0] + ")";
            else if (!doc.partial) document.getElementById("since-all").textContent = "Received and Sent continue the kernel's counters from when serve first saw each interface (a total's tooltip says when)";
            status(Number(doc.time) > 0 ? "Updated " + clock(Number(doc.time)) + " · every " + doc.interval_seconds + " s" : "Rates from the next sample on");
            if (state.selected) showFacts(state.selected);
          }

          function showFacts(key) {
            const entry = state.rows.get(key);
            const facts = document.getElementById("facts");
            if (!entry) { facts.replaceChildren(el("dt", {}, "Status"), el("dd", {}, "not seen in the last sample")); return; }
            const i = entry.data;
            const pairs = [
              ...(i.alias ? [["Alias", i.alias]] : []),
              ["Kind", i.kind + " (evidence: " + i.evidence + ")"],
              ["Receive", rate(i.rx_bytes_per_second)], ["Send", rate(i.tx_bytes_per_second)],
              ["Received", mark(i.quality) + bytes(i.rx_bytes) + " (" + i.rx_bytes + " bytes)"],
              ["Sent", mark(i.quality) + bytes(i.tx_bytes) + " (" + i.tx_bytes + " bytes)"],
              ["Totals from", sinceText(i)],
              ["Quality", i.quality], ["Present", i.present ? "yes" : "no (deleted)"],
              ["Events", "recreated " + i.events.recreations + ", deleted " + i.events.deletions + ", counter resets " + i.events.resets + ", 32-bit wraps " + i.events.wraps],
            ];
            facts.replaceChildren(...pairs.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
            document.getElementById("graph").replaceChildren(spark(entry.history, 600, 160, true));
          }

          async function getJSON(url) {
            const response = await fetch(url, { credentials: "same-origin", cache: "no-store" });
            if (!response.ok) throw new Error(url + ": " + response.status + " " + (await response.text()).trim());
            return response.json();
          }

          // serve --probe: which probes leave by this interface, through a
          // tunnel or outside them, and a tunnel's outside estimate.
          async function showRoute(key) {
            const box = document.getElementById("route");
            box.replaceChildren();
            let doc;
            try { doc = await getJSON("/api/v1/routes"); } catch (error) { box.append(el("p", {}, "No route verdict: " + error.message)); return; }
            const probes = doc.probes.filter((p) => p.interface === key);
            const outside = doc.outside.filter((t) => t.tunnel === key || t.underlay === key);
            if (!probes.length && !outside.length) return;
            box.append(el("h3", {}, "Route"));
            const list = el("ul");
            for (const p of probes) {
              list.append(el("li", { class: p.leaves_outside ? "mark" : "" }, "Traffic to " + p.probe + " leaves by " + key + (p.gateway ? " via " + p.gateway : "") + (p.via_tunnel ? ", through the tunnel" : ", outside the tunnels")));
            }
            for (const t of outside) {
              list.append(el("li", {}, "Outside " + t.tunnel + " over " + t.underlay + " since serve started: " + (t.uncertain ? "≈ " : "") + bytes(t.rx_bytes) + " received, " + bytes(t.tx_bytes) + " sent (an estimate)"));
            }
            box.append(list);
          }

          const granularities = [["fiveminutes", "Five minutes", 24], ["hour", "Hours", 24], ["day", "Days", 31], ["month", "Months", 12]];
          async function showUsage(key) {
            const tables = document.getElementById("tables");
            const cycle = document.getElementById("cycle");
            cycle.replaceChildren();
            if (document.body.dataset.usage !== "yes") {
              tables.replaceChildren(el("p", {}, "No usage tables: this serve keeps no state file (start it with --state FILE)."));
              return;
            }
            tables.replaceChildren(el("p", {}, "Reading the state file…"));
            try {
              const plan = await getJSON("/api/v1/usage?granularity=cycle&interface=" + encodeURIComponent(key));
              const mine = plan.interfaces.find((i) => keyOf(i) === key);
              const current = mine && mine.periods.length ? mine.periods[mine.periods.length - 1] : null;
              if (current && current.plan) {
                const p = current.plan;
                cycle.append(el("h3", {}, "Billing cycle " + current.period));
                const dl = el("dl");
                const used = p.quota_bytes == null ? bytes(p.used_bytes) : bytes(p.used_bytes) + " of " + bytes(p.quota_bytes) + " (" + (p.used_ratio * 100).toFixed(1) + " %)";
                dl.append(el("dt", {}, "Used (" + p.direction + ")"), el("dd", {}, mark(current.quality) + used));
                if (p.projection) dl.append(el("dt", {}, "Projection"), el("dd", {}, bytes(p.projection.bytes) + " by " + when(p.projection.at) + (p.projection.over ? " — over the quota" : "")));
                cycle.append(dl);
                if (p.quota_bytes != null) {
                  const meter = el("div", { class: "meter" + (p.over ? " over" : ""), role: "meter", "aria-valuemin": "0", "aria-valuemax": "100", "aria-valuenow": String(Math.round(p.used_ratio * 100)), "aria-label": "quota used" });
                  const bar = el("span");
                  bar.style.width = Math.min(100, p.used_ratio * 100).toFixed(1) + "%";
                  meter.append(bar);
                  cycle.append(meter);
                }
              }
              const sections = [];
              if (!/[*?\[\],\\]/.test(key)) {
                const picture = el("section", { class: "usage picture" });
                picture.append(el("h3", {}, "Summary"));
                picture.append(el("img", { src: "/usage.png?granularity=summary&interface=" + encodeURIComponent(key), alt: "usage summary of " + key + " (the figures below)" }));
                sections.push(picture);
              }
              for (const [granularity, title, count] of granularities) {
                const doc = await getJSON("/api/v1/usage?granularity=" + granularity + "&limit=" + count + "&interface=" + encodeURIComponent(key));
                const found = doc.interfaces.find((i) => keyOf(i) === key);
                const periods = found ? found.periods.slice(-count) : [];
                const section = el("section", { class: "usage", "data-granularity": granularity });
                section.append(el("h3", {}, title));
                if (!periods.length) { section.append(el("p", {}, "Nothing recorded.")); sections.push(section); continue; }
                section.append(bars(periods));
                const table = el("table");
                const head = el("tr");
                for (const h of ["Period", "Received", "Sent", "Total"]) head.append(el("th", { scope: "col", class: h === "Period" ? "" : "num" }, h));
                const thead = el("thead"); thead.append(head);
                const tbody = el("tbody");
                for (const p of periods.slice().reverse()) {
                  const tr = el("tr", { "data-rx": p.rx_bytes, "data-tx": p.tx_bytes });
                  tr.append(el("td", {}, periodName(p, granularity)), el("td", { class: "num" }, mark(p.quality) + bytes(p.rx_bytes)), el("td", { class: "num" }, mark(p.quality) + bytes(p.tx_bytes)), el("td", { class: "num" }, mark(p.quality) + bytes(Number(p.rx_bytes) + Number(p.tx_bytes))));
                  tbody.append(tr);
                }
                table.append(thead, tbody);
                section.append(table);
                sections.push(section);
              }
              if (doc_stale(plan)) sections.unshift(el("p", { class: "mark" }, plan.state.note));
              tables.replaceChildren(...sections);
            } catch (error) {
              tables.replaceChildren(el("p", {}, "No usage tables: " + error.message));
            }
          }
          const doc_stale = (doc) => doc.state && doc.state.stale && doc.state.note;

          function bars(periods) {
            const width = 600, height = 120;
            const svg = svgEl("svg", { viewBox: "0 0 " + width + " " + height, class: "bars", role: "img", "aria-label": "received and sent per period" });
            const peak = Math.max(1, ...periods.map((p) => Number(p.rx_bytes) + Number(p.tx_bytes)));
            const w = width / periods.length;
            periods.forEach((p, n) => {
              const rx = (Number(p.rx_bytes) / peak) * (height - 14), tx = (Number(p.tx_bytes) / peak) * (height - 14);
              svg.appendChild(svgEl("rect", { class: "rx", x: (n * w + 1).toFixed(1), y: (height - rx).toFixed(1), width: Math.max(1, w - 2).toFixed(1), height: rx.toFixed(1) }));
              svg.appendChild(svgEl("rect", { class: "tx", x: (n * w + 1).toFixed(1), y: (height - rx - tx).toFixed(1), width: Math.max(1, w - 2).toFixed(1), height: tx.toFixed(1) }));
            });
            const label = svgEl("text", { x: 4, y: 11 });
            label.textContent = "peak " + bytes(peak);
            svg.appendChild(label);
            const wrap = el("div", { class: "graph" });
            wrap.append(svg);
            return wrap;
          }

          // A link whose name is not percent-encoding (#i=%E0%A4%A): said,
          // and no interface shown (not the one shown before).
          function malformed(text) {
            state.selected = null;
            document.getElementById("overview").hidden = true;
            document.getElementById("detail").hidden = false;
            document.getElementById("detail-title").textContent = "Malformed link";
            document.title = "Malformed link · ifmeter";
            const back = el("a", { href: "#" }, "the list of interfaces");
            const said = el("dd", { id: "malformed" }, "#i=" + text + " names no interface: its percent-encoding is broken. Choose one from ");
            said.append(back, ".");
            document.getElementById("facts").replaceChildren(el("dt", {}, "Link"), said);
            for (const id of ["graph", "route", "cycle", "tables"]) document.getElementById(id).replaceChildren();
          }

          function route() {
            const match = /^#i=(.*)$/.exec(location.hash);
            let key = null;
            if (match) {
              try { key = decodeURIComponent(match[1]); } catch (error) { malformed(match[1]); return; }
            }
            state.selected = key;
            document.getElementById("overview").hidden = key !== null;
            document.getElementById("detail").hidden = key === null;
            if (key !== null) {
              const known = state.rows.get(key);
              document.getElementById("detail-title").textContent = known && known.data ? nameOf(known.data) : key;
              document.title = key + " · ifmeter";
              showFacts(key);
              showRoute(key);
              showUsage(key);
              document.getElementById("detail-title").setAttribute("tabindex", "-1");
              document.getElementById("detail-title").focus();
            } else {
              document.title = "ifmeter";
            }
          }

          // The unit toggle: every rate shown again in the other unit, at
          // once (the next sample keeps it).
          function showUnits() {
            const toggle = document.getElementById("units");
            toggle.setAttribute("aria-pressed", String(bits));
            for (const entry of state.rows.values()) {
              if (!entry.data) continue;
              entry.cells[0].textContent = rate(entry.data.rx_bytes_per_second);
              entry.cells[1].textContent = rate(entry.data.tx_bytes_per_second);
            }
            if (state.selected) showFacts(state.selected);
          }

          async function start() {
            window.addEventListener("hashchange", route);
            showUnits();
            document.getElementById("units").addEventListener("click", () => {
              bits = !bits;
              try { localStorage.setItem("ifmeter.bits", bits ? "1" : "0"); } catch (error) { /* kept for this page only */ }
              showUnits();
            });
            try {
              update(await getJSON("/api/v1/interfaces?history=1"), true);
            } catch (error) {
              status("Cannot read /api/v1/interfaces: " + error.message);
            }
            route();
            follow();
          }

          // The sample stream (/api/v1/events), read with fetch so that a
          // refusal's status, line and Retry-After are seen; after any
          // failure the page tries again: the stream's retry (2 s) doubled
          // at each failure in a row, at most 10 s, a tenth more at random
          // (pages refused together do not come back together), and never
          // sooner than Retry-After says. A sample read resets the backoff.
          const stream = { base: 2000, failures: 0 };
          function retryDelay(retryAfter) {
            stream.failures += 1;
            const backoff = Math.min(10000, stream.base * Math.pow(2, stream.failures - 1));
            const wait = Math.max(backoff, Number.isFinite(retryAfter) && retryAfter > 0 ? retryAfter * 1000 : 0);
            return Math.round(wait * (1 + Math.random() * 0.1));
          }
          async function follow() {
            let wait, why;
            try {
              const response = await fetch("/api/v1/events", { credentials: "same-origin", cache: "no-store", headers: { Accept: "text/event-stream" } });
              if (response.ok && response.body) {
                document.body.dataset.stream = "open";
                await readEvents(response.body.getReader());
                why = "The stream ended";
              } else {
                why = ((await response.text()).split("\n")[0] || "HTTP " + response.status).replace(/[.;]\s*$/, "");
                wait = retryDelay(Number(response.headers.get("Retry-After")));
              }
            } catch (error) {
              why = "Connection lost";
            }
            if (wait === undefined) wait = retryDelay(NaN);
            document.body.dataset.stream = "waiting";
            status(why + "; trying again in " + Math.ceil(wait / 1000) + " s…");
            setTimeout(follow, wait);
          }
          async function readEvents(reader) {
            const decoder = new TextDecoder();
            let buffer = "";
            for (;;) {
              const { value, done } = await reader.read();
              if (done) return;
              buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
              let end;
              while ((end = buffer.indexOf("\n\n")) >= 0) {
                const block = buffer.slice(0, end);
                buffer = buffer.slice(end + 2);
                let type = "message";
                const data = [];
                for (const line of block.split("\n")) {
                  const colon = line.indexOf(":");
                  const field = colon < 0 ? line : line.slice(0, colon);
                  const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
                  if (field === "event") type = text;
                  else if (field === "data") data.push(text);
                  else if (field === "retry" && /^[0-9]+$/.test(text)) stream.base = Math.max(100, Number(text));
                }
                if (type === "sample" && data.length) {
                  stream.failures = 0;
                  onEvent(JSON.parse(data.join("\n")));
                }
              }
            }
          }
          start();
        })();

        """#
}
