/**
 * Turns a recurring schedule's occurrences into one-off jobs on the table path (docs/design.md,
 * "Recurring schedules"). EventBridge Scheduler is only the clock: each firing calls
 * {@link materialise}, which writes every occurrence from the schedule's watermark up to a horizon
 * (at least {@link MIN_OCCURRENCES_AHEAD} occurrences and {@link MATERIALISE_AHEAD_MS} ahead),
 * then moves the watermark. Occurrence ids are derived from (tenant, schedule, revision, due
 * time), so a repeated or retried firing rewrites the same keys and the conditional put keeps one
 * job each; a firing that comes late (ingest was down) writes the occurrences it missed, late,
 * once each.
 */
import { isoMs, type JobLookups, jobSpan, jobTrace, SPAN_KIND, type SpanSink, tombstoneExpiresAtMs, unpackTrace } from '../model/index.js';
import { ingestJob, type IngestDeps, type IngestOutcome } from '../ingest/index.js';
import { limiter } from '../util/index.js';
import { END_OF_TIME } from './expression/index.js';
import { occurrencesOf, type PendingCancel, type ScheduleRecord, type Timing } from './model.js';
import type { ScheduleStore } from './ports.js';

/** Occurrences are materialised at least this far ahead: EventBridge Scheduler fires up to a minute late. */
export const MATERIALISE_AHEAD_MS = 3 * 60_000;
/** ... and at least this many occurrences ahead, however far they are. */
export const MIN_OCCURRENCES_AHEAD = 2;
/** Most occurrences one firing writes (a long outage is caught up over several firings). */
export const MAX_OCCURRENCES_PER_PASS = 1_000;
/** Table writes one pass keeps in flight. */
const WRITE_CONCURRENCY = 16;

export interface RecurringDeps extends Omit<IngestDeps, 'store'> {
  /** Ingest's writes for the occurrences, and cancels for those a change retires. */
  readonly store: IngestDeps['store'] & Pick<JobLookups, 'cancel'>;
  readonly schedules: ScheduleStore;
  /**
   * Most occurrences one pass writes or cancels (tests lower it to cross the pass boundary with
   * fewer rows; internal, not a setting). @default {@link MAX_OCCURRENCES_PER_PASS}
   */
  readonly maxOccurrencesPerPass?: number;
}

const passSize = (deps: Pick<RecurringDeps, 'maxOccurrencesPerPass'>) => deps.maxOccurrencesPerPass ?? MAX_OCCURRENCES_PER_PASS;

/** The period of the coarse clock: a schedule that runs more often gets a `rate(5 minutes)` clock. */
export const COARSE_CLOCK_MS = 5 * 60_000;
/** How many upcoming occurrences decide whether a schedule runs more often than the coarse clock. */
const CLOCK_SAMPLE = 20;

/**
 * How far a pass at `nowMs` materialises: `MIN_OCCURRENCES_AHEAD` occurrences after now, and
 * `MATERIALISE_AHEAD_MS` beyond the clock's next firing (a coarse clock fires up to its period later).
 */
export function horizonOf(
  r: Pick<ScheduleRecord, 'expression' | 'timezone' | 'startAtMs' | 'endAtMs' | 'anchorMs' | 'clockPeriodMs'>,
  nowMs: number,
): number {
  // Strictly after now: a firing at an occurrence's time writes the two that follow it.
  const ahead = occurrencesOf(r, nowMs + 1, MIN_OCCURRENCES_AHEAD);
  // Fewer left than that: all of them (the schedule ends).
  if (ahead.length < MIN_OCCURRENCES_AHEAD) return END_OF_TIME;
  return Math.max(nowMs + (r.clockPeriodMs ?? 0) + MATERIALISE_AHEAD_MS, ahead[ahead.length - 1]!);
}

/**
 * The clock a schedule gets, decided when its revision is written: a schedule whose next
 * occurrences come on average more often than every {@link COARSE_CLOCK_MS} is fired every
 * `COARSE_CLOCK_MS` (each firing materialises the several occurrences ahead: fewer firings, SQS
 * messages and watermark writes per occurrence); any other mirrors its own expression. `at()` has
 * none.
 */
export function clockPeriodOf(r: Parameters<typeof occurrencesOf>[0], nowMs: number): number | undefined {
  if (r.expression.trimStart().startsWith('at(')) return undefined;
  const runs = occurrencesOf(r, nowMs, CLOCK_SAMPLE + 1);
  if (runs.length <= CLOCK_SAMPLE) return undefined;
  return (runs[CLOCK_SAMPLE]! - runs[0]!) / CLOCK_SAMPLE < COARSE_CLOCK_MS ? COARSE_CLOCK_MS : undefined;
}

/** What the schedule's clock fires on: its own timing, or the coarse `rate()`. */
export function clockTimingOf(r: ScheduleRecord): Timing {
  if (r.clockPeriodMs === undefined) return r;
  return {
    expression: `rate(${r.clockPeriodMs / 60_000} minutes)`,
    timezone: 'UTC',
    ...(r.startAtMs !== undefined ? { startAtMs: r.startAtMs } : {}),
    ...(r.endAtMs !== undefined ? { endAtMs: r.endAtMs } : {}),
  };
}

