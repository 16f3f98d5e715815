import { $ } from './dom.js';
import { state } from './state.js';

/**
 * Whether the live refresh runs, in the header, and the Pause button's label. It stops on a later
 * page of the list (rows would shift under the reader) as well as on Pause.
 */
export function showLiveLabel(): void {
  const live = $('#live');
  const on = !state.paused && !(state.tab === 'jobs' && state.page > 0);
  live.className = `where ${on ? 'on' : 'off'}`;
  live.textContent = on
    ? `live (every ${Math.round(state.refreshMs / 100) / 10} s)`
    : state.paused
      ? 'paused'
      : `paused on page ${state.page + 1}: back to page 1 to resume`;
  $('#pause').textContent = state.paused ? 'Resume' : 'Pause';
}
