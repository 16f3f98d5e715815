/** The Schedules tab: the tenant's recurring schedules (`GET .../schedules`), 50 at a time. */
import { callApi, errorText, missingRoute } from './api.js';
import type { Schedule, SchedulePage } from './apiTypes.js';
import { $, el, showMessage, stateBadge } from './dom.js';
import { state } from './state.js';

/** The next runs shown per schedule; more are elided. */
const RUNS_SHOWN = 3;

/** Loads the first schedules into the table or, with `more`, appends those after the last shown. */
export async function loadSchedules(more: boolean): Promise<void> {
  const query = new URLSearchParams({ limit: '50' });
  if (more && state.scheduleCursor) query.set('cursor', state.scheduleCursor);
  const reply = await callApi<SchedulePage>('GET', `/schedules?${query.toString()}`);
  const body = $('#schedules tbody');
  const moreButton = $('#schedules-more');
  if (!reply.ok) {
    body.replaceChildren();
    moreButton.hidden = true;
    if (missingRoute(reply)) showMessage('#schedules-msg', 'info', 'Recurring schedules are not available on this deployment.');
    else showMessage('#schedules-msg', 'err', `Could not list schedules: ${errorText(reply)}`);
    return;
  }
  const schedules = reply.data?.schedules ?? [];
  state.scheduleCursor = reply.data?.nextCursor || null;
  moreButton.hidden = !state.scheduleCursor;
  showMessage('#schedules-msg', 'info', schedules.length === 0 && !more ? 'This tenant has no recurring schedules.' : '');
  const rows = schedules.map(scheduleRow);
  if (more) body.append(...rows);
  else body.replaceChildren(...rows);
}

function scheduleRow(schedule: Schedule): HTMLTableRowElement {
  return el('tr', { 'data-schedule': schedule.name }, [
    el('td', { text: schedule.name }),
    el('td', {}, [stateBadge(schedule.state)]),
    el('td', { class: 'mono', text: schedule.expression }),
    el('td', { text: schedule.timezone || '' }),
    el('td', { class: 'mono small', text: nextRunsText(schedule) }),
  ]);
}

/**
 * The first next runs, or why there are none: a schedule paused, or past its end.
 *
 * @example nextRunsText(nightly) // '2030-01-02T01:00:00.000Z  2030-01-03T01:00:00.000Z  2030-01-04T01:00:00.000Z  …'
 */
function nextRunsText({ nextRuns = [], state: scheduleState }: Schedule): string {
  if (nextRuns.length === 0) return scheduleState === 'DISABLED' ? 'paused' : 'ended';
  return nextRuns.slice(0, RUNS_SHOWN).join('  ') + (nextRuns.length > RUNS_SHOWN ? '  …' : '');
}