/** The job of one occurrence of a revision. */
export function occurrenceJob(
  deps: Pick<IngestDeps, 'codec'>,
  r: { tenant: string; name: string; rev: string; shardCount: number },
  dueMs: number,
): { jobId: string; shard: number } {
  const { shard, random } = deps.codec.occurrencePlacement(r.tenant, r.name, r.rev, dueMs, r.shardCount);
  return { jobId: deps.codec.encode({ tenant: r.tenant, shard, dueMs, path: 't', random }), shard };
}

/**
 * Writes the occurrences of an enabled schedule after its watermark, up to the horizon, and moves
 * the watermark (conditional on the revision: a schedule changed meanwhile keeps its own). The
 * retired revisions' cancels left by a call that died are finished first. `untilMs` caps the
 * horizon. One pass: at most {@link MAX_OCCURRENCES_PER_PASS} occurrences (the next firing goes
 * on from the watermark; a change catches up with {@link catchUp}). Returns how many occurrence
 * jobs were new.
 */
export async function materialise(
  deps: RecurringDeps,
  record: ScheduleRecord,
  opts: { readonly nowMs?: number; readonly untilMs?: number } = {},
): Promise<number> {
  const settled = await settlePending(deps, record);
  if (settled.state !== 'ENABLED' || settled.deleting) return 0;
  // A firing passes the time it read before it read the record: a change made after that read
  // retires this revision's occurrences up to at least this horizon (see `retire`), however long
  // this pass then takes.
  const now = opts.nowMs ?? deps.clock.now();
  const horizon = Math.min(horizonOf(settled, now), opts.untilMs ?? Number.POSITIVE_INFINITY);
  const { created, through } = await writePass(deps, settled, horizon);
  if (through > settled.throughMs) await deps.schedules.advanceThrough(settled.tenant, settled.name, settled.rev, through);
  return created;
}

/**
 * Writes every occurrence of `record`'s revision after its watermark up to `untilMs` (inclusive),
 * however many: passes of at most {@link MAX_OCCURRENCES_PER_PASS}, each followed by the watermark
 * (so a call that dies part way, or runs out of `budget`, leaves the next call or firing to go on
 * from there). A change runs it on the old revision up to its cut-off before writing the new one.
 * Returns `done` (the watermark reached `untilMs`), `changed` (the revision was replaced meanwhile:
 * read it again) or `budget` (`budget()` said stop between two passes).
 */
export async function catchUp(
  deps: RecurringDeps,
  record: ScheduleRecord,
  untilMs: number,
  budget: () => boolean = () => true,
): Promise<'done' | 'changed' | 'budget'> {
  let r = record;
  while (r.throughMs < untilMs) {
    if (r !== record && !budget()) return 'budget';
    const { through } = await writePass(deps, r, untilMs);
    if (!(await deps.schedules.advanceThrough(r.tenant, r.name, r.rev, through))) {
      // Not moved: another revision, or a firing moved it as far or further.
      const stored = await deps.schedules.getSchedule(r.tenant, r.name);
      if (stored?.rev !== r.rev) return 'changed';
      r = { ...r, throughMs: Math.max(through, stored.throughMs) };
    } else r = { ...r, throughMs: through };
  }
  return 'done';
}

/** One pass: the revision's occurrences after its watermark up to `horizon`, at most {@link MAX_OCCURRENCES_PER_PASS}; `through` is where the watermark may go. */
async function writePass(deps: RecurringDeps, record: ScheduleRecord, horizon: number): Promise<{ created: number; through: number }> {
  const max = passSize(deps);
  const runs = occurrencesOf(record, record.throughMs + 1, max, horizon === END_OF_TIME ? undefined : horizon + 1);
  const limit = limiter(WRITE_CONCURRENCY);
  const startMs = deps.clock.now();
  const jobs = runs.map((dueMs) => ({ ...occurrenceJob(deps, record, dueMs), dueMs }));
  const outcomes = await Promise.all(
    jobs.map(({ jobId, shard, dueMs }) =>
      limit(() => ingestJob(deps, { jobId, tenant: record.tenant, shard, dueMs, payload: record.payload, schedule: record.name })),
    ),
  );
  if (deps.spans) fireSpans(deps.spans, record, jobs, outcomes, { startMs, endMs: deps.clock.now() });
  const through = runs.length === max ? runs[runs.length - 1]! : horizon;
  return { created: outcomes.filter((o) => o === 'created').length, through };
}

/**
 * Each occurrence written starts a trace of its own (the one its job id derives): its
 * `dynein.schedule.fire` span is that trace's root, linked to the call that defined the schedule
 * when it carried a `traceparent` (docs/tracing.md); its `dynein.ingest` span goes under it.
 */
