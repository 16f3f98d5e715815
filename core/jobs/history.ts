import {
  ApiError,
  type Clock,
  deliverySpans,
  InvalidJobIdError,
  isoMs,
  type JobIdCodec,
  type JobLookups,
  parseJsonBody,
  parseTraceparent,
  type RowKey,
  type SpanSink,
  type StoredRow,
  type TenantRecord,
  type TraceContext,
  ValidationError,
} from '../model/index.js';
import { cutText, type JsonPath, limiter, RawJson } from '../util/index.js';
import type { ListableState, ListedItem } from './listing.js';
import type { HistoryState, Outcome, TimelineEvent } from './replies.js';
import type { TenantRegistry } from '../tenants/index.js';
import { concurrencyKeyOf, type KeyedDeps, type KeyedEnd, settleKeys } from './keyedOutcomes.js';

/**
 * Job history (docs/history.md): for a tenant with history on, the worker reports each
 * delivery's outcome, and the scheduler keeps the latest one per job as an outcome record.
 *
 * - The record lives in its own partition `h#<shard>`, under the job row's sort key
 *   (`<dueMs 13>#<jobId>`): never at the job's key, where the dispatcher's delivered marker is
 *   written by a BatchWriteItem put that an outcome must not race. The same sort key in both
 *   partitions lets a listing merge them shard by shard.
 * - It is written by a BatchWriteItem put (25 per call; a report carries up to 100), once per
 *   reported outcome, with the tenant's history retention as its TTL. A put keeps the latest
 *   outcome: a retry's report lands after the failure's (the worker reports within a second and
 *   the retry waits for its backoff, 10 s by default), so the record ends with the last attempt.
 */

export const OUTCOMES: readonly Outcome[] = ['SUCCEEDED', 'FAILED', 'DEAD', 'CANCELLED'];

/**
 * How far this function's clock may lag the one that timed a direct job's delivery (SQS's): a job
 * sent straight to its queue counts as delivered from this long before its due time.
 */
export const DIRECT_DELIVERY_SKEW_MS = 1_000;

/** Job rows read at once to check a report's jobs were delivered (one report: at most 100). */
const ROW_READS_IN_FLIGHT = 16;

/** Most outcomes in one report (`POST /v1/tenants/{tenant}/jobs/outcomes`). */
export const MAX_OUTCOMES_PER_REPORT = 100;
/** Largest `result` (its JSON text, UTF-8 bytes) and `error` (characters) a record keeps. */
export const MAX_RESULT_BYTES = 1024;
/** One job's entries in a report: the one kept (the latest attempt), their indexes, and all of them. */
interface Group {
  record: OutcomeRecord;
  readonly indexes: number[];
  readonly all: OutcomeRecord[];
}

/** Workflow jobs' ends carried on at once by one report. */
const CARRY_ON_IN_FLIGHT = 8;

/** A workflow job's `result`: its children's deliveries carry it (while their message stays within SQS's limit). */
export const MAX_WORKFLOW_RESULT_BYTES = 64 * 1024;
export const MAX_ERROR_CHARS = 1024;
/** The history retention when a tenant turns history on without one: 7 days. */
export const DEFAULT_HISTORY_TTL_MS = 7 * 86_400_000;
/** The delivery message attribute that asks workers to report outcomes. */
export const HISTORY_ATTRIBUTE = 'dynein-history';

/** One outcome record (`pk = h#<shard>`, `sk = <dueMs 13>#<jobId>`). */
export interface OutcomeRecord extends RowKey {
  readonly tenant: string;
  readonly outcome: Outcome;
  /** The delivery attempt it reports (the message's receive count), from 1. */
  readonly attempt: number;
  /** When the worker received the message, epoch ms. */
  readonly receivedAtMs: number;
  readonly durationMs: number;
  readonly error?: string;
  /** The handler's small result, as JSON text. */
  readonly result?: string;
  /** When the report was written, epoch ms. */
  readonly reportedAtMs: number;
  /** The record's TTL, epoch ms. */
  readonly expiresAtMs: number;
}

