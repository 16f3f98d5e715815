/**
 * The job browser's page (`dynein ui`): plain HTML and CSS, its script at `app.js` (TypeScript in
 * ./browser/, bundled by esbuild: ./appScript.ts), below the run's token as the page. The script
 * finds its elements by these ids and classes.
 * Nothing is loaded from elsewhere (no framework, no CDN); kept as a string so that the package
 * build (tsc) ships it.
 */
export const PAGE_HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Dynein job browser</title>
<style>
 :root{--b:#d8dde3;--m:#6b7480;--a:#2660a4;--bad:#b3261e;--ok:#2e7d32}
 *{box-sizing:border-box} body{font:14px/1.4 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d2329;background:#f6f7f9}
 header{display:flex;gap:1rem;align-items:center;padding:.6rem 1.2rem;background:#1d2b3a;color:#fff;flex-wrap:wrap}
 header h1{font-size:1.05rem;margin:0 1rem 0 0} header .where{color:#b9c4cf;font-size:.85rem}
 header label{font-size:.85rem} header select,header input{margin-left:.3rem}
 nav{display:flex;gap:.2rem;padding:0 1.2rem;background:#fff;border-bottom:1px solid var(--b)}
 nav button{border:0;background:none;padding:.6rem .9rem;cursor:pointer;font:inherit;color:var(--m);border-bottom:2px solid transparent}
 nav button.on{color:#1d2329;border-bottom-color:var(--a);font-weight:600}
 main{display:flex;gap:1rem;padding:1rem 1.2rem;align-items:flex-start}
 section{background:#fff;border:1px solid var(--b);border-radius:6px;padding:.8rem 1rem;flex:1;min-width:0}
 main>section{overflow-x:auto}
 #detail{flex:0 0 26rem} #detail[hidden]{display:none}
 form.filters{display:flex;gap:.6rem;flex-wrap:wrap;align-items:end;margin-bottom:.6rem}
 form.filters label{display:flex;flex-direction:column;font-size:.78rem;color:var(--m)}
 input,select,button{font:inherit} input,select{padding:.2rem .3rem;border:1px solid var(--b);border-radius:4px}
 button{padding:.25rem .7rem;border:1px solid var(--b);border-radius:4px;background:#fff;cursor:pointer}
 button.primary{background:var(--a);color:#fff;border-color:var(--a)} button.danger{color:var(--bad);border-color:var(--bad)}
 button:disabled{opacity:.45;cursor:default}
 table{border-collapse:collapse;width:100%} th,td{text-align:left;padding:.3rem .5rem;border-bottom:1px solid #eef0f3;white-space:nowrap}
 th{font-size:.78rem;color:var(--m);font-weight:600} tbody tr.job{cursor:pointer} tbody tr.job:hover{background:#f1f5fb}
 tbody tr.sel{background:#e4edf8} td.mono,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.82rem}
 .state{display:inline-block;padding:0 .45rem;border-radius:9px;font-size:.75rem;font-weight:600;background:#e8ebef}
 .state.SCHEDULED{background:#e3ecfa;color:#1f4f8a} .state.QUEUED,.state.DELIVERED{background:#e6f4ea;color:#1e6b34}
 .state.SUCCEEDED{background:#d7f0dd;color:#135c27} .state.CANCELLED{background:#eee;color:#555}
 .state.FAILED,.state.DEAD{background:#fbe4e2;color:#8c1d18} .state.ENABLED{background:#e6f4ea;color:#1e6b34} .state.DISABLED{background:#eee;color:#555}
 .bar{display:flex;gap:.6rem;align-items:center;margin-top:.6rem;flex-wrap:wrap} .muted{color:var(--m)} .small{font-size:.8rem}
 .msg{margin:.5rem 0;padding:.4rem .6rem;border-radius:4px} .msg:empty{display:none}
 .msg.err{background:#fbe4e2;color:#8c1d18} .msg.ok{background:#e6f4ea;color:#1e6b34} .msg.info{background:#eef2f7;color:#334}
 dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem .8rem;margin:.4rem 0} dt{color:var(--m);font-size:.8rem} dd{margin:0;word-break:break-all}
 .wf{display:grid;grid-template-columns:9rem 1fr 4.5rem;gap:.15rem .4rem;align-items:center;margin:.4rem 0;font-size:.85em} .wf .track{position:relative;height:.8rem;background:var(--b)} .wf .span{position:absolute;top:0;bottom:0;min-width:2px;background:var(--a)}
 ol.timeline{list-style:none;padding:0;margin:.4rem 0;border-left:2px solid var(--b)} ol.timeline li{padding:.15rem 0 .35rem .7rem;position:relative}
 ol.timeline li::before{content:"";position:absolute;left:-6px;top:.5rem;width:10px;height:10px;border-radius:50%;background:var(--a)}
 .panel{margin-top:.8rem;padding-top:.6rem;border-top:1px solid var(--b)} .panel[hidden]{display:none}
 textarea{display:block;width:100%;margin-top:.3rem;padding:.3rem;border:1px solid var(--b);border-radius:4px;font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:.82rem}
 pre{background:#f6f7f9;padding:.4rem;border-radius:4px;overflow:auto;max-height:12rem;margin:.3rem 0}
 svg.workflow{margin-top:.6rem;font-size:12px} svg.workflow .edge{stroke:#9aa5b1;stroke-width:1.2} svg.workflow .arrow{fill:#9aa5b1}
 svg.workflow g.job{cursor:pointer} svg.workflow rect{fill:#e8ebef;stroke:var(--b)} svg.workflow .key{font-weight:600;fill:#1d2329}
 svg.workflow .state-label{fill:var(--m);font-size:11px} svg.workflow g.WAITING rect{fill:#fff;stroke-dasharray:4 3}
 svg.workflow g.SCHEDULED rect{fill:#e3ecfa} svg.workflow g.QUEUED rect{fill:#e6f4ea} svg.workflow g.SUCCEEDED rect{fill:#d7f0dd}
 svg.workflow g.CANCELLED rect{fill:#eee} svg.workflow g.DEAD rect{fill:#fbe4e2}
 #live.on::before{content:"● ";color:var(--ok)} #live.off::before{content:"❚❚ ";color:var(--m)}
</style></head>
<body>
<header>
 <h1>Dynein job browser</h1>
 <label>Tenant <span id="tenant-slot"></span></label>
 <span class="where" id="where"></span>
 <span class="where off" id="live"></span>
 <button id="pause" type="button">Pause</button>
</header>
<nav>
 <button type="button" data-tab="jobs" class="on">Jobs</button>
 <button type="button" data-tab="schedules">Schedules</button>
 <button type="button" data-tab="dlq">Dead letters</button>
 <button type="button" data-tab="workflows">Workflows</button>
</nav>
<main>
 <section id="tab-jobs">
  <form class="filters" id="filters">
   <label>State<select name="state">
    <option value="">any</option><option>SCHEDULED</option><option>QUEUED</option><option>CANCELLED</option>
    <option>DELIVERED</option><option>SUCCEEDED</option><option>FAILED</option><option>DEAD</option>
   </select></label>
   <label>Run at from<input type="datetime-local" name="from" step="1"></label>
   <label>to<input type="datetime-local" name="to" step="1"></label>
   <label>Schedule<input name="schedule" size="12" placeholder="any"></label>
   <label>Tag<input name="tag" size="12" placeholder="any"></label>
   <label>Key<input name="key" size="12" placeholder="any" title="concurrency key"></label>
   <label>Order<select name="order"><option value="asc">soonest first</option><option value="desc">latest first</option></select></label>
   <label>Per page<select name="limit"><option>10</option><option selected>25</option><option>50</option><option>100</option></select></label>
   <button class="primary" type="submit">Show</button>
   <button type="button" id="cancel-tag" title="Cancel every pending job with the tag entered (POST .../jobs/cancel)">Cancel all with this tag</button>
   <button type="button" id="cancel-key" title="Cancel every pending job with the concurrency key entered (POST .../jobs/cancel)">Cancel all with this key</button>
  </form>
  <form class="filters" id="open"><label>Open a job by id<input name="jobId" size="44" placeholder="j1.…" spellcheck="false"></label><button type="submit">Open</button></form>
  <div class="msg" id="jobs-msg"></div>
  <table id="jobs"><thead><tr><th>Job</th><th>Run at</th><th>State</th><th>Delivered at</th><th>Schedule</th><th>Key</th><th>Tags</th></tr></thead><tbody></tbody></table>
  <div class="bar"><button type="button" id="prev">◀ Previous</button><span id="page">Page 1</span><button type="button" id="next">Next ▶</button>
   <span class="muted small">Times are your browser's local time in the filters, UTC in the table.</span></div>
 </section>
 <section id="tab-schedules" hidden>
  <div class="msg" id="schedules-msg"></div>
  <table id="schedules"><thead><tr><th>Name</th><th>State</th><th>Expression</th><th>Time zone</th><th>Next runs</th></tr></thead><tbody></tbody></table>
  <div class="bar"><button type="button" id="schedules-more" hidden>More</button></div>
 </section>
 <section id="tab-dlq" hidden>
  <div class="msg" id="dlq-msg"></div>
  <table id="dlq"><thead><tr><th><input type="checkbox" id="dlq-all" title="select all"></th><th>Job</th><th>Receives</th><th>First failure</th><th>Error</th><th>Body</th><th>Edit</th></tr></thead><tbody></tbody></table>
  <div class="bar"><button type="button" id="redrive-selected" disabled>Redrive selected</button><button type="button" class="primary" id="redrive-all">Redrive all</button><button type="button" class="danger" id="delete-selected" disabled>Delete selected</button><button type="button" id="dlq-edits-show" aria-expanded="false" aria-controls="dlq-edits">Show edits</button><span class="muted small" id="dlq-depth"></span></div>
  <form class="panel" id="dlq-edit" hidden>
   <label for="dlq-edit-payload">New payload of <span class="mono" id="dlq-edit-job"></span> <span class="muted small">(JSON, sent as typed; Save puts the job back on its queue with it)</span></label>
   <textarea id="dlq-edit-payload" name="payload" rows="8" spellcheck="false"></textarea>
   <div class="msg" id="dlq-edit-msg" aria-live="polite"></div>
   <div class="bar"><button type="submit" class="primary" id="dlq-edit-save">Save</button><button type="button" id="dlq-edit-cancel">Cancel</button></div>
  </form>
  <div class="panel" id="dlq-edits" hidden>
   <b>Edits</b> <span class="muted small">newest first</span>
   <div class="msg" id="dlq-edits-msg"></div>
   <table><thead><tr><th>At</th><th>Job</th><th>By</th><th>Payload SHA-256 (old → new)</th></tr></thead><tbody></tbody></table>
   <p class="muted small" id="dlq-edits-more" hidden>Older edits are not shown: <span class="mono">dynein dlq audit --all</span> lists them all.</p>
  </div>
 </section>
 <section id="tab-workflows" hidden>
  <form class="filters" id="open-workflow"><label>Open a workflow by id<input name="workflowId" size="44" placeholder="wf1.…" spellcheck="false"></label><button type="submit">Open</button></form>
  <div class="msg" id="workflow-msg"></div>
  <div class="mono small" id="workflow-head"></div>
  <div id="workflow-graph"></div>
 </section>
 <aside id="detail" hidden><section>
  <div class="bar" style="margin:0;justify-content:space-between"><b>Job</b><button type="button" id="detail-close">Close</button></div>
  <div class="msg" id="detail-msg"></div>
  <dl id="detail-fields"></dl>
  <div id="detail-timeline"></div>
  <div id="detail-trace"></div>
  <div class="bar"><button type="button" class="danger" id="cancel">Cancel job</button></div>
 </section></aside>
</main>
<script src="app.js"></script>
</body></html>
`;
