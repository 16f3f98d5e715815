import { Acquirer } from './acquirer.js';
import { backoffMs, settleAll, sleep } from '../util/index.js';
import {
  type AcquiredRow,
  cellOfGroup,
  DEFAULT_PRIORITY,
  type DueKey,
  dueMsOf,
  type HeldPointer,
  positionThrough,
  readAheadMs,
  type RowKey,
  ShardLane,
  type ShardMarks,
  ThrottledError,
} from '../model/index.js';
import { ParkedTenants } from './parked.js';
import { Releaser, rowKeyString, type ReleaseStats } from './releaser.js';
import { TenantTally } from './tenantTally.js';
import { dispatchFlow, type DispatchDeps } from './deps.js';

export type { DispatchDeps } from './deps.js';

export interface RoundOptions {
  /** Shards this round dispatches. */
  readonly shards: readonly number[];
  /** The round has returned by then (epoch ms), having released what it holds. */
  readonly deadlineMs: number;
  /**
   * Where to start reading each shard (epoch ms): the marks kept in the group lease item. A shard
   * without one is read from its start.
   */
  readonly marks?: ShardMarks;
  /** Re-read interval while busy. @default 500 */
  readonly queryIntervalMs?: number;
  /** Most rows held (acquired, not yet sent). @default 10_000 */
  readonly maxHeldRows?: number;
  /** Most payload bytes held. @default 64 MiB */
  readonly maxHeldBytes?: number;
  /** Conditional acquires in flight. @default 32 */
  readonly acquireConcurrency?: number;
  /** Items per page of a shard read. @default 200 */
  readonly pageRows?: number;
  /**
   * Checked every `ownerCheckMs` with the marks to keep: false ends the round (another
   * execution took the group).
   */
  readonly stillOwner?: (marks: ShardMarks) => Promise<boolean>;
  /** @default 5_000 */
  readonly ownerCheckMs?: number;
  /** Aborting stops the round at once: no further calls, timers cleared (a crash, in tests). */
  readonly signal?: AbortSignal;
  /** Called as rows are sent, with their lateness (metrics that stay current during a long round). */
  readonly onSent?: (latenessMs: readonly number[]) => void;
}

export interface RoundReport extends ReleaseStats {
  /** Rows taken with the conditional acquire. */
  acquired: number;
  /** Of those, rows whose earlier lease had expired (a crashed or slow dispatcher's). */
  recovered: number;
  /** Acquires whose condition failed: another round got there first, or the row was cancelled. */
  conflicts: number;
  /** Reads of the table: due-range pages, late-lane reads, idle probes, and key lookups after a conflict. */
  queries: number;
  /** Items those reads returned (DynamoDB's ScannedCount: nothing is filtered away). */
  itemsRead: number;
  /** Overdue rows the backlog heads read (an outage's backlog, drained oldest first). */
  backlogRows: number;
  /** Rows found through the late lane. */
  lateRows: number;
  /** Most rows tracked at once (read, not yet final): what the round's memory follows. */
  maxTracked: number;
  /** Backoffs after throttling (one per failed step, however many of its calls were throttled). */
  throttled: number;
  /** Backoffs after other errors. */
  errors: number;
  /** The round ended because nothing was due within the lookahead. */
  idle: boolean;
  /** The round ended because another execution took over the group. */
  lostGroup: boolean;
  /** Rows still held at the end (abandoned: dispatched again when their lease expires). */
  abandoned: number;
  /** Where the next reader of each shard may start (kept in the group lease item). */
  marks: ShardMarks;
  /** Most rows of unregistered tenants the round held back, parked (core/dispatch/parked.ts). */
  parked: number;
  /** Those rows' tenants. */
  parkedTenants: string[];
  /** Rows put in the hold lane because their tenant was paused (docs/tenant-controls.md). */
  held: number;
  /** Rows read back from the hold lane (their tenant resumed, or its queue drained). */
  unheld: number;
  /** Queued rows moved to the hold lane to keep the round's queue bounded (a flood, or a delivery-limited backlog). */
  spilled: number;
  /** Those rows' tenants (paused during the round). */
  heldTenants: string[];
  /** Paused tenants with jobs in the hold lanes of the round's shards (for the PausedTooLong alarm). */
  pausedTenants: string[];
  /**
   * The longest any tenant that may send (not paused, registered) has had the same first row in
   * the hold lanes of the round's shards, as this process saw it across its looks (ms; 0: none):
   * rows that should be read back and are not (the HeldAfterResume alarm).
   */
  heldAfterResumeMs: number;
  /** Those tenants whose first held row waited so (over 0 ms), longest first, at most 10. */
  heldAfterResumeTenants: string[];
  durationMs: number;
}

