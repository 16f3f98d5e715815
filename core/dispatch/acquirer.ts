/**
 * The acquire queue of a dispatch round: conditional acquires run continuously, at most
 * `concurrency` at a time. The round's reads fill it; it never waits for them, and they never
 * wait for it.
 *
 * Which row goes next (docs/tenant-controls.md#fair-share-and-priority):
 * - **Between tenants, weighted fair share.** Each tenant with rows queued has its own queue; the
 *   next acquire goes to the tenant with the least virtual time (stride scheduling: each acquire
 *   advances a tenant's virtual time by 1 / weight). When more is due than dispatch can take,
 *   tenants get acquires in proportion to their weights, so a tenant flooding the scheduler
 *   delays another tenant's rows by at most its own share, not by its whole flood. A tenant that
 *   was idle re-enters at the current virtual time: it earns no credit while idle.
 * - **Inside a tenant.** Rows already due first, higher `priority` first among them, then earlier
 *   due time; then rows not yet due, in due order (they are sent at their due millisecond
 *   whatever order they are acquired in); then the tenant's backlog rows (read by an outage
 *   drain), higher priority first, then oldest first. A row that falls due during an outage drain
 *   thus goes ahead of every backlog row of its tenant.
 */
import type { AdaptiveLimit } from './adaptiveLimit.js';
import { Heap } from '../util/index.js';
import { DEFAULT_PRIORITY } from '../model/index.js';
import { FairShare, type FairLane } from './fairShare.js';

export interface AcquireItem {
  readonly key: { readonly shard: number; readonly dueMs: number };
  readonly tenant: string;
  /** 1..9, higher first among a tenant's due rows. @default 5 */
  readonly priority?: number;
}

export interface AcquirerOptions<T> {
  /** Acquires in flight at most. */
  readonly concurrency: number;
  /**
   * Shared with the other rounds of the process: acquires in flight across them, learnt from
   * their latency (core/dispatch/adaptiveLimit.ts). Rows wait here, in fair order, rather than in the
   * table's request queue.
   */
  readonly limit?: AdaptiveLimit;
  /** False while the round holds as much as it may (the held-rows and bytes caps). */
  readonly canStart: () => boolean;
  /**
   * Runs one acquire; rejections are the caller's to handle inside. Resolves with the latency of
   * its call to the table (ms), when it made one: what `limit` learns from.
   */
  readonly run: (item: T) => Promise<number | undefined | void>;
  readonly now: () => number;
  /** A tenant's weight (≥ 1). @default 1 for every tenant */
  readonly weightOf?: (tenant: string) => number;
  /** False for a tenant that may not start an acquire now (its delivery limit): its rows wait, others go on. */
  readonly mayStart?: (tenant: string) => boolean;
}

interface Entry<T> {
  readonly item: T;
  /** Arrival order: ties keep it. */
  readonly seq: number;
}

const prio = (e: Entry<AcquireItem>) => e.item.priority ?? DEFAULT_PRIORITY;
/** Higher priority first, then earlier due time, then arrival. */
const byPriority = (a: Entry<AcquireItem>, b: Entry<AcquireItem>) =>
  prio(a) !== prio(b) ? prio(a) > prio(b) : a.item.key.dueMs !== b.item.key.dueMs ? a.item.key.dueMs < b.item.key.dueMs : a.seq < b.seq;
/** Earlier due time first, then arrival. */
const byDue = (a: Entry<AcquireItem>, b: Entry<AcquireItem>) =>
  a.item.key.dueMs !== b.item.key.dueMs ? a.item.key.dueMs < b.item.key.dueMs : a.seq < b.seq;

/** One tenant's rows waiting for an acquire. */
class TenantQueue<T extends AcquireItem> implements FairLane {
  /** Fresh rows already due (moved from `future` as they fall due). */
  readonly due = new Heap<Entry<T>>(byPriority);
  /** Fresh rows not yet due. */
  readonly future = new Heap<Entry<T>>(byDue);
  readonly backlog = new Heap<Entry<T>>(byPriority);
  /** Virtual time: advanced by 1 / weight per acquire. */
  pass = 0;

  constructor(readonly tenant: string) {}

  get size(): number {
    return this.due.size + this.future.size + this.backlog.size;
  }

  /** The row this tenant would acquire next, at `now`. */
  next(now: number): Entry<T> | undefined {
    while (this.future.size > 0 && this.future.peek()!.item.key.dueMs <= now) this.due.push(this.future.pop()!);
    return this.due.pop() ?? this.future.pop() ?? this.backlog.pop();
  }
}

export class Acquirer<T extends AcquireItem> {
  readonly #tenants = new Map<string, TenantQueue<T>>();
  /** Tenants with rows queued. */
  readonly #active = new Set<TenantQueue<T>>();
  #queued = 0;
  #backlogSize = 0;
  #seq = 0;
  /** Which tenant's row goes next (core/dispatch/fairShare.ts, shared with the releaser's send slots). */
  readonly #fair = new FairShare<TenantQueue<T>>();
  #inflight = 0;
  /** Acquires in flight per tenant. */
  readonly #inflightBy = new Map<string, number>();
  #pausedUntil = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  readonly #running = new Set<Promise<void>>();

  constructor(private readonly opts: AcquirerOptions<T>) {}

  readonly #kick = () => this.kick();

  /** Rows waiting for an acquire. */
  get queued(): number {
    return this.#queued;
  }

  /** Of those, backlog rows. */
  get backlogQueued(): number {
    return this.#backlogSize;
  }

  get inflight(): number {
    return this.#inflight;
  }

  /** Acquires of `tenant` in flight. */
  inflightOf(tenant: string): number {
    return this.#inflightBy.get(tenant) ?? 0;
  }

