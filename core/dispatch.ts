import { backoffMs, forEachLimit, sleep } from './backoff.js';
import type { SchedulerSettings } from './config.js';
import { ThrottledError } from './errors.js';
import { ParkedTenants } from './parked.js';
import { Releaser, rowKeyString, type ReleaseStats } from './release.js';
import type { Clock, DueKey, JobStore, QueueSender, RowKey } from './ports.js';
import type { TenantRegistry } from './tenants.js';

export interface DispatchDeps {
  readonly store: JobStore;
  readonly sender: QueueSender;
  readonly tenants: TenantRegistry;
  readonly clock: Clock;
  readonly settings: SchedulerSettings;
  /** Structured log of unusual events (throttling, lost leases); silent by default. */
  readonly log?: (message: string, fields?: Record<string, unknown>) => void;
  /** Tenants found unregistered, whose rows stay parked (kept across rounds). @default one per round */
  readonly parked?: ParkedTenants;
}

export interface RoundOptions {
  /** Shards this round dispatches. */
  readonly shards: readonly number[];
  /** The round has returned by then (epoch ms), having released what it holds. */
  readonly deadlineMs: number;
  /** Re-query interval while busy. @default 500 */
  readonly queryIntervalMs?: number;
  /** Most rows held (acquired, not yet sent). @default 10_000 */
  readonly maxHeldRows?: number;
  /** Most payload bytes held. @default 64 MiB */
  readonly maxHeldBytes?: number;
  /** Conditional acquires in flight. @default 32 */
  readonly acquireConcurrency?: number;
  /** Checked every `ownerCheckMs`: false ends the round (another execution took the group). */
  readonly stillOwner?: () => Promise<boolean>;
  /** @default 5_000 */
  readonly ownerCheckMs?: number;
  /** Aborting stops the round at once: no further calls, timers cleared (a crash, in tests). */
  readonly signal?: AbortSignal;
}

export interface RoundReport extends ReleaseStats {
  /** Rows taken with the conditional acquire. */
  acquired: number;
  /** Of those, rows whose earlier lease had expired (a crashed or slow dispatcher's). */
  recovered: number;
  /** Acquires whose condition failed: another round got there first, or the row was cancelled. */
  conflicts: number;
  /** Due tombstones moved to cancel records. */
  tombstonesMoved: number;
  /** Shard queries (one per page) and the rows they returned. */
  queries: number;
  itemsRead: number;
  /** Backoffs after throttling (one per failed step, however many of its calls were throttled). */
  throttled: number;
  /** Backoffs after other errors, and failed tombstone moves. */
  errors: number;
  /** The round ended because nothing was due within the lookahead. */
  idle: boolean;
  /** The round ended because another execution took over the group. */
  lostGroup: boolean;
  /** Rows still held at the end (abandoned: dispatched again when their lease expires). */
  abandoned: number;
  /** Most rows of unregistered tenants one look found due and left parked (core/parked.ts). */
  parked: number;
  /** Those rows' tenants. */
  parkedTenants: string[];
  durationMs: number;
}

/** Leaves this much before the deadline to release what the round holds. */
const RELEASE_MARGIN_MS = 1_000;
/** How long a round waits at its end for its own requests still in flight (within the 2 s margin the Lambda entry leaves). */
const SETTLE_MS = 1_500;

/**
 * One dispatch round over a shard group, as DESIGN.md's "Job lifecycle" describes it.
 *
 * Every `queryIntervalMs` it reads each shard from its start up to `now + lookahead` (keys, state
 * and lease only), acquires new rows in due order with a conditional update that returns the
 * payload, and hands them to a {@link Releaser} that sends each at its due millisecond. Querying
 * never waits for releasing. It returns when nothing is due within the lookahead, when another
 * execution took its group, or near its deadline, after releasing what it holds.
 *
 * @example
 * const report = await dispatchRound(deps, { shards: [0, 8, 16], deadlineMs: Date.now() + 60_000 });
 */
