/**
 * Phase 9, second half: the alternative docs/listing.md rejected, measured. A global secondary
 * index `byTenant` (partition key `gpk` = `<tenant>#<shard mod INDEX_BUCKETS>`, sort key `sk`,
 * projecting what a listing reads) is added to the scheduler table; the real pipeline (submit,
 * ingest, cancel, dispatch, delivered markers) runs over it, and a listing is served from it by
 * the real `JobLister` merging the tenant's buckets.
 *
 * dynalite maintains the index (so Queries on it return what DynamoDB would) but reports no
 * write capacity for it (node_modules/dynalite/db/index.js `addConsumedCapacity` counts the table
 * item only). An SDK middleware on the system's DynamoDB client therefore (a) adds `gpk` to the
 * items the scheduler writes at a job's key (the attribute a deployment with the index would
 * write), and (b) accounts the write units of every job-path write itself, from the item before
 * and after it (read on a separate client), by DynamoDB's documented rules (AWS DynamoDB
 * Developer Guide, "Global secondary indexes" > "Provisioned throughput considerations for
 * Global Secondary Indexes" > "Write activity", and "Storage considerations" for the size of an
 * index entry: table key + index key + projected attributes + 100 bytes):
 * - table: ceil(max(old, new item size) / 1 KB) per write (at least 1; 1 for a failed conditional write);
 * - index: 0 when the projected entry is unchanged or absent before and after; one write of
 *   ceil(entry / 1 KB) when it is added, removed, or its projected attributes change under the
 *   same index key; two (delete the old entry, put the new) when the index key changes.
 */
import {
  type AttributeValue,
  BatchGetItemCommand,
  type CreateTableCommandInput,
  type DynamoDBClient,
  QueryCommand,
  type QueryCommandOutput,
} from '@aws-sdk/client-dynamodb';
import { createTableInput } from '../adapters/tableSchema.js';
import { JobLister, type ListedItem, type ListedPage, type ListFilter, type ListingStore, type ListRange } from '../core/jobs/listing.js';
import { TenantRegistry } from '../core/tenants/registry.js';
import type { Emulators } from '../test/support/emulators.js';
import { createSystem, runAllGroups, submitJobs, type TestSystem } from '../test/support/system.js';
import { itemBytes, wruOf } from './cost.js';
import { PRICES } from './prices.js';
import { progress, realisticPayload, sleep, writeListingRows } from './support.js';

export const INDEX_NAME = 'byTenant';
/**
 * Index partitions per tenant: `gpk` = `<tenant>#<shard mod 16>`. One index partition takes
 * 1,000 write units a second; a tenant submitting 10,000 jobs/s writes 10,000 × (index WRU per
 * job) a second to its index entries, which one `gpk` per tenant would throttle (a GSI that
 * cannot keep up throttles the table's writes). 16 buckets carry 16,000 index WRU/s per tenant,
 * 10,000 jobs/s at up to 1.6 index WRU per job; the shard (uniformly random per job) spreads a
 * tenant's jobs over them evenly. The price: a listing merges at least 16 Queries per page. The
 * phase measures about 3 index WRU per job with this projection (every state change rewrites
 * the entry), so 10,000 jobs/s would need 32 buckets: the read side is measured with 32 too.
 */
export const INDEX_BUCKETS = 16;
/** Buckets for 10,000 jobs/s of one tenant at about 3 index WRU per job (see {@link INDEX_BUCKETS}). */
export const INDEX_BUCKETS_HIGH = 32;
/** What the listing reads (core/jobs/listing.ts `ListedItem`, the blocker filter on `priorState`). */
export const INDEX_PROJECTION = ['tenant', 'state', 'sched', 'deliveredAt', 'expiresAt', 'priorState'] as const;
/** DynamoDB's per-entry overhead of a secondary index entry (Developer Guide, GSI storage considerations). */
const INDEX_ENTRY_OVERHEAD = 100;

type Item = Record<string, AttributeValue>;

/** The scheduler table (`createTableInput`) with the `byTenant` index. */
export function indexedTableInput(tableName: string): CreateTableCommandInput {
  const base = createTableInput(tableName);
  return {
    ...base,
    AttributeDefinitions: [...(base.AttributeDefinitions ?? []), { AttributeName: 'gpk', AttributeType: 'S' }],
    GlobalSecondaryIndexes: [
      {
        IndexName: INDEX_NAME,
        KeySchema: [
          { AttributeName: 'gpk', KeyType: 'HASH' },
          { AttributeName: 'sk', KeyType: 'RANGE' },
        ],
        Projection: { ProjectionType: 'INCLUDE', NonKeyAttributes: [...INDEX_PROJECTION] },
      },
    ],
  };
}

