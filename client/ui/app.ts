/**
 * The job browser's script (served at `app.js` below the run's token): plain browser JavaScript, no framework. Every
 * API call goes to the `dynein ui` server's `/api/...` proxy, which signs it: the page holds no key.
 * It builds the DOM with textContent only (nothing from the API is parsed as HTML).
 */
export const APP_JS = String.raw`'use strict';
(function () {
  var $ = function (sel) { return document.querySelector(sel); };
  function el(tag, attrs, kids) {
    var e = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === 'text') e.textContent = attrs[k];
      else if (k === 'class') e.className = attrs[k];
      else e.setAttribute(k, attrs[k]);
    });
    (kids || []).forEach(function (c) { if (c != null) e.appendChild(typeof c === 'string' ? document.createTextNode(c) : c); });
    return e;
  }
  function stateBadge(s) { return el('span', { class: 'state ' + (s || ''), text: s || '-' }); }
  function msg(id, kind, text) { var m = $(id); m.className = 'msg ' + kind; m.textContent = text || ''; }

  var cfg = null;
  var DLQ_REFRESH_MS = 10000;
  var S = {
    tenant: '', tab: 'jobs', paused: false, busy: false,
    query: '', cursors: [null], page: 0, nextCursor: null, pageKey: '',
    selected: null, scheduleCursor: null, dlqChecked: {}, dlqAt: 0
  };

  function api(method, path, body) {
    var init = { method: method, headers: { 'x-dynein-ui': '1' } };
    if (body !== undefined) { init.headers['content-type'] = 'application/json'; init.body = JSON.stringify(body); }
    // Relative: below the page's /<token>/, which the server requires on every call.
    return fetch('api/v1/tenants/' + encodeURIComponent(S.tenant) + path, init).then(function (res) {
      return res.text().then(function (t) {
        var data = null;
        try { data = t ? JSON.parse(t) : null; } catch (e) { data = { message: t }; }
        return { status: res.status, ok: res.ok, data: data };
      });
    }, function (err) { return { status: 0, ok: false, data: { message: 'the job browser server is unreachable (' + err.message + ')' } }; });
  }
  /** A 404 from the gateway itself (no error code): the route is not deployed. */
  function missingRoute(r) { return r.status === 404 && !(r.data && r.data.error); }
  function errorText(r) {
    var e = r.data && (r.data.error || r.data);
    var text = e ? ((e.code ? e.code + ': ' : '') + (e.message || '')) : '';
    return (text || 'HTTP ' + r.status) + (r.status ? ' (HTTP ' + r.status + ')' : '');
  }

  // ---- jobs ----
  function filterQuery() {
    var f = $('#filters');
    var p = new URLSearchParams();
    var state = f.state.value, from = f.from.value, to = f.to.value, schedule = f.schedule.value.trim();
    if (state) p.set('state', state);
    if (from) p.set('from', new Date(from).toISOString());
    if (to) p.set('to', new Date(to).toISOString());
    if (schedule) p.set('schedule', schedule);
    if (f.order.value !== 'asc') p.set('order', f.order.value);
    p.set('limit', f.limit.value);
    return p;
  }
  /** The query of the page shown now (a reply to an older one is dropped). */
  function pageQuery() {
    var p = new URLSearchParams(S.query);
    if (S.cursors[S.page]) p.set('cursor', S.cursors[S.page]);
    return p.toString();
  }
  function loadJobs() {
    var q = pageQuery();
    var key = S.tenant + '?' + q;
    return api('GET', '/jobs?' + q).then(function (r) {
      if (key !== S.tenant + '?' + pageQuery()) return;
      var body = $('#jobs tbody');
      if (!r.ok) {
        body.replaceChildren();
        S.nextCursor = null;
        if (missingRoute(r)) msg('#jobs-msg', 'info', 'Listing jobs is not available on this deployment (GET /v1/tenants/{tenant}/jobs answered 404): update the stack. You can still open a job by its id above.');
        else msg('#jobs-msg', 'err', 'Could not list jobs: ' + errorText(r));
        pager();
        return;
      }
      var jobs = (r.data && r.data.jobs) || [];
      S.nextCursor = (r.data && r.data.nextCursor) || null;
      msg('#jobs-msg', 'info', jobs.length === 0 ? (S.page === 0 ? 'No jobs match.' : 'No more jobs.') : '');
      body.replaceChildren.apply(body, jobs.map(function (j) {
        var tr = el('tr', { class: 'job' + (S.selected === j.jobId ? ' sel' : ''), 'data-job-id': j.jobId }, [
          el('td', { class: 'mono', text: j.jobId }),
          el('td', { class: 'mono', text: j.runAt || '' }),
          el('td', {}, [stateBadge(j.state)]),
          el('td', { class: 'mono', text: j.deliveredAt || '' }),
          el('td', { text: j.schedule || '' })
        ]);
        tr.addEventListener('click', function () { openJob(j.jobId); });
        return tr;
      }));
      pager();
    });
  }
  function pager() {
    $('#page').textContent = 'Page ' + (S.page + 1);
    $('#prev').disabled = S.page === 0;
    $('#next').disabled = !S.nextCursor;
    liveLabel();
  }
  function showJobs(reset) {
    if (reset) { S.query = filterQuery().toString(); S.cursors = [null]; S.page = 0; S.nextCursor = null; }
    return loadJobs();
  }

  // ---- one job ----
  function openJob(jobId) {
    S.selected = jobId;
    document.querySelectorAll('#jobs tbody tr').forEach(function (tr) { tr.classList.toggle('sel', tr.getAttribute('data-job-id') === jobId); });
    $('#detail').hidden = false;
    msg('#detail-msg', 'info', '');
    return loadJob();
  }
  function loadJob() {
    var jobId = S.selected;
    if (!jobId) return Promise.resolve();
    return api('GET', '/jobs/' + encodeURIComponent(jobId)).then(function (r) {
      if (jobId !== S.selected) return;
      var dl = $('#detail-fields');
      if (!r.ok) { dl.replaceChildren(el('dt', { text: 'job' }), el('dd', { class: 'mono', text: jobId })); msg('#detail-msg', 'err', errorText(r)); return; }
      var j = r.data || {};
      var rows = [];
      Object.keys(j).forEach(function (k) {
        if (k === 'timeline') return;
        var v = j[k];
        rows.push(el('dt', { text: k }));
        rows.push(k === 'state' ? el('dd', {}, [stateBadge(v)]) : el('dd', { class: 'mono', text: typeof v === 'string' ? v : JSON.stringify(v) }));
      });
      dl.replaceChildren.apply(dl, rows);
      var tl = $('#detail-timeline');
      if (Array.isArray(j.timeline) && j.timeline.length) {
        tl.replaceChildren(el('b', { text: 'Timeline' }), el('ol', { class: 'timeline' }, j.timeline.map(function (e) {
          var extra = Object.keys(e).filter(function (k) { return k !== 'at' && k !== 'event' && k !== 'state'; })
            .map(function (k) { return k + ' ' + (typeof e[k] === 'string' ? e[k] : JSON.stringify(e[k])); }).join(', ');
          return el('li', {}, [el('span', { class: 'mono small', text: e.at || '' }), ' ', el('b', { text: e.event || e.state || '' }), extra ? el('div', { class: 'muted small', text: extra }) : null]);
        })));
      } else {
        tl.replaceChildren(el('p', { class: 'muted small', text: 'No timeline: this tenant keeps no history (or the job has none yet).' }));
      }
      $('#cancel').disabled = j.state !== 'SCHEDULED';
    });
  }
  function cancelJob() {
    var jobId = S.selected;
    if (!jobId) return;
    $('#cancel').disabled = true;
    api('DELETE', '/jobs/' + encodeURIComponent(jobId)).then(function (r) {
      if (r.ok) msg('#detail-msg', 'ok', 'Cancelled ' + jobId + '.');
      else msg('#detail-msg', 'err', 'Not cancelled: ' + errorText(r));
      return Promise.all([loadJob(), loadJobs()]);
    });
  }

  // ---- schedules ----
  function loadSchedules(more) {
    var p = new URLSearchParams({ limit: '50' });
    if (more && S.scheduleCursor) p.set('cursor', S.scheduleCursor);
    return api('GET', '/schedules?' + p.toString()).then(function (r) {
      var body = $('#schedules tbody');
      if (!r.ok) {
        body.replaceChildren();
        $('#schedules-more').hidden = true;
        if (missingRoute(r)) msg('#schedules-msg', 'info', 'Recurring schedules are not available on this deployment.');
        else msg('#schedules-msg', 'err', 'Could not list schedules: ' + errorText(r));
        return;
      }
      var list = (r.data && r.data.schedules) || [];
      S.scheduleCursor = (r.data && r.data.nextCursor) || null;
      $('#schedules-more').hidden = !S.scheduleCursor;
      msg('#schedules-msg', 'info', list.length === 0 && !more ? 'This tenant has no recurring schedules.' : '');
      var rows = list.map(function (s) {
        var runs = s.nextRuns || [];
        return el('tr', { 'data-schedule': s.name }, [
          el('td', { text: s.name }), el('td', {}, [stateBadge(s.state)]), el('td', { class: 'mono', text: s.expression }),
          el('td', { text: s.timezone || '' }),
          el('td', { class: 'mono small', text: runs.length ? runs.slice(0, 3).join('  ') + (runs.length > 3 ? '  …' : '') : (s.state === 'DISABLED' ? 'paused' : 'ended') })
        ]);
      });
      if (more) rows.forEach(function (tr) { body.appendChild(tr); });
      else body.replaceChildren.apply(body, rows);
    });
  }

  // ---- dead letters ----
  function handleOf(m) { return m.handle || m.receiptHandle || m.messageId; }
  function loadDlq() {
    S.dlqAt = Date.now();
    return api('GET', '/dlq').then(function (r) {
      var body = $('#dlq tbody');
      if (!r.ok) {
        body.replaceChildren();
        $('#redrive-all').disabled = true;
        $('#redrive-selected').disabled = true;
        $('#delete-selected').disabled = true;
        $('#dlq-depth').textContent = '';
        if (missingRoute(r)) msg('#dlq-msg', 'info', 'Dead letters are not available on this deployment (GET /v1/tenants/{tenant}/dlq answered 404): update the stack, or use dynein redrive.');
        else msg('#dlq-msg', 'err', 'Could not read the dead-letter queue: ' + errorText(r));
        return;
      }
      var list = (r.data && (r.data.messages || r.data.deadLetters)) || [];
      var seen = {};
      var rows = list.map(function (m) {
        var h = handleOf(m);
        seen[h] = S.dlqChecked[h] || false;
        var box = el('input', { type: 'checkbox', 'data-handle': h });
        box.checked = seen[h];
        box.addEventListener('change', function () { S.dlqChecked[h] = box.checked; dlqButtons(); });
        var bodyText = m.body !== undefined ? (typeof m.body === 'string' ? m.body : JSON.stringify(m.body)) : (m.payload !== undefined ? JSON.stringify(m.payload) : '');
        return el('tr', { 'data-handle': h }, [
          el('td', {}, [box]),
          el('td', { class: 'mono', text: m.jobId || (m.job && m.job.jobId) || m.messageId || '' }),
          el('td', { text: String(m.receiveCount != null ? m.receiveCount : '') }),
          el('td', { class: 'mono small', text: m.firstFailureAt || m.firstReceivedAt || m.sentAt || '' }),
          el('td', { class: 'small', text: m.error || (m.attributes && m.attributes.dyneinError) || '' }),
          el('td', { class: 'mono small', text: bodyText.length > 80 ? bodyText.slice(0, 80) + '…' : bodyText })
        ]);
      });
      S.dlqChecked = seen;
      body.replaceChildren.apply(body, rows);
      msg('#dlq-msg', 'info', list.length === 0 ? 'The dead-letter queue is empty.' : '');
      var depth = r.data && r.data.approximateDepth;
      $('#dlq-depth').textContent = typeof depth === 'number' && depth > list.length ? 'about ' + depth + ' messages in the queue; showing ' + list.length + ' (redrive or delete them to see more)' : '';
      $('#redrive-all').disabled = list.length === 0;
      dlqButtons();
    });
  }
  function dlqButtons() {
    var n = Object.keys(S.dlqChecked).filter(function (h) { return S.dlqChecked[h]; }).length;
    $('#redrive-selected').disabled = n === 0;
    $('#redrive-selected').textContent = n ? 'Redrive selected (' + n + ')' : 'Redrive selected';
    $('#delete-selected').disabled = n === 0;
    $('#delete-selected').textContent = n ? 'Delete selected (' + n + ')' : 'Delete selected';
  }
  function count(list) { return Array.isArray(list) ? list.length : list; }
  function plural(n, what) { return n + ' ' + what + (n === 1 ? '' : 's'); }
  /** The reply of redrive or delete, in words: {"redriven"|"deleted": [...], "notFound": [...], "failed"?: [...], "sentNotDeleted"?: [...]}, or a move task. */
  function describeDlqReply(verb, d, asked) {
    if (d.method === 'StartMessageMoveTask') return 'Started a message move task: every message goes back to the queue (it may take a moment).';
    var unsent = count(d.sentNotDeleted)
      ? '; ' + count(d.sentNotDeleted) + ' sent to the queue but still in the DLQ (their delete failed): delete them (they stay selected), do not redrive them again or they are delivered twice'
      : '';
    if (d.method === 'copy') return 'Redrove ' + plural(d.moved || 0, 'message') + ' to the queue' + (unsent || (d.complete === false ? ' (more remain: press again)' : '')) + '.';
    var done = count(verb === 'redrive' ? d.redriven : d.deleted);
    var text = (verb === 'redrive' ? 'Redrove ' : 'Deleted ') + plural(done != null ? done : asked, 'message') + (verb === 'redrive' ? ' to the queue' : '');
    if (count(d.notFound)) text += '; ' + count(d.notFound) + ' no longer in the DLQ';
    if (count(d.failed)) text += '; ' + count(d.failed) + ' failed (still in the DLQ)';
    return text + unsent + '.';
  }
  function redrive(all) {
    var handles = Object.keys(S.dlqChecked).filter(function (h) { return S.dlqChecked[h]; });
    $('#redrive-all').disabled = true;
    $('#redrive-selected').disabled = true;
    api('POST', '/dlq/redrive', all ? { all: true } : { handles: handles }).then(function (r) {
      if (r.ok) {
        var d = r.data || {};
        msg('#dlq-msg', count(d.failed) || count(d.sentNotDeleted) ? 'err' : 'ok', describeDlqReply('redrive', d, handles.length));
        // Those sent but not deleted stay selected, for Delete selected.
        S.dlqChecked = {};
        (d.sentNotDeleted || []).forEach(function (h) { S.dlqChecked[h] = true; });
      } else {
        msg('#dlq-msg', missingRoute(r) ? 'info' : 'err', missingRoute(r) ? 'Redrive is not available on this deployment.' : 'Redrive failed: ' + errorText(r));
      }
      var shown = $('#dlq-msg').textContent;
      var kind = $('#dlq-msg').className;
      return loadDlq().then(function () { $('#dlq-msg').className = kind; $('#dlq-msg').textContent = shown; });
    });
  }

  function deleteSelected() {
    var handles = Object.keys(S.dlqChecked).filter(function (h) { return S.dlqChecked[h]; });
    if (!handles.length || !window.confirm('Delete ' + plural(handles.length, 'message') + ' from the dead-letter queue? They are gone for good.')) return;
    $('#delete-selected').disabled = true;
    api('POST', '/dlq/delete', { handles: handles }).then(function (r) {
      if (r.ok) { msg('#dlq-msg', count((r.data || {}).failed) ? 'err' : 'ok', describeDlqReply('delete', r.data || {}, handles.length)); S.dlqChecked = {}; }
      else msg('#dlq-msg', 'err', 'Delete failed: ' + errorText(r));
      var shown = $('#dlq-msg').textContent;
      var kind = $('#dlq-msg').className;
      return loadDlq().then(function () { $('#dlq-msg').className = kind; $('#dlq-msg').textContent = shown; });
    });
  }

  // ---- live refresh, tabs, tenant ----
  function liveLabel() {
    var live = $('#live');
    var on = !S.paused && !(S.tab === 'jobs' && S.page > 0);
    live.className = 'where ' + (on ? 'on' : 'off');
    live.textContent = on ? 'live (every ' + Math.round(cfg.refreshMs / 100) / 10 + ' s)' : S.paused ? 'paused' : 'paused on page ' + (S.page + 1) + ': back to page 1 to resume';
    $('#pause').textContent = S.paused ? 'Resume' : 'Pause';
  }
  function refreshTab() {
    if (S.tab === 'jobs') return loadJobs();
    if (S.tab === 'schedules') return loadSchedules(false);
    return loadDlq();
  }
  function tick() {
    if (S.busy || S.paused || !S.tenant || document.hidden) return;
    if (S.tab === 'jobs' && S.page > 0) return;
    // Each peek at the DLQ counts as a receive of its messages: every 10 s is enough.
    if (S.tab === 'dlq' && Date.now() - S.dlqAt < DLQ_REFRESH_MS) return;
    S.busy = true;
    Promise.all([refreshTab(), S.selected && S.tab === 'jobs' ? loadJob() : null]).finally(function () { S.busy = false; });
  }
  function showTab(tab) {
    S.tab = tab;
    document.querySelectorAll('nav button').forEach(function (b) { b.classList.toggle('on', b.getAttribute('data-tab') === tab); });
    ['jobs', 'schedules', 'dlq'].forEach(function (t) { $('#tab-' + t).hidden = t !== tab; });
    $('#detail').hidden = tab !== 'jobs' || !S.selected;
    liveLabel();
    return refreshTab();
  }
  function setTenant(t) {
    S.tenant = t;
    S.selected = null;
    S.dlqChecked = {};
    $('#detail').hidden = true;
    showJobs(true);
    if (S.tab !== 'jobs') refreshTab();
  }

  fetch('ui/config').then(function (r) { return r.json(); }).then(function (c) {
    cfg = c;
    $('#where').textContent = (c.local ? 'local stack ' : 'API ') + c.endpoint;
    var slot = $('#tenant-slot');
    var picker;
    if (c.local) {
      picker = el('select', { id: 'tenant' }, c.tenants.map(function (t) { return el('option', { value: t, text: t }); }));
      picker.value = c.tenant;
    } else {
      picker = el('input', { id: 'tenant', list: 'tenant-list', size: '14', value: c.tenant, placeholder: 'tenant' });
      slot.appendChild(el('datalist', { id: 'tenant-list' }, c.tenants.map(function (t) { return el('option', { value: t }); })));
    }
    picker.addEventListener('change', function () { if (picker.value.trim()) setTenant(picker.value.trim()); });
    slot.appendChild(picker);
    $('#filters').addEventListener('submit', function (e) { e.preventDefault(); showJobs(true); });
    $('#open').addEventListener('submit', function (e) {
      e.preventDefault();
      var id = $('#open').jobId.value.trim();
      if (id) openJob(id);
    });
    $('#prev').addEventListener('click', function () { if (S.page > 0) { S.page--; loadJobs(); } });
    $('#next').addEventListener('click', function () { if (S.nextCursor) { S.cursors[S.page + 1] = S.nextCursor; S.page++; loadJobs(); } });
    $('#pause').addEventListener('click', function () { S.paused = !S.paused; liveLabel(); });
    $('#cancel').addEventListener('click', cancelJob);
    $('#detail-close').addEventListener('click', function () { S.selected = null; $('#detail').hidden = true; document.querySelectorAll('#jobs tr.sel').forEach(function (tr) { tr.classList.remove('sel'); }); });
    $('#schedules-more').addEventListener('click', function () { loadSchedules(true); });
    $('#redrive-all').addEventListener('click', function () { redrive(true); });
    $('#redrive-selected').addEventListener('click', function () { redrive(false); });
    $('#delete-selected').addEventListener('click', deleteSelected);
    $('#dlq-all').addEventListener('change', function () {
      var on = $('#dlq-all').checked;
      document.querySelectorAll('#dlq tbody input[type=checkbox]').forEach(function (b) { b.checked = on; S.dlqChecked[b.getAttribute('data-handle')] = on; });
      dlqButtons();
    });
    document.querySelectorAll('nav button').forEach(function (b) { b.addEventListener('click', function () { showTab(b.getAttribute('data-tab')); }); });
    if (c.tenant) setTenant(c.tenant);
    else msg('#jobs-msg', 'info', 'Pick a tenant.');
    setInterval(tick, c.refreshMs);
  });
})();
`;
