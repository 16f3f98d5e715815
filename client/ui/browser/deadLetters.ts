/**
 * The Dead letters tab: a peek at the tenant's DLQ (`GET .../dlq`), and redrive or delete of the
 * messages ticked (`POST .../dlq/redrive`, `POST .../dlq/delete`). A Dynein delivery's Edit opens
 * the payload editor of deadLetterEdits.ts (the `dynein:edit-dead-letter` event, wired by main.ts).
 */
import { callApi, errorText, missingRoute } from './api.js';
import type { DeadLetter, DeadLetterPage, DeadLetterRedrive, DeadLettersDeleted } from './apiTypes.js';
import { describeDelete, describeRedrive, failed, plural, sentNotDeleted } from './deadLetterReplies.js';
import { $, el, showMessage } from './dom.js';
import { state } from './state.js';

/** The characters of a message body shown in its row. */
const BODY_SHOWN = 80;

/** Loads the messages at the head of the DLQ. Ticks survive a reload for the messages still there. */
export async function loadDeadLetters(): Promise<void> {
  state.dlqAt = Date.now();
  const reply = await callApi<DeadLetterPage>('GET', '/dlq');
  const body = $('#dlq tbody');
  if (!reply.ok) {
    body.replaceChildren();
    for (const id of ['#redrive-all', '#redrive-selected', '#delete-selected']) $<HTMLButtonElement>(id).disabled = true;
    $('#dlq-depth').textContent = '';
    if (missingRoute(reply))
      showMessage(
        '#dlq-msg',
        'info',
        'Dead letters are not available on this deployment (GET /v1/tenants/{tenant}/dlq answered 404): update the stack, or use dynein redrive.',
      );
    else showMessage('#dlq-msg', 'err', `Could not read the dead-letter queue: ${errorText(reply)}`);
    return;
  }
  const messages = reply.data?.messages ?? [];
  const ticked = state.dlqChecked;
  state.dlqChecked = new Map(messages.map((m) => [m.handle, ticked.get(m.handle) ?? false]));
  state.dlqStuck = new Set(messages.map((m) => m.handle).filter((handle) => state.dlqStuck.has(handle)));
  body.replaceChildren(...messages.map(deadLetterRow));
  showMessage('#dlq-msg', 'info', messages.length === 0 ? 'The dead-letter queue is empty.' : '');
  $('#dlq-depth').textContent = depthText(reply.data?.approximateDepth, messages.length);
  $<HTMLButtonElement>('#redrive-all').disabled = messages.length === 0;
  showSelectionButtons();
}

/** A peek shows at most 10 messages: says so when the queue holds more. */
function depthText(depth: number | undefined, shown: number): string {
  if (typeof depth !== 'number' || depth <= shown) return '';
  return `about ${depth} messages in the queue; showing ${shown} (redrive or delete them to see more)`;
}

function deadLetterRow(message: DeadLetter): HTMLTableRowElement {
  const { handle } = message;
  const box = el('input', { type: 'checkbox', 'data-handle': handle });
  box.checked = state.dlqChecked.get(handle) ?? false;
  box.addEventListener('change', () => {
    state.dlqChecked.set(handle, box.checked);
    showSelectionButtons();
  });
  const { body } = message;
  return el('tr', { 'data-handle': handle }, [
    el('td', {}, [box]),
    el('td', { class: 'mono', text: message.jobId || message.messageId }),
    el('td', { text: String(message.receiveCount) }),
    el('td', { class: 'mono small', text: message.firstReceivedAt || message.sentAt || '' }),
    el('td', { class: 'small', text: message.attributes.dyneinError ?? '' }),
    el('td', { class: 'mono small', text: body.length > BODY_SHOWN ? `${body.slice(0, BODY_SHOWN)}…` : body }),
    el('td', {}, [message.jobId ? editButton(message, message.jobId) : null]),
  ]);
}

/**
 * Edit, on a Dynein delivery's row (a message someone else sent has no payload to edit). Disabled
 * on one sent but not deleted: it is already back on the queue, another edit would deliver it twice.
 */
