import { timingSafeEqual } from 'node:crypto';
import {
  type Clock,
  isoMs,
  type JobIdCodec,
  parseRunAt,
  parseSortKey,
  MAX_TAG_LENGTH,
  type SchedulerSettings,
  type TenantRecord,
  ValidationError,
  jobTraceId,
  type TraceContext,
} from '../model/index.js';
import { DEAD_LETTERED_MESSAGE, type JobPageReply, type ListedJob } from './replies.js';
import { concurrencyKeyOf } from './keyedOutcomes.js';
import { cutText, limiter } from '../util/index.js';
import { SCHEDULE_NAME_PATTERN } from '../recurring/index.js';
import type { TenantRegistry } from '../tenants/index.js';

/**
 * `GET /v1/tenants/{tenant}/jobs`: a tenant's jobs, read from the shards themselves (no index,
 * see docs/listing.md). A page is a k-way merge of per-shard Queries over the sort-key range of
 * [from, to], each shard read lazily, a few items at a time, only while the merge needs it.
 */

/** One item a listing read returns: the key, the small attributes, never the payload. */
export interface ListedItem {
  /** `<dueMs 13>#<jobId>`. */
  readonly sk: string;
  readonly tenant: string;
  /** The item's `state` attribute as stored (`SCHEDULED`, `ACQUIRED`, `QUEUED`, ... or a history state). */
  readonly state: string;
  /** The occurrence's schedule name (`sched`). */
  readonly schedule?: string;
  /** `deliveredAt`, epoch ms. */
  readonly deliveredAtMs?: number;
  /** A live row's `prio`, when not the default 5. */
  readonly priority?: number;
  /** The row's tags, when it has some. */
  readonly tags?: readonly string[];
  /** A keyed row's concurrency key and limit. */
  readonly concurrency?: { readonly key: string; readonly limit: number };
  /** A debounced job's row or marker: its debounce key (`dkey`). */
  readonly debounceKey?: string;
  /** The trace its submit carried (`tc`, `ts`), when it carried one. */
  readonly trace?: TraceContext;
  /** The item's TTL, epoch ms: readers ignore the item from then (DynamoDB deletes it late). */
  readonly expiresAtMs?: number;
}

/** A sort-key range of one partition, read in `desc` order or not, strictly after `afterSk` when given. */
export interface ListRange {
  /** Least sort key of the range (inclusive). */
  readonly fromSk: string;
  /** Greatest sort key of the range (inclusive). */
  readonly toSk: string;
  /** Continue after this sort key (in the read's order): a key previously read in the range. */
  readonly afterSk?: string;
  readonly desc: boolean;
}

/** What the store filters on (a FilterExpression: filtered items still count as read). */
export interface ListFilter {
  readonly tenant: string;
  /** Stored `state` values to keep; all when omitted. */
  readonly states?: readonly string[];
  readonly schedule?: string;
  /** Only items whose `tags` hold this one. */
  readonly tag?: string;
  /** Only items with this concurrency key (`ck`). */
  readonly concurrencyKey?: string;
  /** Only debounced items of this key (`dkey`). */
  readonly debounceKey?: string;
}

export interface ListedPage {
  /** The items of the range read that pass the filter, in the read's order. */
  readonly items: ListedItem[];
  /** Sort key of the last item read (whether it passed the filter or not). */
  readonly last?: string;
  /** The read stopped at its limit: items may remain in the range. */
  readonly more: boolean;
  /** Items read (evaluated), for the cost figures. */
  readonly read: number;
}

/** The reads a listing needs, implemented by DynamoJobStore (not part of JobStore). */
export interface ListingStore {
  /**
   * One Query of `partition` (a shard `"<n>"`, or a history partition `"h#<n>"`) over `range`,
   * evaluating at most `limit` items, keeping those that pass `filter`, without payloads.
   */
  listRange(partition: string, range: ListRange, limit: number, filter: ListFilter): Promise<ListedPage>;
}

/**
 * Where a listable state lives: the partitions to merge and the stored `state` values that mean
 * it. The table's own states are {@link LIVE_STATES}; history (`h#<shard>` partitions) adds its
 * own through {@link ListerDeps.states}.
 */