/** The outcome records in the scheduler table (implemented by adapters/dynamoHistoryStore.ts). */
export interface HistoryStore {
  /**
   * Puts the records (distinct keys), and an attempt item per failure in `failures` that keeps it
   * for the timeline (`h#a#<shard>`, one per attempt), 25 items per BatchWriteItem; returns the
   * indexes of the records that could not be written (or whose job's failure could not be).
   */
  putOutcomes(records: readonly OutcomeRecord[], failures?: readonly OutcomeRecord[]): Promise<number[]>;
  /** The job's outcome record, strongly consistent. */
  getOutcome(key: RowKey): Promise<OutcomeRecord | undefined>;
  /** The job's failed attempts (at most `limit`, the earliest first), from their attempt items. */
  getFailedAttempts(key: RowKey, limit: number): Promise<OutcomeRecord[]>;
}

/** A dead-letter edit of a job, as its timeline shows it (core/deadLetters' audit entry). */
export interface JobEdit {
  readonly atMs: number;
  readonly by: string;
  readonly oldPayloadSha256: string;
  readonly newPayloadSha256: string;
}

/** A job's dead-letter edits, oldest first (core/deadLetters' DeadLetterEdits). */
export interface JobEdits {
  ofJob(key: RowKey): Promise<readonly JobEdit[]>;
}

/** Failed attempts a timeline shows at most. */
export const MAX_TIMELINE_ATTEMPTS = 20;

/** The tenant has not turned history on: its outcomes are not kept. */
export class HistoryOffError extends ApiError {
  readonly status = 409;
  readonly code = 'HistoryOff';
  constructor(tenant: string) {
    super(
      `tenant '${tenant}' does not keep job history: turn it on (DyneinTenant history prop, or DYNEIN_HISTORY locally) to report outcomes`,
    );
    this.name = 'HistoryOffError';
  }
}

/**
 * An outcome for a job that has not been delivered (still scheduled, being cancelled or
 * cancelled, dead-lettered by ingest, or not yet due): refused for that entry, and final (a
 * report of it again is refused again; the reporter does not retry it).
 */
export class NotDeliveredError extends ApiError {
  readonly status = 409;
  readonly code = 'NotDelivered';
  constructor(state: string) {
    super(`the job has not been delivered (it is ${state}): an outcome is kept only for a delivered job; nothing was stored`);
    this.name = 'NotDeliveredError';
  }
}

/**
 * The timeline of a history tenant's job: SCHEDULED at runAt, DELIVERED when the dispatcher
 * recorded the send (or the worker first received it), the earlier failed attempts, the latest
 * reported outcome, and each edit of it as a dead letter (EDITED), in time order.
 */
export function timelineOf(
  dueMs: number,
  row: StoredRow | undefined,
  record: OutcomeRecord | undefined,
  failedAttempts: readonly OutcomeRecord[] = [],
  edits: readonly JobEdit[] = [],
): TimelineEvent[] {
  const events = outcomeTimeline(dueMs, row, record, failedAttempts);
  if (edits.length === 0) return events;
  const edited: TimelineEvent[] = edits.map((e) => ({
    at: isoMs(e.atMs),
    event: 'EDITED',
    by: e.by,
    oldPayloadSha256: e.oldPayloadSha256,
    newPayloadSha256: e.newPayloadSha256,
  }));
  // Merged in by time, the outcomes' own order kept (a worker's clock may put an attempt before
  // the dispatcher's DELIVERED); an edit never goes before SCHEDULED.
  const merged: TimelineEvent[] = [events[0]!];
  let e = 0;
  for (const event of events.slice(1)) {
    while (e < edited.length && edited[e]!.at < event.at) merged.push(edited[e++]!);
    merged.push(event);
  }
  return [...merged, ...edited.slice(e)];
}

function outcomeTimeline(
  dueMs: number,
  row: StoredRow | undefined,
  record: OutcomeRecord | undefined,
  failedAttempts: readonly OutcomeRecord[],
): TimelineEvent[] {
  const events: TimelineEvent[] = [{ at: isoMs(dueMs), event: 'SCHEDULED' }];
  const earlier = record ? failedAttempts.filter((a) => a.attempt < record.attempt) : [];
  const first = earlier[0] ?? record;
  const deliveredAt = row?.state === 'QUEUED' ? row.deliveredAtMs : undefined;
  if (deliveredAt !== undefined) events.push({ at: isoMs(deliveredAt), event: 'DELIVERED' });
  else if (first) events.push({ at: isoMs(first.receivedAtMs), event: 'DELIVERED' });
  for (const a of earlier) events.push(outcomeEvent(a));
  if (record) events.push(outcomeEvent(record));
  return events;
}

