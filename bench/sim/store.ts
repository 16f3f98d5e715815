/**
 * In-process stand-ins for the scheduler table and the tenant queues, at the port level
 * (core/model/ports.ts `JobStore`, `QueueSender`), in virtual time (./clock.ts).
 *
 * {@link SimTable} holds the items with the semantics the dispatcher relies on (the conditions of
 * adapters/dynamoJobStore.ts, one by one) and enforces DynamoDB's throughput limits: per partition
 * key 1,000 WCU/s and 3,000 RCU/s, per table the on-demand quota (40,000 WRU/s and RRU/s by
 * default), as token buckets refilled continuously. A request over a limit fails as on AWS:
 * single-item writes and queries with a throttling error that the client ({@link SimJobStore})
 * retries like the SDK's standard retry mode and then surfaces as core/model/errors.ts `ThrottledError`
 * (what adapters/dynamoJobStore.ts `rethrow` makes of it); BatchWriteItem leaves the throttled
 * items unprocessed (returned as failed keys, as the adapter does).
 *
 * {@link SimJobStore} is one client of the table: a Lambda instance (or the local process). Every
 * call is charged CPU on that client's {@link Cpu} (one serial CPU: a call cannot leave before the
 * CPU has done the work of the calls before it), then a network latency drawn from the model; on
 * the local stack's model the table is one serial server (dynalite is one Node process) with a
 * service time per operation.
 *
 * Concurrency keys (docs/flow-control.md): the table keeps one item per key (its limit and its
 * holders, each with its slot's lease), with adapters/dynamoKeySlots.ts's conditions, and
 * {@link SimKeySlots} is a client's view of them (core/model/ports.ts `KeySlots`).
 */
import { ThrottledError } from '../../core/model/errors.js';
import { sortKey } from '../../core/model/jobId.js';
import { positionBefore, positionThrough } from '../../core/model/lanes.js';
import { heldSortKey } from '../../adapters/dynamoJobStore.js';
import type {
  AcquiredRow,
  CancelRecord,
  DueKey,
  DuePage,
  HeldPage,
  HeldPointer,
  JobRow,
  JobStore,
  KeyFull,
  KeySlots,
  OutgoingMessage,
  QueueSender,
  RowKey,
  RowState,
  SendFailure,
  ShardMarks,
  StoredRow,
} from '../../core/model/ports.js';
import type { VirtualTime } from './clock.js';

/** DynamoDB's limits the table enforces. */
export interface TableLimits {
  /** Write units per second per partition key. @default 1000 */
  readonly partitionWcu: number;
  /** Read units per second per partition key. @default 3000 */
  readonly partitionRcu: number;
  /** The table's on-demand write quota, units per second. @default 40_000 */
  readonly tableWru: number;
  /** The table's on-demand read quota, units per second. @default 40_000 */
  readonly tableRru: number;
}

export const AWS_TABLE_LIMITS: TableLimits = { partitionWcu: 1_000, partitionRcu: 3_000, tableWru: 40_000, tableRru: 40_000 };
/** No limits (the local stack: dynalite throttles nothing). */
export const NO_TABLE_LIMITS: TableLimits = { partitionWcu: Infinity, partitionRcu: Infinity, tableWru: Infinity, tableRru: Infinity };

/** Size of the items, bytes, for the units they cost (docs/capacity.md: a deflated 1 KB job row is ~640 bytes). */
const ROW_BYTES = 640;
const MARKER_BYTES = 150;
const POINTER_BYTES = 80;