function editButton(message: DeadLetter, jobId: string): HTMLButtonElement {
  const stuck = state.dlqStuck.has(message.handle);
  const button = el('button', {
    type: 'button',
    class: 'edit',
    'aria-label': `Edit the payload of ${jobId}`,
    title: stuck
      ? 'Already sent to the queue (its delete from the DLQ failed): delete it, do not edit it again'
      : 'Edit the payload and retry',
    text: 'Edit',
  });
  button.disabled = stuck;
  button.addEventListener('click', () => window.dispatchEvent(new CustomEvent('dynein:edit-dead-letter', { detail: message })));
  return button;
}

/** The handles ticked, in row order. */
function tickedHandles(): string[] {
  return [...state.dlqChecked].filter(([, ticked]) => ticked).map(([handle]) => handle);
}

/** Ticks or unticks every message shown (the header's checkbox). */
export function tickAll(on: boolean): void {
  for (const box of document.querySelectorAll<HTMLInputElement>('#dlq tbody input[type=checkbox]')) {
    box.checked = on;
    state.dlqChecked.set(box.getAttribute('data-handle') ?? '', on);
  }
  showSelectionButtons();
}

/** Redrive selected and Delete selected, enabled with how many are ticked. */
function showSelectionButtons(): void {
  const n = tickedHandles().length;
  for (const [id, label] of [
    ['#redrive-selected', 'Redrive selected'],
    ['#delete-selected', 'Delete selected'],
  ] as const) {
    const button = $<HTMLButtonElement>(id);
    button.disabled = n === 0;
    button.textContent = n ? `${label} (${n})` : label;
  }
}

/**
 * Redrives every message (`all`) or those ticked, and says how that went. Those sent but not
 * deleted stay ticked, ready for Delete selected.
 */
export async function redrive(all: boolean): Promise<void> {
  const handles = tickedHandles();
  $<HTMLButtonElement>('#redrive-all').disabled = true;
  $<HTMLButtonElement>('#redrive-selected').disabled = true;
  const reply = await callApi<DeadLetterRedrive>('POST', '/dlq/redrive', all ? { all: true } : { handles });
  if (reply.ok) {
    const result = reply.data ?? { redriven: handles, notFound: [] };
    const stuck = sentNotDeleted(result);
    showMessage('#dlq-msg', failed(result).length || stuck.length ? 'err' : 'ok', describeRedrive(result));
    state.dlqChecked = new Map(stuck.map((handle) => [handle, true]));
    for (const handle of stuck) state.dlqStuck.add(handle);
  } else if (missingRoute(reply)) showMessage('#dlq-msg', 'info', 'Redrive is not available on this deployment.');
  else showMessage('#dlq-msg', 'err', `Redrive failed: ${errorText(reply)}`);
  await reloadKeepingMessage();
}

/** Deletes the messages ticked, for good, once the user confirms. */
export async function deleteTicked(): Promise<void> {
  const handles = tickedHandles();
  if (handles.length === 0) return;
  if (!window.confirm(`Delete ${plural(handles.length, 'message')} from the dead-letter queue? They are gone for good.`)) return;
  $<HTMLButtonElement>('#delete-selected').disabled = true;
  const reply = await callApi<DeadLettersDeleted>('POST', '/dlq/delete', { handles });
  if (reply.ok) {
    const result = reply.data ?? { deleted: handles, notFound: [] };
    showMessage('#dlq-msg', failed(result).length ? 'err' : 'ok', describeDelete(result));
    state.dlqChecked = new Map();
  } else showMessage('#dlq-msg', 'err', `Delete failed: ${errorText(reply)}`);
  await reloadKeepingMessage();
}

/** Reloads the list after a redrive, delete or edit; the reload would clear the message saying how it went. */
export async function reloadKeepingMessage(): Promise<void> {
  const box = $('#dlq-msg');
  const { className, textContent } = box;
  await loadDeadLetters();
  box.className = className;
  box.textContent = textContent;
}