/** The index partition key of a job item of `tenant` in `shard`. */
export const gpkOf = (tenant: string, shard: number, buckets = INDEX_BUCKETS) => `${tenant}#${shard % buckets}`;

const isShard = (pk: string | undefined) => pk !== undefined && /^\d+$/.test(pk);
const isJobPath = (pk: string | undefined) => pk !== undefined && /^(l#)?\d+$/.test(pk);
const bytesOf = (item: Item) => itemBytes(item as Parameters<typeof itemBytes>[0]);

/** The index entry of an item (undefined: not in the index), with `projection` (KEYS_ONLY: none). */
function entryOf(item: Item | undefined, projection: readonly string[]): Item | undefined {
  if (!item?.gpk?.S) return undefined;
  const e: Item = { pk: item.pk!, sk: item.sk!, gpk: item.gpk };
  for (const a of projection) if (item[a] !== undefined) e[a] = item[a];
  return e;
}

const same = (a: Item, b: Item) => JSON.stringify(Object.entries(a).sort()) === JSON.stringify(Object.entries(b).sort());

/** Index write units of one table write turning `before` into `after` (DynamoDB's rules, above). */
export function indexWru(before: Item | undefined, after: Item | undefined, projection: readonly string[] = INDEX_PROJECTION): number {
  const [o, n] = [entryOf(before, projection), entryOf(after, projection)];
  const size = (e: Item) => wruOf(bytesOf(e) + INDEX_ENTRY_OVERHEAD);
  if (!o && !n) return 0;
  if (!o) return size(n!);
  if (!n) return size(o);
  if (o.gpk!.S !== n.gpk!.S) return size(o) + size(n);
  return same(o, n) ? 0 : Math.max(size(o), size(n));
}

/** Table write units of one write turning `before` into `after`. */
export function tableWru(before: Item | undefined, after: Item | undefined, withoutGpk = false): number {
  const strip = (i: Item | undefined) => {
    if (!i || !withoutGpk) return i;
    const { gpk: _gpk, ...rest } = i;
    return rest;
  };
  const [o, n] = [strip(before), strip(after)];
  return wruOf(Math.max(o ? bytesOf(o) : 0, n ? bytesOf(n) : 0));
}

export interface WriteTally {
  writes: number;
  /** Table WRU with the `gpk` attribute stored (the table with the index). */
  tableWru: number;
  /** Table WRU of the same items without `gpk` (the table as it is, no index). */
  tableWruNoIndex: number;
  indexWru: number;
  /** Index WRU of a KEYS_ONLY projection instead (for comparison: a listing would then read every listed item from the table). */
  indexWruKeysOnly: number;
}

/**
 * The SDK middleware: adds `gpk` to job items, and tallies the job-path writes (pk `<shard>` or
 * `l#<shard>`) by kind, table and index write units apart, from the items read before and after
 * on `reader` (a client outside the tally).
 */
export class IndexWriteMeter {
  readonly byKind: Record<string, WriteTally> = {};
  /** Write units dynalite itself reported for the same writes (table only), as a cross-check. */
  reportedTableWru = 0;
  /** Accounting on (off: `gpk` is still added, nothing is read or tallied). */
  accounting = true;

  constructor(
    private readonly reader: DynamoDBClient,
    private readonly buckets = INDEX_BUCKETS,
  ) {}

  attach(client: DynamoDBClient): DynamoDBClient {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const op = (context.commandName ?? '').replace(/Command$/, '');
        const input = args.input as Record<string, unknown>;
        const writes = this.#writes(op, input);
        if (writes.length === 0) return next(args);
        const before = this.accounting ? await this.#read(writes) : [];
        if (this.accounting) input.ReturnConsumedCapacity = 'TOTAL';
        try {
          const res = await next(args);
          if (!this.accounting) return res;
          const after = await this.#read(writes);
          const caps = (res.output as { ConsumedCapacity?: { CapacityUnits?: number } | { CapacityUnits?: number }[] }).ConsumedCapacity;
          for (const c of Array.isArray(caps) ? caps : [caps]) this.reportedTableWru += c?.CapacityUnits ?? 0;
          writes.forEach((w, i) => {
            const [o, n] = [before[i], after[i]];
            this.#add(`${op}:${w.pk.startsWith('l#') ? 'late-pointer' : (n?.state?.S ?? 'deleted')}`, {
              writes: 1,
              tableWru: tableWru(o, n),
              tableWruNoIndex: tableWru(o, n, true),
              indexWru: indexWru(o, n),
              indexWruKeysOnly: indexWru(o, n, []),
            });
          });
          return res;
        } catch (err) {
          // A failed conditional write is billed 1 WRU on the table, nothing on the index.
          if (this.accounting && (err as Error).name === 'ConditionalCheckFailedException')
            this.#add(`${op}:condition-failed`, { writes: 1, tableWru: 1, tableWruNoIndex: 1, indexWru: 0, indexWruKeysOnly: 0 });
          throw err;
        }
      },
      { step: 'initialize', name: 'benchIndexWriteMeter', override: true },
    );
    return client;
  }

  /** Totals over every kind. */
  total(): WriteTally {
    const t: WriteTally = { writes: 0, tableWru: 0, tableWruNoIndex: 0, indexWru: 0, indexWruKeysOnly: 0 };
    for (const k of Object.values(this.byKind)) for (const f of Object.keys(t) as (keyof WriteTally)[]) t[f] += k[f];
    return t;
  }

  /** Count of writes of one kind (`PutItem:SCHEDULED`, `BatchWriteItem:QUEUED`, ...). */
  count(kind: string): number {
    return this.byKind[kind]?.writes ?? 0;
  }

  #add(kind: string, t: WriteTally): void {
    const k = (this.byKind[kind] ??= { writes: 0, tableWru: 0, tableWruNoIndex: 0, indexWru: 0, indexWruKeysOnly: 0 });
    for (const f of Object.keys(t) as (keyof WriteTally)[]) k[f] += t[f];
  }

  /** The job-path writes of a request (adding `gpk` to the items on the way). */
  #writes(op: string, input: Record<string, unknown>): { table: string; pk: string; key: Item }[] {
    const out: { table: string; pk: string; key: Item }[] = [];
    const keyOf = (i: Item): Item => ({ pk: i.pk!, sk: i.sk! });
    const addGpk = (item: Item) => {
      if (isShard(item.pk?.S) && item.tenant?.S) item.gpk = { S: gpkOf(item.tenant.S, Number(item.pk!.S), this.buckets) };
    };
    const table = input.TableName as string;
    if (op === 'PutItem') {
      const item = input.Item as Item;
      if (!isJobPath(item.pk?.S)) return out;
      addGpk(item);
      out.push({ table, pk: item.pk!.S!, key: keyOf(item) });
    } else if (op === 'UpdateItem' || op === 'DeleteItem') {
      const key = input.Key as Item;
      if (!isJobPath(key.pk?.S)) return out;
      const values = input.ExpressionAttributeValues as Item | undefined;
      const expr = input.UpdateExpression as string | undefined;
      // An update that sets the tenant (cancel: it may create the tombstone) sets gpk with it.
      if (op === 'UpdateItem' && isShard(key.pk!.S) && values?.[':tenant']?.S && expr?.startsWith('SET ')) {
        values[':benchGpk'] = { S: gpkOf(values[':tenant'].S, Number(key.pk!.S), this.buckets) };
        input.UpdateExpression = `SET gpk = :benchGpk, ${expr.slice(4)}`;
      }
      out.push({ table, pk: key.pk!.S!, key: keyOf(key) });
    } else if (op === 'BatchWriteItem') {
      const req = input.RequestItems as Record<string, { PutRequest?: { Item?: Item }; DeleteRequest?: { Key?: Item } }[]>;
      for (const [t, reqs] of Object.entries(req))
        for (const r of reqs) {
          const item = r.PutRequest?.Item ?? r.DeleteRequest?.Key;
          if (!item || !isJobPath(item.pk?.S)) continue;
          if (r.PutRequest?.Item) addGpk(r.PutRequest.Item);
          out.push({ table: t, pk: item.pk!.S!, key: keyOf(item) });
        }
    }
    return out;
  }

  /** The items at `keys`, strongly consistent, in order (undefined where there is none). */
  async #read(keys: { table: string; key: Item }[]): Promise<(Item | undefined)[]> {
    const found = new Map<string, Item>();
    const id = (table: string, k: Item) => `${table}\n${k.pk!.S}\n${k.sk!.S}`;
    for (let i = 0; i < keys.length; i += 100) {
      let request: Record<string, { Keys: Item[]; ConsistentRead: boolean }> = {};
      for (const { table, key } of keys.slice(i, i + 100)) (request[table] ??= { Keys: [], ConsistentRead: true }).Keys.push(key);
      while (Object.keys(request).length > 0) {
        const res = await this.reader.send(new BatchGetItemCommand({ RequestItems: request }));
        for (const [t, items] of Object.entries(res.Responses ?? {})) for (const it of items) found.set(id(t, it), it);
        request = (res.UnprocessedKeys ?? {}) as typeof request;
      }
    }
    return keys.map(({ table, key }) => found.get(id(table, key)));
  }
}

