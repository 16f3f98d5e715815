/**
 * A round's use of its shards' hold lanes (docs/tenant-controls.md): rows of paused tenants (and
 * rows spilled to keep the round bounded) go there as pointers and stay SCHEDULED, cancellable;
 * the round looks for tenants with rows there, reads a tenant's pointers back once it may send
 * again, and reports tenants whose held rows wait although they may send.
 */
import { DEFAULT_PRIORITY, type HeldPointer, type ShardLane } from '../model/index.js';
import { sleep } from '../util/index.js';
import type { DispatchDeps } from './deps.js';
import type { ParkedTenants } from './parked.js';
import { rowKeyString } from './releaseStats.js';
import type { RoundReport } from './roundReport.js';
import { newTrack, type RowTracker, type Track } from './rowTracker.js';
import { TenantTally } from './tenantTally.js';

/** How often a round looks for tenants with rows in a shard's hold lane (the controls' staleness bound). */
const HOLD_SCAN_MS = 5_000;
/**
 * Tenants with held rows one look finds per shard at most: each look goes on where the last one
 * stopped and wraps round, so that with T tenants held in a shard each is found within
 * ceil(T / 50) looks.
 */
const HOLD_TENANTS_PER_SCAN = 50;
/** When the rows queued and held pass this share of the round's cap, the largest tenant's excess goes to the hold lane. */
export const SPILL_AT = 0.75;
/** Pointers written per request. */
const POINTER_BATCH = 25;

/** The moves every part of a round makes on its rows (the round implements them). */
export interface RoundRows {
  readonly report: RoundReport;
  readonly tracker: RowTracker;
  /** Whether the round may read more rows (its cap, see the round). */
  room(): boolean;
  /** Queues a row for an acquire: fresh, or in its lane's backlog. */
  queue(t: Track, backlog: boolean): void;
  /** Counts one read of the table and the items it returned. */
  count(items: number): void;
  /** The lane of a shard the round reads. */
  laneOf(shard: number): ShardLane | undefined;
}

/** What the hold lanes need to know of the round's queues. */
export interface HoldRoom {
  /** Rows of `tenant` queued for an acquire. */
  queuedOf(tenant: string): number;
  /** Rows queued for an acquire, and of those the backlog heads'. */
  readonly queued: number;
  readonly backlogQueued: number;
  /** Rows acquired and not yet sent. */
  readonly releasing: number;
}

export interface HoldLanesOptions {
  readonly maxRows: number;
  readonly pageRows: number;
  readonly signal?: AbortSignal;
}

export class HoldLanes {
  /** Per shard, the first held row of each tenant that may send, and since when (see `HoldScanMemory.heads`). */
  readonly #heads = new Map<number, Map<string, { readonly sk: string; readonly since: number }>>();
  /** Per tenant, the longest its first held row waited while it could send (the report's `heldAfterResumeMs`). */
  readonly #heldAfter = new Map<string, number>();
  /** Holds waiting for their pointer's write (batched). */
  readonly #batch: { t: Track; pointer: HeldPointer }[] = [];
  #flushing: Promise<void> | undefined;
  /** Hold-lane rows this look is reading back, over all lanes ({@link unheldRoom}). */
  #unheldThisLook = 0;

  constructor(
    private readonly deps: Pick<DispatchDeps, 'store' | 'controls' | 'tenants' | 'holdScans' | 'clock'>,
    private readonly parked: ParkedTenants,
    private readonly rows: RoundRows,
    private readonly queues: HoldRoom,
    private readonly opts: HoldLanesOptions,
  ) {}

  /** A new look over the round's lanes begins. */
  startLook(): void {
    this.#unheldThisLook = 0;
  }

  /** Hold pointers are being written. */
  get flushing(): boolean {
    return this.#flushing !== undefined;
  }