class Bucket {
  #tokens: number;
  #at: number;
  constructor(
    private readonly rate: number,
    now: number,
  ) {
    this.#tokens = rate; // one second of burst
    this.#at = now;
  }
  take(n: number, now: number): boolean {
    if (this.rate === Infinity) return true;
    this.#tokens = Math.min(this.rate, this.#tokens + ((now - this.#at) * this.rate) / 1000);
    this.#at = now;
    if (this.#tokens < n) return false;
    this.#tokens -= n;
    return true;
  }
}

/** Which limit a request met. */
export type ThrottleKind = 'partition WCU' | 'partition RCU' | 'table WRU quota' | 'table RRU quota';

export class SimThrottle extends Error {
  constructor(readonly kind: ThrottleKind) {
    super(`${kind} exceeded`);
    this.name = 'ProvisionedThroughputExceededException';
  }
}

interface Item {
  readonly sk: string;
  readonly dueMs: number;
  readonly jobId: string;
  state: RowState;
  leaseUntil: number;
  tenant: string;
  payload?: string;
  priority?: number;
  concurrency?: { readonly key: string; readonly limit: number };
  deliveredAtMs?: number;
  expiresAtMs?: number;
}

interface Partition {
  /** Items in sort-key order. */
  readonly sks: string[];
  readonly items: Map<string, Item>;
}

export interface TableCounters {
  writeUnits: number;
  readUnits: number;
  /** Throttled requests (or batch items) per limit. */
  throttles: Record<ThrottleKind, number>;
  /** Item writes by kind. */
  writes: Record<string, number>;
  queries: number;
  itemsRead: number;
  /** When the last delivered marker was written (virtual ms; 0: none yet). */
  lastMarkerAt: number;
}

export class SimTable {
  readonly #parts = new Map<string, Partition>();
  readonly #wcu = new Map<string, Bucket>();
  readonly #rcu = new Map<string, Bucket>();
  readonly #tableW: Bucket;
  readonly #tableR: Bucket;
  readonly #leases = new Map<number, { owner: string; ownerStart: number; leaseUntil: number; marks: ShardMarks }>();
  readonly counters: TableCounters = {
    writeUnits: 0,
    readUnits: 0,
    throttles: { 'partition WCU': 0, 'partition RCU': 0, 'table WRU quota': 0, 'table RRU quota': 0 },
    writes: {},
    queries: 0,
    itemsRead: 0,
    lastMarkerAt: 0,
  };

  constructor(
    private readonly vt: VirtualTime,
    readonly limits: TableLimits = AWS_TABLE_LIMITS,
  ) {
    this.#tableW = new Bucket(limits.tableWru, vt.now());
    this.#tableR = new Bucket(limits.tableRru, vt.now());
  }

  // ---- capacity ----

  /** Charges `units` write units to partition `pk`; throws {@link SimThrottle} when a limit is met. */
  chargeWrite(pk: string, units: number, kind: string): void {
    const now = this.vt.now();
    let b = this.#wcu.get(pk);
    if (!b) this.#wcu.set(pk, (b = new Bucket(this.limits.partitionWcu, now)));
    if (!b.take(units, now)) throw this.#throttled('partition WCU');
    if (!this.#tableW.take(units, now)) throw this.#throttled('table WRU quota');
    this.counters.writeUnits += units;
    this.counters.writes[kind] = (this.counters.writes[kind] ?? 0) + 1;
  }

  chargeRead(pk: string, bytes: number, consistent: boolean): void {
    const units = Math.max(1, Math.ceil(bytes / 4096)) * (consistent ? 1 : 0.5);
    const now = this.vt.now();
    let b = this.#rcu.get(pk);
    if (!b) this.#rcu.set(pk, (b = new Bucket(this.limits.partitionRcu, now)));
    if (!b.take(units, now)) throw this.#throttled('partition RCU');
    if (!this.#tableR.take(units, now)) throw this.#throttled('table RRU quota');
    this.counters.readUnits += units;
  }

  #throttled(kind: ThrottleKind): SimThrottle {
    this.counters.throttles[kind]++;
    return new SimThrottle(kind);
  }

  // ---- items ----

  #part(pk: string): Partition {
    let p = this.#parts.get(pk);
    if (!p) this.#parts.set(pk, (p = { sks: [], items: new Map() }));
    return p;
  }

  #insert(pk: string, item: Item): void {
    const p = this.#part(pk);
    if (!p.items.has(item.sk)) {
      const i = upperBound(p.sks, item.sk);
      p.sks.splice(i, 0, item.sk);
    }
    p.items.set(item.sk, item);
  }