/** The greatest string below `s` that any job sort key (ASCII) could be: the bound for "strictly before". */
function justBefore(s: string): string {
  return `${s.slice(0, -1)}${String.fromCharCode(s.charCodeAt(s.length - 1) - 1)}\uffff`;
}

/**
 * The `ListingStore` over the index: partition `"<b>"` of a tenant is `gpk` `<tenant>#<b>`. Reads
 * are eventually consistent (a GSI has no strongly consistent read). The cursor's `afterSk`
 * becomes the BETWEEN bound (strictly after it in the read's order).
 */
export class IndexListingStore implements ListingStore {
  readonly stats = { queries: 0, items: 0, reportedRru: 0, billedRru: 0 };

  constructor(
    private readonly client: DynamoDBClient,
    private readonly tableName: string,
  ) {}

  async listRange(partition: string, range: ListRange, limit: number, filter: ListFilter): Promise<ListedPage> {
    let lo = range.fromSk;
    let hi = range.toSk;
    if (range.afterSk !== undefined) {
      if (range.desc) hi = justBefore(range.afterSk);
      else lo = `${range.afterSk}\u0000`;
    }
    if (lo > hi) return { items: [], more: false, read: 0 };
    const names: Record<string, string> = { '#state': 'state' };
    const values: Item = {
      ':g': { S: `${filter.tenant}#${partition}` },
      ':lo': { S: lo },
      ':hi': { S: hi },
      ':tenant': { S: filter.tenant },
      ':none': { S: 'NONE' },
    };
    const conditions = ['tenant = :tenant', '(attribute_not_exists(priorState) OR priorState <> :none)'];
    if (filter.states) {
      filter.states.forEach((state, i) => (values[`:s${i}`] = { S: state }));
      conditions.push(`#state IN (${filter.states.map((_, i) => `:s${i}`).join(', ')})`);
    }
    if (filter.schedule !== undefined) {
      values[':sched'] = { S: filter.schedule };
      conditions.push('sched = :sched');
    }
    const page: QueryCommandOutput = await this.client.send(
      new QueryCommand({
        TableName: this.tableName,
        IndexName: INDEX_NAME,
        KeyConditionExpression: 'gpk = :g AND sk BETWEEN :lo AND :hi',
        FilterExpression: conditions.join(' AND '),
        ProjectionExpression: 'sk, tenant, #state, sched, deliveredAt, expiresAt',
        ExpressionAttributeNames: names,
        ExpressionAttributeValues: values,
        ScanIndexForward: !range.desc,
        Limit: limit,
        ReturnConsumedCapacity: 'TOTAL',
      }),
    );
    const read = page.ScannedCount ?? 0;
    const reported = page.ConsumedCapacity?.CapacityUnits ?? 0;
    this.stats.queries++;
    this.stats.items += read;
    this.stats.reportedRru += reported;
    // DynamoDB bills a Query at least 0.5 RRU eventually consistent (dynalite reports 0 for an empty one).
    this.stats.billedRru += Math.max(0.5, reported);
    const items: ListedItem[] = (page.Items ?? []).map((item) => ({
      sk: item.sk?.S ?? '',
      tenant: item.tenant?.S ?? '',
      state: item.state?.S ?? 'SCHEDULED',
      ...(item.sched?.S !== undefined ? { schedule: item.sched.S } : {}),
      ...(item.deliveredAt?.N ? { deliveredAtMs: Number(item.deliveredAt.N) } : {}),
      ...(item.expiresAt?.N ? { expiresAtMs: Number(item.expiresAt.N) * 1000 } : {}),
    }));
    const last = page.LastEvaluatedKey?.sk?.S;
    return { items, more: last !== undefined, read, ...(last !== undefined ? { last } : {}) };
  }
}

