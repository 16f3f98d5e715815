import type { AdaptiveLimit } from './adaptiveLimit.js';
import { backoffMs, Heap } from '../util/index.js';
import type { DispatchDeps } from './deps.js';
import {
  type AcquiredRow,
  DEFAULT_PRIORITY,
  deliveryMessage,
  jobLogFields,
  jobSpan,
  MAX_BATCH_ENTRIES,
  type OutgoingMessage,
  packBatches,
  type RowKey,
  type RowLeases,
  SPAN_KIND,
  spanIdOfTraceparent,
} from '../model/index.js';
import { TenantTally } from './tenantTally.js';
import { rowKeyString, type ReleaseHooks, type ReleaseStats } from './releaseStats.js';
import { DeliveryLimits } from './deliveryLimits.js';
import { FairShare, type FairLane } from './fairShare.js';
import { LeaseKeeper, type Leased } from './leaseKeeper.js';
import { MarkerWriter, type Sent } from './markerWriter.js';
import { type Gated, KeyGate } from './keyGate.js';
import { KeyTally } from './keyTally.js';

/** What a releaser runs on: of the table, only a row's lease (renew, give back, mark delivered). */
export type ReleaserDeps = Pick<
  DispatchDeps,
  'sender' | 'tenants' | 'clock' | 'settings' | 'log' | 'controls' | 'keySlots' | 'debounces' | 'spans'
> & {
  readonly store: Pick<RowLeases, 'renew' | 'unacquire' | 'markDelivered'>;
};

interface Held extends Leased, Gated {
  readonly bytes: number;
  /** A keyed row's lease renewed since it took its slot ({@link Releaser.#confirmKeyed}). */
  confirmed?: boolean;
  /** A debounced row whose generation names it, claimed for the send ({@link Releaser.#claimDebounced}). */
  claimed?: boolean;
  attempts: number;
  /** Not before this (epoch ms): the due time, later after a failed send. */
  readyAt: number;
}

/** A tenant's rows whose time has come, waiting for a send slot: higher priority first, then earlier. */
interface ReadyLane extends FairLane {
  readonly rows: Heap<Held>;
}

/**
 * Sends (SendMessageBatch calls) in flight per round. Rows whose time has come wait for a slot in
 * per-tenant queues served by weighted fair share: a tenant's flood of overdue rows neither
 * floods the queue service with requests nor delays another tenant's row that falls due by more
 * than a slot. Eight batches of ten in flight carry thousands of rows a second per dispatcher.
 */
const SEND_CONCURRENCY = 8;

/**
 * The release timer of a dispatch round: holds acquired rows and sends each at its due
 * millisecond, never before, batching the rows that are due together; send slots go to tenants by
 * weighted fair share ({@link FairShare}) within their delivery limits ({@link DeliveryLimits});
 * then each sent row's delivered marker is written ({@link MarkerWriter}).
 *
 * Before a send, a row's lease must have at least `safetyMs` left ({@link LeaseKeeper}, which
 * also renews held rows while they wait), so a row another round may re-acquire is never sent.
 * Failed batch entries alone are retried, with backoff.
 */
export class Releaser {
  readonly #held = new Map<string, Held>();
  /** Held rows waiting to be sent, by `readyAt`. */
  #queue: Held[] = [];
  /** Rows whose time has come, waiting for a send slot, per tenant. */
  readonly #ready = new Map<string, ReadyLane>();
  #readyCount = 0;
  /** Which tenant's rows take the next send slot (core/dispatch/fairShare.ts, shared with the acquirer). */
  readonly #fair = new FairShare<ReadyLane>();
  #sending = 0;
  /** Sends in flight per tenant. */
  readonly #sendingBy = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  readonly #leases: LeaseKeeper<Held>;
  readonly #markers: MarkerWriter;
  readonly #limits: DeliveryLimits;
  readonly #inflight = new Set<Promise<void>>();
  #bytes = 0;
  /** Set by abandon(): a release still in flight then neither re-queues rows nor arms timers. */
  #ended = false;
  /** Held rows per tenant. */
  readonly #heldBy = new Map<string, number>();
  /** Keyed rows wait here for a slot of their key (absent without key slots). */
  readonly #gate: KeyGate<Held> | undefined;