function outcomeEvent(r: OutcomeRecord): TimelineEvent {
  return {
    at: isoMs(r.receivedAtMs + r.durationMs),
    event: r.outcome,
    attempt: r.attempt,
    durationMs: r.durationMs,
    ...(r.error !== undefined ? { error: r.error } : {}),
    ...(r.result !== undefined ? { result: JSON.parse(r.result) as unknown } : {}),
  };
}

/**
 * What a listing shows for an outcome record (the `h#<shard>` partitions): the fields of `GET`
 * of one job, `state` the latest outcome. For list14's JobLister.
 *
 * @example
 * for (const item of page.items) jobs.push(historyStatus(outcomeRecordOf(item)));
 */
export function historyStatus(r: OutcomeRecord): {
  jobId: string;
  tenant: string;
  runAt: string;
  state: Outcome;
  attempt: number;
  finishedAt: string;
  durationMs: number;
  error?: string;
} {
  return {
    jobId: r.jobId,
    tenant: r.tenant,
    runAt: isoMs(r.dueMs),
    state: r.outcome,
    attempt: r.attempt,
    finishedAt: isoMs(r.receivedAtMs + r.durationMs),
    durationMs: r.durationMs,
    ...(r.error !== undefined ? { error: r.error } : {}),
  };
}

const historyOff = (t: { historyTtlMs?: number }) =>
  t.historyTtlMs === undefined ? 'the tenant does not keep job history (docs/history.md)' : undefined;

function outcomeState(o: Outcome): ListableState {
  return {
    partition: (shard) => `h#${shard}`,
    stored: [o],
    render: (base, item) => ({
      ...base,
      state: o,
      ...(item.deliveredAtMs ? { deliveredAt: isoMs(item.deliveredAtMs) } : {}),
      ...(item.schedule !== undefined ? { schedule: item.schedule } : {}),
    }),
    unavailable: historyOff,
  };
}

/**
 * The history states a listing accepts (core/jobs/listing.ts), for tenants with history on.
 * `SUCCEEDED`, `FAILED` and `DEAD` are read from the outcome records (`h#<shard>`, the latest
 * outcome of each job); `DELIVERED` from the shards' delivered markers whose job has no outcome
 * record. A listing without `state` shows a marker as `DELIVERED`, or as its job's outcome.
 */
export const HISTORY_STATES: Readonly<Record<HistoryState, ListableState>> = {
  DELIVERED: {
    partition: (shard) => String(shard),
    stored: ['QUEUED'],
    render: (base, item: ListedItem) => ({
      ...base,
      state: 'DELIVERED',
      ...(item.deliveredAtMs ? { deliveredAt: isoMs(item.deliveredAtMs) } : {}),
      ...(item.schedule !== undefined ? { schedule: item.schedule } : {}),
      ...(item.tags !== undefined && item.tags.length > 0 ? { tags: [...item.tags] } : {}),
    }),
    unavailable: historyOff,
    // A job whose outcome is reported lists under that outcome, as GET shows it.
    supersededIn: (shard) => `h#${shard}`,
    replaces: 'QUEUED',
  },
  SUCCEEDED: outcomeState('SUCCEEDED'),
  FAILED: outcomeState('FAILED'),
  DEAD: outcomeState('DEAD'),
};

/** One entry's answer: the outcome kept, or why not. */
export type OutcomeResult =
  { readonly jobId: string; readonly state: Outcome } | { readonly jobId?: string; readonly error: { code: string; message: string } };

/**
 * Workflow jobs' outcomes (core/workflows): accepted whatever the tenant's history setting, and
 * carried on to the job's children before the report is answered.
 */