/** Leaves this much before the deadline to release what the round holds. */
const RELEASE_MARGIN_MS = 1_000;
/** How long a round waits at its end for its own requests still in flight (within the 2 s margin the Lambda entry leaves). */
const SETTLE_MS = 1_500;
/** A fresh read whose page ends this far behind now has met an outage's backlog. */
const BACKLOG_LAG_MS = 1_000;
/** Pages the fresh head reads per shard and look. */
const FRESH_PAGES = 4;
/** Late-lane pointers read per shard and look. */
const LATE_PAGE = 100;
/** A deleted pointer may still show in the late lane's (eventually consistent) reads this long. */
const POINTER_ECHO_MS = 10_000;
/** How often a round looks for tenants with rows in a shard's hold lane (the controls' staleness bound). */
const HOLD_SCAN_MS = 5_000;
/**
 * Tenants with held rows one look finds per shard at most: each look goes on where the last one
 * stopped and wraps round, so that with T tenants held in a shard each is found within
 * ceil(T / 50) looks.
 */
const HOLD_TENANTS_PER_SCAN = 50;
/** Parked rows a round keeps watching, in pages (at most a quarter of its cap): the older ones go to the hold lane. */
const PARKED_KEEP_PAGES = 2;
/** A delivery-limited tenant has at most this many seconds of its rate acquired and unsent. */
const LIMITED_IN_HAND_SECONDS = 2;
/** ... and at most this many seconds of it (at least two pages) waiting for an acquire: the rest goes to the hold lane. */
const LIMITED_QUEUED_SECONDS = 10;
/** When the rows queued and held pass this share of the round's cap, the largest tenant's excess goes to the hold lane. */
const SPILL_AT = 0.75;

/** A row the round has read and that is not final yet. */
interface Track {
  readonly key: RowKey;
  readonly id: string;
  /** From the job id: fair share is per tenant. */
  readonly tenant: string;
  /** The job's priority (1..9), when not the default. */
  readonly priority?: number;
  /** Read by a due-range read: it holds the shard's mark back until it is final. */
  main: boolean;
  /** A late-lane pointer names it: deleted once the row is final. */
  late: boolean;
  /** Counted in its lane's `backlogOpen` while queued. */
  backlog: boolean;
  /** Last seen ACQUIRED by someone (a recovery when we acquire it). */
  wasAcquired: boolean;
  /** Its hold-lane pointer, when it has one: deleted once the row is final. */
  held?: HeldPointer;
  phase: 'queued' | 'acquiring' | 'held' | 'watch';
  /** When watched: acquire again from then (the other holder's lease ends). */
  retryAt: number;
}

const isLive = (k: DueKey) => k.state === 'SCHEDULED' || k.state === 'ACQUIRED';