export interface ListableState {
  /** Partition key of `shard` holding this state's items. */
  partition(shard: number): string;
  /** Stored `state` values listed under this state. */
  readonly stored: readonly string[];
  /** The status object of an item (defaults to {@link renderLive}). */
  render?(base: { readonly jobId: string; readonly tenant: string; readonly runAt: string }, item: ListedItem): ListedJob;
  /** Whether `tenant` may list this state (history states: tenants with history on); why not otherwise. */
  unavailable?(tenant: TenantRecord): string | undefined;
  /**
   * A partition of `shard` whose items (any state) supersede this state's item at the same key:
   * such a job is listed under its newer state only (`DELIVERED` gives way to a reported outcome).
   */
  supersededIn?(shard: number): string;
  /**
   * A table state this one stands in for in a listing without `state`, for the tenants that may
   * list it (`DELIVERED` for `QUEUED`, with a superseding item shown in its place), so that each
   * job lists as `GET` of it answers.
   */
  replaces?: string;
}

const shardPartition = (shard: number) => String(shard);

/** The states the shards hold: a listing without `state` lists all of them. */
export const LIVE_STATES: Readonly<Record<string, ListableState>> = {
  // ACQUIRED is SCHEDULED being sent right now: listed under SCHEDULED, shown as ACQUIRED (as GET shows it).
  SCHEDULED: { partition: shardPartition, stored: ['SCHEDULED', 'ACQUIRED'] },
  QUEUED: { partition: shardPartition, stored: ['QUEUED'] },
  CANCELLED: { partition: shardPartition, stored: ['CANCELLED'] },
  DEAD_LETTERED: { partition: shardPartition, stored: ['DEAD'] },
};

export interface ListerDeps {
  readonly store: ListingStore;
  readonly codec: JobIdCodec;
  readonly tenants: TenantRegistry;
  readonly clock: Clock;
  readonly settings: Pick<SchedulerSettings, 'shardCount'>;
  /** Extra listable states (history), by name. */
  readonly states?: Readonly<Record<string, ListableState>>;
  /** Items one page may read at most before it answers what it has (with a cursor). @default max(10 × limit, 5,000) */
  readonly maxReadPerPage?: number;
}

export const LIST_DEFAULT_LIMIT = 100;
export const LIST_MAX_LIMIT = 1000;
/** Queries one page keeps in flight. */
const READ_CONCURRENCY = 16;
/** Largest Limit of one Query. */
const MAX_CHUNK = 1000;
const PARAMS = new Set(['state', 'from', 'to', 'schedule', 'tag', 'concurrencyKey', 'debounceKey', 'order', 'limit', 'cursor']);

/** The parsed query of a listing. */
export interface JobFilter {
  readonly state?: string;
  readonly fromMs: number;
  readonly toMs: number;
  readonly schedule?: string;
  /** Only jobs whose tags hold this one. */
  readonly tag?: string;
  /** Only jobs submitted with this concurrency key. */
  readonly concurrencyKey?: string;
  /** Only jobs submitted with this debounce key (docs/flow-control.md#debounce). */
  readonly debounceKey?: string;
  readonly desc: boolean;
}

/**
 * A listing's `limit` parameter: a whole number from 1 to {@link LIST_MAX_LIMIT}, {@link LIST_DEFAULT_LIMIT} when absent.
 * @throws ValidationError naming it
 */
export function listLimit(text: string | undefined): number {
  if (text === undefined) return LIST_DEFAULT_LIMIT;
  const n = /^[1-9]\d{0,3}$/.test(text) ? Number(text) : NaN;
  if (!(n <= LIST_MAX_LIMIT)) throw new ValidationError(`limit ${JSON.stringify(text)} must be a whole number from 1 to ${LIST_MAX_LIMIT}`);
  return n;
}

/** How much a page read: the figures docs/listing.md reports. */
export interface PageStats {
  items: number;
  queries: number;
}

/** Lists a tenant's jobs page by page (see docs/listing.md). */
export class JobLister {
  /** What the last page read (for tests and the benchmark). */
  readonly lastPage: PageStats = { items: 0, queries: 0 };