function fireSpans(
  spans: SpanSink,
  record: ScheduleRecord,
  jobs: readonly { readonly jobId: string; readonly dueMs: number }[],
  outcomes: readonly IngestOutcome[],
  at: { readonly startMs: number; readonly endMs: number },
): void {
  const definedBy = unpackTrace(record.definedBy);
  jobs.forEach(({ jobId, dueMs }, i) => {
    if (outcomes[i] !== 'created') return;
    const trace = jobTrace(jobId);
    const attributes = {
      'dynein.tenant': record.tenant,
      'dynein.job_id': jobId,
      'dynein.schedule': record.name,
      'dynein.occurrence_at': isoMs(dueMs),
    };
    spans.record({
      traceId: trace.traceId,
      spanId: trace.spanId,
      name: 'dynein.schedule.fire',
      kind: SPAN_KIND.internal,
      ...at,
      attributes,
      ...(definedBy ? { links: [{ traceId: definedBy.traceId, spanId: definedBy.spanId }] } : {}),
    });
    const ingested = jobSpan('dynein.ingest', SPAN_KIND.internal, { jobId, tenant: record.tenant }, at, { 'dynein.outcome': 'created' });
    if (ingested) spans.record(ingested);
  });
}

/**
 * Cancels the materialised occurrences of retired revisions (each a tombstone at its key, so a
 * firing of the old revision still in flight cannot write it afterwards), then drops the
 * pending entries. An occurrence after the cut-off that a dispatcher had already taken (the
 * cancel came too late: it is being delivered) stays the old revision's: the current revision's
 * watermark moves past it (before the entries are dropped), so no later revision writes that
 * time again. Returns the record as settled (no pending entries, the watermark so moved).
 */
export async function settlePending(deps: RecurringDeps, record: ScheduleRecord): Promise<ScheduleRecord> {
  if (record.pending.length === 0) return record;
  const taken = Math.max(...(await Promise.all(record.pending.map((p) => cancelOccurrences(deps, record, p)))));
  if (taken > record.throughMs) await deps.schedules.advanceThrough(record.tenant, record.name, record.rev, taken);
  await deps.schedules.clearPending(
    record.tenant,
    record.name,
    record.rev,
    record.pending.map((p) => p.rev),
  );
  return { ...record, pending: [], throughMs: Math.max(record.throughMs, taken) };
}

/** Tombstones a retired revision's occurrences in (`fromMs`, `throughMs`]; returns the last one a dispatcher already held (or -Infinity). */
async function cancelOccurrences(deps: RecurringDeps, record: ScheduleRecord, p: PendingCancel): Promise<number> {
  const limit = limiter(WRITE_CONCURRENCY);
  const { store, settings } = deps;
  let after = p.fromMs + 1;
  let taken = Number.NEGATIVE_INFINITY;
  const max = passSize(deps);
  for (;;) {
    const runs = occurrencesOf(p, after, max, p.throughMs + 1);
    await Promise.all(
      runs.map((dueMs) =>
        limit(async () => {
          const { jobId, shard } = occurrenceJob(
            deps,
            { tenant: record.tenant, name: record.name, rev: p.rev, shardCount: p.shardCount },
            dueMs,
          );
          // A row a dispatcher holds (or delivered) is not touched: it is being delivered.
          const outcome = await store.cancel(
            { shard, dueMs, jobId },
            record.tenant,
            // The tombstone outlives every copy of a firing message that could write the occurrence again.
            tombstoneExpiresAtMs(dueMs, deps.clock.now(), settings),
            { occurrence: true },
          );
          if (outcome === 'acquired') taken = Math.max(taken, dueMs);
        }),
      ),
    );
    if (runs.length < max) return taken;
    after = runs[runs.length - 1]! + 1;
  }
}

/** The pending cancel that retires `record`'s revision at `nowMs`: its occurrences due after the cut-off. */
export function retire(record: ScheduleRecord, nowMs: number, lookaheadMs: number): PendingCancel {
  return {
    rev: record.rev,
    expression: record.expression,
    timezone: record.timezone,
    ...(record.startAtMs !== undefined ? { startAtMs: record.startAtMs } : {}),
    ...(record.endAtMs !== undefined ? { endAtMs: record.endAtMs } : {}),
    anchorMs: record.anchorMs,
    shardCount: record.shardCount,
    fromMs: nowMs + lookaheadMs,
    // A firing still in flight may have read its clock up to a minute ago or ahead: cover its horizon.
    throughMs: Math.max(record.throughMs, horizonOf(record, nowMs + 60_000)),
  };
}

/** A firing of the schedule's clock: materialises what is due ahead (nothing for a schedule deleted since). */
export async function materialiseFiring(deps: RecurringDeps, ref: { tenant: string; name: string }): Promise<number> {
  const nowMs = deps.clock.now();
  const record = await deps.schedules.getSchedule(ref.tenant, ref.name);
  return record ? materialise(deps, record, { nowMs }) : 0;
}
