/**
 * A round's reads of its shards (docs/design-dispatch.md): each look reads what is new in a shard
 * (from where it read last, up to the read-ahead, in bounded pages), drains an outage's backlog
 * oldest first beside it, reads the shard's late lane, then its hold lane; and, before a round ends
 * idle, probes for rows due within the lookahead.
 */
import { type DueKey, dueMsOf, positionThrough, type SchedulerSettings, type ShardLane } from '../model/index.js';
import type { DispatchDeps } from './deps.js';
import type { HoldLanes, RoundRows } from './holdLanes.js';
import { ParkedTenants } from './parked.js';
import { rowKeyString } from './releaseStats.js';
import { newTrack } from './rowTracker.js';

/** A fresh read whose page ends this far behind now has met an outage's backlog. */
const BACKLOG_LAG_MS = 1_000;
/** Pages the fresh head reads per shard and look. */
const FRESH_PAGES = 4;
/** Late-lane pointers read per shard and look. */
const LATE_PAGE = 100;

const isLive = (k: DueKey) => k.state === 'SCHEDULED' || k.state === 'ACQUIRED';

export class ShardReader {
  constructor(
    private readonly deps: Pick<DispatchDeps, 'store' | 'controls'> & { readonly settings: Pick<SchedulerSettings, 'lookaheadMs'> },
    private readonly rows: RoundRows,
    private readonly holds: Pick<HoldLanes, 'read'>,
    private readonly pageRows: number,
  ) {}

  /**
   * One look at a shard: the fresh head's new pages (up to `horizon`), a backlog page when the
   * last one is nearly acquired, the late lane, and the hold lane. Answers whether a late-lane row
   * is due within the lookahead but not yet within the read-ahead (the round is not idle then).
   */
  async read(lane: ShardLane, t0: number, horizon: number): Promise<boolean> {
    await this.#readFresh(lane, t0, horizon);
    await this.#readBacklog(lane, t0);
    const ahead = await this.#readLate(lane, t0, horizon);
    if (this.deps.controls || lane.holds.size > 0) await this.holds.read(lane, t0);
    return ahead;
  }

  /**
   * The fresh head's pages. A page that ends far behind now has met an outage's backlog: a
   * backlog head drains it oldest first, and the fresh head jumps to now, so that rows falling due
   * meanwhile do not wait.
   */
  async #readFresh(lane: ShardLane, t0: number, horizon: number): Promise<void> {
    const through = positionThrough(horizon);
    lane.caughtUp = false;
    for (let p = 0; p < FRESH_PAGES && this.rows.room(); p++) {
      const page = await this.deps.store.readDue(lane.shard, { after: lane.fresh, through }, this.pageRows);
      this.rows.count(page.rows.length);
      if (page.more && page.last && !lane.backlog && dueMsOf(page.last) < t0 - BACKLOG_LAG_MS) {
        const end = positionThrough(Math.max(t0 - 1, dueMsOf(page.last)));
        lane.backlog = { after: page.last, end };
        lane.fresh = end;
        this.#take(lane, page.rows, true, t0);
        continue;
      }
      this.#take(lane, page.rows, false, t0);
      if (!page.more) {
        if (lane.fresh === undefined || lane.fresh < through) lane.fresh = through;
        lane.caughtUp = true;
        break;
      }
      if (page.last) lane.fresh = page.last;
    }
    if (lane.probeHintMs !== undefined && lane.fresh !== undefined && dueMsOf(lane.fresh) >= lane.probeHintMs) lane.probeHintMs = undefined;
  }

  /** A page of the backlog when fewer than half a page of it waits for an acquire. */
  async #readBacklog(lane: ShardLane, t0: number): Promise<void> {
    if (!lane.backlog || lane.backlogOpen >= this.pageRows / 2 || !this.rows.room()) return;
    const page = await this.deps.store.readDue(lane.shard, { after: lane.backlog.after, through: lane.backlog.end }, this.pageRows);
    this.rows.count(page.rows.length);
    this.#take(lane, page.rows, true, t0);
    if (page.more && page.last) lane.backlog.after = page.last;
    else lane.backlog = undefined;
  }

  /** The late lane: rows ingested too close to their due time to be sure a read position had not passed them. */
  async #readLate(lane: ShardLane, t0: number, horizon: number): Promise<boolean> {
    const { tracker, report } = this.rows;
    const pointers = await this.deps.store.readLate(lane.shard, t0 + this.deps.settings.lookaheadMs, LATE_PAGE);
    this.rows.count(pointers.length);
    let ahead = false;
    for (const k of pointers) {
      const id = rowKeyString(k);
      const known = tracker.get(id);
      if (known) {
        known.late = true;
        continue;
      }
      if (tracker.latePointers.goneLately(id, t0)) continue;
      if (k.dueMs > horizon) {
        ahead = true;
        continue;
      }
      if (!this.rows.room()) continue; // read again at the next look
      const t = newTrack(k, id, ParkedTenants.tenantOf(k.jobId) ?? '', { late: true });
      tracker.track(t);
      report.lateRows++;
      this.rows.queue(t, false);
    }
    return ahead;
  }

  /**
   * Before ending idle: is anything due within the lookahead beyond the read-ahead? One item at
   * most per shard, and none while an earlier probe's item is still ahead of the fresh head.
   */
  async probe(lane: ShardLane, t0: number): Promise<boolean> {
    if (lane.probeHintMs !== undefined) return true;
    const through = positionThrough(t0 + this.deps.settings.lookaheadMs);
    const page = await this.deps.store.readDue(lane.shard, { after: lane.fresh, through }, 1);
    this.rows.count(page.rows.length);
    const first = page.rows[0];
    if (!first) return false;
    lane.probeHintMs = first.dueMs;
    return true;
  }

  /** Tracks the live rows of a page and queues them (or watches those another round holds). */
  #take(lane: ShardLane, rows: readonly DueKey[], backlog: boolean, now: number): void {
    const { tracker, report } = this.rows;
    for (const k of rows) {
      if (!isLive(k)) continue; // a delivered marker, a tombstone, a DEAD record: final
      const id = rowKeyString(k);
      const known = tracker.get(id);
      if (known) {
        known.main = true;
        continue;
      }
      const fields = { main: true, wasAcquired: k.state === 'ACQUIRED', ...(k.priority !== undefined ? { priority: k.priority } : {}) };
      const t = newTrack({ shard: lane.shard, dueMs: k.dueMs, jobId: k.jobId }, id, ParkedTenants.tenantOf(k.jobId) ?? '', fields);
      tracker.track(t);
      if (backlog) report.backlogRows++;
      if (k.state === 'ACQUIRED' && k.leaseUntil >= now) tracker.watch(t, k.leaseUntil + 1);
      else this.rows.queue(t, backlog);
    }
  }
}
