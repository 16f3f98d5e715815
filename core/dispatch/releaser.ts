import type { AdaptiveLimit } from './adaptiveLimit.js';
import { backoffMs, Heap } from '../util/index.js';
import type { DispatchDeps } from './deps.js';
import { type AcquiredRow, DEFAULT_PRIORITY, deliveryMessage, MAX_BATCH_ENTRIES, packBatches, type RowKey } from '../model/index.js';
import { TokenBucket } from './tokenBucket.js';
import { TenantTally } from './tenantTally.js';

export interface ReleaseStats {
  /** Rows sent to their tenant queue. */
  sent: number;
  /** Sent rows replaced by their delivered marker. */
  recorded: number;
  /** Rows dropped unsent because their lease could not be renewed (another round has them). */
  leaseLost: number;
  /** Lease renewals that succeeded. */
  renewed: number;
  /** Batch entries sent again after a failure. */
  sendRetries: number;
  /** Per sent row: ms from its due time to the send's acknowledgement. */
  latenessMs: number[];
  /** The same per tenant (sent, failed sends, a lateness sample), made on the first send. */
  byTenant?: TenantTally;
  /** Sends put off by a tenant's delivery rate limit (a row counts each time). */
  deferred: number;
  /** Acquired rows given back unsent because their tenant was paused. */
  givenBack: number;
}

interface Held {
  readonly key: string;
  readonly row: AcquiredRow;
  readonly bytes: number;
  leaseUntil: number;
  attempts: number;
  /** Not before this (epoch ms): the due time, later after a failed send. */
  readyAt: number;
  busy: boolean;
  /** A renewal in flight, shared by whoever asks for one meanwhile. */
  renewing?: Promise<boolean>;
}

const RECORD_BATCH = 25;
/**
 * Sends (SendMessageBatch calls) in flight per round. Rows whose time has come wait for a slot in
 * per-tenant queues served by weighted fair share: a tenant's flood of overdue rows neither
 * floods the queue service with requests nor delays another tenant's row that falls due by more
 * than a slot. Eight batches of ten in flight carry thousands of rows a second per dispatcher.
 */
const SEND_CONCURRENCY = 8;
const RECORD_DELAY_MS = 1_000;

/** What the round learns from its releaser, to track the rows it read until they are final. */
export interface ReleaseHooks {
  /** These rows' delivered markers are written: they are final. */
  onRecorded?(rows: readonly AcquiredRow[]): void;
  /**
   * The releaser let go of a row it had acquired (its lease was lost to another round, its
   * tenant is unknown, or its marker could not be written): someone must look at it again from
   * `retryAtMs` on.
   */
  onDropped?(row: AcquiredRow, retryAtMs: number): void;
  /** These rows were just sent (their lateness, ms from due time to the send's acknowledgement): live metrics. */
  onSent?(latenessMs: readonly number[]): void;
}

/** A sent row waiting for its marker, with the lease it was sent under. */
interface Sent {
  readonly row: AcquiredRow;
  readonly leaseUntil: number;
}

export function rowKeyString(k: RowKey): string {
  return `${k.shard}|${k.dueMs}|${k.jobId}`;
}

/**
 * The release timer of a dispatch round: holds acquired rows and sends each at its due
 * millisecond, never before, batching the rows that are due together, then replaces each sent
 * row by its delivered marker (a put at the same key: the write a delete would cost).
 *
 * Before a send it makes sure the row's lease has at least `safetyMs` left (renewing it with a
 * conditional write), so a row another round may re-acquire is never sent; held rows are renewed
 * while they wait. Failed batch entries alone are retried, with backoff.
 */
export class Releaser {
  readonly #held = new Map<string, Held>();
  /** Held rows waiting to be sent, by `readyAt`. */
  #queue: Held[] = [];
  /** Rows whose time has come, waiting for a send slot: per tenant, higher priority first, then earlier. */
  readonly #ready = new Map<string, { rows: Heap<Held>; pass: number }>();
  #readyCount = 0;
  /** The virtual time of the tenant served last (fair share of send slots, as the acquirer's). */
  #vtime = 0;
  #sending = 0;
  /** Sends in flight per tenant. */
  readonly #sendingBy = new Map<string, number>();
  #timer: NodeJS.Timeout | undefined;
  #renewTimer: NodeJS.Timeout | undefined;
  /** Sent rows waiting for their marker: flushed at 25 (one BatchWriteItem) or after a second. */
  #toRecord: Sent[] = [];
  #recordTimer: NodeJS.Timeout | undefined;
  readonly #inflight = new Set<Promise<void>>();
  #bytes = 0;
  readonly #safetyMs: number;
  /** Set by abandon(): a release still in flight then neither re-queues rows nor arms timers. */
  #ended = false;
  /** Held rows per tenant. */
  readonly #heldBy = new Map<string, number>();
  /** Delivery rate limits' buckets, per limited tenant. */
  readonly #buckets = new Map<string, TokenBucket>();

