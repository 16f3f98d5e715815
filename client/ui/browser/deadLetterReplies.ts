/**
 * The replies of redrive and delete on the dead-letter queue, in words. Pure: no DOM, no state.
 */
import type { DeadLetterRedrive, DeadLettersDeleted } from './apiTypes.js';

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
