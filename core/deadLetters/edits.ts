import { createHash } from 'node:crypto';
import { parseJson, RawJson } from '../util/index.js';
import type { RowKey } from '../model/index.js';

/**
 * Edits of dead letters (`POST /v1/tenants/{tenant}/dlq/edit`): a dead letter put back on its
 * tenant queue with a new payload, and the audit entry each edit leaves.
 */

/** One edit, as the audit trail keeps it (`GET .../dlq/audit`, and the job's timeline). */
export interface DeadLetterEdit {
  /** When the edit was made (epoch ms). */
  readonly atMs: number;
  readonly tenant: string;
  readonly jobId: string;
  /** The caller: the IAM principal ARN API Gateway authorised (the local stack's keys have ARNs too), else its access key id. */
  readonly by: string;
  /** SHA-256 (hex) of the payload's JSON text before and after. */
  readonly oldPayloadSha256: string;
  readonly newPayloadSha256: string;
  /** The SQS message id of the dead letter that was edited. */
  readonly messageId: string;
}

/** The audit trail of edits (adapters/dynamoDeadLetterEdits.ts in the scheduler table). */
export interface DeadLetterEdits {
  /**
   * Records an edit, before its message is sent: an edit delivered always has its entry (one
   * whose send then failed keeps it too: the trail lists attempts). `key` is the job's.
   */
  record(edit: DeadLetterEdit, key: RowKey): Promise<void>;
  /** The tenant's entries, newest first, a page at a time (`cursor` from the previous page). */
  list(tenant: string, limit: number, cursor?: string): Promise<{ edits: DeadLetterEdit[]; cursor?: string }>;
  /** The job's entries, oldest first (for its timeline). */
  ofJob(key: RowKey): Promise<DeadLetterEdit[]>;
}

/** SHA-256 of a payload's JSON text (UTF-8), hex. */
export const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/**
 * A Dynein delivery body with its payload replaced by `payload` (JSON text, spliced in as it is):
 * every other byte kept. Undefined for a body that is not a delivery (its payload is the last
 * member, `"payload":<text>}`, as core/model/messages.ts writes it).
 */
export function withPayload(body: string, payload: string): { body: string; oldPayload: string } | undefined {
  let parsed: unknown;
  try {
    parsed = parseJson(body, { raw: (path) => path.length === 1 && path[0] === 'payload' });
  } catch {
    return undefined;
  }
  const old = (parsed as { payload?: unknown } | null)?.payload;
  if (!(old instanceof RawJson)) return undefined;
  const tail = `"payload":${old.text}}`;
  if (!body.endsWith(tail)) return undefined;
  return { body: `${body.slice(0, body.length - tail.length)}"payload":${payload}}`, oldPayload: old.text };
}
