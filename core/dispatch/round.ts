import { Acquirer } from './acquirer.js';
import { backoffMs, settleAll, sleep } from '../util/index.js';
import { cellOfGroup, readAheadMs, ShardLane, type ShardMarks, ThrottledError } from '../model/index.js';
import { HoldLanes, type RoundRows } from './holdLanes.js';
import { ParkedTenants } from './parked.js';
import { Releaser } from './releaser.js';
import { rowKeyString } from './releaseStats.js';
import { emptyRoundReport, type RoundOptions, type RoundReport } from './roundReport.js';
import { RowAcquire } from './rowAcquire.js';
import { RowTracker, type Track } from './rowTracker.js';
import { ShardReader } from './shardReader.js';
import { Spill } from './spill.js';
import { dispatchFlow, type DispatchDeps } from './deps.js';

export type { DispatchDeps } from './deps.js';
export { emptyRoundReport, type RoundOptions, type RoundReport } from './roundReport.js';

/** Leaves this much before the deadline to release what the round holds. */
const RELEASE_MARGIN_MS = 1_000;
/** How long a round waits at its end for its own requests still in flight (within the 2 s margin the Lambda entry leaves). */
const SETTLE_MS = 1_500;
/** A delivery-limited tenant has at most this many seconds of its rate acquired and unsent. */
const LIMITED_IN_HAND_SECONDS = 2;

/**
 * One dispatch round over some shards, as docs/design-dispatch.md describes it.
 *
 * Every `queryIntervalMs` it reads what is new in each shard (from where it read last, up to
 * `now + readAhead`, in bounded pages), the shard's late lane (rows ingested too close to their
 * due time to be sure a read position had not passed them), and rows it watches (held by another
 * round until its lease ends). Rows go to an {@link Acquirer} that acquires them continuously
 * with a conditional update returning the payload, fresh rows first; acquired rows go to a
 * {@link Releaser} that sends each at its due millisecond and then writes its delivered marker.
 *
 * After an outage, a shard's first page is all overdue: the lane splits into a backlog head that
 * drains the overdue rows oldest first, a page at a time as the acquirer takes them, and a fresh
 * head at now that keeps up with rows falling due meanwhile. Memory stays within a few pages per
 * shard plus the held-rows cap, whatever the backlog.
 *
 * It returns when nothing is due within the lookahead, when another execution took its group,
 * or near its deadline, after releasing what it holds; `marks` in its report say where the next
 * reader of each shard may start.
 *
 * @example
 * const report = await dispatchRound(deps, { shards: [0, 8, 16], deadlineMs: Date.now() + 60_000 });
 */
export async function dispatchRound(deps: DispatchDeps, options: RoundOptions): Promise<RoundReport> {
  return new DispatchRound(deps, options).run();
}

/**
 * A round's loop over its parts: each look reads the shards ({@link ShardReader}, with the hold
 * lanes of {@link HoldLanes}), looks again at the rows it watches ({@link RowTracker}), bounds its
 * queue ({@link Spill}), and lets the {@link Acquirer} (running {@link RowAcquire}) take rows for
 * the {@link Releaser}; it ends idle, on losing its group, or near its deadline.
 */
class DispatchRound implements RoundRows {
  readonly report = emptyRoundReport();
  readonly tracker: RowTracker;
  readonly #started: number;
  readonly #interval: number;
  readonly #maxRows: number;
  readonly #maxBytes: number;
  readonly #readAhead: number;
  readonly #lanes: ShardLane[];
  readonly #laneOf: Map<number, ShardLane>;
  readonly #holds: HoldLanes;
  readonly #reader: ShardReader;
  readonly #spill: Spill;
  readonly #releaser: Releaser;
  readonly #acquirer: Acquirer<Track>;
  /** Consecutive failed looks, for the backoff. */
  #attempt = 0;
  #lastOwnerCheck: number;