  #delete(pk: string, sk: string): void {
    const p = this.#parts.get(pk);
    if (!p || !p.items.delete(sk)) return;
    const i = upperBound(p.sks, sk) - 1;
    if (p.sks[i] === sk) p.sks.splice(i, 1);
  }

  #get(pk: string, sk: string): Item | undefined {
    return this.#parts.get(pk)?.items.get(sk);
  }

  /**
   * A Query of `pk`'s range: its items, charged to the partition and counted (each item its size,
   * or `bytesEach` for pointers).
   */
  #query(pk: string, after: string | undefined, through: string, limit: number, consistent: boolean, bytesEach?: number) {
    const page = this.#range(pk, after, through, limit);
    const bytes = bytesEach === undefined ? page.items.reduce((n, it) => n + itemBytes(it), 0) : page.items.length * bytesEach;
    this.chargeRead(pk, bytes, consistent);
    this.counters.queries++;
    this.counters.itemsRead += page.items.length;
    return page;
  }

  /** Items of `pk` with `after < sk <= through` (from the start without `after`), at most `limit`. */
  #range(pk: string, after: string | undefined, through: string, limit: number): { items: Item[]; more: boolean } {
    const p = this.#parts.get(pk);
    if (!p) return { items: [], more: false };
    let i = after === undefined ? 0 : upperBound(p.sks, after);
    const items: Item[] = [];
    for (; i < p.sks.length && p.sks[i]! <= through && items.length < limit; i++) items.push(p.items.get(p.sks[i]!)!);
    return { items, more: i < p.sks.length && p.sks[i]! <= through };
  }

  /** Every item of a row partition (for the end-of-run check). */
  rows(shard: number): readonly Item[] {
    const p = this.#parts.get(String(shard));
    return p ? p.sks.map((sk) => p.items.get(sk)!) : [];
  }

  // ---- the JobStore operations, atomically at the server ----

  putJob(row: JobRow): 'created' | 'exists' {
    const pk = String(row.shard);
    this.chargeWrite(pk, 1, 'put');
    const sk = sortKey(row.dueMs, row.jobId);
    const at = this.#get(pk, sk);
    if (at && at.state !== 'DEAD') return 'exists';
    this.#insert(pk, {
      sk,
      dueMs: row.dueMs,
      jobId: row.jobId,
      state: 'SCHEDULED',
      leaseUntil: 0,
      tenant: row.tenant,
      payload: row.payload,
      ...(row.priority !== undefined && row.priority !== 5 ? { priority: row.priority } : {}),
      ...(row.concurrency ? { concurrency: row.concurrency } : {}),
    });
    return 'created';
  }

  readDue(shard: number, range: { after?: string; through: string }, limit: number): DuePage {
    const pk = String(shard);
    const { items, more } = this.#query(pk, range.after, range.through, limit, true);
    const rows: DueKey[] = items.map((it) => ({
      shard,
      dueMs: it.dueMs,
      jobId: it.jobId,
      state: it.state,
      leaseUntil: it.leaseUntil,
      ...(it.priority !== undefined ? { priority: it.priority } : {}),
    }));
    return { rows, last: items.at(-1)?.sk, more };
  }

  dueTimes(shard: number, untilMs: number, limit: number, fromMs?: number): { dueMs: number[]; more: boolean } {
    const pk = String(shard);
    const after = fromMs === undefined ? undefined : positionBefore(fromMs);
    const { items, more } = this.#query(pk, after, positionThrough(untilMs), limit, false);
    return { dueMs: items.filter((it) => it.state === 'SCHEDULED' || it.state === 'ACQUIRED').map((it) => it.dueMs), more };
  }

  putLatePointer(key: RowKey): void {
    const pk = `l#${key.shard}`;
    this.chargeWrite(pk, 1, 'late pointer');
    const sk = sortKey(key.dueMs, key.jobId);
    this.#insert(pk, { sk, dueMs: key.dueMs, jobId: key.jobId, state: 'SCHEDULED', leaseUntil: 0, tenant: '' });
  }

  readLate(shard: number, untilMs: number, limit: number): RowKey[] {
    const pk = `l#${shard}`;
    const { items } = this.#query(pk, undefined, positionThrough(untilMs), limit, false, POINTER_BYTES);
    return items.map((it) => ({ shard, dueMs: it.dueMs, jobId: it.jobId }));
  }

  /** One item of a batch write: false when throttled (left unprocessed). */
  #batchItem(pk: string, kind: string, write: () => void): boolean {
    try {
      this.chargeWrite(pk, 1, kind);
    } catch (err) {
      if (err instanceof SimThrottle) return false;
      throw err;
    }
    write();
    return true;
  }

  deleteLatePointers(keys: readonly RowKey[]): RowKey[] {
    return keys.filter(
      (k) => !this.#batchItem(`l#${k.shard}`, 'late pointer delete', () => this.#delete(`l#${k.shard}`, sortKey(k.dueMs, k.jobId))),
    );
  }

  putHeldPointers(pointers: readonly HeldPointer[]): HeldPointer[] {
    return pointers.filter(
      (p) =>
        !this.#batchItem(`p#${p.shard}`, 'hold pointer', () =>
          this.#insert(`p#${p.shard}`, {
            sk: heldSortKey(p),
            dueMs: p.dueMs,
            jobId: p.jobId,
            state: 'SCHEDULED',
            leaseUntil: 0,
            tenant: p.tenant,
            priority: p.priority,
          }),
        ),
    );
  }

  deleteHeldPointers(pointers: readonly HeldPointer[]): HeldPointer[] {
    return pointers.filter(
      (p) => !this.#batchItem(`p#${p.shard}`, 'hold pointer delete', () => this.#delete(`p#${p.shard}`, heldSortKey(p))),
    );
  }

  readHeld(shard: number, range: { tenant?: string; after?: string }, limit: number): HeldPage {
    const pk = `p#${shard}`;
    const p = this.#parts.get(pk);
    const out: HeldPointer[] = [];
    let more = false;
    if (p) {
      let i = range.after === undefined ? 0 : upperBound(p.sks, range.after);
      for (; i < p.sks.length; i++) {
        const sk = p.sks[i]!;
        if (range.tenant !== undefined && !sk.startsWith(`${range.tenant}#`)) {
          if (sk > `${range.tenant}#`) break;
          continue;
        }
        if (out.length >= limit) {
          more = true;
          break;
        }
        const it = p.items.get(sk)!;
        out.push({ shard, tenant: it.tenant, priority: it.priority ?? 5, dueMs: it.dueMs, jobId: it.jobId });
      }
    }
    this.chargeRead(pk, out.length * POINTER_BYTES, false);
    this.counters.queries++;
    const last = more ? heldSortKey(out.at(-1)!) : undefined;
    return { pointers: out, more, ...(last !== undefined ? { last } : {}) };
  }

  /** ACQUIRED with `held` as its lease: what renew and unacquire are conditional on. */
  updateWhileHeld(key: RowKey, held: number, update: (it: Item) => void, kind: string): boolean {
    const pk = String(key.shard);
    this.chargeWrite(pk, 1, kind);
    const it = this.#get(pk, sortKey(key.dueMs, key.jobId));
    if (!it || it.state !== 'ACQUIRED' || it.leaseUntil !== held) return false;
    update(it);
    return true;
  }

  acquire(key: RowKey, nowMs: number, leaseUntil: number): AcquiredRow | undefined {
    const pk = String(key.shard);
    // A failed conditional write is billed all the same.
    this.chargeWrite(pk, 1, 'acquire');
    const it = this.#get(pk, sortKey(key.dueMs, key.jobId));
    // SCHEDULED, or ACQUIRED by a dispatcher whose lease has run out (adapters/dynamoJobStore.ts).
    if (!it || !(it.state === 'SCHEDULED' || (it.state === 'ACQUIRED' && it.leaseUntil < nowMs))) return undefined;
    it.state = 'ACQUIRED';
    it.leaseUntil = leaseUntil;
    return {
      ...key,
      tenant: it.tenant,
      payload: it.payload ?? 'null',
      leaseUntil,
      ...(it.priority !== undefined ? { priority: it.priority } : {}),
      ...(it.concurrency ? { concurrency: it.concurrency } : {}),
    };
  }

  markDelivered<K extends RowKey & { readonly tenant: string; readonly expiresAtMs: number }>(
    rows: readonly K[],
    deliveredAtMs: number,
  ): K[] {
    // Unconditional puts of the marker (BatchWriteItem), each billed 1 WRU.
    if (rows.length > 0) this.counters.lastMarkerAt = this.vt.now();
    return rows.filter(
      (r) =>
        !this.#batchItem(String(r.shard), 'marker', () =>
          this.#insert(String(r.shard), {
            sk: sortKey(r.dueMs, r.jobId),
            dueMs: r.dueMs,
            jobId: r.jobId,
            state: 'QUEUED',
            leaseUntil: 0,
            tenant: r.tenant,
            deliveredAtMs,
            expiresAtMs: r.expiresAtMs,
          }),
        ),
    );
  }

  cancel(key: RowKey, tenant: string, expiresAtMs: number): 'cancelled' | 'acquired' {
    const pk = String(key.shard);
    this.chargeWrite(pk, 1, 'cancel');
    const sk = sortKey(key.dueMs, key.jobId);
    const it = this.#get(pk, sk);
    if (it && !(it.state === 'SCHEDULED' || it.state === 'CANCELLED' || it.state === 'DEAD')) return 'acquired';
    this.#insert(pk, { sk, dueMs: key.dueMs, jobId: key.jobId, state: 'CANCELLED', leaseUntil: 0, tenant, expiresAtMs });
    return 'cancelled';
  }

  getRow(key: RowKey): StoredRow | undefined {
    const pk = String(key.shard);
    const it = this.#get(pk, sortKey(key.dueMs, key.jobId));
    this.chargeRead(pk, it ? itemBytes(it) : 1, true);
    if (!it) return undefined;
    return {
      state: it.state,
      tenant: it.tenant,
      leaseUntil: it.leaseUntil,
      ...(it.deliveredAtMs !== undefined ? { deliveredAtMs: it.deliveredAtMs } : {}),
      ...(it.expiresAtMs !== undefined ? { expiresAtMs: it.expiresAtMs } : {}),
      ...(it.priority !== undefined ? { priority: it.priority } : {}),
    };
  }

  // ---- concurrency keys: one item per key, its limit and its holders (adapters/dynamoKeySlots.ts) ----

  readonly #keys = new Map<string, { limit: number; limitAtMs: number; holders: Map<string, number> }>();

  #key(tenant: string, key: string, limit: number) {
    const pk = `k#${tenant}#${key}`;
    let k = this.#keys.get(pk);
    if (!k) this.#keys.set(pk, (k = { limit, limitAtMs: 0, holders: new Map() }));
    return { pk, k };
  }

  /** A slot for `jobId` (also when it holds one already), or who holds them: one conditional write, the item returned on failure. */
  keyTake(tenant: string, key: string, jobId: string, untilMs: number, limit: number): true | KeyFull {
    const { pk, k } = this.#key(tenant, key, limit);
    this.chargeWrite(pk, 1, 'keyTake');
    if (!k.holders.has(jobId) && k.holders.size >= k.limit) return { holders: new Map(k.holders), limit: k.limit };
    k.holders.set(jobId, untilMs);
    return true;
  }

  keyEvict(tenant: string, key: string, holders: ReadonlyMap<string, number>): number {
    const { pk, k } = this.#key(tenant, key, 1);
    this.chargeWrite(pk, 1, 'keyEvict');
    let n = 0;
    for (const [jobId, until] of holders)
      if (k.holders.get(jobId) === until) {
        k.holders.delete(jobId);
        n++;
      }
    return n;
  }

  keyRelease(tenant: string, key: string, jobId: string): void {
    const { pk, k } = this.#key(tenant, key, 1);
    this.chargeWrite(pk, 1, 'keyRelease');
    k.holders.delete(jobId);
  }

  keyExtend(tenant: string, key: string, jobId: string, untilMs: number): boolean {
    const { pk, k } = this.#key(tenant, key, 1);
    this.chargeWrite(pk, 1, 'keyExtend');
    if (!k.holders.has(jobId)) return false;
    k.holders.set(jobId, untilMs);
    return true;
  }

  keyHolds(tenant: string, key: string, jobId: string): boolean {
    const { pk, k } = this.#key(tenant, key, 1);
    this.chargeRead(pk, 200, true);
    return k.holders.has(jobId);
  }

  keySetLimit(tenant: string, key: string, limit: number, atMs: number): void {
    const { pk, k } = this.#key(tenant, key, limit);
    this.chargeWrite(pk, 1, 'keyLimit');
    if (atMs >= k.limitAtMs) {
      k.limit = limit;
      k.limitAtMs = atMs;
    }
  }

  /** The slots held now, over every key (none once every job's outcome freed its slot). */
  keyHolders(): number {
    let n = 0;
    for (const { holders } of this.#keys.values()) n += holders.size;
    return n;
  }

  takeGroupLease(group: number, owner: string, ownerStartMs: number, nowMs: number, untilMs: number, marks?: ShardMarks) {
    this.chargeWrite(`lease#${group}`, 1, 'group lease');
    const l = this.#leases.get(group);
    // Free, expired, ours already, or held by an older execution (the newer one takes over).
    if (l && !(l.leaseUntil < nowMs || l.owner === owner || l.ownerStart < ownerStartMs)) return { held: false, marks: {} };
    const next = { owner, ownerStart: ownerStartMs, leaseUntil: untilMs, marks: marks ? { ...marks } : { ...(l?.marks ?? {}) } };
    this.#leases.set(group, next);
    return { held: true, marks: { ...next.marks } };
  }

  groupMarks(group: number): ShardMarks {
    this.chargeRead(`lease#${group}`, 200, false);
    return { ...(this.#leases.get(group)?.marks ?? {}) };
  }
}

function itemBytes(it: Item): number {
  return it.state === 'SCHEDULED' || it.state === 'ACQUIRED' ? ROW_BYTES : MARKER_BYTES;
}

/** First index whose element is greater than `x`. */
function upperBound(a: readonly string[], x: string): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (a[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** One serial CPU: a Lambda instance's share of a vCPU, or the local process. */
export class Cpu {
  /** Virtual time at which the work charged so far is done. */
  freeAt = 0;
  /** CPU time charged, virtual µs of this CPU (already divided by the share). */
  busyUs = 0;
  /** Most a call waited for the CPU, ms. */
  maxWaitMs = 0;
  /** CPU time (µs) of the work that started within {@link window}. */
  windowBusyUs = 0;
  constructor(
    readonly name: string,
    /** Share of one vCPU (a 1,024 MB Lambda has 1024 / 1769). */
    readonly vcpu: number,
    /** The measurement window (virtual ms): its utilisation is what tells a saturated CPU. */
    readonly window: { readonly from: number; readonly to: number } = { from: 0, to: Infinity },
  ) {}

  /** Charges `us` of 1-vCPU work from `now`; returns when it is done (virtual ms). */
  charge(now: number, us: number): number {
    const start = Math.max(now, this.freeAt);
    this.maxWaitMs = Math.max(this.maxWaitMs, start - now);
    const ms = us / this.vcpu / 1000;
    this.freeAt = start + ms;
    this.busyUs += ms * 1000;
    if (start >= this.window.from && start < this.window.to) this.windowBusyUs += ms * 1000;
    return this.freeAt;
  }
}

/** Latency model of one kind of call: a median and a spread (log-normal), ms. */
export interface Latency {
  readonly medianMs: number;
  /** Sigma of the log-normal; 0: always the median. */
  readonly sigma: number;
}

/** CPU per call (µs at one vCPU), from the benchmark's `capacity.cpuUsPerJob`. */
export interface CpuModel {
  /** Per conditional acquire (capacity.cpuUsPerJob.acquire). */
  readonly acquireUs: number;
  /** Per sent message (a share of capacity.cpuUsPerJob.release). */
  readonly sendPerMessageUs: number;
  /** Per delivered marker (a share of release). */
  readonly markerPerRowUs: number;
  /** Per item a due-range read returns (a share of release). */
  readonly readPerItemUs: number;
  /** Per request, besides the per-item shares: an SDK call's fixed cost. */
  readonly callUs: number;
}

/** The network and service times of the calls. */
export interface CallModel {
  readonly write: Latency;
  readonly query: Latency;
  readonly batchWrite: Latency;
  readonly send: Latency;
  /**
   * A serial storage server (the local stack's dynalite, one Node process): service time per
   * operation, µs. Undefined on AWS (DynamoDB's partitions serve in parallel).
   */
  readonly server?: { readonly writeUs: number; readonly batchItemUs: number; readonly queryUs: number; readonly queryItemUs: number };
}

export interface SendRecord {
  sends: number;
  firstSentAt: number;
  firstAckAt: number;
}

/** What every client shares: the clock, the latency model, the random source, the serial server. */
export class SimNetwork {
  serverFreeAt = 0;
  /** SDK-level retries after throttling. */
  sdkRetries = 0;
  constructor(
    readonly vt: VirtualTime,
    readonly calls: CallModel,
    readonly random: () => number,
  ) {}

  latency(l: Latency): number {
    if (l.sigma === 0) return l.medianMs;
    // Box-Muller
    const u = Math.max(1e-12, this.random());
    const v = this.random();
    const z = Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v);
    return l.medianMs * Math.exp(l.sigma * z);
  }

  /**
   * One request: CPU on `cpu`, half the network latency, the operation (at a serial server when
   * modelled), the other half back. Throttling is retried as the SDK's standard mode does (3
   * attempts, backoff from 500 ms for throttling); then surfaces as {@link ThrottledError}.
   */
  async call<T>(cpu: Cpu, cpuUs: number, lat: Latency, serviceUs: number, op: () => T): Promise<T> {
    for (let attempt = 0; ; attempt++) {
      const leave = cpu.charge(this.vt.now(), cpuUs);
      const l = this.latency(lat);
      await this.vt.sleep(leave + l / 2 - this.vt.now());
      if (this.calls.server) {
        const start = Math.max(this.vt.now(), this.serverFreeAt);
        this.serverFreeAt = start + serviceUs / 1000;
        await this.vt.sleep(this.serverFreeAt - this.vt.now());
      }
      let result: T;
      try {
        result = op();
      } catch (err) {
        await this.vt.sleep(l / 2);
        if (err instanceof SimThrottle) {
          if (attempt < 2) {
            this.sdkRetries++;
            await this.vt.sleep(this.random() * Math.min(20_000, 500 * 2 ** attempt));
            continue;
          }
          throw new ThrottledError(`DynamoDB throttled: ${err.message}`, err);
        }
        throw err;
      }
      await this.vt.sleep(l / 2);
      return result;
    }
  }
}

/** The scheduler table as one client (a Lambda instance, or the local process) sees it. */
export class SimJobStore implements JobStore {
  constructor(
    private readonly table: SimTable,
    private readonly net: SimNetwork,
    private readonly cpu: Cpu,
    private readonly costs: CpuModel,
  ) {}

  #srv(kind: 'write' | 'query' | 'batch', items = 1): number {
    const s = this.net.calls.server;
    if (!s) return 0;
    if (kind === 'write') return s.writeUs;
    if (kind === 'batch') return s.batchItemUs * items;
    return s.queryUs + s.queryItemUs * items;
  }

  putJob(row: JobRow): Promise<'created' | 'exists'> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.write, this.#srv('write'), () => this.table.putJob(row));
  }

  async readDue(shard: number, range: { readonly after?: string; readonly through: string }, limit: number): Promise<DuePage> {
    // The per-item CPU is charged after the answer (unmarshalling the items).
    const page = await this.net.call(this.cpu, this.costs.callUs, this.net.calls.query, this.#srv('query', limit / 4), () =>
      this.table.readDue(shard, range, limit),
    );
    if (page.rows.length > 0)
      await this.net.vt.sleep(this.cpu.charge(this.net.vt.now(), page.rows.length * this.costs.readPerItemUs) - this.net.vt.now());
    return page;
  }

  dueTimes(shard: number, untilMs: number, limit: number, fromMs?: number) {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.query, this.#srv('query'), () =>
      this.table.dueTimes(shard, untilMs, limit, fromMs),
    );
  }

  putLatePointer(key: RowKey): Promise<void> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.write, this.#srv('write'), () => this.table.putLatePointer(key));
  }

  readLate(shard: number, untilMs: number, limit: number): Promise<RowKey[]> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.query, this.#srv('query'), () =>
      this.table.readLate(shard, untilMs, limit),
    );
  }

  async #batch<K>(keys: readonly K[], perItemUs: number, op: (chunk: readonly K[]) => K[]): Promise<K[]> {
    const failed: K[] = [];
    for (let i = 0; i < keys.length; i += 25) {
      const chunk = keys.slice(i, i + 25);
      failed.push(
        ...(await this.net.call(
          this.cpu,
          this.costs.callUs + perItemUs * chunk.length,
          this.net.calls.batchWrite,
          this.#srv('batch', chunk.length),
          () => op(chunk),
        )),
      );
    }
    return failed;
  }

  deleteLatePointers(keys: readonly RowKey[]): Promise<RowKey[]> {
    return this.#batch(keys, 0, (c) => this.table.deleteLatePointers(c));
  }

  putHeldPointers(pointers: readonly HeldPointer[]): Promise<HeldPointer[]> {
    return this.#batch(pointers, 0, (c) => this.table.putHeldPointers(c));
  }

  readHeld(shard: number, range: { readonly tenant?: string; readonly after?: string }, limit: number): Promise<HeldPage> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.query, this.#srv('query'), () =>
      this.table.readHeld(shard, range, limit),
    );
  }

  deleteHeldPointers(pointers: readonly HeldPointer[]): Promise<HeldPointer[]> {
    return this.#batch(pointers, 0, (c) => this.table.deleteHeldPointers(c));
  }

  unacquire(key: RowKey, heldLeaseUntil: number): Promise<boolean> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.write, this.#srv('write'), () =>
      this.table.updateWhileHeld(
        key,
        heldLeaseUntil,
        (it) => {
          it.state = 'SCHEDULED';
          it.leaseUntil = 0;
        },
        'unacquire',
      ),
    );
  }

  acquire(key: RowKey, nowMs: number, leaseUntil: number): Promise<AcquiredRow | undefined> {
    return this.net.call(this.cpu, this.costs.acquireUs, this.net.calls.write, this.#srv('write'), () =>
      this.table.acquire(key, nowMs, leaseUntil),
    );
  }

  renew(key: RowKey, heldLeaseUntil: number, newLeaseUntil: number): Promise<boolean> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.write, this.#srv('write'), () =>
      this.table.updateWhileHeld(key, heldLeaseUntil, (it) => (it.leaseUntil = newLeaseUntil), 'renew'),
    );
  }

  markDelivered(
    rows: readonly (RowKey & { readonly tenant: string; readonly expiresAtMs: number; readonly schedule?: string })[],
    deliveredAtMs: number,
  ): Promise<RowKey[]> {
    return this.#batch(rows, this.costs.markerPerRowUs, (c) => this.table.markDelivered(c, deliveredAtMs));
  }

  cancel(key: RowKey, tenant: string, expiresAtMs: number): Promise<'cancelled' | 'acquired'> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.write, this.#srv('write'), () =>
      this.table.cancel(key, tenant, expiresAtMs),
    );
  }

  /** The simulation cancels nothing: no keyed row waiting for its slot is ever cancelled. */
  cancelWaiting(): Promise<boolean> {
    return Promise.resolve(false);
  }

  getRow(key: RowKey): Promise<StoredRow | undefined> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.write, this.#srv('write'), () => this.table.getRow(key));
  }

  putDead(): Promise<boolean> {
    return Promise.reject(new Error('putDead is not simulated'));
  }

  putCancelRecord(_key: RowKey, _record: CancelRecord): Promise<boolean> {
    return Promise.reject(new Error('cancel records are not simulated'));
  }

  getCancelRecord(): Promise<CancelRecord | undefined> {
    return Promise.resolve(undefined);
  }

  takeGroupLease(group: number, owner: string, ownerStartMs: number, nowMs: number, untilMs: number, marks?: ShardMarks) {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.write, this.#srv('write'), () =>
      this.table.takeGroupLease(group, owner, ownerStartMs, nowMs, untilMs, marks),
    );
  }

  groupMarks(group: number): Promise<ShardMarks> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.query, this.#srv('query'), () => this.table.groupMarks(group));
  }
}