  constructor(private readonly deps: ListerDeps) {}

  /** The states `state=` accepts. */
  get states(): string[] {
    return Object.keys(this.#states());
  }

  /**
   * One page of `tenant`'s jobs matching `query` (`state`, `from`, `to`, `schedule`, `order`,
   * `limit`, `cursor`, as strings). Each job once, in runAt order (then job id) across pages.
   * @throws ValidationError naming the bad parameter, TenantNotFoundError
   */
  async list(tenant: string, query: Readonly<Record<string, string | undefined>> = {}): Promise<JobPageReply> {
    const record = await this.deps.tenants.require(tenant);
    const { filter, limit } = this.#parse(query);
    const why = filter.state === undefined ? undefined : this.#states()[filter.state]?.unavailable?.(record);
    if (why !== undefined) throw new ValidationError(`state ${filter.state}: ${why}`);
    const canonical = canonicalFilter(filter);
    const afterSk = query.cursor === undefined ? undefined : this.#readCursor(tenant, canonical, query.cursor);
    const states = this.#states();
    let selected = filter.state === undefined ? Object.values(LIVE_STATES) : [states[filter.state]!];
    if (filter.state === undefined)
      for (const [name, stand] of Object.entries(states))
        if (stand.replaces !== undefined && stand.unavailable?.(record) === undefined)
          selected = selected.map((s) => (s === LIVE_STATES[stand.replaces!] ? states[name]! : s));
    const stored = [...new Set(selected.flatMap((s) => s.stored))];
    const renderOf = new Map<string, ListableState>();
    for (const s of selected) for (const v of s.stored) renderOf.set(v, s);
    const shards = Array.from({ length: this.deps.settings.shardCount }, (_, i) => i);
    const partitions = [...new Set(selected.flatMap((s) => shards.map((i) => s.partition(i))))];
    const superseding = [...new Set(selected.flatMap((s) => (s.supersededIn ? shards.map((i) => s.supersededIn!(i)) : [])))];
    const now = this.deps.clock.now();
    const { items, frontier } = await this.#merge(
      partitions,
      superseding,
      { fromSk: skFloor(filter.fromMs), toSk: skCeiling(filter.toMs), desc: filter.desc, ...(afterSk ? { afterSk } : {}) },
      {
        tenant,
        ...(filter.state !== undefined ? { states: stored } : {}),
        ...(filter.schedule ? { schedule: filter.schedule } : {}),
        ...(filter.tag !== undefined ? { tag: filter.tag } : {}),
        ...(filter.concurrencyKey !== undefined ? { concurrencyKey: filter.concurrencyKey } : {}),
        ...(filter.debounceKey !== undefined ? { debounceKey: filter.debounceKey } : {}),
      },
      limit,
      now,
      // With a state, a superseded item is not of it; without one, its newer state is shown.
      filter.state === undefined ? 'replace' : 'drop',
    );
    const jobs: ListedJob[] = [];
    for (const item of items) {
      const key = parseSortKey(item.sk);
      // Past its TTL, an item is gone for status too (DynamoDB deletes it some time later).
      if (!key || (item.expiresAtMs !== undefined && item.expiresAtMs <= now)) continue;
      const base = { jobId: key.jobId, tenant, runAt: isoMs(key.dueMs) };
      // A superseding item is an outcome record: its state names its listable state.
      const state = item.superseding ? states[item.state] : renderOf.get(item.state);
      jobs.push(state?.render ? state.render(base, item) : renderLive(base, item));
    }
    return { jobs, ...(frontier !== undefined ? { nextCursor: this.#cursor(tenant, canonical, frontier) } : {}) };
  }

  /**
   * The k-way merge: reads every partition a little (about limit / partitions items each), then
   * emits the least head while no partition with items left could hold a lesser one, refilling
   * just the partitions that block it. Returns the items in order and, unless every partition is
   * exhausted, the sort key up to which all of them have been read and emitted (the cursor).
   * The `superseding` partitions are read alongside (the tenant's items, unexpired, any state):
   * a head whose key one of them holds is dropped (`drop`) or replaced by that item (`replace`),
   * and no head is emitted before each of them has been read up to it.
   */
  async #merge(
    partitions: readonly string[],
    superseding: readonly string[],
    range: ListRange,
    filter: ListFilter,
    limit: number,
    now: number,
    superseded: 'drop' | 'replace',
  ): Promise<{ items: (ListedItem & { superseding?: true })[]; frontier?: string }> {
    const before = (a: string, b: string) => (range.desc ? a > b : a < b);
    const cap = this.deps.maxReadPerPage ?? Math.max(10 * limit, 5_000);
    const run = limiter(READ_CONCURRENCY);
    const stats = this.lastPage;
    stats.items = 0;
    stats.queries = 0;
    let matched = 0;
    type Source = { partition: string; buf: ListedItem[]; pos: number; last?: string; more: boolean; supersedes: boolean };
    const source = (partition: string, supersedes: boolean): Source => ({
      partition,
      buf: [],
      pos: 0,
      last: range.afterSk,
      more: true,
      supersedes,
    });
    const sources: Source[] = [...partitions.map((p) => source(p, false)), ...superseding.map((p) => source(p, true))];
    const fill = (batch: Source[], chunk: number) =>
      Promise.all(
        batch.map((s) =>
          run(async () => {
            const page = await this.deps.store.listRange(
              s.partition,
              { ...range, ...(s.last ? { afterSk: s.last } : {}) },
              chunk,
              s.supersedes ? { tenant: filter.tenant } : filter,
            );
            stats.items += page.read;
            stats.queries++;
            if (!s.supersedes) matched += page.items.length;
            // Past its TTL an item supersedes nothing (GET ignores it too).
            const read = s.supersedes ? page.items.filter((i) => i.expiresAtMs === undefined || i.expiresAtMs > now) : page.items;
            // What is still buffered stays (a superseding partition is refilled before its items are passed).
            s.buf = [...s.buf.slice(s.pos), ...read];
            s.pos = 0;
            s.more = page.more;
            if (page.last) s.last = page.last;
          }),
        ),
      );
    await fill(sources, Math.min(MAX_CHUNK, Math.ceil(limit / sources.length) + 1, Math.max(1, Math.ceil(cap / sources.length))));
    const out: (ListedItem & { superseding?: true })[] = [];
    // Set once the page has read its cap: nothing beyond it is emitted, and the next page starts there.
    let bound: string | undefined;
    while (out.length < limit) {
      let best: Source | undefined;
      for (const s of sources)
        if (!s.supersedes && s.pos < s.buf.length && (!best || before(s.buf[s.pos]!.sk, best.buf[best.pos]!.sk))) best = s;
      const head = best?.buf[best.pos]!.sk;
      // Nothing buffered from the head on (a superseding partition's items before it are no longer needed).
      const drained = (s: Source) => s.pos >= s.buf.length || (s.supersedes && head !== undefined && before(s.buf.at(-1)!.sk, head));
      if (bound === undefined) {
        // A drained partition with items left blocks every head beyond what it has read
        // (a superseding one only while there is a head to check).
        const blocking = sources.filter((s) => s.more && drained(s) && (head === undefined ? !s.supersedes : before(s.last!, head)));
        if (blocking.length > 0 && stats.items < cap) {
          // Matches per item read so far: a sparse tenant's partitions are read in larger chunks.
          const density = Math.max((matched + 1) / (stats.items + 1), 1 / MAX_CHUNK);
          const live = sources.filter((s) => s.more).length;
          const budget = Math.max(1, Math.ceil((cap - stats.items) / blocking.length));
          await fill(blocking, Math.min(MAX_CHUNK, budget, Math.ceil((limit - out.length) / live / density) + 1));
          continue;
        }
        for (const s of blocking) if (bound === undefined || before(s.last!, bound)) bound = s.last;
      }
      if (head === undefined || (bound !== undefined && before(bound, head))) break;
      for (const s of sources) if (s.supersedes) while (s.pos < s.buf.length && before(s.buf[s.pos]!.sk, head)) s.pos++;
      const item = best!.buf[best!.pos++]!;
      const over = sources.find((s) => s.supersedes && s.buf[s.pos]?.sk === item.sk);
      const newer = over?.buf[over.pos];
      if (!newer) out.push(item);
      else if (superseded === 'replace')
        out.push({
          ...newer,
          // What GET shows beside the outcome: the marker's delivery time, the occurrence's schedule.
          ...(item.schedule !== undefined ? { schedule: item.schedule } : {}),
          ...(item.deliveredAtMs !== undefined ? { deliveredAtMs: item.deliveredAtMs } : {}),
          superseding: true,
        });
    }
    const exhausted = sources.every((s) => s.supersedes || (!s.more && s.pos >= s.buf.length));
    // Every item up to the frontier has been emitted or read and filtered out.
    const frontier = out.length === limit ? out.at(-1)!.sk : bound;
    return { items: out, ...(exhausted || frontier === undefined ? {} : { frontier }) };
  }

  #states(): Record<string, ListableState> {
    return { ...LIVE_STATES, ...this.deps.states };
  }

  #parse(query: Readonly<Record<string, string | undefined>>): { filter: JobFilter; limit: number } {
    for (const k of Object.keys(query))
      if (!PARAMS.has(k) && query[k] !== undefined)
        throw new ValidationError(`${k} is not a parameter of this route: use ${[...PARAMS].join(', ')}`);
    const states = this.states;
    const state = query.state;
    if (state !== undefined && !states.includes(state))
      throw new ValidationError(`state ${JSON.stringify(state)} is not a listable state: use one of ${states.join(', ')}`);
    const fromMs = query.from === undefined ? 0 : timeParam('from', query.from);
    // `to` is inclusive at millisecond precision: digits beyond the millisecond are dropped.
    const toMs = query.to === undefined ? MAX_MS : timeParam('to', query.to.replace(/(\.\d{3})\d+/, '$1'));
    if (toMs < fromMs) throw new ValidationError(`to (${query.to}) is before from (${query.from}): give from ≤ to`);
    const schedule = query.schedule;
    if (schedule !== undefined && (!SCHEDULE_NAME_PATTERN.test(schedule) || schedule === '.' || schedule === '..'))
      throw new ValidationError(
        `schedule ${JSON.stringify(cutText(schedule, 70))} is not a schedule name: use 1 to 64 letters, digits, '_', '.' or '-'`,
      );
    const tag = query.tag;
    if (tag !== undefined && (tag.length === 0 || tag.length > MAX_TAG_LENGTH))
      throw new ValidationError(`tag must be 1 to ${MAX_TAG_LENGTH} characters, got ${JSON.stringify(cutText(tag, 70))}`);
    const concurrencyKey = concurrencyKeyOf(query.concurrencyKey);
    const debounceKey = concurrencyKeyOf(query.debounceKey, 'debounceKey');
    const order = query.order ?? 'asc';
    if (order !== 'asc' && order !== 'desc') throw new ValidationError(`order ${JSON.stringify(order)} must be asc or desc`);
    const limit = listLimit(query.limit);
    return {
      filter: {
        fromMs,
        toMs,
        desc: order === 'desc',
        ...(state !== undefined ? { state } : {}),
        ...(schedule !== undefined ? { schedule } : {}),
        ...(tag !== undefined ? { tag } : {}),
        ...(concurrencyKey !== undefined ? { concurrencyKey } : {}),
        ...(debounceKey !== undefined ? { debounceKey } : {}),
      },
      limit,
    };
  }