  /** Resolves once every hold asked for is written (or given up). */
  async written(): Promise<void> {
    while (this.#flushing) await this.#flushing;
  }

  /**
   * The shard's hold lane: every {@link HOLD_SCAN_MS}, which tenants have rows there (one
   * single-item read per tenant, a bounded number per look, see {@link scan}); then, for each
   * tenant that may send again (not paused, registered), a page of its pointers (higher priority
   * first, then oldest) when fewer than a page of its rows wait for an acquire. `force`: look
   * again before the round ends idle.
   */
  async read(lane: ShardLane, t0: number, force = false): Promise<void> {
    const { store, controls } = this.deps;
    const { tracker, report } = this.rows;
    const { pageRows } = this.opts;
    if (!this.#heads.has(lane.shard)) this.#resume(lane, t0, force);
    if (force || t0 >= lane.holdScanAt) {
      lane.holdScanAt = t0 + HOLD_SCAN_MS;
      await this.#scan(lane, t0);
    }
    if (force) {
      // Before ending idle: the tenants whose pointers this round wrote (a read of the lane may have missed the newest).
      for (const tenant of lane.holdsWritten) {
        if (lane.holds.get(tenant)?.more) continue;
        const page = await store.readHeld(lane.shard, { tenant }, 1);
        this.rows.count(page.pointers.length);
        if (page.pointers.length > 0) lane.holds.set(tenant, { more: true });
      }
    }
    for (const [tenant, h] of lane.holds) {
      if (!h.more || !this.rows.room() || this.unheldRoom(tenant) <= 0) continue;
      if (this.parked.knownParked(tenant, t0) || (controls && (await controls.get(tenant)).paused)) continue;
      const take = Math.min(pageRows, this.unheldRoom(tenant)); // again: other lanes may have taken the room meanwhile
      if (take <= 0) continue;
      this.#unheldThisLook += take;
      const page = await store.readHeld(lane.shard, { tenant, ...(h.after !== undefined ? { after: h.after } : {}) }, take);
      this.rows.count(page.pointers.length);
      h.more = page.more;
      if (page.last !== undefined) h.after = page.last;
      for (const p of page.pointers) {
        const id = rowKeyString(p);
        const known = tracker.get(id);
        if (known) {
          known.held = p;
          continue;
        }
        if (tracker.heldPointers.goneLately(id, t0)) continue;
        const t = newTrack(p, id, tenant, { priority: p.priority, held: p });
        tracker.track(t);
        report.unheld++;
        this.rows.queue(t, false);
      }
    }
  }

  /** The round's first look at a shard: go on from this process's last look (an earlier round's). */
  #resume(lane: ShardLane, t0: number, force: boolean): void {
    const known = this.deps.holdScans?.get(lane.shard);
    this.#heads.set(lane.shard, known?.heads ?? new Map());
    lane.holdCursor = known?.cursor;
    if (!force && known && known.until > t0) {
      // It looked moments ago: start from what it found.
      lane.holdScanAt = known.until;
      for (const tenant of known.tenants) if (!lane.holds.has(tenant)) lane.holds.set(tenant, { more: true });
    }
  }

  /**
   * One look for the tenants with rows in the shard's hold lane: at most
   * {@link HOLD_TENANTS_PER_SCAN} single-item reads, each jumping past the tenant it found,
   * going on from where this process's last look stopped and wrapping round at the lane's end (a
   * lap ends where the look began). Tenants the look passed without finding them have no held row
   * left. Notes how long each tenant that may send has had the same first held row.
   */
  async #scan(lane: ShardLane, t0: number): Promise<void> {
    const { found, covered, cursor } = await this.#findTenants(lane);
    lane.holdCursor = cursor;
    const inCovered = (tenant: string) => {
      const at = `${tenant}$`;
      return covered.some((c) => (c.after === undefined || at > c.after) && (c.through === undefined || at <= c.through));
    };
    const heads = this.#heads.get(lane.shard)!;
    for (const tenant of lane.holds.keys()) if (!found.has(tenant) && inCovered(tenant)) lane.holds.delete(tenant);
    for (const tenant of heads.keys()) if (!found.has(tenant) && inCovered(tenant)) heads.delete(tenant);
    for (const [tenant, p] of found) {
      const h = lane.holds.get(tenant);
      // Read through before: start again (a pointer may have been added behind the position).
      if (!h || !h.more) lane.holds.set(tenant, { more: true });
      const paused = this.deps.controls !== undefined && (await this.deps.controls.get(tenant)).paused;
      if (paused || (await this.parked.parksTenant(tenant, this.deps.tenants, t0))) {
        heads.delete(tenant);
        continue;
      }
      const sk = `${p.priority}#${rowKeyString(p)}`;
      const head = heads.get(tenant);
      const since = head?.sk === sk ? head.since : t0;
      if (head?.sk !== sk) heads.set(tenant, { sk, since });
      this.#heldAfter.set(tenant, Math.max(this.#heldAfter.get(tenant) ?? 0, t0 - Math.max(since, p.dueMs)));
    }
    this.deps.holdScans?.set(lane.shard, {
      until: lane.holdScanAt,
      tenants: [...found.keys()],
      ...(lane.holdCursor !== undefined ? { cursor: lane.holdCursor } : {}),
      heads,
    });
  }