export interface WorkflowOutcomes {
  /** How long a workflow job's outcome record is kept at least (its children's summaries read it). */
  readonly retentionMs: number;
  /** Why the workflow job at `key` has not been delivered (its state), or undefined when it has. */
  undelivered(key: RowKey, nowMs: number): Promise<string | undefined>;
  /**
   * The job ended (its outcome record, with `result` as JSON text, stored): carried on to its
   * children. Throws when that did not complete (reported again, it does).
   */
  ended(tenant: TenantRecord, jobId: string, outcome: 'SUCCEEDED' | 'DEAD' | 'CANCELLED', atMs: number, result?: string): Promise<void>;
}

export interface HistoryDeps {
  readonly history: HistoryStore;
  /** Workflow jobs' outcomes. Absent: a report is taken for a history tenant only. */
  readonly workflows?: WorkflowOutcomes;
  /** The job rows: an outcome is kept only for a job the table shows delivered (or has no row of). */
  readonly rows: Pick<JobLookups, 'getRow'>;
  readonly codec: JobIdCodec;
  readonly tenants: TenantRegistry;
  readonly clock: Clock;
  /** Concurrency keys' slots (docs/flow-control.md): a keyed job's report frees or renews its slot. Absent: keys are ignored. */
  readonly keySlots?: KeyedDeps['keySlots'];
  /** The tenants' `keyLeaseSeconds`. */
  readonly controls?: KeyedDeps['controls'];
  /** Where the reported deliveries' `dynein.receive` and `dynein.outcome` spans go (docs/tracing.md). Absent: none are built. */
  readonly spans?: SpanSink;
}

/** `POST /v1/tenants/{tenant}/jobs/outcomes`: records a batch of outcomes, answering per entry. */
export class OutcomesService {
  #carryOnFailures = 0;

  constructor(private readonly deps: HistoryDeps) {}

  /**
   * Workflow jobs' ends stored but not carried on to their children since the last call (their
   * entries answered `Throttled`; the children wait until the report comes again): the
   * `WorkflowCarryOnFailures` metric.
   */
  takeCarryOnFailures(): number {
    const n = this.#carryOnFailures;
    this.#carryOnFailures = 0;
    return n;
  }

