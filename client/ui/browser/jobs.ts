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
  const [from, to, schedule, tag, key] = [value('from'), value('to'), value('schedule').trim(), value('tag').trim(), value('key').trim()];
  if (value('state')) query.set('state', value('state'));
  if (from) query.set('from', new Date(from).toISOString());
  if (to) query.set('to', new Date(to).toISOString());
  if (schedule) query.set('schedule', schedule);
  if (tag) query.set('tag', tag);
  if (key) query.set('concurrencyKey', key);
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

/**
 * Loads the page shown now into the table. A reply for a page or tenant left meanwhile is dropped.
 * `keepMessage`: a refresh (live, or after a bulk cancel) leaves the message shown, the outcome
 * of what the user did, unless the page is empty; a load the user asked for clears it.
 */
export async function loadJobs(keepMessage = false): Promise<void> {
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
  if (jobs.length === 0) showMessage('#jobs-msg', 'info', state.page === 0 ? 'No jobs match.' : 'No more jobs.');
  else if (!keepMessage) showMessage('#jobs-msg', 'info', '');
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
    el('td', { class: 'mono' }, [
      job.concurrencyKey,
      job.concurrencyKey !== undefined && job.concurrencyLimit !== undefined
        ? el('span', { class: 'muted small', text: ` (limit ${job.concurrencyLimit})` })
        : null,
    ]),
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

/** A bulk cancel the Jobs tab offers: which filter field selects the jobs, and how its messages name them. */
interface CancelSelector {
  /** The field of the filters form that holds the value. */
  readonly field: string;
  /** The selector of the `POST .../jobs/cancel` body (docs/flow-control.md "Bulk cancel"). */
  readonly body: 'tag' | 'concurrencyKey';
  /** The button, disabled while its cancel runs. */
  readonly button: string;
  /** `tag` / `key`, as in "Cancelled by tag "order-42"". */
  readonly noun: string;
  /** What the confirmation says the jobs are: `tagged "order-42"`. */
  readonly described: (value: string) => string;
  /** What the message asks for when the field is empty. */
  readonly missing: string;
}

const BY_TAG: CancelSelector = {
  field: 'tag',
  body: 'tag',
  button: '#cancel-tag',
  noun: 'tag',
  described: (tag) => `tagged "${tag}"`,
  missing: 'Enter a tag first: every pending job with that tag is cancelled.',
};

const BY_KEY: CancelSelector = {
  field: 'key',
  body: 'concurrencyKey',
  button: '#cancel-key',
  noun: 'key',
  described: (key) => `with concurrency key "${key}"`,
  missing: 'Enter a concurrency key first: every pending job with that key is cancelled.',
};

/** Cancel all with this tag: {@link cancelAllWith} the tag filter's value. */
export function cancelByTag(): Promise<void> {
  return cancelAllWith(BY_TAG);
}

/** Cancel all with this key: {@link cancelAllWith} the key filter's value. */
export function cancelByKey(): Promise<void> {
  return cancelAllWith(BY_KEY);
}

/**
 * Cancels every pending job selected by the filter's value, the tag or the concurrency key
 * (`POST .../jobs/cancel`, docs/flow-control.md), once the user confirms, then follows the operation
 * until it is done, its counts in the message.
 */
async function cancelAllWith(by: CancelSelector): Promise<void> {
  const value = fieldValue($<HTMLFormElement>('#filters'), by.field).trim();
  if (!value) return showMessage('#jobs-msg', 'err', by.missing);
  if (!window.confirm(`Cancel every pending job of ${state.tenant} ${by.described(value)}? Jobs already delivered are not affected.`))
    return;
  const button = $<HTMLButtonElement>(by.button);
  button.disabled = true;
  try {
    const started = await callApi<CancelJobsStarted>('POST', '/jobs/cancel', { [by.body]: value });
    if (!started.ok) return showMessage('#jobs-msg', 'err', `Not cancelled: ${errorText(started)}`);
    if (!started.data) return showMessage('#jobs-msg', 'err', 'Not cancelled: the reply had no operation id');
    if (await followOperation(started.data.operationId, `by ${by.noun} "${value}"`)) await loadJobs(true);
  } finally {
    button.disabled = false;
  }
}

/**
 * Follows a bulk cancel until it is `DONE` (true), its counts in the message as they grow, for up to
 * {@link FOLLOW_OPERATION_MS}; false when its progress could not be read, or it still runs then.
 */
async function followOperation(id: string, what: string): Promise<boolean> {
  for (const until = Date.now() + FOLLOW_OPERATION_MS; ;) {
    const op = await callApi<Operation>('GET', `/operations/${encodeURIComponent(id)}`);
    if (!op.ok || !op.data) {
      const why = op.ok ? 'came back empty' : `could not be read: ${errorText(op)}`;
      showMessage('#jobs-msg', 'err', `Cancel ${id} started; its progress ${why}`);
      return false;
    }
    const counts = `matched ${op.data.matched}, cancelled ${op.data.cancelled}, already queued ${op.data.alreadyQueued}, not cancellable ${op.data.notCancellable}`;
    if (op.data.state === 'DONE') {
      showMessage('#jobs-msg', 'ok', `Cancelled ${what}: ${counts}.`);
      return true;
    }
    if (Date.now() > until) {
      showMessage('#jobs-msg', 'info', `Still cancelling (${counts}): follow it with dynein operation ${id}.`);
      return false;
    }
    showMessage('#jobs-msg', 'info', `Cancelling ${what}: ${counts}...`);
    await new Promise((r) => setTimeout(r, 500));
  }
}