/** A client's view of the table's key items (core/model/ports.ts `KeySlots`): each call one request. */
export class SimKeySlots implements KeySlots {
  constructor(
    private readonly table: SimTable,
    private readonly net: SimNetwork,
    private readonly cpu: Cpu,
    private readonly costs: CpuModel,
  ) {}

  #write<T>(op: () => T): Promise<T> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.write, this.net.calls.server?.writeUs ?? 0, op);
  }

  setLimit(tenant: string, key: string, limit: number, atMs: number): Promise<void> {
    return this.#write(() => this.table.keySetLimit(tenant, key, limit, atMs));
  }

  take(tenant: string, key: string, jobId: string, untilMs: number, limit: number): Promise<true | KeyFull> {
    return this.#write(() => this.table.keyTake(tenant, key, jobId, untilMs, limit));
  }

  evict(tenant: string, key: string, holders: ReadonlyMap<string, number>): Promise<number> {
    return this.#write(() => this.table.keyEvict(tenant, key, holders));
  }

  release(tenant: string, key: string, jobId: string): Promise<void> {
    return this.#write(() => this.table.keyRelease(tenant, key, jobId));
  }

  extend(tenant: string, key: string, jobId: string, untilMs: number): Promise<boolean> {
    return this.#write(() => this.table.keyExtend(tenant, key, jobId, untilMs));
  }

  holds(tenant: string, key: string, jobId: string): Promise<boolean> {
    return this.net.call(this.cpu, this.costs.callUs, this.net.calls.query, this.net.calls.server?.queryUs ?? 0, () =>
      this.table.keyHolds(tenant, key, jobId),
    );
  }
}

