/** The Jobs tab's list: `GET .../jobs` with the filters, a page at a time. */
import { callApi, errorText, missingRoute } from './api.js';
import type { CancelJobsStarted, JobPage, ListedJob, Operation } from './apiTypes.js';
import { $, el, fieldValue, showMessage, stateBadge } from './dom.js';
import { openJob } from './job.js';
import { showLiveLabel } from './liveLabel.js';
import { state } from './state.js';

/**
 * The filters' query: the window on runAt entered in the browser's local time, sent as RFC 3339.
 *
 * @example filterQuery().toString() // 'state=QUEUED&limit=25'
 */
function filterQuery(): URLSearchParams {
  const form = $<HTMLFormElement>('#filters');
  const value = (name: string) => fieldValue(form, name);
  const query = new URLSearchParams();
  const [from, to, schedule, tag] = [value('from'), value('to'), value('schedule').trim(), value('tag').trim()];
  if (value('state')) query.set('state', value('state'));
  if (from) query.set('from', new Date(from).toISOString());
  if (to) query.set('to', new Date(to).toISOString());
  if (schedule) query.set('schedule', schedule);
  if (tag) query.set('tag', tag);
  if (value('order') !== 'asc') query.set('order', value('order'));
  query.set('limit', value('limit'));
  return query;
}

/** The query of the page shown now: the filters and the page's cursor. */
function pageQuery(): string {
  const query = new URLSearchParams(state.query);
  const cursor = state.cursors[state.page];
  if (cursor) query.set('cursor', cursor);
  return query.toString();
}

/** Loads the page shown now into the table. A reply for a page or tenant left meanwhile is dropped. */
export async function loadJobs(): Promise<void> {
  const query = pageQuery();
  const asked = `${state.tenant}?${query}`;
  const reply = await callApi<JobPage>('GET', `/jobs?${query}`);
  if (asked !== `${state.tenant}?${pageQuery()}`) return;
  const body = $('#jobs tbody');
  if (!reply.ok) {
    body.replaceChildren();
    state.nextCursor = null;
    if (missingRoute(reply))
      showMessage(
        '#jobs-msg',
        'info',
        'Listing jobs is not available on this deployment (GET /v1/tenants/{tenant}/jobs answered 404): update the stack. You can still open a job by its id above.',
      );
    else showMessage('#jobs-msg', 'err', `Could not list jobs: ${errorText(reply)}`);
    showPager();
    return;
  }
  const jobs = reply.data?.jobs ?? [];
  state.nextCursor = reply.data?.nextCursor || null;
  showMessage('#jobs-msg', 'info', jobs.length > 0 ? '' : state.page === 0 ? 'No jobs match.' : 'No more jobs.');
  body.replaceChildren(...jobs.map(jobRow));
  showPager();
}

/** A row of the list; a click opens the job in the detail panel. */
function jobRow(job: ListedJob): HTMLTableRowElement {
  const row = el('tr', { class: state.selected === job.jobId ? 'job sel' : 'job', 'data-job-id': job.jobId }, [
    el('td', { class: 'mono', text: job.jobId }),
    el('td', { class: 'mono', text: job.runAt || '' }),
    el('td', {}, [stateBadge(job.state)]),
    el('td', { class: 'mono', text: job.deliveredAt ?? '' }),
    el('td', { text: job.schedule ?? '' }),
    el('td', { class: 'small', text: (job.tags ?? []).join(', ') }),
  ]);
  row.addEventListener('click', () => void openJob(job.jobId));
  return row;
}

/** The page number, and Previous and Next enabled where they lead somewhere. */
function showPager(): void {
  $('#page').textContent = `Page ${state.page + 1}`;
  $<HTMLButtonElement>('#prev').disabled = state.page === 0;
  $<HTMLButtonElement>('#next').disabled = !state.nextCursor;
  showLiveLabel();
}

/** Back to page 1 with the filters as they are now (Show, or another tenant). */
export function showFilteredJobs(): Promise<void> {
  state.query = filterQuery().toString();
  state.cursors = [null];
  state.page = 0;
  state.nextCursor = null;
  return loadJobs();
}

export function previousPage(): void {
  if (state.page === 0) return;
  state.page--;
  void loadJobs();
}

/** Follows the last reply's cursor, keeping it so that Previous can come back to this page. */
export function nextPage(): void {
  if (!state.nextCursor) return;
  state.cursors[state.page + 1] = state.nextCursor;
  state.page++;
  void loadJobs();
}

/** How long the page follows a bulk cancel before it leaves the rest to `dynein operation`. */
const FOLLOW_OPERATION_MS = 60_000;

/**
 * Cancels every pending job with the tag in the filters (`POST .../jobs/cancel`, docs/flow-control.md),
 * once the user confirms, then follows the operation until it is done, its counts in the message.
 */
export async function cancelByTag(): Promise<void> {
  const tag = fieldValue($<HTMLFormElement>('#filters'), 'tag').trim();
  if (!tag) return showMessage('#jobs-msg', 'err', 'Enter a tag first: every pending job with that tag is cancelled.');
  if (!window.confirm(`Cancel every pending job of ${state.tenant} tagged "${tag}"? Jobs already delivered are not affected.`)) return;
  const button = $<HTMLButtonElement>('#cancel-tag');
  button.disabled = true;
  try {
    const started = await callApi<CancelJobsStarted>('POST', '/jobs/cancel', { tag });
    if (!started.ok) return showMessage('#jobs-msg', 'err', `Not cancelled: ${errorText(started)}`);
    if (!started.data) return showMessage('#jobs-msg', 'err', 'Not cancelled: the reply had no operation id');
    const id = started.data.operationId;
    for (const until = Date.now() + FOLLOW_OPERATION_MS; ;) {
      const op = await callApi<Operation>('GET', `/operations/${encodeURIComponent(id)}`);
      if (!op.ok) return showMessage('#jobs-msg', 'err', `Cancel ${id} started; its progress could not be read: ${errorText(op)}`);
      if (!op.data) return showMessage('#jobs-msg', 'err', `Cancel ${id} started; its progress came back empty`);
      const counts = `matched ${op.data.matched}, cancelled ${op.data.cancelled}, already queued ${op.data.alreadyQueued}, not cancellable ${op.data.notCancellable}`;
      if (op.data.state === 'DONE') {
        showMessage('#jobs-msg', 'ok', `Cancelled by tag "${tag}": ${counts}.`);
        break;
      }
      if (Date.now() > until)
        return showMessage('#jobs-msg', 'info', `Still cancelling (${counts}): follow it with dynein operation ${id}.`);
      showMessage('#jobs-msg', 'info', `Cancelling by tag "${tag}": ${counts}...`);
      await new Promise((r) => setTimeout(r, 500));
    }
    await loadJobs();
  } finally {
    button.disabled = false;
  }
}
