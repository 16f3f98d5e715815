/**
 * The recurring-schedule API: `PUT`, `GET`, `DELETE /v1/tenants/{tenant}/schedules/{name}`, the
 * list, pause and resume (docs/api.md). Each change is one conditional write of the schedule item
 * at a new revision, which also records the old revision's occurrences still to cancel; then the
 * cancels (tombstones), the clock (EventBridge Scheduler) and the first occurrences. A call that
 * dies part way leaves the item saying what is left, and the next call or firing finishes it.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import {
  type Clock,
  ConcurrentModificationError,
  isoMs,
  type JobIdCodec,
  type JobStore,
  ScheduleCatchingUpError,
  ScheduleNotFoundError,
  type SchedulerSettings,
  packTrace,
  type SpanSink,
  type TraceContext,
  ValidationError,
} from '../model/index.js';
import { MAX_RUNS_PER_CALL, parseSchedule } from './expression/index.js';
import type { TenantRegistry } from '../tenants/index.js';
import { catchUp, clockPeriodOf, clockTimingOf, materialise, retire, settlePending, type RecurringDeps } from './materialise.js';
import {
  assertScheduleName,
  occurrencesOf,
  parseDefinition,
  renderSchedule,
  type ScheduleDefinition,
  type ScheduleRecord,
  type ScheduleReply,
} from './model.js';
import type { OccurrenceAudits, ScheduleStore, ScheduleTrigger } from './ports.js';

export interface SchedulesDeps {
  readonly store: JobStore;
  readonly schedules: ScheduleStore;
  readonly trigger: ScheduleTrigger;
  readonly tenants: TenantRegistry;
  readonly codec: JobIdCodec;
  readonly clock: Clock;
  readonly settings: SchedulerSettings;
  /** Where the occurrences' `dynein.schedule.fire` and `dynein.ingest` spans go (docs/tracing.md). Absent: none. */
  readonly spans?: SpanSink;
  /** The never-fired check's list of tenants with schedules: each change notes its tenant. Absent: not noted. */
  readonly audits?: Pick<OccurrenceAudits, 'noteScheduleTenant'>;
  /** Wakes the group of each occurrence's row if it rests (docs/design-dispatch.md, "Rest"). */
  readonly wakes: RecurringDeps['wakes'];
  /** Internal (tests): see {@link RecurringDeps.maxOccurrencesPerPass}. */
  readonly maxOccurrencesPerPass?: number;
}

/** How long a change spends catching up a schedule that is behind before it answers 503 `CatchingUp` (the function's timeout is 20 s). */
export const CATCH_UP_BUDGET_MS = 10_000;
/** How long a deleted schedule's marker outlives its floor (the TTL removes it later still). */
const MARKER_RETENTION_MS = 24 * 3_600_000;

/** Runs a dry run previews by default, and at most. */
export const DRY_RUN_RUNS = 100;
/** Schedules per list page: default and most. */
export const LIST_DEFAULT = 50;
export const LIST_MAX = 100;

/** What a PUT answers: the status (201 created, 200 replaced or dry run) and the reply. */
export interface PutResult {
  readonly status: 200 | 201;
  readonly schedule: ScheduleReply & { readonly dryRun?: true };
}

export class SchedulesService {
  readonly #recurring: RecurringDeps;

