import {
  type Clock,
  type InboundJob,
  inboundMatchesId,
  isLateRow,
  type JobIdCodec,
  jobSpan,
  type JobWrites,
  type KeySlots,
  parseInboundJobs,
  type RowWakes,
  type SchedulerSettings,
  SPAN_KIND,
  type SpanSink,
} from '../model/index.js';
import { unlimited, type Limit } from '../util/index.js';

export type IngestOutcome = 'created' | 'duplicate' | 'cancelled';

/** An inbound message that is not one submit wrote; retrying cannot help, so it goes to the DLQ. */
export class MalformedInboundError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedInboundError';
  }
}

export interface IngestDeps {
  readonly store: JobWrites;
  readonly codec: JobIdCodec;
  readonly clock: Clock;
  readonly settings: SchedulerSettings;
  /** Concurrency keys' limits (docs/flow-control.md): set before a keyed job's row is written. Absent: not kept. */
  readonly keySlots?: Pick<KeySlots, 'setLimit'>;
  /** Where the `dynein.ingest` spans go, one per job written (docs/tracing.md). Absent: none are built. */
  readonly spans?: SpanSink;
  /** Wakes the group of each row written if it rests (docs/design-dispatch.md, "Rest"). */
  readonly wakes: Pick<RowWakes, 'written'>;
}

/** What became of one inbound message: the outcome of each job written, and the first failure. */
export interface MessageIngest {
  /** Outcomes of the jobs that did not fail (all of them when `error` is undefined). */
  readonly outcomes: IngestOutcome[];
  /** Set when the message must be retried (or, when malformed, sent to the DLQ). */
  readonly error?: unknown;
  /** The jobs whose rows are in the table now (created, or there already): bulk cancels settle them. */
  readonly written: InboundJob[];
}

/**
 * Writes the jobs of one inbound message into the table. Every job is attempted, each on its own;
 * when any fails, the message is to be retried whole (the jobs already written then come back as
 * duplicates). A malformed message fails with a {@link MalformedInboundError}, which retrying
 * cannot mend, so it ends in the DLQ; a malformed job entry does too, after the well-formed jobs
 * beside it were written. `limit` bounds the writes in flight (shared across the messages of one
 * invocation).
 */
export async function ingestMessage(
  deps: IngestDeps,
  body: string,
  limit: Limit = unlimited,
  sent?: { readonly atMs: number; readonly stamp: (tenant: string) => Promise<boolean> },
): Promise<MessageIngest> {
  const jobs = parseInboundJobs(body);
  if (!jobs) return { outcomes: [], written: [], error: new MalformedInboundError('inbound message is not one written by submit') };
  try {
    await setKeyLimits(deps, jobs, sent?.atMs ?? deps.clock.now(), limit);
  } catch (error) {
    return { outcomes: [], written: [], error };
  }
  const startMs = deps.clock.now();
  const settled = await Promise.allSettled(
    jobs.map((job, i) =>
      job
        ? limit(async () => ingestJob(deps, sent && (await sent.stamp(job.tenant)) ? { ...job, sentAtMs: sent.atMs } : job))
        : Promise.reject(new MalformedInboundError(`job ${i} of the inbound message is not one written by submit`)),
    ),
  );
  if (deps.spans) recordSpans(deps.spans, jobs, settled, { startMs, endMs: deps.clock.now() });
  const outcomes = settled.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
  const written = settled.flatMap((r, i) => (r.status === 'fulfilled' && r.value !== 'cancelled' ? [jobs[i]!] : []));
  const failed = settled.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  return failed ? { outcomes, written, error: failed.reason } : { outcomes, written };
}

/**
 * The limits the message's keyed jobs were submitted with, one write per key (the message's last
 * job of a key has the latest limit): written before any of the rows, so the dispatcher that takes
 * a row's slot finds its key's limit. A limit submitted later than `atMs` stands.
 */