  /**
   * @param deliveryShare this round's share of each tenant's `maxDeliveriesPerSecond` (its shards
   *   over all shards: rows are spread evenly over shards, so the shares add up to the limit)
   */
  constructor(
    private readonly deps: ReleaserDeps,
    private readonly stats: ReleaseStats,
    private readonly signal?: AbortSignal,
    private readonly hooks: ReleaseHooks = {},
    deliveryShare = 1,
    /** Sends in flight across the process's rounds, learnt from their latency (core/dispatch/adaptiveLimit.ts). */
    private readonly sendLimit?: AdaptiveLimit,
  ) {
    this.#leases = new LeaseKeeper<Held>(
      deps,
      stats,
      () => this.#held,
      (lost) => this.#leaseLost(lost),
      (p) => this.#track(p),
    );
    this.#markers = new MarkerWriter(deps, stats, hooks, (p) => this.#track(p), signal);
    this.#limits = new DeliveryLimits(deps.controls, deliveryShare);
    if (deps.keySlots)
      this.#gate = new KeyGate<Held>(
        {
          slots: deps.keySlots,
          clock: deps.clock,
          keyLeaseSeconds: (tenant) => deps.controls?.peek(tenant).keyLeaseSeconds,
          tally: () => (this.stats.byKey ??= new KeyTally()),
          ...(deps.log ? { log: deps.log } : {}),
        },
        (rows) => this.#admitted(rows),
      );
    signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  /**
   * A stop (the signal) is graceful: the markers of rows already sent are written once more (one
   * attempt, awaited by `settled`), so that a restart does not send them again. A process that
   * dies writes nothing, and its sent rows are sent again after their lease: at least once.
   */
  readonly #onAbort = () => {
    const sent = this.#markers.stop();
    this.abandon();
    this.#markers.writeOnce(sent);
  };

  get size(): number {
    return this.#held.size;
  }

  get bytes(): number {
    return this.#bytes;
  }

  holds(k: RowKey): boolean {
    return this.#held.has(rowKeyString(k));
  }

  /** Rows of `tenant` held (acquired, not sent yet). */
  heldOf(tenant: string): number {
    return this.#heldBy.get(tenant) ?? 0;
  }

  /** Tenants with rows held. */
  tenants(): string[] {
    return [...this.#heldBy.keys()];
  }

  /** This round's delivery rate for `tenant` (its share of the limit), or undefined when unlimited. */
  rateOf(tenant: string): number | undefined {
    return this.#limits.rateOf(tenant);
  }

  add(row: AcquiredRow): void {
    if (this.signal?.aborted || this.#ended) return;
    const key = rowKeyString(row);
    if (this.#held.has(key)) return;
    const h: Held = { key, row, bytes: row.payload.length, leaseUntil: row.leaseUntil, attempts: 0, readyAt: row.dueMs, busy: false };
    this.#held.set(key, h);
    this.#heldBy.set(row.tenant, (this.#heldBy.get(row.tenant) ?? 0) + 1);
    this.#bytes += h.bytes;
    this.#enqueue(h);
    this.#leases.keep();
  }

  /** Sent rows whose marker is not written yet. */
  get unrecorded(): number {
    return this.#markers.waiting;
  }

  /** Waits until everything held is sent (or dropped) and recorded, or until `deadlineMs`. */
  async drain(deadlineMs: number): Promise<void> {
    while ((this.#held.size > 0 || this.#inflight.size > 0 || this.#markers.waiting > 0) && !this.signal?.aborted) {
      if (this.#held.size === 0 && this.#markers.waiting > 0) this.#markers.flush();
      const left = deadlineMs - this.deps.clock.now();
      if (left <= 0) return;
      await Promise.race([...this.#inflight, new Promise((r) => setTimeout(r, Math.min(left, 20)))]);
    }
  }

  /**
   * Resolves once no send, marker write or renewal of this releaser is still running (each stops
   * retrying once aborted), or after `maxWaitMs`. A round awaits it so that none of its requests
   * outlives it: on Lambda, a request left running would resume in a later invocation. The bound
   * keeps a hung connection from holding the round past its deadline margin.
   */
  async settled(maxWaitMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((r) => (timer = setTimeout(r, maxWaitMs)));
    const all = (async () => {
      while (this.#inflight.size > 0) await Promise.all([...this.#inflight]);
    })();
    await Promise.race([all, timeout]).finally(() => clearTimeout(timer));
  }

  /**
   * Gives back (SCHEDULED again) the keyed rows still waiting for a slot of their key as the round
   * ends, so that the next round takes them at once rather than after their lease. A row a probe
   * took meanwhile is not given back (its slot is held, and it is sent, or sent again after its lease).
   */
  async giveBackWaiting(): Promise<number> {
    const rows = (this.#gate?.takeWaiting() ?? []).filter((h) => this.#held.get(h.key) === h && !h.busy && !h.slot);
    const back = await Promise.all(
      rows.map(async (h) => {
        this.#forget(h);
        return this.deps.store.unacquire(h.row, h.leaseUntil).catch(() => false);
      }),
    );
    return back.filter(Boolean).length;
  }

  /** Stops the timers and forgets what is held; returns how many rows were still held. */
  abandon(): number {
    this.#ended = true;
    this.signal?.removeEventListener('abort', this.#onAbort);
    clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#leases.stop();
    this.#gate?.stop();
    // Sent rows not yet recorded keep their lease: a later round sends them again (a duplicate).
    this.#markers.stop();
    const n = this.#held.size;
    this.#ready.clear();
    this.#readyCount = 0;
    this.#held.clear();
    this.#heldBy.clear();
    this.#queue = [];
    this.#bytes = 0;
    return n;
  }

  #enqueue(h: Held): void {
    if (this.#ended) return;
    // Binary insertion by readyAt keeps the queue sorted; ties keep arrival order.
    let lo = 0;
    let hi = this.#queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#queue[mid]!.readyAt <= h.readyAt) lo = mid + 1;
      else hi = mid;
    }
    this.#queue.splice(lo, 0, h);
    if (lo === 0) this.#arm();
  }

  /** Queues rows that are ready at the same time, in their order, in one splice. */
  #enqueueAll(hs: Held[], readyAt: number): void {
    if (this.#ended || hs.length === 0) return;
    let lo = 0;
    let hi = this.#queue.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#queue[mid]!.readyAt <= readyAt) lo = mid + 1;
      else hi = mid;
    }
    this.#queue.splice(lo, 0, ...hs);
    if (lo === 0) this.#arm();
  }

  #arm(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const first = this.#queue[0];
    if (!first || this.signal?.aborted) return;
    this.#timer = setTimeout(() => this.#fire(), Math.max(0, first.readyAt - this.deps.clock.now()));
  }

  #fire(): void {
    this.#timer = undefined;
    if (this.#ended || this.signal?.aborted) return;
    const now = this.deps.clock.now();
    const head = this.#queue[0];
    if (!head) return;
    // Per tenant (a batch goes to one queue): the rows due within the release window of the
    // tenant's first queued row share its batch (at most ten), sent when the last of them is due:
    // never early, and a lone row is not held at all. Another tenant's rows neither wait for it
    // nor hold it back. Only rows up to the window past now (or past the head) can decide.
    const windowMs = this.deps.settings.releaseWindowMs;
    const horizon = Math.max(now, head.readyAt) + windowMs;
    const batches = new Map<string, { first: number; n: number; last: number }>();
    let k = 0;
    for (; k < this.#queue.length && this.#queue[k]!.readyAt <= horizon; k++) {
      const h = this.#queue[k]!;
      const b = batches.get(h.row.tenant);
      if (!b) batches.set(h.row.tenant, { first: h.readyAt, n: 1, last: h.readyAt });
      else if (b.n < MAX_BATCH_ENTRIES && h.readyAt <= b.first + windowMs) {
        b.n++;
        b.last = h.readyAt;
      }
    }
    // Timers may fire a millisecond early: only rows whose time has come leave the queue.
    const kept: Held[] = [];
    let moved = 0;
    for (let i = 0; i < k; i++) {
      const h = this.#queue[i]!;
      if (h.readyAt > now || batches.get(h.row.tenant)!.last > now) {
        kept.push(h);
        continue;
      }
      let r = this.#ready.get(h.row.tenant);
      if (!r) this.#ready.set(h.row.tenant, (r = this.#fair.lane(h.row.tenant, { rows: new Heap<Held>(byPriority) })));
      r.rows.push(h);
      this.#readyCount++;
      moved++;
    }
    if (moved > 0) this.#queue = k === this.#queue.length ? kept : kept.concat(this.#queue.slice(k));
    // Next: a waiting batch's last row, or the first row not yet due (kept rows are in order).
    let wake = Infinity;
    for (const b of batches.values()) if (b.last > now) wake = Math.min(wake, b.last);
    const next = this.#queue.find((h, i) => h.readyAt > now || i >= kept.length);
    if (next) wake = Math.min(wake, Math.max(next.readyAt, now + 1));
    this.#pump();
    clearTimeout(this.#timer);
    this.#timer = undefined;
    if (wake !== Infinity && !this.#ended && !this.signal?.aborted) this.#timer = setTimeout(() => this.#fire(), wake - now);
  }

  /** Starts sends while slots are free: the tenant with the least virtual time, up to ten of its rows. */
  #pump(): void {
    while (this.#sending < SEND_CONCURRENCY && this.#readyCount > 0 && !this.#ended && !this.signal?.aborted) {
      const r = this.#fair.pick(this.#ready.values())!;
      const tenant = r.tenant;
      // A tenant with no send in flight sends whatever the shared limit (a tenant within its share
      // never waits behind a flood's sends); the others wait for a slot.
      if (this.sendLimit) {
        if (!this.#sendingBy.has(tenant)) this.sendLimit.start(tenant);
        else if (!this.sendLimit.tryStart(this.#pumpLater, tenant)) return; // woken when a slot is ours
      }
      const rows: Held[] = [];
      while (rows.length < MAX_BATCH_ENTRIES && r.rows.size > 0) {
        const h = r.rows.pop()!;
        this.#readyCount--;
        if (this.#held.get(h.key) === h && !h.busy) rows.push(h); // not dropped meanwhile (a lost lease)
      }
      this.#fair.served(r, this.deps.controls?.peek(tenant).weight ?? 1);
      if (r.rows.size === 0) this.#ready.delete(tenant);
      if (rows.length === 0) {
        this.sendLimit?.done();
        continue;
      }
      this.#sending++;
      this.#sendingBy.set(tenant, (this.#sendingBy.get(tenant) ?? 0) + 1);
      this.#track(
        this.#release(rows)
          .then(
            (latencyMs) => this.sendLimit?.done(latencyMs),
            (err: unknown) => {
              this.sendLimit?.done();
              throw err;
            },
          )
          .finally(() => {
            this.#sending--;
            const n = (this.#sendingBy.get(tenant) ?? 1) - 1;
            if (n > 0) this.#sendingBy.set(tenant, n);
            else this.#sendingBy.delete(tenant);
            this.#pump();
          }),
      );
    }
  }

  readonly #pumpLater = () => this.#pump();

  #track(p: Promise<void>): void {
    const tracked = p
      .catch((err) => this.deps.log?.('release failed', { error: (err as Error).message }))
      .finally(() => this.#inflight.delete(tracked));
    this.#inflight.add(tracked);
  }

  /**
   * A keyed row that took its slot and is let go unsent (its lease lost, its tenant paused or
   * unknown) gives the slot back: whoever sends it later takes one again. Conditional on the slot
   * lease its take wrote: a round that took the row over (and its slot, under the same job id)
   * since keeps the slot it holds.
   */
  #freeSlot(h: Held): void {
    const c = h.slot ? h.row.concurrency : undefined;
    if (!c) return;
    h.slot = false;
    const slots = this.deps.keySlots;
    const given =
      h.slotUntil !== undefined
        ? slots?.evict(h.row.tenant, c.key, new Map([[h.row.jobId, h.slotUntil]]))
        : slots?.release(h.row.tenant, c.key, h.row.jobId);
    void given?.catch(() => undefined);
  }

  #forget(h: Held): void {
    if (!this.#held.delete(h.key)) return;
    this.#bytes -= h.bytes;
    const n = (this.#heldBy.get(h.row.tenant) ?? 1) - 1;
    if (n > 0) this.#heldBy.set(h.row.tenant, n);
    else this.#heldBy.delete(h.row.tenant);
  }

  /**
   * The rows of `list` that `tenant`'s delivery limit lets go now (in order); the others wait in
   * the queue for the bucket's next token.
   */
  #allowed(tenant: string, list: Held[], now: number): Held[] {
    const bucket = this.#limits.bucketOf(tenant, now);
    if (!bucket) return list;
    // Tokens go to the tenant's ready rows by priority, then due time (all of them are due).
    list.sort((a, b) => (b.row.priority ?? DEFAULT_PRIORITY) - (a.row.priority ?? DEFAULT_PRIORITY) || a.row.dueMs - b.row.dueMs);
    const granted = bucket.take(now, list.length);
    if (granted < list.length) {
      const readyAt = bucket.readyAt(now);
      const later = list.slice(granted);
      for (const h of later) {
        h.busy = false;
        h.readyAt = readyAt;
      }
      this.stats.deferred += later.length;
      (this.stats.byTenant ??= new TenantTally()).deferred(tenant, later.length);
      this.#enqueueAll(later, readyAt);
    }
    return list.slice(0, granted);
  }

  /**
   * The rows of `list` that may go now as far as concurrency keys go: a keyed row takes a slot of
   * its key first; one that gets none waits in the gate (its lease still kept) and comes back
   * through {@link #admitted} once it has one.
   */
  async #keyed(list: Held[]): Promise<Held[]> {
    if (!this.#gate) return list;
    if (!list.some((h) => h.row.concurrency && !h.slot)) return this.#confirmKeyed(list);
    let pass: Held[];
    try {
      pass = await this.#gate.pass(list);
    } catch (err) {
      // The key's item could not be written: the keyed rows try again shortly.
      this.deps.log?.('key slots unavailable', { error: (err as Error).message });
      pass = list.filter((h) => !h.row.concurrency || h.slot);
      this.#retryLater(list.filter((h) => !pass.includes(h)));
    }
    for (const h of list) if (!pass.includes(h) && !h.slot) h.busy = false;
    return this.#confirmKeyed(pass);
  }

  /**
   * A keyed row's lease is renewed once it holds its slot, before its first send: a cancel of a
   * row waiting for its key writes on the lease it read (JobsService), so either that cancel or
   * this renewal fails, and a cancelled row is never sent. A row whose renewal fails gives its slot back ({@link #settle}).
   */
  async #confirmKeyed(pass: Held[]): Promise<Held[]> {
    const fresh = pass.filter((h) => h.row.concurrency && h.slot && !h.confirmed);
    if (fresh.length === 0) return pass;
    const now = this.deps.clock.now();
    const lost = new Set<Held>();
    await Promise.all(
      fresh.map(async (h) => {
        if (await this.#leases.renew(h, now + this.deps.settings.leaseMs)) h.confirmed = true;
        else lost.add(h);
      }),
    );
    if (lost.size === 0) return pass;
    this.#settle(lost, { sent: [], retry: [] });
    return pass.filter((h) => !lost.has(h));
  }

  /**
   * Keyed rows that took their slot while waiting: sent as soon as a send slot is free. A row may
   * take its slot while the release that sent it to wait is still checking the batch's other
   * keys (its busy flag still set): it is not that release's any more, so the flag goes now, or
   * the send slots would skip it for good.
   */
  #admitted(rows: Held[]): void {
    const now = this.deps.clock.now();
    const held = rows.filter((h) => this.#held.get(h.key) === h);
    for (const h of held) {
      h.busy = false;
      h.readyAt = now;
    }
    this.#enqueueAll(held, now);
  }

  /**
   * Debounced rows (docs/flow-control.md#debounce) go only as the version their generation names:
   * the claim (one conditional write, right before the first send) ends the job's replaces and
   * cancels. A row another version replaced, or whose job was cancelled, is deleted unsent.
   */
  async #claimDebounced(list: Held[]): Promise<Held[]> {
    const debounces = this.deps.debounces;
    const fresh = debounces ? list.filter((h) => h.row.debounce && h.row.debounce.ver !== '' && !h.claimed) : [];
    if (fresh.length === 0) return list;
    const stale = new Set<Held>();
    const failed = new Set<Held>();
    await Promise.all(
      fresh.map(async (h) => {
        try {
          if (await debounces!.claim(h.row.jobId, h.row.debounce!.ver)) h.claimed = true;
          else stale.add(h);
        } catch (err) {
          this.deps.log?.('debounce claim failed', { ...jobLogFields(h.row), error: (err as Error).message });
          failed.add(h);
        }
      }),
    );
    this.#retryLater([...failed]);
    for (const h of stale) {
      this.#forget(h);
      this.stats.superseded = (this.stats.superseded ?? 0) + 1;
      this.#track(
        debounces!.dropAcquired(h.row, h.leaseUntil).then(
          (dropped) => (dropped ? this.hooks.onRecorded?.([h.row]) : this.hooks.onDropped?.(h.row, h.leaseUntil + 1)),
          () => this.hooks.onDropped?.(h.row, h.leaseUntil + 1),
        ),
      );
    }
    return list.filter((h) => !stale.has(h) && !failed.has(h));
  }

  #retryLater(rows: Held[]): void {
    for (const h of rows) {
      h.busy = false;
      h.attempts++;
      h.readyAt = this.deps.clock.now() + backoffMs(h.attempts, { baseMs: 50, capMs: 1_000 });
      this.#enqueue(h);
    }
  }

  /** Gives a paused tenant's rows back (SCHEDULED again) so that they are held, not sent. */
  async #giveBack(tenant: string, list: Held[]): Promise<void> {
    this.deps.log?.('tenant paused; acquired rows given back', { tenant, rows: list.length });
    await Promise.all(
      list.map(async (h) => {
        this.#forget(h);
        this.#freeSlot(h);
        const back = await this.deps.store.unacquire(h.row, h.leaseUntil).catch(() => false);
        if (back) this.stats.givenBack++;
        // Given back: look at it again now (it will be held); otherwise after its lease.
        this.hooks.onDropped?.(h.row, back ? this.deps.clock.now() : h.leaseUntil + 1);
      }),
    );
  }

  /** Sends `rows` (one tenant's); resolves with the latency of its slowest send call (ms), when it made one. */
  async #release(rows: Held[]): Promise<number | undefined> {
    for (const h of rows) h.busy = true;
    const lost = await this.#renewStale(rows);
    if (this.signal?.aborted) return;
    const byTenant = await this.#sendable(rows.filter((h) => !lost.has(h)));
    if (this.signal?.aborted) return;
    const outcome: SendOutcome = { sent: [], retry: [] };
    await Promise.all([...byTenant].map(([tenant, list]) => this.#sendTo(tenant, list, outcome)));
    if (this.signal?.aborted) return outcome.slowest;
    this.#settle(lost, outcome);
    return outcome.slowest;
  }

  /** Never send a row whose lease is about to expire: renew first. Answers the rows whose lease is lost. */
  async #renewStale(rows: readonly Held[]): Promise<Set<Held>> {
    const now = this.deps.clock.now();
    const stale = rows.filter((h) => h.leaseUntil - now < this.#leases.safetyMs);
    const lost = new Set<Held>();
    await Promise.all(stale.map(async (h) => (await this.#leases.renew(h, now + this.deps.settings.leaseMs)) || lost.add(h)));
    return lost;
  }

  /**
   * Tenant controls (at most 5 s stale: a read only when the cached copy is older): a paused
   * tenant's rows go back; a limited tenant's wait for tokens. Answers what may be sent now, by tenant.
   */
  async #sendable(rows: readonly Held[]): Promise<Map<string, Held[]>> {
    const byTenant = new Map<string, Held[]>();
    for (const h of rows) {
      const list = byTenant.get(h.row.tenant) ?? [];
      list.push(h);
      byTenant.set(h.row.tenant, list);
    }
    const paused = new Set<string>();
    const controls = this.deps.controls;
    if (controls) await Promise.all([...byTenant.keys()].map(async (t) => (await controls.get(t)).paused && paused.add(t)));
    if (this.signal?.aborted) return byTenant;
    const at = this.deps.clock.now();
    for (const [tenant, list] of byTenant) {
      if (paused.has(tenant)) {
        byTenant.delete(tenant);
        this.#track(this.#giveBack(tenant, list));
        continue;
      }
      const allowed = await this.#claimDebounced(this.#allowed(tenant, await this.#keyed(list), at));
      if (allowed.length === 0) byTenant.delete(tenant);
      else byTenant.set(tenant, allowed);
    }
    return byTenant;
  }

  /** Sends one tenant's rows to its queue, in batches; notes in `outcome` what went and what must be sent again. */
  async #sendTo(tenant: string, list: readonly Held[], outcome: SendOutcome): Promise<void> {
    const { clock, tenants, sender } = this.deps;
    const record = await tenants.lookup(tenant).catch(() => undefined);
    if (!record) {
      // Unknown tenant (deregistered?): leave the row ACQUIRED; it is retried after its lease.
      this.deps.log?.('no queue for tenant; row left for a later round', { tenant, rows: list.length });
      for (const h of list) {
        this.#forget(h);
        this.#freeSlot(h);
        this.hooks.onDropped?.(h.row, h.leaseUntil + 1);
      }
      return;
    }
    const byId = new Map(list.map((h, i) => [String(i), h]));
    const opts = { history: record.historyTtlMs !== undefined }; // workers report outcomes (docs/history.md)
    await Promise.all(
      packBatches(list.map((h, i) => deliveryMessage(String(i), h.row, undefined, opts))).map(async (batch) => {
        if (this.signal?.aborted) return;
        let failed: Set<string>;
        const called = clock.now();
        const messageIds = this.deps.spans ? new Map<string, string>() : undefined;
        try {
          const onSent = messageIds && ((id: string, messageId: string) => void messageIds.set(id, messageId));
          failed = new Set((await sender.sendBatch(record.queueUrl, batch, onSent)).map((f) => f.id));
          outcome.slowest = Math.max(outcome.slowest ?? 0, clock.now() - called);
        } catch {
          failed = new Set(batch.map((m) => m.id));
        }
        if (messageIds) this.#spans(record.queueUrl, batch, byId, failed, messageIds, called);
        if (this.signal?.aborted) {
          // Stopped while the send was in flight: record what it delivered all the same.
          this.#markers.writeOnce(batch.filter((m) => !failed.has(m.id)).map((m) => ({ row: byId.get(m.id)!.row, leaseUntil: 0 })));
          return;
        }
        this.#count(
          tenant,
          batch.map((m) => [byId.get(m.id)!, failed.has(m.id)] as const),
          outcome,
        );
      }),
    );
  }

  /** The `dynein.dispatch` span of each job a batch sent: the span its message's `traceparent` names as parent. */
  #spans(
    queueUrl: string,
    batch: readonly OutgoingMessage[],
    byId: ReadonlyMap<string, Held>,
    failed: ReadonlySet<string>,
    messageIds: ReadonlyMap<string, string>,
    startMs: number,
  ): void {
    const endMs = this.deps.clock.now();
    const queue = queueUrl.slice(queueUrl.lastIndexOf('/') + 1);
    for (const m of batch) {
      if (failed.has(m.id)) continue;
      const row = byId.get(m.id)!.row;
      const span = jobSpan(
        'dynein.dispatch',
        SPAN_KIND.producer,
        row,
        { startMs, endMs },
        {
          'messaging.system': 'aws_sqs',
          'messaging.operation': 'publish',
          'messaging.destination.name': queue,
          ...(messageIds.has(m.id) ? { 'messaging.message.id': messageIds.get(m.id)! } : {}),
          'dynein.lateness_ms': endMs - row.dueMs,
        },
        spanIdOfTraceparent(m.attributes!.traceparent!),
      );
      if (span) this.deps.spans!.record(span);
    }
  }

  /** Counts a batch's sends (lateness: due time to the send's acknowledgement) and its failed entries. */
  #count(tenant: string, entries: readonly (readonly [Held, boolean])[], outcome: SendOutcome): void {
    const at = this.deps.clock.now();
    const lateness: number[] = [];
    const tally = (this.stats.byTenant ??= new TenantTally());
    for (const [h, failed] of entries) {
      if (failed) {
        outcome.retry.push(h);
        tally.failed(tenant);
      } else {
        this.stats.sent++;
        this.stats.latenessMs.push(at - h.row.dueMs);
        lateness.push(at - h.row.dueMs);
        tally.sent(tenant, at - h.row.dueMs);
        outcome.sent.push(h);
      }
    }
    if (lateness.length > 0) this.hooks.onSent?.(lateness);
  }

  /** After a release: lost rows let go, failed entries queued again with backoff, sent rows waiting for their marker. */
  #settle(lost: ReadonlySet<Held>, outcome: SendOutcome): void {
    for (const h of lost) {
      this.#forget(h);
      this.hooks.onDropped?.(h.row, h.leaseUntil + 1);
      this.#freeSlot(h); // cancelled while it waited, or taken over by another round
    }
    this.stats.leaseLost += lost.size;
    for (const h of outcome.retry) {
      h.busy = false;
      h.attempts++;
      this.stats.sendRetries++;
      h.readyAt = this.deps.clock.now() + backoffMs(h.attempts, { baseMs: 50, capMs: 1_000 });
      this.#enqueue(h);
    }
    // A sent row is no longer held: its lease keeps other rounds off until its marker is written.
    for (const h of outcome.sent) this.#forget(h);
    const sent: Sent[] = outcome.sent.map((h) => ({ row: h.row, leaseUntil: h.leaseUntil }));
    // Written at once when nothing else is held (the end of a burst: no reason to wait).
    this.#markers.add(sent, this.#queue.length === 0 && this.#readyCount === 0, !this.#ended);
  }

  /** A waiting row's lease could not be renewed: another round may have it now. */
  #leaseLost(h: Held): void {
    if (h.busy || !this.#held.has(h.key)) return;
    this.#queue = this.#queue.filter((q) => q !== h);
    this.#gate?.drop(h);
    this.#forget(h); // and skipped if it waits for a send slot
    this.#freeSlot(h); // it took its slot, then lost its lease before its send (cancelled meanwhile)
    this.stats.leaseLost++;
    this.hooks.onDropped?.(h.row, h.leaseUntil + 1);
    this.#arm();
  }
}

/** What one release did: rows sent, rows to send again, its slowest send call (ms). */
interface SendOutcome {
  readonly sent: Held[];
  readonly retry: Held[];
  slowest?: number;
}

/** Higher priority first, then earlier ready time. */
function byPriority(a: Held, b: Held): boolean {
  const pa = a.row.priority ?? DEFAULT_PRIORITY;
  const pb = b.row.priority ?? DEFAULT_PRIORITY;
  return pa !== pb ? pa > pb : a.readyAt < b.readyAt;
}