  /**
   * The single-item reads of one look: tenant → its first pointer (highest priority, then
   * oldest), the stretches of the lane the look covered (positions in (after, through]; no
   * `through`: to the lane's end), and where the next look goes on.
   */
  async #findTenants(lane: ShardLane): Promise<{
    found: Map<string, HeldPointer>;
    covered: { after: string | undefined; through?: string }[];
    cursor: string | undefined;
  }> {
    const begin = lane.holdCursor;
    const found = new Map<string, HeldPointer>();
    const covered: { after: string | undefined; through?: string }[] = [];
    let from = begin;
    let after = begin;
    let wrapped = begin === undefined; // a look from the lane's start covers it in one lap
    for (let reads = 0; ; reads++) {
      if (reads === HOLD_TENANTS_PER_SCAN) {
        if (after !== undefined) covered.push({ after: from, through: after }); // (undefined: it has just wrapped round)
        break;
      }
      const page = await this.deps.store.readHeld(lane.shard, after === undefined ? {} : { after }, 1);
      this.rows.count(page.pointers.length);
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
    return { found, covered, cursor: after };
  }

  /**
   * Rows of `tenant` the hold lanes may still give back in this look: none while it has two
   * pages queued; otherwise up to where the round would spill, less what this look already
   * reads back over all lanes. Rows read back are never spilled again (read, dropped and read
   * again, the churn that halved a saturated round's rate), and a refill is large and rare.
   */
  unheldRoom(tenant: string): number {
    const { maxRows, pageRows } = this.opts;
    if (this.queues.queuedOf(tenant) >= 2 * pageRows) return 0;
    const kept = this.queues.queued - this.queues.backlogQueued + this.queues.releasing;
    return Math.floor(maxRows * SPILL_AT) - kept - this.#unheldThisLook;
  }

  /** Rows of a tenant no longer paused (and not parked) wait in this shard's hold lane (the round has work). */
  hasWork(lane: ShardLane): boolean {
    const now = this.deps.clock.now();
    for (const [tenant, h] of lane.holds) {
      if (h.more && !this.deps.controls?.peek(tenant).paused && !this.parked.knownParked(tenant, now)) return true;
    }
    return false;
  }

  /**
   * A paused tenant's row goes to the hold lane (`paused` false: a row spilled): once its pointer
   * is written the round lets go of it, so the shard's mark may pass it; the row stays SCHEDULED
   * (cancellable) until the tenant resumes and a round reads the pointer back. Pointer writes are
   * batched.
   */
  hold(t: Track, paused = true): Promise<void> {
    const { report, tracker } = this.rows;
    if (paused) {
      report.held++;
      (report.byTenant ??= new TenantTally()).held(t.tenant);
      if (!report.heldTenants.includes(t.tenant)) report.heldTenants.push(t.tenant);
    }
    if (t.held) {
      tracker.drop(t); // already in the hold lane (its tenant was paused again, or it was spilled again)
      this.#reread(t);
      return Promise.resolve();
    }
    this.#batch.push({ t, pointer: { ...t.key, tenant: t.tenant, priority: t.priority ?? DEFAULT_PRIORITY } });
    return (this.#flushing ??= this.#flush());
  }

  /** Writes the batched hold pointers, {@link POINTER_BATCH} a request, until none is left. */
  #flush(): Promise<void> {
    const { signal } = this.opts;
    const { tracker } = this.rows;
    return (async () => {
      await sleep(5, signal);
      while (this.#batch.length > 0 && !signal?.aborted) {
        const batch = this.#batch.splice(0, POINTER_BATCH);
        const failed = new Set(
          await this.deps.store.putHeldPointers(batch.map((b) => b.pointer)).then(
            (f) => f.map(rowKeyString),
            () => batch.map((b) => b.t.id),
          ),
        );
        if (signal?.aborted) return;
        for (const { t: held, pointer } of batch) {
          if (failed.has(held.id))
            tracker.watch(held, this.deps.clock.now() + 1_000, false); // tried again later; the row keeps the mark meanwhile
          else {
            held.held = pointer;
            tracker.drop(held);
            this.#reread(held);
          }
        }
      }
    })().finally(() => {
      // A hold queued while this flush was ending is written by the next one.
      this.#flushing = this.#batch.length > 0 && !signal?.aborted ? this.#flush() : undefined;
    });
  }

  /** The lane of a row just put (back) in the hold lane reads its tenant's pointers again from the start. */
  #reread(t: Track): void {
    const lane = this.rows.laneOf(t.key.shard);
    if (lane) {
      lane.holds.set(t.tenant, { more: true });
      lane.holdsWritten.add(t.tenant);
    }
  }

  /** The report's hold figures at the round's end: paused tenants with held rows, and held rows waiting although their tenant may send. */
  finishReport(lanes: readonly ShardLane[]): void {
    const { report } = this.rows;
    const controls = this.deps.controls;
    if (controls) {
      const paused = new Set<string>(report.heldTenants);
      for (const l of lanes) for (const tenant of l.holds.keys()) if (controls.peek(tenant).paused) paused.add(tenant);
      report.pausedTenants = [...paused].sort();
    }
    const waited = [...this.#heldAfter].filter(([, ms]) => ms > 0).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
    report.heldAfterResumeMs = waited[0]?.[1] ?? 0;
    report.heldAfterResumeTenants = waited.slice(0, 10).map(([tenant]) => tenant);
  }
}