async function setKeyLimits(deps: IngestDeps, jobs: readonly (InboundJob | undefined)[], atMs: number, limit: Limit): Promise<void> {
  const { keySlots } = deps;
  if (!keySlots) return;
  const limits = new Map<string, { tenant: string; key: string; limit: number }>();
  for (const job of jobs)
    if (job?.concurrency) limits.set(`${job.tenant}\u0000${job.concurrency.key}`, { tenant: job.tenant, ...job.concurrency });
  await Promise.all([...limits.values()].map((k) => limit(() => keySlots.setLimit(k.tenant, k.key, k.limit, atMs))));
}

/** One `dynein.ingest` span per job of the message written (or found written: a redelivery). */
function recordSpans(
  spans: SpanSink,
  jobs: readonly (InboundJob | undefined)[],
  settled: readonly PromiseSettledResult<IngestOutcome>[],
  at: { readonly startMs: number; readonly endMs: number },
): void {
  settled.forEach((r, i) => {
    if (r.status !== 'fulfilled' || r.value === 'cancelled') return;
    const job = jobs[i]!;
    const span = jobSpan('dynein.ingest', SPAN_KIND.consumer, job, at, {
      'messaging.system': 'aws_sqs',
      'messaging.operation': 'process',
      'dynein.outcome': r.value,
    });
    if (span) spans.record(span);
  });
}

/** {@link ingestMessage}, throwing its failure: each job's outcome, in order. */
export async function ingest(deps: IngestDeps, body: string): Promise<IngestOutcome[]> {
  const { outcomes, error } = await ingestMessage(deps, body);
  if (error !== undefined) throw error;
  return outcomes;
}

/**
 * Writes one inbound job into the table. Idempotent: the put is conditional on the key being
 * empty, so a redelivered message, or a tombstone left by an early cancel, never yields a second
 * live row.
 *
 * Tombstones stay at their key until their TTL, so the conditional put meets them. Earlier
 * releases moved due tombstones to a cancel record: a job ingested once it is due first claims
 * the cancel-record key (conditional put) and stops if a cancel record is there, so a job those
 * releases cancelled is never revived either.
 */
export async function ingestJob(deps: IngestDeps, job: InboundJob & { readonly sentAtMs?: number }): Promise<IngestOutcome> {
  let id;
  try {
    id = deps.codec.parse(job.jobId);
  } catch {
    throw new MalformedInboundError(`inbound message carries an invalid job id`);
  }
  if (!inboundMatchesId(id, job)) {
    throw new MalformedInboundError(`inbound message for ${job.jobId} does not match its job id`);
  }
  const key = { shard: job.shard, dueMs: job.dueMs, jobId: job.jobId };
  const now = deps.clock.now();
  if (job.dueMs <= now) {
    // Late ingest: claim the cancel-record key first. A cancel record there means the job was
    // cancelled and its tombstone already moved (or being moved): do not write the row.
    const claimed = await deps.store.putCancelRecord(
      key,
      { kind: 'INGESTED', atMs: now },
      Math.max(job.dueMs, now) + deps.settings.cancelRecordRetentionMs,
    );
    if (!claimed) {
      const existing = await deps.store.getCancelRecord(key);
      if (existing?.kind === 'CANCELLED') return 'cancelled';
    }
  }
  // Its group awake by its due time: before the write too, so that an ingest dying between the
  // write and the check after it (its message then comes back) costs no lateness.
  await deps.wakes.written(job.shard, job.dueMs);
  const outcome = (await deps.store.putJob(job)) === 'created' ? 'created' : 'duplicate';
  // Dispatchers read each shard incrementally; a row due this soon after its write may lie
  // behind a read position already, so it is also noted in the shard's late lane (which rounds
  // read whole). Also on a duplicate: an earlier attempt may have died between the two writes.
  if (isLateRow(job.dueMs, deps.clock.now(), deps.settings)) await deps.store.putLatePointer(key);
  // The check that counts: after the write (also on a duplicate, for the same reason).
  await deps.wakes.written(job.shard, job.dueMs);
  return outcome;
}