  #cursor(tenant: string, canonical: string, sk: string): string {
    return `${Buffer.from(sk, 'utf8').toString('base64url')}.${this.deps.codec.tag(`jobs\n${tenant}\n${canonical}`, sk)}`;
  }

  /** The sort key a cursor carries, if this deployment issued it for this tenant and these filters. */
  #readCursor(tenant: string, canonical: string, cursor: string): string {
    const bad = new ValidationError(
      'cursor is not one this API issued for this tenant and these filters: pass nextCursor from the previous page unchanged, with the same state, from, to, schedule, tag, concurrencyKey, debounceKey and order',
    );
    const m = /^([A-Za-z0-9_-]{1,400})\.([A-Za-z0-9_-]{22})$/.exec(cursor);
    if (!m) throw bad;
    const sk = Buffer.from(m[1]!, 'base64url').toString('utf8');
    const expected = Buffer.from(this.deps.codec.tag(`jobs\n${tenant}\n${canonical}`, sk));
    const given = Buffer.from(m[2]!);
    if (expected.length !== given.length || !timingSafeEqual(expected, given) || !parseSortKey(sk)) throw bad;
    return sk;
  }
}

/** The status object of a row, marker, tombstone or DEAD record, as GET of one job answers it. */
export function renderLive(base: { readonly jobId: string; readonly tenant: string; readonly runAt: string }, item: ListedItem): ListedJob {
  return { ...renderItem(base, item), traceId: jobTraceId({ jobId: base.jobId, trace: item.trace }) };
}

