/**
 * The local dashboard at `/`: live counts (dispatch counts each batch as it is sent), backlog,
 * lateness histogram, AWS requests per job delivered (labelled with what they count).
 */
export const DASHBOARD_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Dynein Serverless (local)</title>
<style>
 body{font:14px system-ui,sans-serif;margin:2rem;color:#222;max-width:60rem}
 h1{font-size:1.3rem} h2{font-size:1rem;margin-top:1.5rem}
 .cards{display:flex;gap:1rem;flex-wrap:wrap} .card{border:1px solid #ddd;border-radius:6px;padding:.6rem 1rem;min-width:7rem}
 .card b{display:block;font-size:1.4rem} table{border-collapse:collapse} td,th{padding:.15rem .6rem;text-align:left}
 .bar{background:#4a7;height:.8rem;display:inline-block} .muted{color:#888}
</style></head><body>
<h1>Dynein Serverless — local stack</h1>
<p class="muted">Counters since compute started: <span id="since"></span>; read every second (updated <span id="updated">-</span>). Raw data: <a href="/local/metrics">/local/metrics</a>.</p>
<h2>Jobs</h2><div class="cards" id="cards"></div>
<p class="muted" id="cancels"></p>
<h2>Lateness (due time to send acknowledged)</h2><table id="hist"></table>
<h2>Tenants</h2>
<p class="muted">From dispatch: held while paused, sends deferred by a delivery limit; submits refused by a submit limit (all tenants): <span id="throttled">0</span>. Change controls with <code>npx dynein tenant</code>.</p>
<table id="tenants"></table>
<h2>Busiest concurrency keys</h2>
<p class="muted">The ten busiest keys dispatch steps reported (docs/flow-control.md), most waiting first: jobs started, asks for a slot refused (all slots held), jobs waiting at the latest step, p95 of the waits past the due time of jobs that waited.</p>
<table id="keys"></table>
<h2>Recurring occurrences never fired</h2>
<p class="muted" id="missed-what">The never-fired check (docs/tracing.md) looks every 5 minutes for schedule occurrences not delivered 5 minutes after their time.</p>
<table id="missed"></table>
<h2>AWS requests per job delivered</h2>
<p class="muted" id="req-what"></p>
<table id="req"></table>
<script>
const fmt = (n) => (n ?? 0).toLocaleString();
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => '&#' + c.charCodeAt(0) + ';');
let busy = false;
async function refresh() {
  if (busy) return;
  busy = true;
  try {
    const m = await (await fetch('/local/metrics', { cache: 'no-store' })).json();
    document.getElementById('since').textContent = m.since;
    document.getElementById('updated').textContent = new Date().toLocaleTimeString();
    const j = m.jobs;
    document.getElementById('cards').innerHTML = [['submitted', j.submitted], ['scheduled (backlog)', j.backlog], ['queued directly', j.queuedDirectly], ['dispatched', j.dispatched], ['delivered (both)', j.delivered], ['cancelled jobs', j.cancelled], ['lateness mean ms', m.lateness.meanMs], ['lateness max ms', m.lateness.maxMs]]
      .map(([k, v]) => '<div class="card">' + k + '<b>' + fmt(v) + '</b></div>').join('');
    document.getElementById('cancels').textContent = 'Cancelled jobs count each job once; ' + fmt(j.cancelRequests) + ' cancel request' + (j.cancelRequests === 1 ? '' : 's') + ' answered 200 (repeats included). Cancels are not jobs delivered.';
    const max = Math.max(1, ...m.lateness.buckets.map((b) => b.count));
    document.getElementById('hist').innerHTML = m.lateness.buckets.map((b) => '<tr><td>≤ ' + (b.le === null ? '∞' : b.le) + ' ms</td><td>' + fmt(b.count) + '</td><td><span class="bar" style="width:' + (300 * b.count / max) + 'px"></span></td></tr>').join('');
    document.getElementById('throttled').textContent = fmt(m.submitsThrottled);
    document.getElementById('tenants').innerHTML = '<tr><th>tenant</th><th>delivered</th><th>held</th><th>deferred</th><th>lateness p50 / p95 / p99 ms</th><th>state</th></tr>' + (Object.entries(m.tenants).map(([k, t]) => '<tr><td>' + k + '</td><td>' + fmt(t.delivered) + '</td><td>' + fmt(t.held) + '</td><td>' + fmt(t.deferred) + '</td><td>' + [t.latenessP50Ms, t.latenessP95Ms, t.latenessP99Ms].map((v) => v ?? '-').join(' / ') + '</td><td>' + (t.paused ? '<b>paused</b>' : 'running') + '</td></tr>').join('') || '<tr><td class="muted" colspan="6">no tenant dispatched yet</td></tr>');
    document.getElementById('keys').innerHTML = '<tr><th>tenant</th><th>key</th><th>started</th><th>asks refused</th><th>waiting</th><th>wait p95 ms</th></tr>' + ((m.keys ?? []).map((k) => '<tr><td>' + esc(k.tenant) + '</td><td class="mono">' + esc(k.key) + '</td><td>' + fmt(k.started) + '</td><td>' + fmt(k.refused) + '</td><td>' + fmt(k.waiting) + '</td><td>' + (k.waitP95Ms ?? '-') + '</td></tr>').join('') || '<tr><td class="muted" colspan="6">no job with a concurrency key dispatched yet</td></tr>');
    const a = m.missedOccurrences ?? { runs: 0, missed: 0, recent: [] };
    document.getElementById('missed-what').textContent = 'The never-fired check looks every 5 minutes for schedule occurrences not delivered 5 minutes after their time: ' + fmt(a.runs) + ' checks' + (a.lastRunAt ? ', the latest at ' + a.lastRunAt : '') + ', ' + fmt(a.missed) + ' missed.';
    document.getElementById('missed').innerHTML = '<tr><th>tenant</th><th>schedule</th><th>occurrence</th><th>reason</th><th>job</th></tr>' + (a.recent.map((x) => '<tr><td>' + esc(x.tenant) + '</td><td>' + esc(x.schedule) + '</td><td>' + esc(x.occurrenceAt) + '</td><td><b>' + esc(x.reason) + '</b></td><td class="mono">' + esc(x.jobId) + '</td></tr>').join('') || '<tr><td class="muted" colspan="5">none missed</td></tr>');
    document.getElementById('req-what').textContent = 'Each figure: ' + m.requestsPerJobCounts + ' Jobs delivered so far: ' + fmt(j.delivered) + '.';
    document.getElementById('req').innerHTML = '<tr><th>operation</th><th>per job delivered</th><th class="muted">requests in all</th></tr>' + (Object.entries(m.requestsPerJob).map(([k, v]) => '<tr><td>' + k + '</td><td>' + v + '</td><td class="muted">' + fmt(m.requests[k]) + '</td></tr>').join('') || '<tr><td class="muted" colspan="3">no job delivered yet</td></tr>');
  } catch (e) { document.getElementById('since').textContent = 'compute unreachable (restarting?)'; }
  finally { busy = false; }
}
refresh(); setInterval(refresh, 1000);
</script></body></html>`;