  /** Tenants with rows queued. */
  tenants(): string[] {
    return [...this.#active].map((q) => q.tenant);
  }

  /** Rows of `tenant` waiting for an acquire. */
  queuedOf(tenant: string): number {
    return this.#tenants.get(tenant)?.size ?? 0;
  }

  /** The tenant with the most fresh rows (not backlog rows) queued, and how many. */
  largestFresh(): { tenant: string; queued: number } | undefined {
    let best: TenantQueue<T> | undefined;
    const fresh = (q: TenantQueue<T>) => q.due.size + q.future.size;
    for (const q of this.#active) if (!best || fresh(q) > fresh(best)) best = q;
    return best && { tenant: best.tenant, queued: fresh(best) };
  }

  /**
   * Takes out `tenant`'s queued rows beyond the first `keep` in the order it would acquire them
   * (the ones it would reach last), and returns them; with `freshOnly`, its backlog rows (an
   * outage drain, already paced by its reads) stay and count for nothing.
   */
  spill(tenant: string, keep: number, freshOnly = false): T[] {
    const q = this.#tenants.get(tenant);
    if (!q || (freshOnly ? q.due.size + q.future.size : q.size) <= keep) return [];
    const now = this.opts.now();
    const ordered: { e: Entry<T>; backlog: boolean }[] = [];
    for (;;) {
      const backlog = q.due.size === 0 && q.future.size === 0;
      if (backlog && freshOnly) break;
      const e = q.next(now);
      if (!e) break;
      ordered.push({ e, backlog });
    }
    for (const { e, backlog } of ordered.slice(0, keep)) (backlog ? q.backlog : e.item.key.dueMs <= now ? q.due : q.future).push(e);
    const out = ordered.slice(keep);
    this.#queued -= out.length;
    this.#backlogSize -= out.filter((o) => o.backlog).length;
    if (q.size === 0) this.#active.delete(q);
    return out.map((o) => o.e.item);
  }

  /** Queues a fresh row (or a retry). */
  pushFresh(item: T): void {
    const q = this.#queue(item.tenant);
    const e = { item, seq: this.#seq++ };
    if (item.key.dueMs <= this.opts.now()) q.due.push(e);
    else q.future.push(e);
  }

  /** Queues a row an outage drain's backlog head read. */
  pushBacklog(item: T): void {
    this.#queue(item.tenant).backlog.push({ item, seq: this.#seq++ });
    this.#backlogSize++;
  }

  /** A pause is running. */
  get paused(): boolean {
    return this.opts.now() < this.#pausedUntil;
  }

  /** No acquire starts before `ms` from now (after throttling). */
  pause(ms: number): void {
    this.#pausedUntil = Math.max(this.#pausedUntil, this.opts.now() + ms);
  }

  /** Starts what may start now; arms a timer to go on after a pause. */
  kick(): void {
    if (this.#stopped) return;
    const now = this.opts.now();
    if (now < this.#pausedUntil) {
      if (!this.#timer) this.#timer = setTimeout(() => ((this.#timer = undefined), this.kick()), this.#pausedUntil - now);
      return;
    }
    const limit = this.opts.limit;
    while (this.#inflight < this.opts.concurrency && this.#queued > 0 && this.opts.canStart() && !this.#stopped) {
      const best = this.#pick();
      if (!best) break;
      // A tenant with no acquire in flight starts one whatever the shared limit (a tenant within
      // its share never waits behind a flood's calls); the others wait for a slot.
      if (limit) {
        if (!this.#inflightBy.has(best.tenant)) limit.start(best.tenant);
        else if (!limit.tryStart(this.#kick, best.tenant)) break; // woken when a slot is ours
      }
      const item = this.#take(best, now);
      this.#inflight++;
      this.#inflightBy.set(item.tenant, (this.#inflightBy.get(item.tenant) ?? 0) + 1);
      const p: Promise<void> = this.opts
        .run(item)
        .then(
          (latencyMs) => limit?.done(typeof latencyMs === 'number' ? latencyMs : undefined),
          () => limit?.done(),
        )
        .finally(() => {
          this.#inflight--;
          const n = (this.#inflightBy.get(item.tenant) ?? 1) - 1;
          if (n > 0) this.#inflightBy.set(item.tenant, n);
          else this.#inflightBy.delete(item.tenant);
          this.#running.delete(p);
          this.kick();
        });
      this.#running.add(p);
    }
  }

  /** Starts nothing more; what is queued stays unacquired. Resolves once the acquires in flight ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }

  #queue(tenant: string): TenantQueue<T> {
    let q = this.#tenants.get(tenant);
    if (!q) {
      q = new TenantQueue<T>(tenant);
      this.#tenants.set(tenant, q);
    }
    if (!this.#active.has(q)) {
      this.#fair.enter(q);
      this.#active.add(q);
    }
    this.#queued++;
    return q;
  }

  /** The tenant with the least virtual time among those that may start. */
  #pick(): TenantQueue<T> | undefined {
    const { mayStart } = this.opts;
    return this.#fair.pick(this.#active, mayStart && ((q) => mayStart(q.tenant)));
  }

  /** Takes `best`'s next row and advances its virtual time. */
  #take(best: TenantQueue<T>, now: number): T {
    const fromBacklog = best.due.size === 0 && best.future.size === 0;
    const e = best.next(now)!;
    this.#queued--;
    if (fromBacklog) this.#backlogSize--;
    this.#fair.served(best, this.opts.weightOf?.(best.tenant) ?? 1);
    if (best.size === 0) this.#active.delete(best);
    return e.item;
  }
}