function renderItem(base: { readonly jobId: string; readonly tenant: string; readonly runAt: string }, item: ListedItem): ListedJob {
  const sched = item.schedule !== undefined ? { schedule: item.schedule } : {};
  switch (item.state) {
    case 'QUEUED':
      return {
        ...base,
        state: 'QUEUED',
        ...(item.deliveredAtMs ? { deliveredAt: isoMs(item.deliveredAtMs) } : {}),
        ...sched,
        ...tags(item),
        ...keyOf(item),
      };
    case 'DEAD':
      return { ...base, state: 'DEAD_LETTERED', message: DEAD_LETTERED_MESSAGE, ...sched };
    case 'ACQUIRED':
      return { ...base, state: item.state, ...prio(item), ...sched, ...tags(item), ...keyOf(item) };
    case 'CANCELLED':
      return { ...base, state: item.state, ...sched, ...tags(item), ...keyOf(item) };
    default:
      return { ...base, state: 'SCHEDULED', ...prio(item), ...sched, ...tags(item), ...keyOf(item) };
  }
}

/** A row's tags, as GET shows them: only when it has some. */
function tags(item: ListedItem): { tags?: string[] } {
  return item.tags !== undefined && item.tags.length > 0 ? { tags: [...item.tags] } : {};
}

/** A keyed row's key and limit, and a debounced job's key, as GET shows them. */
function keyOf(item: ListedItem): { concurrencyKey?: string; concurrencyLimit?: number; debounceKey?: string } {
  return {
    ...(item.concurrency ? { concurrencyKey: item.concurrency.key, concurrencyLimit: item.concurrency.limit } : {}),
    ...(item.debounceKey !== undefined ? { debounceKey: item.debounceKey } : {}),
  };
}