export interface IndexWriteCost {
  /** Jobs submitted (for one tenant, due `delaySeconds` ahead), cancelled before dispatch, delivered. */
  jobs: number;
  cancelled: number;
  delivered: number;
  /** Table write units per job with the index (the items carry `gpk`). */
  wruPerJobTable: number;
  /** The same writes' table units without `gpk` (the table as it is). */
  wruPerJobTableNoIndex: number;
  /** Index write units per job (accounted by DynamoDB's rules: dynalite does not report them). */
  wruPerJobIndex: number;
  /** Index write units per job had the index projected keys only (entries then never change after the put). */
  wruPerJobIndexKeysOnly: number;
  /** Table + index per job. */
  wruPerJobWithIndex: number;
  /** What dynalite itself reported for the table writes, per job (cross-check of the table figure). */
  dynaliteTableWruPerJob: number;
  /** Entries the tenant's index buckets hold at the end (one per job: markers and tombstones). */
  indexEntries: number;
  /** Per kind of write (`<operation>:<state after>`). */
  byKind: Record<string, WriteTally>;
}

/** Entries in the index for `tenant` (every bucket), counted with Select COUNT. */
async function countEntries(client: DynamoDBClient, tableName: string, tenant: string, buckets: number): Promise<number> {
  let n = 0;
  for (let b = 0; b < buckets; b++) {
    let start: Record<string, AttributeValue> | undefined;
    do {
      const res = await client.send(
        new QueryCommand({
          TableName: tableName,
          IndexName: INDEX_NAME,
          KeyConditionExpression: 'gpk = :g',
          ExpressionAttributeValues: { ':g': { S: `${tenant}#${b}` } },
          Select: 'COUNT',
          ...(start ? { ExclusiveStartKey: start } : {}),
        }),
      );
      n += res.Count ?? 0;
      start = res.LastEvaluatedKey;
    } while (start);
  }
  return n;
}

