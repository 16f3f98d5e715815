/** The detail panel: one job's fields and timeline (`GET .../jobs/{jobId}`), and its cancel. */
import { callApi, errorText } from './api.js';
import type { JobStatus, TimelineEvent } from './apiTypes.js';
import { shortHash } from './deadLetterReplies.js';
import { $, asText, el, showMessage, stateBadge } from './dom.js';
import { state } from './state.js';
import { fetchTrace, spansOfJob, waterfall } from './trace.js';

/** Opens `jobId` in the detail panel (a row's click, or Open a job by id) and marks its row. */
export function openJob(jobId: string): Promise<void> {
  state.selected = jobId;
  for (const row of document.querySelectorAll('#jobs tbody tr')) row.classList.toggle('sel', row.getAttribute('data-job-id') === jobId);
  $('#detail').hidden = false;
  showMessage('#detail-msg', 'info');
  return loadJob();
}

/** Closes the detail panel: no job is open. */
export function closeJob(): void {
  state.selected = null;
  $('#detail').hidden = true;
  for (const row of document.querySelectorAll('#jobs tr.sel')) row.classList.remove('sel');
}

/** Loads the open job into the panel. A reply for a job closed or left meanwhile is dropped. */
export async function loadJob(): Promise<void> {
  const jobId = state.selected;
  if (!jobId) return;
  const reply = await callApi<JobStatus>('GET', `/jobs/${encodeURIComponent(jobId)}`);
  if (jobId !== state.selected) return;
  const fields = $('#detail-fields');
  if (!reply.ok) {
    fields.replaceChildren(el('dt', { text: 'job' }), el('dd', { class: 'mono', text: jobId }));
    showMessage('#detail-msg', 'err', errorText(reply));
    return;
  }
  const job = reply.data;
  fields.replaceChildren(...(job ? fieldRows(job) : []));
  $('#detail-timeline').replaceChildren(...timeline(job?.timeline ?? []));
  showCancel(job);
  await showTrace(jobId, job?.traceId);
}

/** The job's waterfall under its timeline (the local stack's spans of its trace), or nothing without a trace id. */
async function showTrace(jobId: string, traceId: string | undefined): Promise<void> {
  const spans = traceId ? await fetchTrace(traceId) : undefined;
  if (jobId !== state.selected) return;
  $('#detail-trace').replaceChildren(...(traceId ? waterfall(traceId, spans && spansOfJob(spans, jobId)) : []));
}

/**
 * The cancel button: **Cancel job** for a job still in the table (`SCHEDULED`, or a keyed job
 * `ACQUIRED` while it waits for its key's slot); **Ask to stop** for a delivered job whose worker
 * reports its end (a history tenant's job without a final outcome, a keyed job, a workflow's
 * job: docs/flow-control.md "Cancel a running job"), until a stop was asked; off otherwise. The
 * API says why when it is too late.
 */
function showCancel(job: JobStatus | null): void {
  const button = $<HTMLButtonElement>('#cancel');
  const state = job?.state;
  const reported = job !== null && (job.concurrencyKey !== undefined || isWorkflowJob(job.jobId));
  const waiting = state === 'SCHEDULED' || (state === 'ACQUIRED' && job?.concurrencyKey !== undefined);
  const running = state === 'DELIVERED' || state === 'FAILED' || (state === 'QUEUED' && reported);
  button.textContent = running ? 'Ask to stop' : 'Cancel job';
  button.disabled = !(waiting || (running && job?.cancelRequested !== true));
}

/** A workflow's job: its id's path is `w` (`j1.<tenant>.<shard>.<time>.w.…`). */
function isWorkflowJob(jobId: string): boolean {
  return jobId.split('.')[4] === 'w';
}

/** Every field of the job as the API gave it (a term and its value), the timeline apart. */
function fieldRows(job: JobStatus): HTMLElement[] {
  return Object.entries(job)
    .filter(([name]) => name !== 'timeline')
    .flatMap(([name, value]: [string, unknown]) => [
      el('dt', { text: name }),
      name === 'state' ? el('dd', {}, [stateBadge(asText(value))]) : el('dd', { class: 'mono', text: asText(value) }),
    ]);
}

/** The job's events, oldest first, under a heading; a tenant without history has none. */
function timeline(events: readonly TimelineEvent[]): HTMLElement[] {
  if (events.length === 0)
    return [el('p', { class: 'muted small', text: 'No timeline: this tenant keeps no history (or the job has none yet).' })];
  return [el('b', { text: 'Timeline' }), el('ol', { class: 'timeline' }, events.map(timelineItem))];
}

/** The fields a timeline item shows in words of its own rather than as `name value`. */
const OWN_WORDS = new Set(['at', 'event', 'oldPayloadSha256', 'newPayloadSha256']);

/**
 * An event: when, what, and its other fields (attempt, error, duration, result; an `EDITED`'s
 * `by`) on a line below; an edit's payload hashes shortened, `payload 3f2a… → 9c1b…`, in full on hover.
 */
function timelineItem(event: TimelineEvent): HTMLLIElement {
  const details = Object.entries(event)
    .filter(([name]) => !OWN_WORDS.has(name))
    .map(([name, value]: [string, unknown]) => `${name} ${asText(value)}`);
  const { oldPayloadSha256: before, newPayloadSha256: after } = event;
  if (before || after) details.push(`payload ${shortHash(before) || '?'} → ${shortHash(after) || '?'}`);
  const hashes: Record<string, string> = before || after ? { title: `payload SHA-256 ${before ?? '?'} → ${after ?? '?'}` } : {};
  return el('li', {}, [
    el('span', { class: 'mono small', text: event.at || '' }),
    ' ',
    el('b', { text: event.event || '' }),
    details.length ? el('div', { class: 'muted small', text: details.join(', '), ...hashes }) : null,
  ]);
}

/**
 * Cancels the open job (`DELETE .../jobs/{jobId}`) and says how that went. Resolves `false` when
 * no job is open, so the caller knows there is nothing to reload.
 */
export async function cancelJob(): Promise<boolean> {
  const jobId = state.selected;
  if (!jobId) return false;
  $<HTMLButtonElement>('#cancel').disabled = true;
  const reply = await callApi('DELETE', `/jobs/${encodeURIComponent(jobId)}`);
  const asked = reply.ok && (reply.data as { state?: string } | null)?.state === 'CANCEL_REQUESTED';
  // 202: the job runs now; its worker is asked to stop it (docs/flow-control.md).
  if (asked) showMessage('#detail-msg', 'ok', `Asked the worker running ${jobId} to stop it (CANCEL_REQUESTED).`);
  else if (reply.ok) showMessage('#detail-msg', 'ok', `Cancelled ${jobId}.`);
  else showMessage('#detail-msg', 'err', `Not cancelled: ${errorText(reply)}`);
  return true;
}