  /**
   * Checks each entry (a job id this deployment issued to `tenant`, a known outcome, sane
   * numbers, a small result) and puts the good ones; the answer lists, per entry in order, the
   * state kept or the error. Two entries for one job keep the later attempt.
   */
  async report(tenant: string, body: string | undefined): Promise<{ results: OutcomeResult[] }> {
    const record = await this.deps.tenants.require(tenant);
    const entries = this.#entries(record, body);
    const now = this.deps.clock.now();
    const results: OutcomeResult[] = [];
    const byKey = new Map<string, Group>();
    // Keyed jobs' ends (their slots), by entry index; a tenant without history stores nothing else of them.
    const keyed = new Map<number, KeyedEnd>();
    // The entries whose delivered message's trace context came with them, by entry index (their spans).
    const traced = new Map<number, { record: OutcomeRecord; message: TraceContext }>();
    entries.forEach((entry, i) => {
      try {
        const workflow = this.#isWorkflowJob(entry);
        const ck = this.deps.keySlots ? concurrencyKeyOf((entry as { concurrencyKey?: unknown } | null)?.concurrencyKey) : undefined;
        // A tenant without history: only workflow jobs' and keyed jobs' outcomes are taken.
        if (record.historyTtlMs === undefined && !workflow && ck === undefined) throw new HistoryOffError(tenant);
        const keepMs = workflow ? Math.max(record.historyTtlMs ?? 0, this.deps.workflows!.retentionMs) : (record.historyTtlMs ?? 0);
        const r = this.#record(tenant, entry, now, now + keepMs, workflow ? MAX_WORKFLOW_RESULT_BYTES : MAX_RESULT_BYTES);
        const message = messageTrace(entry);
        results.push({ jobId: r.jobId, state: r.outcome });
        if (message) traced.set(i, { record: r, message });
        if (ck !== undefined) keyed.set(i, { jobId: r.jobId, key: ck, action: r.outcome === 'FAILED' ? 'extend' : 'release' });
        if (record.historyTtlMs === undefined && !workflow) return; // only its slot changes
        const key = `${r.shard}/${r.dueMs}/${r.jobId}`;
        const prev = byKey.get(key);
        if (!prev) byKey.set(key, { record: r, indexes: [i], all: [r] });
        else {
          prev.indexes.push(i);
          prev.all.push(r);
          if (r.attempt > prev.record.attempt || (r.attempt === prev.record.attempt && r.receivedAtMs >= prev.record.receivedAtMs))
            prev.record = r;
        }
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        const jobId = typeof (entry as { jobId?: unknown })?.jobId === 'string' ? (entry as { jobId: string }).jobId : undefined;
        results.push({ ...(jobId !== undefined ? { jobId } : {}), error: { code: err.code, message: err.message } });
      }
    });
    // Only delivered jobs keep outcomes: the others' entries are refused (NotDelivered), unwritten.
    const undelivered = await this.#undelivered(
      [...byKey.values()].map((g) => g.record),
      now,
    );
    const groups = [...byKey.values()].filter((g) => !undelivered.has(g.record.jobId));
    for (const g of byKey.values()) {
      const why = undelivered.get(g.record.jobId);
      if (why === undefined) continue;
      const error = new NotDeliveredError(why);
      for (const i of g.indexes) results[i] = { jobId: g.record.jobId, error: { code: error.code, message: error.message } };
    }
    // A tenant without history keeps no outcome records: a workflow job's end and result are kept
    // on its workflow record as its end is carried on (a FAILED report, to be retried, changes nothing).
    const recorded = record.historyTtlMs !== undefined ? groups : [];
    // Every failure keeps an attempt item (distinct attempts), also one a later attempt superseded here.
    const failures = new Map<string, OutcomeRecord>();
    for (const g of recorded) for (const r of g.all) if (r.outcome === 'FAILED') failures.set(`${r.jobId}/${r.attempt}`, r);
    const failed = new Set(
      (
        await this.deps.history.putOutcomes(
          recorded.map((g) => g.record),
          [...failures.values()],
        )
      ).map((f) => recorded[f]!),
    );
    for (const g of failed) {
      for (const i of g.indexes)
        results[i] = { jobId: g.record.jobId, error: { code: 'Throttled', message: 'the outcome was not stored: report it again' } };
    }
    await this.#carryOn(
      record,
      groups.filter((g) => !failed.has(g)),
      results,
    );
    await this.#settleKeys(tenant, keyed, results);
    this.#recordSpans(traced, results, now);
    return { results };
  }

  /** The `dynein.receive` and `dynein.outcome` spans of the entries taken (answered with their state). */
  #recordSpans(traced: ReadonlyMap<number, { record: OutcomeRecord; message: TraceContext }>, results: OutcomeResult[], startMs: number) {
    const { spans } = this.deps;
    if (!spans) return;
    const reported = { startMs, endMs: this.deps.clock.now() };
    for (const [i, { record, message }] of traced) {
      if (!('state' in results[i]!)) continue;
      for (const span of deliverySpans(record, message, reported)) spans.record(span);
    }
  }

  /**
   * Keyed jobs' slots: freed by a final outcome, renewed by `FAILED`, once the entry was answered
   * with its state (an entry refused for another reason changes no slot). One whose write failed
   * answers `Throttled`: reported again, it frees the slot then.
   */
  async #settleKeys(tenant: string, keyed: ReadonlyMap<number, KeyedEnd>, results: OutcomeResult[]): Promise<void> {
    const { keySlots } = this.deps;
    if (!keySlots) return;
    const ends = [...keyed].filter(([i]) => 'state' in results[i]!);
    const failed = await settleKeys(
      { keySlots, controls: this.deps.controls, clock: this.deps.clock },
      tenant,
      ends.map(([, e]) => e),
    );
    for (const [i, e] of ends)
      if (failed.has(e.jobId))
        results[i] = {
          jobId: e.jobId,
          error: { code: 'Throttled', message: 'the slot of its concurrency key was not freed: report it again' },
        };
  }

  /**
   * The report's entries. A tenant without history may report only workflow jobs' outcomes:
   * a report with none (or a body that is not a report) is refused whole, as before workflows.
   */
  #entries(record: TenantRecord, body: string | undefined): unknown[] {
    if (record.historyTtlMs !== undefined) return parseBody(body);
    if (!this.deps.workflows && !this.deps.keySlots) throw new HistoryOffError(record.name);
    let entries: unknown[];
    try {
      entries = parseBody(body);
    } catch {
      throw new HistoryOffError(record.name);
    }
    const keyed = (e: unknown) =>
      this.deps.keySlots !== undefined && (e as { concurrencyKey?: unknown } | null)?.concurrencyKey !== undefined;
    if (!entries.some((e) => this.#isWorkflowJob(e) || keyed(e))) throw new HistoryOffError(record.name);
    return entries;
  }

  /** Whether an entry names a workflow's job (its id's path `w`), with workflows wired. */
  #isWorkflowJob(entry: unknown): boolean {
    const jobId = (entry as { jobId?: unknown } | null)?.jobId;
    if (!this.deps.workflows || typeof jobId !== 'string') return false;
    try {
      return this.deps.codec.parse(jobId).path === 'w';
    } catch {
      return false;
    }
  }

  /**
   * Workflow jobs that ended (`SUCCEEDED`, `DEAD` or `CANCELLED`, stored): their children learn of it before the
   * report is answered. One that could not be carried on answers `Throttled`, as an outcome not
   * stored does: report it again (the stored outcome stands, and the repeat completes what was left).
   */
  async #carryOn(tenant: TenantRecord, stored: readonly Group[], results: OutcomeResult[]) {
    const workflows = this.deps.workflows;
    if (!workflows) return;
    // Several at once: a report that coalesces many workers' outcomes does not serialise their children.
    const limit = limiter(CARRY_ON_IN_FLIGHT);
    const carry = async (g: Group) => {
      const r = g.record;
      if (r.outcome === 'FAILED' || this.deps.codec.parse(r.jobId).path !== 'w') return;
      try {
        await workflows.ended(tenant, r.jobId, r.outcome, r.reportedAtMs, r.result);
      } catch (err) {
        this.#carryOnFailures++;
        const message = `the outcome was stored, but the workflow did not move on (${(err as Error)?.message ?? err}): report it again`;
        for (const i of g.indexes) results[i] = { jobId: r.jobId, error: { code: 'Throttled', message } };
      }
    };
    await Promise.all(stored.map((g) => limit(() => carry(g))));
  }

  /**
   * The jobs of `records` that have not been delivered, with the state they are in. Delivered is
   * what status shows (docs/history.md): the dispatcher's delivered marker (`QUEUED`), a row a
   * dispatcher holds while it sends it (`ACQUIRED`: the worker may receive the message before the
   * marker is written), or no live row once the job is due (a job sent straight from submit has
   * none; a marker expires). `SCHEDULED`, `CANCELLED`, `DEAD` and a job not yet due (nothing is
   * delivered early) are not.
   *
   * A read, then the write: DynamoDB's only conditional write across two items is a transaction,
   * which the emulators of the local stack and the tests do not have. It is safe because
   * delivered is final (a marker never goes back to another state), and the one race left (no row
   * yet, then a row or a tombstone written before the outcome) cannot make status lie: status
   * shows an outcome only over a delivered marker or no row (JobsService).
   */
  async #undelivered(records: readonly OutcomeRecord[], now: number): Promise<Map<string, string>> {
    const out = new Map<string, string>();
    const limit = limiter(ROW_READS_IN_FLIGHT);
    await Promise.all(
      records.map((r) =>
        limit(async () => {
          const path = this.deps.codec.parse(r.jobId).path;
          if (path === 'w') {
            const why = await this.deps.workflows?.undelivered(r, now);
            if (why !== undefined) out.set(r.jobId, why);
            return;
          }
          // A job sent straight from submit never has a row: it is not read, only its due time refuses it.
          const direct = path === 'd';
          const row = direct ? undefined : await this.deps.rows.getRow(r);
          const live = row && (row.expiresAtMs === undefined || row.expiresAtMs > now) ? row : undefined;
          if (live?.state === 'QUEUED' || live?.state === 'ACQUIRED') return;
          if (live) out.set(r.jobId, live.state === 'DEAD' ? 'DEAD_LETTERED' : live.state);
          // SQS delivered a direct job at its due time by SQS's clock: allow this function's clock to lag.
          else if (now < r.dueMs - (direct ? DIRECT_DELIVERY_SKEW_MS : 0)) out.set(r.jobId, `not due until ${isoMs(r.dueMs)}`);
        }),
      ),
    );
    return out;
  }

  #record(tenant: string, entry: unknown, now: number, expiresAtMs: number, maxResultBytes: number): OutcomeRecord {
    if (typeof entry !== 'object' || entry === null || Array.isArray(entry))
      throw new ValidationError('each outcome must be a JSON object');
    const e = entry as Record<string, unknown>;
    if (typeof e.jobId !== 'string') throw new ValidationError('jobId must be a string');
    let id;
    try {
      id = this.deps.codec.parse(e.jobId);
    } catch {
      throw new InvalidJobIdError();
    }
    if (id.tenant !== tenant) throw new InvalidJobIdError();
    if (!OUTCOMES.includes(e.outcome as Outcome)) throw new ValidationError(`outcome must be one of ${OUTCOMES.join(', ')}`);
    if (!Number.isSafeInteger(e.attempts) || (e.attempts as number) < 1 || (e.attempts as number) > 1_000)
      throw new ValidationError('attempts must be a whole number from 1 to 1000');
    const receivedAtMs = typeof e.receivedAt === 'string' && /^\d{4}-\d\d-\d\dT/.test(e.receivedAt) ? Date.parse(e.receivedAt) : NaN;
    if (!Number.isFinite(receivedAtMs) || receivedAtMs > now + 300_000)
      throw new ValidationError('receivedAt must be an RFC 3339 time, not in the future');
    if (!Number.isSafeInteger(e.durationMs) || (e.durationMs as number) < 0 || (e.durationMs as number) > 86_400_000)
      throw new ValidationError('durationMs must be a whole number of milliseconds from 0 to 86400000');
    if (e.error !== undefined && typeof e.error !== 'string') throw new ValidationError('error must be a string');
    let result: string | undefined;
    if (e.result !== undefined) {
      // The result's JSON text as the worker sent it (a RawJson, never re-serialised).
      result = e.result instanceof RawJson ? e.result.text : JSON.stringify(e.result);
      if (Buffer.byteLength(result) > maxResultBytes) throw new ValidationError(`result must be at most ${maxResultBytes} bytes of JSON`);
    }
    return {
      shard: id.shard,
      dueMs: id.dueMs,
      jobId: id.jobId,
      tenant,
      outcome: e.outcome as Outcome,
      attempt: e.attempts as number,
      receivedAtMs,
      durationMs: e.durationMs as number,
      ...(typeof e.error === 'string' ? { error: cutText(e.error, MAX_ERROR_CHARS) } : {}),
      ...(result !== undefined ? { result } : {}),
      reportedAtMs: now,
      expiresAtMs,
    };
  }
}

