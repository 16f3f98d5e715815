/** The tabs, the tenant, and the live refresh that keeps what they show current. */
import { $ } from './dom.js';
import { resetDeadLetterEdits } from './deadLetterEdits.js';
import { loadDeadLetters } from './deadLetters.js';
import { loadJob } from './job.js';
import { loadJobs, showFilteredJobs } from './jobs.js';
import { showLiveLabel } from './liveLabel.js';
import { loadSchedules } from './schedules.js';
import { loadWorkflow } from './workflow.js';
import { state, type Tab } from './state.js';

/** Each peek at the DLQ counts as a receive of its messages (docs/dead-letters.md): every 10 s is enough. */
const DLQ_REFRESH_MS = 10_000;

/** Reloads what the open tab shows. */
function refreshTab(): Promise<void> {
  if (state.tab === 'jobs') return loadJobs(true);
  if (state.tab === 'schedules') return loadSchedules(false);
  if (state.tab === 'workflows') return loadWorkflow();
  return loadDeadLetters();
}

/**
 * Whether the live refresh runs now: not paused, the browser tab visible, not on a later page of
 * the list (rows would shift under the reader), the DLQ not peeked at too often, and the last
 * refresh done (a slow API must not pile up requests).
 */
function refreshDue(): boolean {
  if (state.busy || state.paused || !state.tenant || document.hidden) return false;
  if (state.tab === 'jobs' && state.page > 0) return false;
  return !(state.tab === 'dlq' && Date.now() - state.dlqAt < DLQ_REFRESH_MS);
}

/** One beat of the live refresh (every `refreshMs`): the open tab, and the open job with the list. */
export function tick(): void {
  if (!refreshDue()) return;
  state.busy = true;
  void Promise.all([refreshTab(), state.selected && state.tab === 'jobs' ? loadJob() : undefined]).finally(() => {
    state.busy = false;
  });
}

/** Shows the tab `tab` (the job panel with the Jobs tab only) and loads it. */
export function showTab(tab: Tab): Promise<void> {
  state.tab = tab;
  for (const button of document.querySelectorAll('nav button')) button.classList.toggle('on', button.getAttribute('data-tab') === tab);
  for (const other of ['jobs', 'schedules', 'dlq', 'workflows'] as const) $(`#tab-${other}`).hidden = other !== tab;
  $('#detail').hidden = tab !== 'jobs' || !state.selected;
  showLiveLabel();
  return refreshTab();
}

/** Switches to `tenant`: its first page of jobs, and the open tab; nothing of the last tenant stays selected. */
export function showTenant(tenant: string): void {
  state.tenant = tenant;
  state.selected = null;
  state.workflow = null;
  state.dlqChecked = new Map();
  resetDeadLetterEdits();
  $('#detail').hidden = true;
  void showFilteredJobs();
  if (state.tab !== 'jobs') void refreshTab();
}