/** A live row's priority, as GET shows it: only when not the default 5. */
function prio(item: ListedItem): { priority?: number } {
  return item.priority !== undefined ? { priority: item.priority } : {};
}

/** Latest epoch ms a sort key can hold (13 digits). */
const MAX_MS = 9_999_999_999_999;
const pad = (ms: number) => String(ms).padStart(13, '0');
/** Least sort key of a row due at `ms`. */
const skFloor = (ms: number) => `${pad(ms)}#`;
/** Greatest sort key of a row due at `ms` ('~' sorts after every job id character). */
const skCeiling = (ms: number) => `${pad(ms)}#~`;

/** What a cursor is bound to: the filters, never the page size. */
function canonicalFilter(f: JobFilter): string {
  // The tag only when given: cursors issued before tags existed stay valid.
  return [
    f.state ?? '',
    f.fromMs,
    f.toMs,
    f.schedule ?? '',
    f.desc ? 'desc' : 'asc',
    ...(f.tag !== undefined ? [`tag:${f.tag}`] : []),
    ...(f.concurrencyKey !== undefined ? [`key:${f.concurrencyKey}`] : []),
    ...(f.debounceKey !== undefined ? [`debounce:${f.debounceKey}`] : []),
  ].join('\n');
}

function timeParam(name: 'from' | 'to', value: string): number {
  try {
    return Math.min(parseRunAt(value), MAX_MS);
  } catch {
    throw new ValidationError(
      `${name} ${JSON.stringify(cutText(value, 70))} is not an RFC 3339 time: use a form like "2030-01-31T14:03:07.250Z" or "2030-01-31T15:03:07+01:00"`,
    );
  }
}