export interface IndexListingCase {
  pageSize: number;
  tenants: number;
  rows: number;
  /** Index partitions merged per page. */
  buckets: number;
  pages: number;
  jobsPerPage: number;
  itemsReadPerPage: number;
  queriesPerPage: number;
  /** Eventually consistent read units per page, each Query at least 0.5 (as DynamoDB bills). */
  rruPerPage: number;
  /** What dynalite reported (no 0.5 floor on empty Queries). */
  reportedRruPerPage: number;
  usdPerMillionListed: number;
}

export interface IndexListingResult {
  buckets: number;
  projection: readonly string[];
  write: IndexWriteCost;
  cases: IndexListingCase[];
}

async function indexedSystem(
  em: Emulators,
  tenants: string[],
  buckets = INDEX_BUCKETS,
): Promise<{ sys: TestSystem; meter: IndexWriteMeter }> {
  const meter = new IndexWriteMeter(em.newClients().dynamo, buckets);
  const dynamo = meter.attach(em.newClients().dynamo);
  const sys = await createSystem(em, { tenants, dynamo, tableInput: indexedTableInput });
  return { sys, meter };
}

const waitUntil = async (pred: () => boolean, timeoutMs: number, what: string) => {
  const until = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
};

/** The write side: the real pipeline for one tenant over the indexed table. */
export async function measureIndexWrites(em: Emulators, opts: { jobs: number; delaySeconds: number }): Promise<IndexWriteCost> {
  const { sys, meter } = await indexedSystem(em, ['t0']);
  const jobs = Array.from({ length: opts.jobs }, (_, i) => ({ payload: realisticPayload(i), delaySeconds: opts.delaySeconds }));
  const ingest = sys.startIngest();
  let dispatch: { stop(): Promise<void> } | undefined;
  try {
    const replies = await submitJobs(sys, 't0', jobs);
    await waitUntil(() => meter.count('PutItem:SCHEDULED') >= opts.jobs, 60_000, 'ingest');
    const toCancel = replies.filter((_, i) => i % 10 === 0);
    for (let i = 0; i < toCancel.length; i += 20) await Promise.all(toCancel.slice(i, i + 20).map((r) => sys.w.jobs.cancel('t0', r.jobId)));
    progress(`listing.index: ${opts.jobs} jobs stored, ${toCancel.length} cancelled; dispatching`);
    dispatch = runAllGroups(sys.w.dispatch);
    const delivered = opts.jobs - toCancel.length;
    await waitUntil(() => meter.count('BatchWriteItem:QUEUED') >= delivered, opts.delaySeconds * 1000 + 120_000, 'delivered markers');
    await dispatch.stop();
    dispatch = undefined;
    const t = meter.total();
    const per = (n: number) => +(n / opts.jobs).toFixed(3);
    return {
      jobs: opts.jobs,
      cancelled: toCancel.length,
      delivered: meter.count('BatchWriteItem:QUEUED'),
      wruPerJobTable: per(t.tableWru),
      wruPerJobTableNoIndex: per(t.tableWruNoIndex),
      wruPerJobIndex: per(t.indexWru),
      wruPerJobIndexKeysOnly: per(t.indexWruKeysOnly),
      wruPerJobWithIndex: per(t.tableWru + t.indexWru),
      dynaliteTableWruPerJob: per(meter.reportedTableWru),
      indexEntries: await countEntries(em.dynamo, sys.tableName, 't0', INDEX_BUCKETS),
      byKind: meter.byKind,
    };
  } finally {
    await dispatch?.stop();
    await ingest.stop();
  }
}