export async function dispatchRound(deps: DispatchDeps, options: RoundOptions): Promise<RoundReport> {
  const { store, clock, settings } = deps;
  const started = clock.now();
  const interval = Math.min(options.queryIntervalMs ?? 500, 500);
  const maxRows = options.maxHeldRows ?? 10_000;
  const maxBytes = options.maxHeldBytes ?? 64 * 1024 * 1024;
  const signal = options.signal;
  const report: RoundReport = {
    acquired: 0, recovered: 0, conflicts: 0, tombstonesMoved: 0, queries: 0, itemsRead: 0, throttled: 0, errors: 0,
    idle: false, lostGroup: false, abandoned: 0, parked: 0, parkedTenants: [], durationMs: 0,
    sent: 0, deleted: 0, leaseLost: 0, renewed: 0, sendRetries: 0, latenessMs: [],
  };
  const parkedTenants = deps.parked ?? new ParkedTenants();
  const releaser = new Releaser(deps, report, signal);
  let attempt = 0; // consecutive failed iterations, for backoff
  let lastOwnerCheck = started;
  const moving = new Map<string, Promise<void>>();

  try {
    while (!signal?.aborted) {
      const t0 = clock.now();
      const stopAt = options.deadlineMs - RELEASE_MARGIN_MS;
      if (t0 >= stopAt) break;
      if (options.stillOwner && t0 - lastOwnerCheck >= (options.ownerCheckMs ?? 5_000)) {
        lastOwnerCheck = t0;
        if (!(await options.stillOwner())) {
          report.lostGroup = true;
          break;
        }
      }
      const horizon = Math.min(t0 + settings.lookaheadMs, stopAt);
      let keys: DueKey[];
      try {
        keys = (await Promise.all(options.shards.map((s) => store.queryDue(s, horizon)))).flat();
        report.queries += options.shards.length;
        report.itemsRead += keys.length;
      } catch (err) {
        await backOff(err);
        continue;
      }
      if (signal?.aborted) break;

      const now = clock.now();
      const toAcquire: DueKey[] = [];
      let live = 0;
      for (const k of keys) {
        if (k.state === 'CANCELLED') {
          const key = rowKeyString(k);
          if (k.dueMs + settings.tombstoneGraceMs <= now && !moving.has(key)) {
            moving.set(key, moveTombstone(k).finally(() => moving.delete(key)));
          }
          continue;
        }
        live++;
        if (releaser.holds(k)) continue;
        if (k.state === 'SCHEDULED' || k.leaseUntil < now) toAcquire.push(k);
      }
      // Rows of unregistered tenants stay parked: not acquired, and not counted as work (an idle round).
      const split = await parkedTenants.split(toAcquire, deps.tenants, now);
      toAcquire.length = 0;
      toAcquire.push(...split.acquire);
      live -= split.parked.length;
      if (split.parked.length > report.parked) report.parked = split.parked.length;
      for (const k of split.parked) {
        const tenant = ParkedTenants.tenantOf(k.jobId)!;
        if (!report.parkedTenants.includes(tenant)) report.parkedTenants.push(tenant);
      }
      if (live === 0 && releaser.size === 0) {
        report.idle = true;
        break;
      }
      toAcquire.sort((a, b) => a.dueMs - b.dueMs);
      const full = () => releaser.size >= maxRows || releaser.bytes >= maxBytes || !!signal?.aborted;
      let throttledNow: unknown;
      await forEachLimit(toAcquire, options.acquireConcurrency ?? 32, async (k) => {
        try {
          const at = clock.now();
          const row = await store.acquire(k, at, at + settings.leaseMs);
          if (signal?.aborted) return;
          if (!row) {
            report.conflicts++;
            return;
          }
          report.acquired++;
          if (k.state === 'ACQUIRED') report.recovered++;
          releaser.add(row);
        } catch (err) {
          throttledNow = err;
        }
      }, () => full() || throttledNow !== undefined);
      if (throttledNow !== undefined) {
        await backOff(throttledNow);
        continue;
      }
      attempt = 0;
      await sleep(t0 + interval - clock.now(), signal);
    }
    // Release what is held; everything held is due before the deadline.
    await releaser.drain(options.deadlineMs);
    await Promise.all(moving.values());
  } finally {
    report.abandoned = releaser.abandon();
    await releaser.settled(SETTLE_MS);
    report.durationMs = clock.now() - started;
  }
  return report;

  async function backOff(err: unknown): Promise<void> {
    if (err instanceof ThrottledError) report.throttled++;
    else report.errors++;
    deps.log?.('dispatch round backing off', { error: (err as Error).message, attempt });
    await sleep(backoffMs(attempt++, { baseMs: 50, capMs: 2_000 }), signal);
  }

  /**
   * A due tombstone leaves the due range: the cancel record is written first (conditional put),
   * then the tombstone is deleted. A young ingest claim at the cancel-record key means a late
   * ingest is in flight: leave the tombstone (it fails that ingest's put) and retry later.
   */
  async function moveTombstone(k: RowKey): Promise<void> {
    try {
      const now = clock.now();
      const record = { kind: 'CANCELLED' as const, atMs: now };
      const expiresAt = k.dueMs + settings.cancelRecordRetentionMs;
      if (!(await store.putCancelRecord(k, record, expiresAt))) {
        const existing = await store.getCancelRecord(k);
        if (existing?.kind === 'INGESTED') {
          if (existing.atMs + settings.tombstoneGraceMs > now) return;
          if (!(await store.convertClaim(k, existing.atMs, now))) return;
        }
      }
      if (signal?.aborted) return;
      await store.deleteTombstone(k);
      report.tombstonesMoved++;
    } catch (err) {
      report.errors++;
      deps.log?.('moving a tombstone failed; a later round retries', { error: (err as Error).message });
    }
  }
}