  constructor(
    private readonly deps: DispatchDeps,
    private readonly options: RoundOptions,
  ) {
    const { clock, settings, controls } = deps;
    const signal = options.signal;
    this.#started = clock.now();
    this.#lastOwnerCheck = this.#started;
    this.#interval = Math.min(options.queryIntervalMs ?? 500, 500);
    this.#maxRows = options.maxHeldRows ?? 10_000;
    this.#maxBytes = options.maxHeldBytes ?? 64 * 1024 * 1024;
    const pageRows = options.pageRows ?? 200;
    this.#readAhead = readAheadMs(settings);
    this.#lanes = options.shards.map((s) => new ShardLane(s, options.marks?.[s]));
    this.#laneOf = new Map(this.#lanes.map((l) => [l.shard, l]));
    this.tracker = new RowTracker(deps.store, this.report);
    const parkedTenants = deps.parked ?? new ParkedTenants();
    // A round's shards are all of one cell (a step dispatches groups of its tick's cell only).
    const cell = cellOfGroup((options.shards[0] ?? 0) % settings.groupCount, settings);
    const flow = deps.flow?.of(cell) ?? dispatchFlow(() => clock.now());
    const releaser = (this.#releaser = new Releaser(
      deps,
      this.report,
      signal,
      {
        onRecorded: (rows) => rows.forEach((r) => this.tracker.finish(rowKeyString(r))),
        onDropped: (row, retryAt) => {
          const t = this.tracker.get(rowKeyString(row));
          if (t) this.tracker.watch(t, retryAt);
        },
        ...(options.onSent ? { onSent: options.onSent } : {}),
      },
      options.shards.length / Math.max(1, settings.shardCount),
      flow.sends,
    ));
    const limits = { maxRows: this.#maxRows, pageRows, ...(signal ? { signal } : {}) };
    const queues = {
      queuedOf: (tenant: string) => this.#acquirer.queuedOf(tenant),
      get queued() {
        return acquirer.queued;
      },
      get backlogQueued() {
        return acquirer.backlogQueued;
      },
      get releasing() {
        return releaser.size;
      },
    };
    this.#holds = new HoldLanes(deps, parkedTenants, this, queues, limits);
    this.#reader = new ShardReader(deps, this, this.#holds, pageRows);
    const rowAcquire = new RowAcquire(
      deps,
      parkedTenants,
      this,
      this.#holds,
      () => this.#acquirer,
      (row) => releaser.add(row),
      signal,
    );
    const acquirer: Acquirer<Track> = (this.#acquirer = new Acquirer<Track>({
      concurrency: options.acquireConcurrency ?? 32,
      limit: flow.acquires,
      now: () => clock.now(),
      canStart: () => releaser.size + acquirer.inflight < this.#maxRows && releaser.bytes < this.#maxBytes && !signal?.aborted,
      run: (t) => rowAcquire.acquire(t),
      weightOf: (tenant) => controls?.peek(tenant).weight ?? 1,
      // A delivery-limited tenant keeps about two seconds of its rate in hand; its other rows wait (SCHEDULED, cancellable).
      mayStart: (tenant) => {
        if (controls && !controls.has(tenant)) {
          // Not known yet: its weight and limit first (a tenant's first acquires wait one read).
          void controls.get(tenant).then(() => acquirer.kick());
          return false;
        }
        const rate = releaser.rateOf(tenant);
        return (
          rate === undefined ||
          releaser.heldOf(tenant) + acquirer.inflightOf(tenant) < Math.max(2, Math.ceil(rate * LIMITED_IN_HAND_SECONDS))
        );
      },
    }));
    this.#spill = new Spill(this, this.#holds, acquirer, releaser, limits);
  }

  async run(): Promise<RoundReport> {
    try {
      await this.#loop();
      // Release what is held; everything held is due before the deadline.
      await this.#acquirer.stop();
      await this.#holds.written();
      await this.#releaser.drain(this.options.deadlineMs);
      this.#flushPointers();
      await this.tracker.settled();
    } finally {
      await this.#finish();
    }
    return this.report;
  }

  /** Looks at the shards every interval until the round is idle, has lost its group, or nears its deadline. */
  async #loop(): Promise<void> {
    const { clock } = this.deps;
    const { signal } = this.options;
    while (!signal?.aborted) {
      const t0 = clock.now();
      const stopAt = this.options.deadlineMs - RELEASE_MARGIN_MS;
      if (t0 >= stopAt) break;
      if (!(await this.#stillOwner(t0))) break;
      this.#holds.startLook();
      let lateAhead: boolean[];
      try {
        // Every lane's look settles before the next begins (a lane is never read twice at once).
        lateAhead = await settleAll(this.#lanes.map((l) => this.#reader.read(l, t0, Math.min(t0 + this.#readAhead, stopAt))));
      } catch (err) {
        await this.#backOff(err);
        continue;
      }
      if (signal?.aborted) break;
      this.#attempt = 0;
      this.#afterLook();
      if (this.#quiet(lateAhead)) {
        let idle: boolean;
        try {
          idle = await this.#idle(t0);
        } catch (err) {
          await this.#backOff(err);
          continue;
        }
        if (idle) {
          this.report.idle = true;
          break;
        }
      }
      await sleep(t0 + this.#interval - clock.now(), signal);
    }
  }

  /** Checked every `ownerCheckMs`: false when another execution took the group (the round ends). */
  async #stillOwner(t0: number): Promise<boolean> {
    const { stillOwner, ownerCheckMs } = this.options;
    if (!stillOwner || t0 - this.#lastOwnerCheck < (ownerCheckMs ?? 5_000)) return true;
    this.#lastOwnerCheck = t0;
    if (await stillOwner(this.#currentMarks())) return true;
    this.report.lostGroup = true;
    return false;
  }

  /** After a look: watched rows whose time has come are queued again, the queue is bounded, and the acquirer runs. */
  #afterLook(): void {
    const { controls, clock } = this.deps;
    for (const t of this.tracker.takeDue(clock.now())) this.queue(t, false);
    // Keeps the controls of tenants with rows held current (the release timer reads them from the cache).
    if (controls) for (const tenant of this.#releaser.tenants()) void controls.get(tenant);
    if (controls) this.#spill.queued();
    this.#spill.parked();
    this.#acquirer.kick();
    this.#flushPointers();
    this.report.maxTracked = Math.max(this.report.maxTracked, this.tracker.size);
  }

  /** Nothing tracked but parked rows, nothing to release, and every lane caught up with no backlog or held work. */
  #quiet(lateAhead: readonly boolean[]): boolean {
    return (
      this.tracker.size === this.tracker.parked.size &&
      this.#releaser.size === 0 &&
      !lateAhead.some(Boolean) &&
      this.#lanes.every((l) => l.caughtUp && !l.backlog && !this.#holds.hasWork(l))
    );
  }

  /**
   * A quiet round ends idle unless a probe finds a row due within the lookahead, or (when this
   * round used the hold lanes) a last look at them finds work: a pointer written behind a
   * tenant's read position is found by a scan.
   */
  async #idle(t0: number): Promise<boolean> {
    const busy = (await settleAll(this.#lanes.map((l) => this.#reader.probe(l, t0)))).some(Boolean);
    if (busy) return false;
    const { held, spilled, unheld } = this.report;
    const confirm = this.options.confirmRest === true;
    if (!confirm && (held + spilled + unheld === 0 || this.#holds.flushing)) return this.#restable();
    if (confirm) await this.#holds.written();
    for (const l of this.#lanes) await this.#holds.read(l, t0, true);
    return !this.#lanes.some((l) => this.#holds.hasWork(l)) && this.#restable();
  }

  /** Idle: notes whether its groups may rest (no held or parked rows of its shards known); true. */
  #restable(): true {
    this.report.restable = this.tracker.parked.size === 0 && this.#lanes.every((l) => l.holds.size === 0);
    return true;
  }

  /** Whatever ended the round: rows still held are abandoned (sent again once their lease ends), and the report completed. */
  async #finish(): Promise<void> {
    await this.#acquirer.stop();
    // Keyed rows waiting for a slot go back to SCHEDULED: the next round takes them at once.
    await this.#releaser.giveBackWaiting();
    this.report.abandoned = this.#releaser.abandon();
    await this.#releaser.settled(SETTLE_MS);
    this.report.marks = this.#currentMarks();
    this.report.durationMs = this.deps.clock.now() - this.#started;
    this.#holds.finishReport(this.#lanes);
  }

  /**
   * Whether the round may read more rows: the rows it keeps waiting (queued for an acquire, held
   * for release, and watched: behind another round's lease, or parked) are within its cap. A look
   * may pass it by the pages in flight and the acquires running.
   */
  room(): boolean {
    return this.#acquirer.queued + this.#releaser.size + this.tracker.watching.size < this.#maxRows;
  }

  queue(t: Track, backlog: boolean): void {
    t.backlog = backlog;
    if (backlog) {
      const lane = this.#laneOf.get(t.key.shard);
      if (lane) lane.backlogOpen++;
      this.#acquirer.pushBacklog(t);
    } else this.#acquirer.pushFresh(t);
  }

  count(items: number): void {
    this.report.queries++;
    this.report.itemsRead += items;
  }

  laneOf(shard: number): ShardLane | undefined {
    return this.#laneOf.get(shard);
  }

  #flushPointers(): void {
    if (this.options.signal?.aborted) return;
    this.tracker.flushPointers(() => this.deps.clock.now());
  }

  /** Where the next reader of each shard may start: its lane's position, or the oldest row it still tracks. */
  #currentMarks(): ShardMarks {
    const marks: ShardMarks = {};
    for (const l of this.#lanes) {
      const m = l.mark();
      if (m !== undefined) marks[l.shard] = m;
    }
    return this.tracker.holdMarksBack(marks);
  }

  async #backOff(err: unknown): Promise<void> {
    if (err instanceof ThrottledError) this.report.throttled++;
    else this.report.errors++;
    this.deps.log?.('dispatch round backing off', { error: (err as Error).message, attempt: this.#attempt });
    await sleep(backoffMs(this.#attempt++, { baseMs: 50, capMs: 2_000 }), this.options.signal);
  }
}