/** The read side: one tenant's jobs listed page by page from the index, as bench/listing.ts lists them from the shards. */
export async function measureIndexReads(
  em: Emulators,
  opts: { rows: number; tenants: number; buckets?: number },
): Promise<IndexListingCase[]> {
  const buckets = opts.buckets ?? INDEX_BUCKETS;
  const names = Array.from({ length: opts.tenants }, (_, i) => `t${i}`);
  const { sys, meter } = await indexedSystem(em, names, buckets);
  meter.accounting = false;
  const due = Date.now() + 24 * 3_600_000;
  await writeListingRows(sys, names, opts.rows, due);
  const store = new IndexListingStore(em.newClients().dynamo, sys.tableName);
  const lister = new JobLister({
    store,
    codec: sys.w.codec,
    tenants: new TenantRegistry(sys.w.store),
    clock: { now: () => Date.now() },
    // The lister merges partitions "0".."B-1": the store maps them to the tenant's buckets.
    settings: { shardCount: buckets },
  });
  const expected = Math.ceil(opts.rows / opts.tenants);
  const cases: IndexListingCase[] = [];
  for (const pageSize of [100, 1000]) {
    const start = { ...store.stats };
    let pages = 0;
    let listed = 0;
    let cursor: string | undefined;
    let prev = '';
    const seen = new Set<string>();
    do {
      const page = await lister.list('t0', { limit: String(pageSize), ...(cursor ? { cursor } : {}) });
      cursor = page.nextCursor;
      listed += page.jobs.length;
      pages++;
      // Each job once, in (runAt, job id) order across pages, as from the shards.
      for (const j of page.jobs) {
        const key = `${j.runAt}#${j.jobId}`;
        if (key <= prev || seen.has(j.jobId)) throw new Error(`index listing: ${j.jobId} out of order or repeated`);
        prev = key;
        seen.add(j.jobId);
      }
    } while (cursor);
    if (listed !== expected) throw new Error(`index listing: listed ${listed} jobs of ${expected}`);
    const d = (k: keyof typeof store.stats) => store.stats[k] - start[k];
    const c: IndexListingCase = {
      pageSize,
      tenants: opts.tenants,
      rows: opts.rows,
      buckets,
      pages,
      jobsPerPage: +(listed / pages).toFixed(1),
      itemsReadPerPage: +(d('items') / pages).toFixed(1),
      queriesPerPage: +(d('queries') / pages).toFixed(1),
      rruPerPage: +(d('billedRru') / pages).toFixed(1),
      reportedRruPerPage: +(d('reportedRru') / pages).toFixed(1),
      usdPerMillionListed: +(((d('billedRru') / listed) * 1e6 * PRICES.dynamodbRead.usd) / PRICES.dynamodbRead.per).toFixed(4),
    };
    progress(`listing.index: ${JSON.stringify(c)}`);
    cases.push(c);
  }
  return cases;
}

/** Both sides, for `listing.index` in the result. */
export async function runListingIndex(em: Emulators, opts: { rows: number; jobs: number }): Promise<IndexListingResult> {
  const write = await measureIndexWrites(em, { jobs: opts.jobs, delaySeconds: 30 });
  progress(`listing.index: write ${JSON.stringify({ ...write, byKind: undefined })}`);
  progress(`listing.index: write by kind ${JSON.stringify(write.byKind)}`);
  const cases: IndexListingCase[] = [];
  for (const tenants of [1, 10]) cases.push(...(await measureIndexReads(em, { rows: opts.rows, tenants })));
  cases.push(...(await measureIndexReads(em, { rows: opts.rows, tenants: 1, buckets: INDEX_BUCKETS_HIGH })));
  return { buckets: INDEX_BUCKETS, projection: INDEX_PROJECTION, write, cases };
}