/**
 * The tenant queues: SendMessageBatch with SQS's limits (10 entries, 256 KiB: a bigger call is a
 * bug in the caller and fails). Standard queues do not throttle at these rates (docs/capacity.md).
 * Records, per job id, how often and when it was sent and acknowledged.
 */
export class SimSender implements QueueSender {
  constructor(
    private readonly net: SimNetwork,
    private readonly cpu: Cpu,
    private readonly costs: CpuModel,
    private readonly record: (jobId: string, sentAt: number, ackAt: number) => void,
  ) {}

  async sendBatch(_queueUrl: string, messages: readonly OutgoingMessage[]): Promise<SendFailure[]> {
    if (messages.length === 0 || messages.length > 10) throw new Error(`SendMessageBatch takes 1 to 10 entries, got ${messages.length}`);
    const bytes = messages.reduce((n, m) => n + Buffer.byteLength(m.body), 0);
    if (bytes > 256 * 1024) throw new Error(`SendMessageBatch is at most 256 KiB, got ${bytes}`);
    const vt = this.net.vt;
    const leave = this.cpu.charge(vt.now(), this.costs.callUs + this.costs.sendPerMessageUs * messages.length);
    const l = this.net.latency(this.net.calls.send);
    await vt.sleep(leave - vt.now());
    const sentAt = vt.now();
    await vt.sleep(l);
    const ackAt = vt.now();
    for (const m of messages) this.record(jobIdOf(m.body), sentAt, ackAt);
    return [];
  }
}

function jobIdOf(body: string): string {
  // deliveryMessage's body starts with {"jobId":"...
  const start = body.indexOf('"jobId":"') + 9;
  return body.slice(start, body.indexOf('"', start));
}