  /**
   * @param deliveryShare this round's share of each tenant's `maxDeliveriesPerSecond` (its shards
   *   over all shards: rows are spread evenly over shards, so the shares add up to the limit)
   */
  constructor(
    private readonly deps: DispatchDeps,
    private readonly stats: ReleaseStats,
    private readonly signal?: AbortSignal,
    private readonly hooks: ReleaseHooks = {},
    private readonly deliveryShare = 1,
    /** Sends in flight across the process's rounds, learnt from their latency (core/dispatch/adaptiveLimit.ts). */
    private readonly sendLimit?: AdaptiveLimit,
  ) {
    this.#safetyMs = Math.min(5_000, Math.floor(deps.settings.leaseMs / 3));
    signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  /**
   * A stop (the signal) is graceful: the markers of rows already sent are written once more (one
   * attempt, awaited by `settled`), so that a restart does not send them again. A process that
   * dies writes nothing, and its sent rows are sent again after their lease: at least once.
   */
  readonly #onAbort = () => {
    const sent = this.#toRecord;
    this.abandon();
    this.#recordOnStop(sent);
  };

  #recordOnStop(sent: readonly Sent[]): void {
    if (sent.length === 0) return;
    const { store, clock, settings } = this.deps;
    this.#track(
      store
        .markDelivered(
          sent.map((s) => ({ ...s.row, expiresAtMs: s.row.dueMs + settings.cancelRecordRetentionMs })),
          clock.now(),
        )
        .then((failed) => {
          this.stats.recorded += sent.length - failed.length;
        }),
    );
  }

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
    const limit = this.deps.controls?.peek(tenant).maxDeliveriesPerSecond;
    return limit === undefined ? undefined : limit * this.deliveryShare;
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
    this.#renewTimer ??= setInterval(() => this.#track(this.#renewWaiting()), Math.max(250, Math.floor(this.deps.settings.leaseMs / 4)));
  }

  /** Sent rows whose marker is not written yet. */
  get unrecorded(): number {
    return this.#toRecord.length;
  }

  /** Waits until everything held is sent (or dropped) and recorded, or until `deadlineMs`. */
  async drain(deadlineMs: number): Promise<void> {
    while ((this.#held.size > 0 || this.#inflight.size > 0 || this.#toRecord.length > 0) && !this.signal?.aborted) {
      if (this.#held.size === 0 && this.#toRecord.length > 0) this.#flushRecords();
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

  /** Stops the timers and forgets what is held; returns how many rows were still held. */
  abandon(): number {
    this.#ended = true;
    this.signal?.removeEventListener('abort', this.#onAbort);
    clearTimeout(this.#timer);
    clearTimeout(this.#recordTimer);
    clearInterval(this.#renewTimer);
    this.#timer = this.#renewTimer = this.#recordTimer = undefined;
    // Sent rows not yet recorded keep their lease: a later round sends them again (a duplicate).
    this.#toRecord = [];
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
      if (!r) this.#ready.set(h.row.tenant, (r = { rows: new Heap<Held>(byPriority), pass: this.#vtime }));
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
      let best: string | undefined;
      let bestPass = Infinity;
      for (const [tenant, r] of this.#ready) if (r.pass < bestPass) [best, bestPass] = [tenant, r.pass];
      // A tenant with no send in flight sends whatever the shared limit (a tenant within its share
      // never waits behind a flood's sends); the others wait for a slot.
      if (this.sendLimit) {
        if (!this.#sendingBy.has(best!)) this.sendLimit.start(best);
        else if (!this.sendLimit.tryStart(this.#pumpLater, best)) return; // woken when a slot is ours
      }
      const r = this.#ready.get(best!)!;
      const rows: Held[] = [];
      while (rows.length < MAX_BATCH_ENTRIES && r.rows.size > 0) {
        const h = r.rows.pop()!;
        this.#readyCount--;
        if (this.#held.get(h.key) === h && !h.busy) rows.push(h); // not dropped meanwhile (a lost lease)
      }
      this.#vtime = r.pass;
      r.pass += 1 / Math.max(1, this.deps.controls?.peek(best!).weight ?? 1);
      if (r.rows.size === 0) this.#ready.delete(best!);
      if (rows.length === 0) {
        this.sendLimit?.done();
        continue;
      }
      const tenant = best!;
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
    const rate = this.rateOf(tenant);
    if (rate === undefined) {
      this.#buckets.delete(tenant);
      return list;
    }
    let bucket = this.#buckets.get(tenant);
    if (!bucket) this.#buckets.set(tenant, (bucket = new TokenBucket(rate, now)));
    else bucket.setRate(rate, now);
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

  /** Gives a paused tenant's rows back (SCHEDULED again) so that they are held, not sent. */
  async #giveBack(tenant: string, list: Held[]): Promise<void> {
    this.deps.log?.('tenant paused; acquired rows given back', { tenant, rows: list.length });
    await Promise.all(
      list.map(async (h) => {
        this.#forget(h);
        const back = await this.deps.store.unacquire(h.row, h.leaseUntil).catch(() => false);
        if (back) this.stats.givenBack++;
        // Given back: look at it again now (it will be held); otherwise after its lease.
        this.hooks.onDropped?.(h.row, back ? this.deps.clock.now() : h.leaseUntil + 1);
      }),
    );
  }

  /** Sends `rows` (one tenant's); resolves with the latency of its slowest send call (ms), when it made one. */
  async #release(rows: Held[]): Promise<number | undefined> {
    const { clock, settings, tenants, sender } = this.deps;
    for (const h of rows) h.busy = true;
    // Never send a row whose lease is about to expire: renew first, drop it if that fails.
    const now = clock.now();
    const stale = rows.filter((h) => h.leaseUntil - now < this.#safetyMs);
    const lost = new Set<Held>();
    await Promise.all(stale.map(async (h) => (await this.#renew(h, now + settings.leaseMs)) || lost.add(h)));
    if (this.signal?.aborted) return;

    const byTenant = new Map<string, Held[]>();
    for (const h of rows) {
      if (lost.has(h)) continue;
      const list = byTenant.get(h.row.tenant) ?? [];
      list.push(h);
      byTenant.set(h.row.tenant, list);
    }
    // Tenant controls (at most 5 s stale: a read only when the cached copy is older): a paused
    // tenant's rows go back; a limited tenant's wait for tokens.
    const paused = new Set<string>();
    if (this.deps.controls)
      await Promise.all([...byTenant.keys()].map(async (t) => (await this.deps.controls!.get(t)).paused && paused.add(t)));
    if (this.signal?.aborted) return;
    const at = clock.now();
    for (const [tenant, list] of byTenant) {
      if (paused.has(tenant)) {
        byTenant.delete(tenant);
        this.#track(this.#giveBack(tenant, list));
        continue;
      }
      const allowed = this.#allowed(tenant, list, at);
      if (allowed.length === 0) byTenant.delete(tenant);
      else byTenant.set(tenant, allowed);
    }
    const sentRows: Held[] = [];
    const retry: Held[] = [];
    let slowest: number | undefined;
    await Promise.all(
      [...byTenant].map(async ([tenant, list]) => {
        const record = await tenants.lookup(tenant).catch(() => undefined);
        if (!record) {
          // Unknown tenant (deregistered?): leave the row ACQUIRED; it is retried after its lease.
          this.deps.log?.('no queue for tenant; row left for a later round', { tenant, rows: list.length });
          for (const h of list) {
            this.#forget(h);
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
            try {
              const called = clock.now();
              failed = new Set((await sender.sendBatch(record.queueUrl, batch)).map((f) => f.id));
              slowest = Math.max(slowest ?? 0, clock.now() - called);
            } catch {
              failed = new Set(batch.map((m) => m.id));
            }
            if (this.signal?.aborted) {
              // Stopped while the send was in flight: record what it delivered all the same.
              this.#recordOnStop(batch.filter((m) => !failed.has(m.id)).map((m) => ({ row: byId.get(m.id)!.row, leaseUntil: 0 })));
              return;
            }
            const at = clock.now();
            const lateness: number[] = [];
            for (const m of batch) {
              const h = byId.get(m.id)!;
              if (failed.has(m.id)) {
                retry.push(h);
                (this.stats.byTenant ??= new TenantTally()).failed(tenant);
              } else {
                this.stats.sent++;
                this.stats.latenessMs.push(at - h.row.dueMs);
                lateness.push(at - h.row.dueMs);
                (this.stats.byTenant ??= new TenantTally()).sent(tenant, at - h.row.dueMs);
                sentRows.push(h);
              }
            }
            if (lateness.length > 0) this.hooks.onSent?.(lateness);
          }),
        );
      }),
    );
    if (this.signal?.aborted) return slowest;
    for (const h of lost) {
      this.#forget(h);
      this.hooks.onDropped?.(h.row, h.leaseUntil + 1);
    }
    this.stats.leaseLost += lost.size;
    for (const h of retry) {
      h.busy = false;
      h.attempts++;
      this.stats.sendRetries++;
      h.readyAt = clock.now() + backoffMs(h.attempts, { baseMs: 50, capMs: 1_000 });
      this.#enqueue(h);
    }
    // A sent row is no longer held: its lease keeps other rounds off until its marker is written.
    for (const h of sentRows) this.#forget(h);
    this.#toRecord.push(...sentRows.map((h) => ({ row: h.row, leaseUntil: h.leaseUntil })));
    // Flush a full batch, or when nothing else is held (the end of a burst: no reason to wait).
    if (this.#toRecord.length >= RECORD_BATCH || (this.#queue.length === 0 && this.#readyCount === 0)) this.#flushRecords();
    else if (this.#toRecord.length > 0 && !this.#ended) this.#recordTimer ??= setTimeout(() => this.#flushRecords(), RECORD_DELAY_MS);
    return slowest;
  }

  /**
   * Writes the markers of sent rows in full batches: across releases, so a request carries up to
   * 25 rows even when rows are sent one by one. A crash before the flush re-sends those rows
   * once their lease expires: duplicates, never losses.
   */
  #flushRecords(): void {
    clearTimeout(this.#recordTimer);
    this.#recordTimer = undefined;
    const rows = this.#toRecord;
    this.#toRecord = [];
    if (rows.length > 0 && !this.signal?.aborted) this.#track(this.#record(rows));
  }

  async #record(rows: Sent[]): Promise<void> {
    const { store, clock, settings } = this.deps;
    const bySk = new Map(rows.map((s) => [rowKeyString(s.row), s]));
    let pending: Sent[] = rows;
    for (let attempt = 0; pending.length > 0 && attempt < 5; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, backoffMs(attempt, { baseMs: 50, capMs: 1_000 })));
      if (this.signal?.aborted) return;
      let failed: RowKey[];
      try {
        failed = await store.markDelivered(
          pending.map((s) => ({ ...s.row, expiresAtMs: s.row.dueMs + settings.cancelRecordRetentionMs })),
          clock.now(),
        );
      } catch {
        continue;
      }
      if (this.signal?.aborted) return;
      const left = new Set(failed.map(rowKeyString));
      const done = pending.filter((s) => !left.has(rowKeyString(s.row)));
      this.stats.recorded += done.length;
      this.hooks.onRecorded?.(done.map((s) => s.row));
      pending = [...left].flatMap((k) => bySk.get(k) ?? []);
    }
    // Rows without a marker are sent again once their lease expires: a duplicate, never a loss.
    if (pending.length > 0) {
      this.deps.log?.('rows sent but not recorded; they will be sent again', { rows: pending.length });
      for (const s of pending) this.hooks.onDropped?.(s.row, s.leaseUntil + 1);
    }
  }

  #renew(h: Held, newLeaseUntil: number): Promise<boolean> {
    h.renewing ??= this.#renewOnce(h, newLeaseUntil).finally(() => (h.renewing = undefined));
    return h.renewing;
  }

  async #renewOnce(h: Held, newLeaseUntil: number): Promise<boolean> {
    try {
      if (!(await this.deps.store.renew(h.row, h.leaseUntil, newLeaseUntil))) return false;
    } catch {
      return h.leaseUntil - this.deps.clock.now() >= this.#safetyMs;
    }
    h.leaseUntil = newLeaseUntil;
    this.stats.renewed++;
    return true;
  }

  /** Renews the leases of waiting rows that have used half of theirs. */
  async #renewWaiting(): Promise<void> {
    if (this.#held.size === 0) {
      clearInterval(this.#renewTimer);
      this.#renewTimer = undefined;
      return;
    }
    const now = this.deps.clock.now();
    const due = [...this.#held.values()].filter((h) => !h.busy && h.leaseUntil - now < this.deps.settings.leaseMs / 2);
    await Promise.all(
      due.map(async (h) => {
        if (!(await this.#renew(h, now + this.deps.settings.leaseMs)) && !h.busy && this.#held.has(h.key)) {
          this.#queue = this.#queue.filter((q) => q !== h);
          this.#forget(h); // and skipped if it waits for a send slot

          this.stats.leaseLost++;
          this.hooks.onDropped?.(h.row, h.leaseUntil + 1);
          this.#arm();
        }
      }),
    );
  }
}

/** Higher priority first, then earlier ready time. */
function byPriority(a: Held, b: Held): boolean {
  const pa = a.row.priority ?? DEFAULT_PRIORITY;
  const pb = b.row.priority ?? DEFAULT_PRIORITY;
  return pa !== pb ? pa > pb : a.readyAt < b.readyAt;
}