/**
 * An entry's `traceparent` (the delivered message's, which the Worker and the Lambda wrapper
 * send), or undefined without one.
 *
 * @throws ValidationError when it is there and not a W3C `traceparent`
 */
function messageTrace(entry: unknown): TraceContext | undefined {
  const header = (entry as { traceparent?: unknown }).traceparent;
  if (header === undefined) return undefined;
  const trace = typeof header === 'string' ? parseTraceparent(header) : undefined;
  if (!trace)
    throw new ValidationError(
      `traceparent must be the delivered message's W3C traceparent (00-<32 hex digits>-<16 hex digits>-<2 hex digits>), got ${JSON.stringify(header)}`,
    );
  return trace;
}

/** Where the results sit in a report: kept as their JSON text (any nesting a result's 1 KB allows). */
const RESULTS = (path: JsonPath) => path.length === 3 && path[0] === 'outcomes' && typeof path[1] === 'number' && path[2] === 'result';

function parseBody(body: string | undefined): unknown[] {
  const parsed = parseJsonBody(body, Number.POSITIVE_INFINITY, RESULTS, 'JSON: {"outcomes": [...]}');
  const outcomes = (parsed as { outcomes?: unknown } | null)?.outcomes;
  if (!Array.isArray(outcomes) || outcomes.length === 0) throw new ValidationError('outcomes must be a non-empty array');
  if (outcomes.length > MAX_OUTCOMES_PER_REPORT)
    throw new ValidationError(`outcomes must hold at most ${MAX_OUTCOMES_PER_REPORT} entries, got ${outcomes.length}`);
  return outcomes;
}
