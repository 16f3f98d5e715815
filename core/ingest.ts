import type { SchedulerSettings } from './config';
import { JobIdCodec } from './jobId';
import { parseInboundBody } from './messages';
import type { Clock, JobStore } from './ports';

export type IngestOutcome = 'created' | 'duplicate' | 'cancelled';

/** An inbound message that is not one submit wrote; retrying cannot help, so it goes to the DLQ. */
export class MalformedInboundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedInboundError';
  }
}

export interface IngestDeps {
  readonly store: JobStore;
  readonly codec: JobIdCodec;
  readonly clock: Clock;
  readonly settings: SchedulerSettings;
}

/**
 * Writes one inbound job into the table. Idempotent: the put is conditional on the key being
 * empty, so a redelivered message, or a tombstone left by an early cancel, never yields a second
 * live row.
 *
 * A job ingested once it is due races the round that moves its tombstone to the cancel record.
 * Ingest first claims the cancel-record key (conditional put); the round writes the cancel record
 * with a conditional put before deleting the tombstone and leaves a young claim alone. Whichever
 * write loses backs off, so a cancelled job is never revived.
 */
export async function ingest(deps: IngestDeps, body: string): Promise<IngestOutcome> {
  const job = parseInboundBody(body);
  if (!job) throw new MalformedInboundError('inbound message is not a job written by submit');
  let id;
  try {
    id = deps.codec.parse(job.jobId);
  } catch {
    throw new MalformedInboundError(`inbound message carries an invalid job id`);
  }
  if (id.tenant !== job.tenant || id.shard !== job.shard || id.dueMs !== job.dueMs || id.path === 'd') {
    throw new MalformedInboundError(`inbound message for ${job.jobId} does not match its job id`);
  }
  const key = { shard: job.shard, dueMs: job.dueMs, jobId: job.jobId };
  const now = deps.clock.now();
  if (job.dueMs <= now) {
    // Late ingest: claim the cancel-record key first. A cancel record there means the job was
    // cancelled and its tombstone already moved (or being moved): do not write the row.
    const claimed = await deps.store.putCancelRecord(key, { kind: 'INGESTED', atMs: now }, Math.max(job.dueMs, now) + deps.settings.cancelRecordRetentionMs);
    if (!claimed) {
      const existing = await deps.store.getCancelRecord(key);
      if (existing?.kind === 'CANCELLED') return 'cancelled';
    }
  }
  return (await deps.store.putJob(job)) === 'created' ? 'created' : 'duplicate';
}