/** A report with nothing done yet (a round starts from it; a step that dispatches nothing answers it). */
export function emptyRoundReport(): RoundReport {
  return {
    acquired: 0,
    recovered: 0,
    conflicts: 0,
    queries: 0,
    itemsRead: 0,
    backlogRows: 0,
    lateRows: 0,
    maxTracked: 0,
    throttled: 0,
    errors: 0,
    idle: false,
    lostGroup: false,
    abandoned: 0,
    marks: {},
    parked: 0,
    parkedTenants: [],
    held: 0,
    unheld: 0,
    spilled: 0,
    heldTenants: [],
    pausedTenants: [],
    heldAfterResumeMs: 0,
    heldAfterResumeTenants: [],
    durationMs: 0,
    sent: 0,
    recorded: 0,
    leaseLost: 0,
    renewed: 0,
    sendRetries: 0,
    latenessMs: [],
    deferred: 0,
    givenBack: 0,
  };
}

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
  const { store, clock, settings } = deps;
  const started = clock.now();
  const interval = Math.min(options.queryIntervalMs ?? 500, 500);
  const maxRows = options.maxHeldRows ?? 10_000;
  const maxBytes = options.maxHeldBytes ?? 64 * 1024 * 1024;
  const pageRows = options.pageRows ?? 200;
  const readAhead = readAheadMs(settings);
  const signal = options.signal;
  const report = emptyRoundReport();
  const lanes = options.shards.map((s) => new ShardLane(s, options.marks?.[s]));
  const laneOf = new Map(lanes.map((l) => [l.shard, l]));
  const tracks = new Map<string, Track>();
  const watching = new Set<Track>();
  const parkedTenants = deps.parked ?? new ParkedTenants();
  /** Tracks of parked rows: watched, never acquired, and not work (the round may go idle). */
  const parked = new Set<string>();
  /** Parked rows the round keeps watching at most; see {@link spillParked}. */
  const parkedKeep = Math.max(1, Math.min(PARKED_KEEP_PAGES * pageRows, Math.floor(maxRows / 4)));
  /** Per shard, the first held row of each tenant that may send, and since when (see `HoldScanMemory.heads`). */
  const holdHeads = new Map<number, Map<string, { readonly sk: string; readonly since: number }>>();
  /** Per tenant, the longest its first held row waited while it could send (the report's `heldAfterResumeMs`). */
  const heldAfter = new Map<string, number>();
  /** Late-lane pointers of final rows, to delete; and when those deleted lately were (reads of the lane may lag). */
  const latePointers = new PointerSweep<RowKey>((keys) => store.deleteLatePointers(keys));
  const background = new Set<Promise<void>>();
  let attempt = 0; // consecutive failed reads, for backoff
  let acquireAttempt = 0; // consecutive throttled acquires
  let lastOwnerCheck = started;

  const controls = deps.controls;
  /** Hold-lane pointers of final rows, to delete; and when those deleted lately were. */
  const heldPointers = new PointerSweep<HeldPointer>((keys) => store.deleteHeldPointers(keys));
  /** Holds waiting for their pointer's write (batched). */
  const holdBatch: { t: Track; pointer: HeldPointer }[] = [];
  let holdFlush: Promise<void> | undefined;
  /** Hold-lane rows this look is reading back, over all lanes ({@link unheldRoom}). */
  let unheldThisLook = 0;
  // A round's shards are all of one cell (a step dispatches groups of its tick's cell only).
  const cell = cellOfGroup((options.shards[0] ?? 0) % settings.groupCount, settings);
  const flow = deps.flow?.of(cell) ?? dispatchFlow(() => clock.now());

  const releaser = new Releaser(
    deps,
    report,
    signal,
    {
      onRecorded: (rows) => rows.forEach((r) => finishId(rowKeyString(r))),
      onDropped: (row, retryAt) => {
        const t = tracks.get(rowKeyString(row));
        if (t) watch(t, retryAt);
      },
      ...(options.onSent ? { onSent: options.onSent } : {}),
    },
    options.shards.length / Math.max(1, settings.shardCount),
    flow.sends,
  );
  const acquirer: Acquirer<Track> = new Acquirer<Track>({
    concurrency: options.acquireConcurrency ?? 32,
    limit: flow.acquires,
    now: () => clock.now(),
    canStart: () => releaser.size + acquirer.inflight < maxRows && releaser.bytes < maxBytes && !signal?.aborted,
    run: acquireOne,
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
        rate === undefined || releaser.heldOf(tenant) + acquirer.inflightOf(tenant) < Math.max(2, Math.ceil(rate * LIMITED_IN_HAND_SECONDS))
      );
    },
  });

  try {
    while (!signal?.aborted) {
      const t0 = clock.now();
      const stopAt = options.deadlineMs - RELEASE_MARGIN_MS;
      if (t0 >= stopAt) break;
      if (options.stillOwner && t0 - lastOwnerCheck >= (options.ownerCheckMs ?? 5_000)) {
        lastOwnerCheck = t0;
        if (!(await options.stillOwner(currentMarks()))) {
          report.lostGroup = true;
          break;
        }
      }
      const horizon = Math.min(t0 + readAhead, stopAt);
      unheldThisLook = 0;
      let lateAhead: boolean[];
      try {
        // Every lane's look settles before the next begins (a lane is never read twice at once).
        lateAhead = await settleAll(lanes.map((l) => readLane(l, t0, horizon)));
      } catch (err) {
        await backOff(err);
        continue;
      }
      if (signal?.aborted) break;
      attempt = 0;
      const now = clock.now();
      for (const t of watching) {
        if (t.retryAt <= now) {
          watching.delete(t);
          queue(t, false);
        }
      }
      // Keeps the controls of tenants with rows held current (the release timer reads them from the cache).
      if (controls) for (const tenant of releaser.tenants()) void controls.get(tenant);
      if (controls) spill();
      spillParked();
      acquirer.kick();
      flushPointers();
      report.maxTracked = Math.max(report.maxTracked, tracks.size);

      const quiet =
        tracks.size === parked.size &&
        releaser.size === 0 &&
        !lateAhead.some(Boolean) &&
        lanes.every((l) => l.caughtUp && !l.backlog && !holdWork(l));
      if (quiet) {
        let busy: boolean;
        try {
          busy = (await settleAll(lanes.map((l) => probe(l, t0)))).some(Boolean);
        } catch (err) {
          await backOff(err);
          continue;
        }
        if (!busy && report.held + report.spilled + report.unheld > 0 && holdFlush === undefined) {
          // This round used the hold lanes: before ending, look at them again (a pointer written
          // behind a tenant's read position is found by a scan).
          try {
            for (const l of lanes) await readHolds(l, t0, true);
          } catch (err) {
            await backOff(err);
            continue;
          }
          busy = lanes.some(holdWork);
        }
        if (!busy) {
          report.idle = true;
          break;
        }
      }
      await sleep(t0 + interval - clock.now(), signal);
    }
    // Release what is held; everything held is due before the deadline.
    await acquirer.stop();
    while (holdFlush) await holdFlush;
    await releaser.drain(options.deadlineMs);
    flushPointers();
    await Promise.all(background);
  } finally {
    await acquirer.stop();
    report.abandoned = releaser.abandon();
    await releaser.settled(SETTLE_MS);
    report.marks = currentMarks();
    report.durationMs = clock.now() - started;
    if (controls) {
      const paused = new Set<string>(report.heldTenants);
      for (const l of lanes) for (const tenant of l.holds.keys()) if (controls.peek(tenant).paused) paused.add(tenant);
      report.pausedTenants = [...paused].sort();
    }
    const waited = [...heldAfter].filter(([, ms]) => ms > 0).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    report.heldAfterResumeMs = waited[0]?.[1] ?? 0;
    report.heldAfterResumeTenants = waited.slice(0, 10).map(([tenant]) => tenant);
  }
  return report;

  /**
   * One look at a shard: the fresh head's new pages (up to the read-ahead), a backlog page when
   * the last one is nearly acquired, and the late lane. Answers whether a late-lane row is due
   * within the lookahead but not yet within the read-ahead (the round is not idle then).
   */
  async function readLane(lane: ShardLane, t0: number, horizon: number): Promise<boolean> {
    const through = positionThrough(horizon);
    lane.caughtUp = false;
    for (let p = 0; p < FRESH_PAGES && room(); p++) {
      const page = await store.readDue(lane.shard, { after: lane.fresh, through }, pageRows);
      count(page.rows.length);
      if (page.more && page.last && !lane.backlog && dueMsOf(page.last) < t0 - BACKLOG_LAG_MS) {
        // The page ends far behind now: an outage's backlog. It is drained oldest first by a
        // backlog head; the fresh head jumps to now, so rows falling due meanwhile do not wait.
        const end = positionThrough(Math.max(t0 - 1, dueMsOf(page.last)));
        lane.backlog = { after: page.last, end };
        lane.fresh = end;
        take(lane, page.rows, true, t0);
        continue;
      }
      take(lane, page.rows, false, t0);
      if (!page.more) {
        if (lane.fresh === undefined || lane.fresh < through) lane.fresh = through;
        lane.caughtUp = true;
        break;
      }
      if (page.last) lane.fresh = page.last;
    }
    if (lane.probeHintMs !== undefined && lane.fresh !== undefined && dueMsOf(lane.fresh) >= lane.probeHintMs) lane.probeHintMs = undefined;

    if (lane.backlog && lane.backlogOpen < pageRows / 2 && room()) {
      const page = await store.readDue(lane.shard, { after: lane.backlog.after, through: lane.backlog.end }, pageRows);
      count(page.rows.length);
      take(lane, page.rows, true, t0);
      if (page.more && page.last) lane.backlog.after = page.last;
      else lane.backlog = undefined;
    }

    const pointers = await store.readLate(lane.shard, t0 + settings.lookaheadMs, LATE_PAGE);
    count(pointers.length);
    let ahead = false;
    for (const k of pointers) {
      const id = rowKeyString(k);
      const known = tracks.get(id);
      if (known) {
        known.late = true;
        continue;
      }
      if (latePointers.goneLately(id, t0)) continue;
      if (k.dueMs > horizon) {
        ahead = true;
        continue;
      }
      if (!room()) continue; // read again at the next look
      const t: Track = {
        key: { shard: k.shard, dueMs: k.dueMs, jobId: k.jobId },
        id,
        tenant: ParkedTenants.tenantOf(k.jobId) ?? '',
        main: false,
        late: true,
        backlog: false,
        wasAcquired: false,
        phase: 'queued',
        retryAt: 0,
      };
      track(t);
      report.lateRows++;
      queue(t, false);
    }
    if (controls || lane.holds.size > 0) await readHolds(lane, t0);
    return ahead;
  }

  /**
   * The shard's hold lane: every {@link HOLD_SCAN_MS}, which tenants have rows there (one
   * single-item read per tenant, a bounded number per look, see {@link scanHolds}); then, for
   * each tenant that may send again (not paused, registered), a page of its pointers (higher
   * priority first, then oldest) when fewer than a page of its rows wait for an acquire.
   */
  async function readHolds(lane: ShardLane, t0: number, force = false): Promise<void> {
    if (!holdHeads.has(lane.shard)) {
      // This process's last look at the shard (an earlier round): go on from its cursor.
      const known = deps.holdScans?.get(lane.shard);
      holdHeads.set(lane.shard, known?.heads ?? new Map());
      lane.holdCursor = known?.cursor;
      if (!force && known && known.until > t0) {
        // It looked moments ago: start from what it found.
        lane.holdScanAt = known.until;
        for (const tenant of known.tenants) if (!lane.holds.has(tenant)) lane.holds.set(tenant, { more: true });
      }
    }
    if (force || t0 >= lane.holdScanAt) {
      lane.holdScanAt = t0 + HOLD_SCAN_MS;
      await scanHolds(lane, t0);
    }
    if (force) {
      // Before ending idle: the tenants whose pointers this round wrote (a read of the lane may have missed the newest).
      for (const tenant of lane.holdsWritten) {
        if (lane.holds.get(tenant)?.more) continue;
        const page = await store.readHeld(lane.shard, { tenant }, 1);
        count(page.pointers.length);
        if (page.pointers.length > 0) lane.holds.set(tenant, { more: true });
      }
    }
    for (const [tenant, h] of lane.holds) {
      if (!h.more || !room() || unheldRoom(tenant) <= 0) continue;
      if (parkedTenants.knownParked(tenant, t0) || (controls && (await controls.get(tenant)).paused)) continue;
      const take = Math.min(pageRows, unheldRoom(tenant)); // again: other lanes may have taken the room meanwhile
      if (take <= 0) continue;
      unheldThisLook += take;
      const page = await store.readHeld(lane.shard, { tenant, ...(h.after !== undefined ? { after: h.after } : {}) }, take);
      count(page.pointers.length);
      h.more = page.more;
      if (page.last !== undefined) h.after = page.last;
      for (const p of page.pointers) {
        const id = rowKeyString(p);
        const known = tracks.get(id);
        if (known) {
          known.held = p;
          continue;
        }
        if (heldPointers.goneLately(id, t0)) continue;
        const t: Track = {
          key: { shard: p.shard, dueMs: p.dueMs, jobId: p.jobId },
          id,
          tenant,
          priority: p.priority,
          main: false,
          late: false,
          held: p,
          backlog: false,
          wasAcquired: false,
          phase: 'queued',
          retryAt: 0,
        };
        track(t);
        report.unheld++;
        queue(t, false);
      }
    }
  }

  /**
   * One look for the tenants with rows in the shard's hold lane: at most
   * {@link HOLD_TENANTS_PER_SCAN} single-item reads, each jumping past the tenant it found,
   * going on from where this process's last look stopped and wrapping round at the lane's end (a
   * lap ends where the look began). Tenants the look passed without finding them have no held row
   * left. Notes how long each tenant that may send has had the same first held row.
   */
  async function scanHolds(lane: ShardLane, t0: number): Promise<void> {
    const begin = lane.holdCursor;
    /** Tenant → its first pointer (highest priority, then oldest). */
    const found = new Map<string, HeldPointer>();
    /** The stretches of the lane this look covered: positions in (after, through]; no `through`: to the lane's end. */
    const covered: { after: string | undefined; through?: string }[] = [];
    let from = begin;
    let after = begin;
    let wrapped = begin === undefined; // a look from the lane's start covers it in one lap
    for (let reads = 0; ; reads++) {
      if (reads === HOLD_TENANTS_PER_SCAN) {
        if (after !== undefined) covered.push({ after: from, through: after }); // (undefined: it has just wrapped round)
        break;
      }
      const page = await store.readHeld(lane.shard, after === undefined ? {} : { after }, 1);
      count(page.pointers.length);
      const p = page.pointers[0];
      const position = p && `${p.tenant}$`; // past every sk of this tenant ('$' sorts right after '#' and before name characters)
      if (wrapped && begin !== undefined && (position === undefined || position > begin)) {
        covered.push({ after: from, through: begin }); // back where the look began: a whole lap
        after = begin;
        break;
      }
      if (p && position) {
        found.set(p.tenant, p);
        after = position;
      }
      if (!p || !page.more) {
        covered.push({ after: from }); // the lane's end
        after = undefined;
        if (wrapped) break;
        wrapped = true;
        from = undefined;
      }
    }
    lane.holdCursor = after;
    const inCovered = (tenant: string) => {
      const at = `${tenant}$`;
      return covered.some((c) => (c.after === undefined || at > c.after) && (c.through === undefined || at <= c.through));
    };
    const heads = holdHeads.get(lane.shard)!;
    for (const tenant of lane.holds.keys()) if (!found.has(tenant) && inCovered(tenant)) lane.holds.delete(tenant);
    for (const tenant of heads.keys()) if (!found.has(tenant) && inCovered(tenant)) heads.delete(tenant);
    for (const [tenant, p] of found) {
      const h = lane.holds.get(tenant);
      // Read through before: start again (a pointer may have been added behind the position).
      if (!h || !h.more) lane.holds.set(tenant, { more: true });
      const paused = controls !== undefined && (await controls.get(tenant)).paused;
      if (paused || (await parkedTenants.parksTenant(tenant, deps.tenants, t0))) {
        heads.delete(tenant);
        continue;
      }
      const sk = `${p.priority}#${rowKeyString(p)}`;
      const head = heads.get(tenant);
      const since = head?.sk === sk ? head.since : t0;
      if (head?.sk !== sk) heads.set(tenant, { sk, since });
      heldAfter.set(tenant, Math.max(heldAfter.get(tenant) ?? 0, t0 - Math.max(since, p.dueMs)));
    }
    deps.holdScans?.set(lane.shard, {
      until: lane.holdScanAt,
      tenants: [...found.keys()],
      ...(lane.holdCursor !== undefined ? { cursor: lane.holdCursor } : {}),
      heads,
    });
  }

  /**
   * Rows of `tenant` the hold lanes may still give back in this look: none while it has two
   * pages queued; otherwise up to where {@link spill} would begin, less what this look already
   * reads back over all lanes. Rows read back are never spilled again (read, dropped and read
   * again, the churn that halved a saturated round's rate), and a refill is large and rare.
   */
  function unheldRoom(tenant: string): number {
    if (acquirer.queuedOf(tenant) >= 2 * pageRows) return 0;
    const kept = acquirer.queued - acquirer.backlogQueued + releaser.size;
    return Math.floor(maxRows * SPILL_AT) - kept - unheldThisLook;
  }

  /** Rows of a tenant no longer paused (and not parked) wait in this shard's hold lane (the round has work). */
  function holdWork(lane: ShardLane): boolean {
    const now = clock.now();
    for (const [tenant, h] of lane.holds) {
      if (h.more && !controls?.peek(tenant).paused && !parkedTenants.knownParked(tenant, now)) return true;
    }
    return false;
  }

  /**
   * Whether the round may read more rows: the rows it keeps waiting (queued for an acquire, held
   * for release, and watched: behind another round's lease, or parked) are within its cap. A look
   * may pass it by the pages in flight and the acquires running.
   */
  function room(): boolean {
    return acquirer.queued + releaser.size + watching.size < maxRows;
  }

  function track(t: Track): void {
    tracks.set(t.id, t);
    if (tracks.size > report.maxTracked) report.maxTracked = tracks.size;
  }

  /**
   * A paused tenant's row goes to the hold lane: once its pointer is written the round lets go
   * of it, so the shard's mark may pass it; the row stays SCHEDULED (cancellable) until the
   * tenant resumes and a round reads the pointer back. Pointer writes are batched.
   */
  function hold(t: Track, paused = true): Promise<void> {
    if (paused) {
      report.held++;
      (report.byTenant ??= new TenantTally()).held(t.tenant);
      if (!report.heldTenants.includes(t.tenant)) report.heldTenants.push(t.tenant);
    }
    if (t.held) {
      drop(t); // already in the hold lane (its tenant was paused again, or it was spilled again)
      rereadHolds(t);
      return Promise.resolve();
    }
    holdBatch.push({ t, pointer: { ...t.key, tenant: t.tenant, priority: t.priority ?? DEFAULT_PRIORITY } });
    return (holdFlush ??= flushHolds());
  }

  /** Writes the batched hold pointers, 25 a request, until none is left. */
  function flushHolds(): Promise<void> {
    return (async () => {
      await sleep(5, signal);
      while (holdBatch.length > 0 && !signal?.aborted) {
        const batch = holdBatch.splice(0, 25);
        const failed = new Set(
          await store.putHeldPointers(batch.map((b) => b.pointer)).then(
            (f) => f.map(rowKeyString),
            () => batch.map((b) => b.t.id),
          ),
        );
        if (signal?.aborted) return;
        for (const { t: held, pointer } of batch) {
          if (failed.has(held.id))
            watch(held, clock.now() + 1_000, false); // tried again later; the row keeps the mark meanwhile
          else {
            held.held = pointer;
            drop(held);
            rereadHolds(held);
          }
        }
      }
    })().finally(() => {
      // A hold queued while this flush was ending is written by the next one.
      holdFlush = holdBatch.length > 0 && !signal?.aborted ? flushHolds() : undefined;
    });
  }

  /**
   * Keeps what waits for an acquire bounded without stopping the reads: a delivery-limited
   * tenant keeps at most {@link LIMITED_QUEUED_SECONDS} of its rate queued, and when the round
   * nears its cap the tenant with the most rows queued keeps two pages. The rest goes to the
   * hold lane (the rows it would reach last), to be read back as its queue drains: one
   * tenant's flood, or a limited tenant's backlog, neither holds the shards' marks back nor
   * stops the reads that find other tenants' rows.
   */
  function spill(): void {
    const keepMin = 2 * pageRows;
    const out: Track[] = [];
    for (const tenant of new Set([...acquirer.tenants(), ...releaser.tenants()])) {
      const rate = releaser.rateOf(tenant);
      if (rate !== undefined) out.push(...acquirer.spill(tenant, Math.max(keepMin, Math.ceil(rate * LIMITED_QUEUED_SECONDS))));
    }
    while (acquirer.queued - acquirer.backlogQueued + releaser.size > maxRows * SPILL_AT) {
      const largest = acquirer.largestFresh();
      if (!largest || largest.queued <= keepMin) break;
      out.push(...acquirer.spill(largest.tenant, keepMin, true));
    }
    for (const t of out) {
      if (t.backlog) {
        const lane = laneOf.get(t.key.shard);
        if (lane) lane.backlogOpen--;
        t.backlog = false;
      }
      t.phase = 'acquiring';
      report.spilled++;
      void hold(t, false);
    }
  }

  /**
   * Parked rows count against the round's cap like any other: the round keeps watching the newest
   * `parkedKeep` (their tenant is looked up again every recheck; they hold the shard's mark, so
   * every round meets them and reports them), and the older ones go to the hold lane, to be read
   * back once their tenant is registered again. A deregistered tenant's backlog thus neither
   * grows the round's memory nor stops the reads that find other tenants' rows.
   */
  function spillParked(): void {
    if (parked.size <= parkedKeep) return;
    const rows: Track[] = [];
    for (const id of parked) {
      const t = tracks.get(id);
      if (t?.phase === 'watch') rows.push(t);
    }
    rows.sort((a, b) => a.key.dueMs - b.key.dueMs || (a.id < b.id ? -1 : 1));
    for (const t of rows.slice(0, Math.max(0, rows.length - parkedKeep))) {
      parked.delete(t.id);
      watching.delete(t);
      t.phase = 'acquiring';
      report.spilled++;
      void hold(t, false);
    }
  }

  /** The lane of a row just put (back) in the hold lane reads its tenant's pointers again from the start. */
  function rereadHolds(t: Track): void {
    const lane = laneOf.get(t.key.shard);
    if (lane) {
      lane.holds.set(t.tenant, { more: true });
      lane.holdsWritten.add(t.tenant);
    }
  }

  /** Forgets a row that is not final but needs this round no more (its hold pointer stays). */
  function drop(t: Track): void {
    tracks.delete(t.id);
    watching.delete(t);
    parked.delete(t.id);
    if (t.late) latePointers.add(t.id, t.key);
  }

  /** Tracks the live rows of a page and queues them (or watches those another round holds). */
  function take(lane: ShardLane, rows: readonly DueKey[], backlog: boolean, now: number): void {
    for (const k of rows) {
      if (!isLive(k)) continue; // a delivered marker, a tombstone, a DEAD record: final
      const id = rowKeyString(k);
      const known = tracks.get(id);
      if (known) {
        known.main = true;
        continue;
      }
      const t: Track = {
        key: { shard: lane.shard, dueMs: k.dueMs, jobId: k.jobId },
        id,
        tenant: ParkedTenants.tenantOf(k.jobId) ?? '',
        ...(k.priority !== undefined ? { priority: k.priority } : {}),
        main: true,
        late: false,
        backlog: false,
        wasAcquired: k.state === 'ACQUIRED',
        phase: 'queued',
        retryAt: 0,
      };
      track(t);
      if (backlog) report.backlogRows++;
      if (k.state === 'ACQUIRED' && k.leaseUntil >= now) watch(t, k.leaseUntil + 1);
      else queue(t, backlog);
    }
  }

  /**
   * Before ending idle: is anything due within the lookahead beyond the read-ahead? One item at
   * most per shard, and none while an earlier probe's item is still ahead of the fresh head.
   */
  async function probe(lane: ShardLane, t0: number): Promise<boolean> {
    if (lane.probeHintMs !== undefined) return true;
    const page = await store.readDue(lane.shard, { after: lane.fresh, through: positionThrough(t0 + settings.lookaheadMs) }, 1);
    count(page.rows.length);
    const first = page.rows[0];
    if (!first) return false;
    lane.probeHintMs = first.dueMs;
    return true;
  }

  function queue(t: Track, backlog: boolean): void {
    t.phase = 'queued';
    t.backlog = backlog;
    if (backlog) {
      const lane = laneOf.get(t.key.shard);
      if (lane) lane.backlogOpen++;
      acquirer.pushBacklog(t);
    } else acquirer.pushFresh(t);
  }

  /** Looks at `t` again from `retryAt` (when another round's lease on it ends). */
  function watch(t: Track, retryAt: number, heldByOther = true): void {
    t.phase = 'watch';
    t.retryAt = retryAt;
    t.wasAcquired = heldByOther;
    watching.add(t);
  }

  function finishId(id: string): void {
    const t = tracks.get(id);
    if (!t) return;
    tracks.delete(id);
    watching.delete(t);
    parked.delete(id);
    if (t.late) latePointers.add(id, t.key);
    if (t.held) heldPointers.add(id, t.held);
  }

  /** Resolves with the latency of the acquire's call to the table, when it made one. */
  async function acquireOne(t: Track): Promise<number | undefined> {
    t.phase = 'acquiring';
    if (t.backlog) {
      const lane = laneOf.get(t.key.shard);
      if (lane) lane.backlogOpen--;
      t.backlog = false;
    }
    const at = clock.now();
    // A row of an unregistered tenant stays parked: looked at again after the recheck interval.
    if (await parkedTenants.parks(t.key.jobId, deps.tenants, at)) {
      parked.add(t.id);
      report.parked = Math.max(report.parked, parked.size);
      const tenant = ParkedTenants.tenantOf(t.key.jobId);
      if (tenant !== undefined && !report.parkedTenants.includes(tenant)) report.parkedTenants.push(tenant);
      watch(t, at + parkedTenants.recheckMs, false);
      return;
    }
    parked.delete(t.id);
    if (controls && (await controls.get(t.tenant)).paused) {
      await hold(t);
      return;
    }
    let row: AcquiredRow | undefined;
    const called = clock.now();
    try {
      row = await store.acquire(t.key, at, at + settings.leaseMs);
    } catch (err) {
      if (signal?.aborted) return;
      // Back in the queue; the acquirer pauses (one backoff for the calls that fail together).
      acquirer.pushFresh(t);
      t.phase = 'queued';
      if (!acquirer.paused) {
        if (err instanceof ThrottledError) report.throttled++;
        else report.errors++;
        deps.log?.('acquire backing off', { error: (err as Error).message, attempt: acquireAttempt });
        acquirer.pause(Math.max(1, backoffMs(acquireAttempt++, { baseMs: 50, capMs: 2_000 })));
      }
      return;
    }
    const latencyMs = clock.now() - called;
    acquireAttempt = 0;
    if (signal?.aborted) return;
    if (row) {
      report.acquired++;
      if (t.wasAcquired) report.recovered++;
      t.phase = 'held';
      releaser.add(row);
      return latencyMs;
    }
    report.conflicts++;
    await resolve(t);
    return latencyMs;
  }

  /** After a failed acquire: what is at the key now? One strongly consistent lookup. */
  async function resolve(t: Track): Promise<void> {
    try {
      const row = await store.getRow(t.key);
      report.queries++;
      if (row) report.itemsRead++;
      const now = clock.now();
      if (!row || (row.expiresAtMs !== undefined && row.expiresAtMs <= now) || (row.state !== 'ACQUIRED' && row.state !== 'SCHEDULED'))
        finishId(t.id);
      else if (row.state === 'ACQUIRED') watch(t, row.leaseUntil + 1);
      else watch(t, now + 100, false); // SCHEDULED again (a redrive replaced a DEAD record): try again shortly
    } catch (err) {
      report.errors++;
      deps.log?.('looking a row up failed; retrying later', { error: (err as Error).message });
      watch(t, clock.now() + 1_000);
    }
  }

  function flushPointers(): void {
    if (signal?.aborted) return;
    for (const sweep of [latePointers, heldPointers]) {
      const p = sweep.flush(() => clock.now());
      if (!p) continue;
      const tracked: Promise<void> = p.finally(() => background.delete(tracked));
      background.add(tracked);
    }
  }

  /** Where the next reader of each shard may start: its lane's position, or the oldest row it still tracks. */
  function currentMarks(): ShardMarks {
    const marks: ShardMarks = {};
    for (const l of lanes) {
      const m = l.mark();
      if (m !== undefined) marks[l.shard] = m;
    }
    for (const t of tracks.values()) {
      const m = marks[t.key.shard];
      if (t.main && m !== undefined && t.key.dueMs < m) marks[t.key.shard] = t.key.dueMs;
    }
    return marks;
  }

  function count(items: number): void {
    report.queries++;
    report.itemsRead += items;
  }

  async function backOff(err: unknown): Promise<void> {
    if (err instanceof ThrottledError) report.throttled++;
    else report.errors++;
    deps.log?.('dispatch round backing off', { error: (err as Error).message, attempt });
    await sleep(backoffMs(attempt++, { baseMs: 50, capMs: 2_000 }), signal);
  }
}

