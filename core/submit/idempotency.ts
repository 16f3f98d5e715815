import { createHash } from 'node:crypto';
import { DEFAULT_PRIORITY, type JobRequest } from '../model/index.js';

/**
 * Idempotency keys. A job submitted with an `idempotencyKey` gets an idempotency record under
 * (tenant, key), written with one conditional put before the job is handed to SQS:
 *
 * - the record names the job (`jobId`) and holds a fingerprint of the request (what counts as
 *   "the same request", {@link fingerprint});
 * - it lives {@link IDEMPOTENCY_WINDOW_MS} (24 h) after it was written; a record past its window
 *   counts as absent (DynamoDB's TTL removes it later);
 * - `sent` turns true once the first request's send succeeded.
 *
 * A retry with the same key finds the record: the same fingerprint answers the same job (200),
 * and sends it again only while `sent` is false (the first request may have died between its
 * record and its send, or still be sending); another fingerprint answers 409
 * `IdempotencyKeyReused` and writes nothing.
 */
export const IDEMPOTENCY_WINDOW_MS = 24 * 3600 * 1000;

export interface IdempotencyRecord {
  readonly jobId: string;
  readonly fingerprint: string;
  /** The job was handed to SQS (the request that wrote the record finished its send). */
  readonly sent: boolean;
  /** End of the window, epoch ms (whole seconds). */
  readonly expiresAtMs: number;
}

/** A record to write or mark; `keyId` is `JobIdCodec.keyId(tenant, key)`. */
export interface IdempotencyEntry {
  readonly keyId: string;
  readonly jobId: string;
  readonly fingerprint: string;
  /** End of the window, epoch ms. */
  readonly expiresAtMs: number;
}

/** Where idempotency records live (the scheduler table on AWS); one conditional write each. */
export interface IdempotencyStore {
  /**
   * Writes `entry` (not sent) unless a record whose window has not ended at `nowMs` is there.
   * Otherwise answers that record, or `undefined` when it vanished in between (claim again).
   */
  claim(entry: IdempotencyEntry, nowMs: number): Promise<{ claimed: true } | { claimed: false; existing: IdempotencyRecord | undefined }>;
  /** Marks records sent: their jobs were handed to SQS. Best effort (an unmarked record only costs a re-send on retry). */
  markSent(entries: readonly IdempotencyEntry[]): Promise<void>;
  /** Deletes a record that is still unsent and names `jobId`: its job was refused, so the key is free again. */
  release(keyId: string, jobId: string): Promise<void>;
}

/**
 * What makes two requests "the same" for an idempotency key: the payload's JSON text byte for
 * byte (an omitted payload is `null`), how the time was given (`runAt` as the instant it names,
 * so `…Z` and `…+00:00` agree; or `delaySeconds` as the delay in ms it rounds up to, not the due
 * time it moves with), `cancellable` (omitted is `true`) and `priority` (omitted is 5; only a
 * priority other than 5 enters the preimage, so records written before priorities existed still
 * match) and `tags` in order (only when there are some, for the same reason), and the
 * concurrency key and limit (only for a keyed job). The tenant and the
 * key are the record's address. SHA-256, base64url.
 */
export function fingerprint(
  job: Pick<JobRequest, 'schedule' | 'cancellable' | 'payloadText' | 'concurrency'> & {
    readonly priority?: number;
    readonly tags?: readonly string[];
  },
): string {
  // Length-prefixed schedule, one-character flags (cancellable, then a priority digit when not
  // the default), the tags as a JSON array when there are some, then the payload: no two requests
  // share a preimage.
  const prio = job.priority === undefined || job.priority === DEFAULT_PRIORITY ? '' : `p${job.priority}`;
  const tags = job.tags && job.tags.length > 0 ? `t${JSON.stringify(job.tags)}` : '';
  const keyed = job.concurrency ? `k${JSON.stringify([job.concurrency.key, job.concurrency.limit])}` : '';
  return createHash('sha256')
    .update(`dynein-idem-v1\n${job.schedule.length}:${job.schedule}\n${job.cancellable ? 'c' : 'n'}${prio}${tags}${keyed}\n`)
    .update(job.payloadText, 'utf8')
    .digest('base64url');
}
