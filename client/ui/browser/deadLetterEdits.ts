/**
 * Edit and retry, in the Dead letters tab: a Dynein delivery's payload edited and the job put back
 * on its queue (`POST .../dlq/edit`), and the tenant's edits, newest first (`GET .../dlq/audit`).
 * The payload goes as the text typed, byte for byte: the request's body is written as text around
 * it, never parsed and serialised again.
 */
import { callApi, errorText, JsonText, missingRoute } from './api.js';
import type { DeadLetter, DeadLetterAuditEntry, DeadLetterAuditPage, DeadLetterEdit } from './apiTypes.js';
import { describeEdit, payloadText, shortHash } from './deadLetterReplies.js';
import { reloadKeepingMessage } from './deadLetters.js';
import { $, el, showMessage } from './dom.js';
import { state } from './state.js';

/** The edits listed: the audit's first page. */
const EDITS_SHOWN = 20;

/** Opens the editor on `message`, its payload's text as the body holds it (not re-serialised). */
export function openEditor(message: DeadLetter): void {
  const text = payloadText(message.body);
  state.dlqEdit = { handle: message.handle, jobId: message.jobId || message.messageId };
  $('#dlq-edit-job').textContent = state.dlqEdit.jobId;
  const box = $<HTMLTextAreaElement>('#dlq-edit-payload');
  box.value = text ?? '';
  showMessage(
    '#dlq-edit-msg',
    'info',
    text === undefined ? 'Its body does not end with a payload ("payload":…}): the API may refuse the edit (NotADelivery).' : '',
  );
  $<HTMLButtonElement>('#dlq-edit-save').disabled = false;
  $('#dlq-edit').hidden = false;
  box.focus();
}

/** Closes the editor (Cancel, a save that went through, another tenant). */
export function closeEditor(): void {
  state.dlqEdit = null;
  $('#dlq-edit').hidden = true;
  showMessage('#dlq-edit-msg', 'info');
}

/**
 * Save: the text typed, trimmed, checked as JSON (nothing is sent otherwise), then sent as
 * `{"handle":…,"payload":<the text>}`. Went through: the editor closes, the list is read again
 * (the message gone, or kept selected if its delete failed). Refused: the API's error in the editor.
 */
export async function saveEdit(): Promise<void> {
  const editing = state.dlqEdit;
  if (!editing) return;
  const typed = $<HTMLTextAreaElement>('#dlq-edit-payload').value.trim();
  const problem = jsonProblem(typed);
  if (problem) return showMessage('#dlq-edit-msg', 'err', problem);
  const { tenant } = state;
  const save = $<HTMLButtonElement>('#dlq-edit-save');
  save.disabled = true;
  showMessage('#dlq-edit-msg', 'info', 'Saving…');
  const body = new JsonText(`{"handle":${JSON.stringify(editing.handle)},"payload":${typed}}`);
  const reply = await callApi<DeadLetterEdit>('POST', '/dlq/edit', body);
  if (tenant !== state.tenant) return;
  save.disabled = false;
  if (!reply.ok) {
    if (missingRoute(reply))
      showMessage('#dlq-edit-msg', 'info', 'Editing dead letters is not available on this deployment: update the stack.');
    else showMessage('#dlq-edit-msg', 'err', `Not edited: ${errorText(reply)}`);
    return;
  }
  const result: DeadLetterEdit = reply.data ?? { jobId: editing.jobId, editedAt: '', oldPayloadSha256: '', newPayloadSha256: '' };
  if (state.dlqEdit === editing) closeEditor();
  showMessage('#dlq-msg', result.sentNotDeleted ? 'err' : 'ok', describeEdit(result));
  if (result.sentNotDeleted) {
    // In the queue and the DLQ: selected alone, ready for Delete selected; its Edit disabled.
    state.dlqChecked = new Map([[editing.handle, true]]);
    state.dlqStuck.add(editing.handle);
  }
  await Promise.all([reloadKeepingMessage(), state.dlqEditsShown ? loadEdits() : undefined]);
}

/** Why `text` cannot be sent as a payload, on one line; `undefined` when it is JSON. */
function jsonProblem(text: string): string | undefined {
  if (text === '') return 'Type the new payload as JSON (null for none).';
  try {
    JSON.parse(text);
    return undefined;
  } catch (err) {
    return `Not JSON, nothing sent: ${(err as Error).message.replace(/\s+/g, ' ')}`;
  }
}

/** Show edits / Hide edits. */
export async function toggleEdits(): Promise<void> {
  showEditsList(!state.dlqEditsShown);
  if (state.dlqEditsShown) await loadEdits();
}

function showEditsList(shown: boolean): void {
  state.dlqEditsShown = shown;
  const button = $('#dlq-edits-show');
  button.textContent = shown ? 'Hide edits' : 'Show edits';
  button.setAttribute('aria-expanded', String(shown));
  $('#dlq-edits').hidden = !shown;
}

/** Reads the tenant's latest edits into the list; a note says when older ones are not shown. */
export async function loadEdits(): Promise<void> {
  const { tenant } = state;
  const reply = await callApi<DeadLetterAuditPage>('GET', `/dlq/audit?limit=${EDITS_SHOWN}`);
  if (tenant !== state.tenant) return;
  const body = $('#dlq-edits tbody');
  const more = $('#dlq-edits-more');
  if (!reply.ok) {
    body.replaceChildren();
    more.hidden = true;
    if (missingRoute(reply)) showMessage('#dlq-edits-msg', 'info', 'The edits are not available on this deployment: update the stack.');
    else showMessage('#dlq-edits-msg', 'err', `Could not read the edits: ${errorText(reply)}`);
    return;
  }
  const edits = reply.data?.edits ?? [];
  body.replaceChildren(...edits.map(editRow));
  showMessage('#dlq-edits-msg', 'info', edits.length === 0 ? 'No dead letter of this tenant has been edited.' : '');
  more.hidden = !reply.data?.cursor;
}

function editRow(edit: DeadLetterAuditEntry): HTMLTableRowElement {
  return el('tr', {}, [
    el('td', { class: 'mono small', text: edit.at }),
    el('td', { class: 'mono', text: edit.jobId }),
    el('td', { class: 'mono small', text: edit.by }),
    el('td', {
      class: 'mono small',
      title: `${edit.oldPayloadSha256} → ${edit.newPayloadSha256}`,
      text: `${shortHash(edit.oldPayloadSha256)} → ${shortHash(edit.newPayloadSha256)}`,
    }),
  ]);
}

/** Another tenant: nothing of the last one's edits stays open. */
export function resetDeadLetterEdits(): void {
  closeEditor();
  state.dlqStuck = new Set();
  showEditsList(false);
  $('#dlq-edits tbody').replaceChildren();
}