/**
 * Pointers (late lane, hold lane) of rows that became final, deleted in batches, and those
 * deleted lately, remembered for {@link POINTER_ECHO_MS}: a lane's read may still show them
 * (eventually consistent), and the round must not take them for new rows.
 */
class PointerSweep<K extends RowKey> {
  readonly #toDelete = new Map<string, K>();
  readonly #deleted = new Map<string, number>();

  constructor(private readonly remove: (keys: readonly K[]) => Promise<K[]>) {}

  add(id: string, key: K): void {
    this.#toDelete.set(id, key);
  }

  /** Waiting for its delete, or deleted within the echo window before `nowMs`. */
  goneLately(id: string, nowMs: number): boolean {
    return this.#toDelete.has(id) || (this.#deleted.get(id) ?? -Infinity) > nowMs - POINTER_ECHO_MS;
  }

  /** Deletes what is waiting (one call, batched by the store); failed deletes wait for the next flush. */
  flush(now: () => number): Promise<void> | undefined {
    if (this.#toDelete.size === 0) return undefined;
    const batch = [...this.#toDelete.values()];
    this.#toDelete.clear();
    return this.remove(batch)
      .then((failed) => {
        const left = new Set(failed.map(rowKeyString));
        for (const k of batch) {
          const id = rowKeyString(k);
          if (left.has(id)) this.#toDelete.set(id, k);
          else {
            if (this.#deleted.size >= 10_000) this.#deleted.clear();
            this.#deleted.set(id, now());
          }
        }
      })
      .catch(() => batch.forEach((k) => this.#toDelete.set(rowKeyString(k), k)));
  }
}
