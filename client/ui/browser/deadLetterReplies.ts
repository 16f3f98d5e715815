/**
 * The replies of redrive, delete and edit on the dead-letter queue, in words, and the payload of a
 * dead letter's body as text. Pure: no DOM, no state.
 */
import type { DeadLetterEdit, DeadLetterRedrive, DeadLettersDeleted } from './apiTypes.js';

/** `3 messages`, `1 message`. */
export function plural(n: number, what: string): string {
  return `${n} ${what}${n === 1 ? '' : 's'}`;
}

/** Handles sent to the queue whose delete from the DLQ failed: they are in both. */
export function sentNotDeleted(reply: DeadLetterRedrive): readonly string[] {
  return ('sentNotDeleted' in reply && reply.sentNotDeleted) || [];
}

/** Handles not sent (still only in the DLQ). */
export function failed(reply: DeadLetterRedrive | DeadLettersDeleted): readonly string[] {
  return ('failed' in reply && reply.failed) || [];
}

/**
 * Messages in both the queue and the DLQ must be deleted, never redriven again: a second redrive
 * would deliver them twice. Said at the end of any redrive that left some.
 */
function sentNotDeletedWarning(reply: DeadLetterRedrive): string {
  const n = sentNotDeleted(reply).length;
  if (n === 0) return '';
  return `; ${n} sent to the queue but still in the DLQ (their delete failed): delete them (they stay selected), do not redrive them again or they are delivered twice`;
}

/**
 * A redrive's reply: a move task started (AWS, `all`), messages copied (the local stack, `all`),
 * or the fate of each handle asked for.
 *
 * @example describeRedrive({ redriven: ['h1'], notFound: [] }) // 'Redrove 1 message to the queue.'
 */
export function describeRedrive(reply: DeadLetterRedrive): string {
  const warning = sentNotDeletedWarning(reply);
  if ('method' in reply) {
    if (reply.method === 'StartMessageMoveTask')
      return 'Started a message move task: every message goes back to the queue (it may take a moment).';
    return `Redrove ${plural(reply.moved || 0, 'message')} to the queue${warning || (reply.complete === false ? ' (more remain: press again)' : '')}.`;
  }
  let text = `Redrove ${plural(reply.redriven.length, 'message')} to the queue`;
  if (reply.notFound.length) text += `; ${reply.notFound.length} no longer in the DLQ`;
  if (failed(reply).length) text += `; ${failed(reply).length} failed (still in the DLQ)`;
  return `${text}${warning}.`;
}

/**
 * A delete's reply.
 *
 * @example describeDelete({ deleted: ['h1', 'h2'], notFound: [] }) // 'Deleted 2 messages.'
 */
export function describeDelete(reply: DeadLettersDeleted): string {
  let text = `Deleted ${plural(reply.deleted.length, 'message')}`;
  if (reply.notFound.length) text += `; ${reply.notFound.length} no longer in the DLQ`;
  if (failed(reply).length) text += `; ${failed(reply).length} failed (still in the DLQ)`;
  return `${text}.`;
}

/**
 * An edit's reply. One sent but not deleted is in both the queue and the DLQ: it must be deleted,
 * never edited or redriven again (it would be delivered twice).
 *
 * @example describeEdit({ jobId: 'j1', ... }) // 'Edited j1: put back on the queue with the new payload.'
 */
export function describeEdit(reply: DeadLetterEdit): string {
  if (reply.sentNotDeleted)
    return `Edited ${reply.jobId}: sent to the queue with the new payload, but still in the DLQ (its delete failed): delete it (it stays selected), do not edit or redrive it again or it is delivered twice.`;
  return `Edited ${reply.jobId}: put back on the queue with the new payload.`;
}

/** The first 12 hex digits of a SHA-256: enough to tell payloads apart on screen. */
export function shortHash(sha256: string | undefined): string {
  return (sha256 ?? '').slice(0, 12);
}

const PAYLOAD_KEY = '"payload":';

/**
 * The payload of a Dynein delivery's body, as its text, byte for byte: the body's last member is
 * `"payload":<text>}` (core/model/messages.ts), so the text is sliced out of the body rather than
 * parsed and serialised again (which would rewrite `1.50` as `1.5`, or the spacing). `"payload":`
 * appears in the text only as a member's name (in a string its quote would be escaped); one
 * inside the payload is followed by more than one JSON value, so the last whose rest of the body
 * parses is the body's own. Undefined when the body ends otherwise (not a delivery).
 *
 * @example payloadText('{"jobId":"j1","payload":{ "n" : 1.50 }}') // '{ "n" : 1.50 }'
 */
export function payloadText(body: string): string | undefined {
  const end = body.trimEnd();
  if (!end.endsWith('}')) return undefined;
  for (let at = end.lastIndexOf(PAYLOAD_KEY); at > 0; at = end.lastIndexOf(PAYLOAD_KEY, at - 1)) {
    const text = end.slice(at + PAYLOAD_KEY.length, -1);
    if (isJson(text)) return text;
  }
  return undefined;
}

function isJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}