  constructor(private readonly deps: SchedulesDeps) {
    this.#recurring = {
      store: deps.store,
      codec: deps.codec,
      clock: deps.clock,
      settings: deps.settings,
      schedules: deps.schedules,
      wakes: deps.wakes,
      ...(deps.spans ? { spans: deps.spans } : {}),
      ...(deps.maxOccurrencesPerPass !== undefined ? { maxOccurrencesPerPass: deps.maxOccurrencesPerPass } : {}),
    };
  }

  /**
   * `PUT .../schedules/{name}` (`query`: `dryRun`, `count`); `caller`: the trace context of its
   * `traceparent`, which the revision's occurrences link to (docs/tracing.md).
   */
  async put(
    tenant: string,
    name: string,
    rawBody: string | undefined,
    query: Readonly<Record<string, string | undefined>> = {},
    caller?: TraceContext,
  ): Promise<PutResult> {
    await this.deps.tenants.require(tenant);
    assertScheduleName(name);
    const dryRun = flag(query.dryRun, 'dryRun');
    if (query.count !== undefined && !dryRun)
      throw new ValidationError('count applies to a dry run only: add dryRun=true, or leave count out');
    const count = query.count === undefined ? DRY_RUN_RUNS : whole(query.count, 'count', 1, DRY_RUN_RUNS);
    const { definition } = parseDefinition(rawBody, this.deps.settings);
    const now = this.deps.clock.now();
    if (dryRun) {
      const existing = live(await this.deps.schedules.getSchedule(tenant, name));
      // The runs it would have once enabled, whatever state it is given.
      const preview = this.#record(tenant, name, { ...definition, state: 'ENABLED' }, existing, now, 'preview');
      return { status: 200, schedule: { ...renderSchedule(preview, now, count), state: definition.state, dryRun: true } };
    }
    const { record, created } = await this.#change(tenant, name, (old, at) => ({
      record: { ...this.#record(tenant, name, definition, old, at, randomRev()), ...(caller ? { definedBy: packTrace(caller) } : {}) },
      created: old === undefined,
    }));
    return { status: created ? 201 : 200, schedule: renderSchedule(record, this.deps.clock.now()) };
  }

  /** `GET .../schedules/{name}`. */
  async get(tenant: string, name: string): Promise<ScheduleReply> {
    await this.deps.tenants.require(tenant);
    assertScheduleName(name);
    const record = live(await this.deps.schedules.getSchedule(tenant, name));
    if (!record) throw new ScheduleNotFoundError(tenant, name);
    return renderSchedule(record, this.deps.clock.now());
  }

  /** `GET .../schedules` (`query`: `limit`, `cursor`). */
  async list(
    tenant: string,
    query: Readonly<Record<string, string | undefined>> = {},
  ): Promise<{ schedules: ScheduleReply[]; nextCursor?: string }> {
    await this.deps.tenants.require(tenant);
    const limit = query.limit === undefined ? LIST_DEFAULT : whole(query.limit, 'limit', 1, LIST_MAX);
    const after = query.cursor === undefined ? undefined : this.#readCursor(tenant, query.cursor);
    const out: ScheduleRecord[] = [];
    let from = after;
    let more = true;
    // Items being deleted are skipped: read on until the page is full or the tenant's items end.
    while (out.length < limit && more) {
      const page = await this.deps.schedules.listSchedules(tenant, limit - out.length, from);
      out.push(...page.records.filter((r) => !r.deleting));
      more = page.more;
      from = page.records.at(-1)?.name ?? from;
    }
    const now = this.deps.clock.now();
    const last = out.at(-1);
    return {
      schedules: out.map((r) => renderSchedule(r, now)),
      ...(more && last ? { nextCursor: this.#cursor(tenant, last.name) } : {}),
    };
  }

  /** `DELETE .../schedules/{name}`: its occurrences due after the cut-off are cancelled. */
  async delete(tenant: string, name: string): Promise<{ tenant: string; name: string; deleted: true }> {
    await this.deps.tenants.require(tenant);
    assertScheduleName(name);
    const { record } = await this.#change(
      tenant,
      name,
      (old, at) => {
        if (!old) throw new ScheduleNotFoundError(tenant, name);
        // The watermark becomes the floor: where a schedule re-created under the name may start.
        return { record: { ...old, rev: randomRev(), updatedAtMs: at, deleting: true, throughMs: this.#floor(old, at) }, created: false };
      },
      { finishDelete: true },
    );
    await this.#finishDelete(record);
    return { tenant, name, deleted: true };
  }

  /** `POST .../schedules/{name}/pause` and `/resume`. */
  async setState(tenant: string, name: string, state: 'ENABLED' | 'DISABLED'): Promise<ScheduleReply> {
    await this.deps.tenants.require(tenant);
    assertScheduleName(name);
    const { record } = await this.#change(tenant, name, (old, at) => {
      if (!old) throw new ScheduleNotFoundError(tenant, name);
      // Already so (and nothing left over): nothing to change.
      if (old.state === state && old.pending.length === 0) return undefined;
      // Paused or resumed, it stays the definition it was: its occurrences keep linking to that call.
      const record = this.#record(tenant, name, { ...old, state }, old, at, randomRev());
      return { record: old.definedBy !== undefined ? { ...record, definedBy: old.definedBy } : record, created: false };
    });
    return renderSchedule(record, this.deps.clock.now());
  }

  /**
   * One change: reads the item, writes its next revision conditionally (retrying a lost race
   * twice), then settles what the write promised: cancels, clock, first occurrences. An enabled
   * revision whose firings are behind is first caught up to the cut-off (every occurrence,
   * in passes: see {@link catchUp}); a delete found in the item (one that died part way, or the
   * marker a finished one leaves) is finished first, and a schedule created over it starts after
   * its floor.
   */
  async #change(
    tenant: string,
    name: string,
    next: (old: ScheduleRecord | undefined, nowMs: number) => { record: ScheduleRecord; created: boolean } | undefined,
    opts: { finishDelete?: boolean } = {},
  ): Promise<{ record: ScheduleRecord; created: boolean }> {
    const { lookaheadMs } = this.deps.settings;
    const started = this.deps.clock.now();
    for (let attempt = 0; attempt < 3; attempt++) {
      const stored = await this.deps.schedules.getSchedule(tenant, name);
      const now = this.deps.clock.now();
      // A delete that died part way: a retried DELETE finishes it and succeeds.
      if (stored?.deleting && !stored.deleted && opts.finishDelete) return { record: stored, created: false };
      const marker = stored?.deleting ? await this.#finishDelete(stored) : undefined;
      const old = stored?.deleting ? undefined : stored;
      const change = next(old, now);
      // Occurrences of the old revision due up to the cut-off that no firing wrote yet (ingest
      // was down): every one written now, delivered late, never skipped by the change.
      if (change !== undefined && old?.state === 'ENABLED' && old.throughMs < now + lookaheadMs) {
        const caught = await catchUp(this.#recurring, old, now + lookaheadMs, () => this.deps.clock.now() - started < CATCH_UP_BUDGET_MS);
        if (caught === 'budget') {
          const through = (await this.deps.schedules.getSchedule(tenant, name))?.throughMs ?? old.throughMs;
          throw new ScheduleCatchingUpError(name, isoMs(through), isoMs(now + lookaheadMs));
        }
        // Revised meanwhile, or the catch-up took long enough for the cut-off to move: read again
        // (a lost race only in the first case; an occurrence a dispatcher took after the cut-off
        // meanwhile stays the old revision's, see `settlePending`).
        if (caught === 'changed') continue;
        const elapsed = this.deps.clock.now() - now;
        if (elapsed >= lookaheadMs && this.deps.clock.now() - started < CATCH_UP_BUDGET_MS) {
          attempt--;
          continue;
        }
      }
      if (change === undefined) {
        await this.#sync(old!);
        return { record: old!, created: false };
      }
      const pending = [...(old?.pending ?? []), ...(old && old.state === 'ENABLED' ? [retire(old, now, lookaheadMs)] : [])];
      // Over a deleted schedule's marker: after the occurrences the deleted one keeps.
      const throughMs = Math.max(change.record.throughMs, marker?.throughMs ?? Number.NEGATIVE_INFINITY);
      const record: ScheduleRecord = { ...change.record, throughMs, pending };
      // Over the marker at its revision; over nothing when the finished delete removed the item.
      const expectedRev = stored?.deleting && !marker ? undefined : stored?.rev;
      if (!(await this.deps.schedules.putSchedule(record, expectedRev))) continue;
      // Before its first occurrence can be due: the never-fired check then knows the tenant.
      if (!record.deleting) await this.deps.audits?.noteScheduleTenant(tenant);
      const settled = await settlePending(this.#recurring, record);
      if (!record.deleting) await this.#sync(settled);
      return { record: settled, created: change.created };
    }
    throw new ConcurrentModificationError(`schedule '${name}'`);
  }

  /** Brings the clock in line with the record, then materialises its first occurrences. */
  async #sync(record: ScheduleRecord): Promise<void> {
    const ref = { tenant: record.tenant, name: record.name };
    // at() has one occurrence, materialised now: no clock needed.
    if (parseSchedule(record.expression, record.timezone).kind === 'at') await this.deps.trigger.remove(ref);
    else await this.deps.trigger.upsert(ref, clockTimingOf(record), record.state === 'ENABLED');
    if (record.state === 'ENABLED') await materialise(this.#recurring, record);
  }

  /**
   * Finishes a delete: its cancels, the clock, then the item. While an occurrence the deleted
   * schedule keeps is still ahead (its floor), the item stays as a marker (`deleted`, removed by
   * the table's TTL) that a schedule re-created under the name starts after; otherwise it is
   * deleted. Returns the marker (undefined when the item is gone).
   */
  async #finishDelete(record: ScheduleRecord): Promise<ScheduleRecord | undefined> {
    if (record.deleted) return record;
    const settled = await settlePending(this.#recurring, record);
    await this.deps.trigger.remove({ tenant: record.tenant, name: record.name });
    // Both conditional on the revision: when another call finished the delete (or created over
    // it) first, the write fails and the caller's own conditional write reads the item again.
    if (settled.throughMs < this.deps.clock.now()) {
      await this.deps.schedules.deleteSchedule(record.tenant, record.name, record.rev);
      return undefined;
    }
    const marker: ScheduleRecord = { ...settled, deleted: true, expiresAtMs: settled.throughMs + MARKER_RETENTION_MS };
    await this.deps.schedules.putSchedule(marker, record.rev);
    return marker;
  }

  /**
   * Where a revision that follows `old` at `now` starts (its watermark): after the call, and after
   * every occurrence an earlier revision keeps: an enabled one's cut-off (now + lookahead), a
   * disabled or deleted one's floor.
   */
  #floor(old: ScheduleRecord | undefined, now: number): number {
    if (!old) return now - 1;
    if (old.state === 'ENABLED' && !old.deleting) return now + this.deps.settings.lookaheadMs;
    return Math.max(now - 1, old.throughMs);
  }

  /** The record a definition makes: a new schedule, or the next revision of `old`. */
  #record(tenant: string, name: string, d: ScheduleDefinition, old: ScheduleRecord | undefined, now: number, rev: string): ScheduleRecord {
    const record: ScheduleRecord = {
      tenant,
      name,
      expression: d.expression,
      timezone: d.timezone,
      ...(d.startAtMs !== undefined ? { startAtMs: d.startAtMs } : {}),
      ...(d.endAtMs !== undefined ? { endAtMs: d.endAtMs } : {}),
      payload: d.payload,
      state: d.state,
      rev,
      shardCount: this.deps.settings.shardCount,
      anchorMs: old?.anchorMs ?? now,
      createdAtMs: old?.createdAtMs ?? now,
      updatedAtMs: now,
      // A new or resumed schedule runs from now (never the runs that fell while it was paused), a
      // replaced one from the cut-off, and neither before an earlier revision's floor.
      throughMs: this.#floor(old, now),
      pending: [],
    };
    const clockPeriodMs = clockPeriodOf(record, now);
    return clockPeriodMs === undefined ? record : { ...record, clockPeriodMs };
  }

  #cursor(tenant: string, name: string): string {
    const text = Buffer.from(name, 'utf8').toString('base64url');
    return `${text}.${this.deps.codec.tag(`schedules\n${tenant}`, name)}`;
  }

  #readCursor(tenant: string, cursor: string): string {
    const bad = new ValidationError('cursor is not one this API issued for this tenant: pass nextCursor from the previous page unchanged');
    const m = /^([A-Za-z0-9_-]{1,120})\.([A-Za-z0-9_-]{22})$/.exec(cursor);
    if (!m) throw bad;
    const name = Buffer.from(m[1]!, 'base64url').toString('utf8');
    const expected = Buffer.from(this.deps.codec.tag(`schedules\n${tenant}`, name));
    const given = Buffer.from(m[2]!);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw bad;
    return name;
  }
}

/** A stored schedule unless it is being deleted. */
function live(r: ScheduleRecord | undefined): ScheduleRecord | undefined {
  return r?.deleting ? undefined : r;
}

function randomRev(): string {
  return randomBytes(9).toString('base64url');
}

function flag(value: string | undefined, name: string): boolean {
  if (value === undefined || value === 'false') return false;
  if (value === 'true' || value === '') return true;
  throw new ValidationError(`${name} must be true or false, got ${JSON.stringify(value)}`);
}

function whole(value: string, name: string, min: number, max: number): number {
  if (!/^\d{1,7}$/.test(value) || Number(value) < min || Number(value) > max)
    throw new ValidationError(`${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(value)}`);
  return Number(value);
}

export { occurrencesOf, MAX_RUNS_PER_CALL };
