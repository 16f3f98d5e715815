import {
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
  type AttributeValue,
  type WriteRequest,
  type QueryCommandOutput,
} from '@aws-sdk/client-dynamodb';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import {
  type AcquiredRow,
  type CancelRecord,
  DEFAULT_PRIORITY,
  type DueKey,
  type DuePage,
  type GroupRest,
  type GroupResting,
  type WakeBy,
  type HeldPage,
  type HeldPointer,
  type JobRow,
  type JobStore,
  parseSortKey,
  positionBefore,
  positionThrough,
  type RowKey,
  type RowState,
  type ShardMarks,
  sortKey,
  type StoredRow,
  TENANT_ATTRIBUTES,
  tenantItemKey,
  type TenantRecord,
  type TenantStore,
  ThrottledError,
} from '../core/model/index.js';
import type { ListedItem, ListedPage, ListFilter, ListingStore, ListRange } from '../core/jobs/index.js';
import { packTrace, type TraceContext, unpackTrace } from '../core/model/index.js';

type Item = Record<string, AttributeValue>;

/**
 * Item layout of the scheduler table (one table, pk/sk strings):
 *
 * | item                                  | pk              | sk                   |
 * |---------------------------------------|-----------------|----------------------|
 * | job row, marker, tombstone, DEAD      | `<shard>`       | `<dueMs 13>#<jobId>` |
 * | late-lane pointer                     | `l#<shard>`     | `<dueMs 13>#<jobId>` |
 * | hold-lane pointer (paused tenants)    | `p#<shard>`     | `<tenant>#<9 − priority>#<dueMs 13>#<jobId>` |
 * | outcome record (dynamoHistoryStore.ts)| `h#<shard>`     | `<dueMs 13>#<jobId>` |
 * | cancel record (earlier releases)      | `c#<shard>`     | `<dueMs 13>#<jobId>` |
 * | group lease (and its shards' marks)   | `lease#<group>` | `lease`              |
 * | tenant                                | `tenant#<name>` | `tenant`             |
 * | idempotency record (dynamoIdempotencyStore.ts) | `idem#<keyId>` | `idem`     |
 * | recurring schedule (dynamoScheduleStore.ts)    | `sched#<tenant>` | `<name>` |
 * | workflow job's waiting record (dynamoWaitingChildren.ts) | `w#<shard>` | `<createdMs 13>#<jobId>` |
 * | workflow job's spec (dynamoWorkflowStore.ts)    | `wp#<shard>`   | `<createdMs 13>#<jobId>` |
 * | workflow, idempotency claim (dynamoWorkflowStore.ts) | `wf#<tenant>` | `<workflowId>`, `k#<key>` |
 */
export const keys = {
  row: (k: RowKey): Item => ({ pk: { S: String(k.shard) }, sk: { S: sortKey(k.dueMs, k.jobId) } }),
  latePointer: (k: RowKey): Item => ({ pk: { S: `l#${k.shard}` }, sk: { S: sortKey(k.dueMs, k.jobId) } }),
  heldPointer: (p: HeldPointer): Item => ({ pk: { S: `p#${p.shard}` }, sk: { S: heldSortKey(p) } }),
  cancelRecord: (k: RowKey): Item => ({ pk: { S: `c#${k.shard}` }, sk: { S: sortKey(k.dueMs, k.jobId) } }),
  groupLease: (group: number): Item => ({ pk: { S: `lease#${group}` }, sk: { S: 'lease' } }),
  tenant: (name: string): Item => {
    const k = tenantItemKey(name); // core/model/schema.ts: the CDK registration writes the same key
    return { pk: { S: k.pk }, sk: { S: k.sk } };
  },
};

/** Counts what the store read, for the backlog-independence test and the benchmark. */
export interface StoreStats {
  itemsRead: number;
  /** Read capacity units listing Queries consumed (as DynamoDB reports them). */
  listingReadUnits?: number;
}

/**
 * Payloads above this many bytes are stored deflated (attribute `payloadZ`, binary) when that is
 * smaller: a row with a 1 KB payload then fits one 1 KB write unit instead of two, and each of a
 * job's three writes (put, acquire, delete) is billed by the row's size.
 */
export const COMPRESS_ABOVE_BYTES = 400;

/** The row's payload attribute: plain JSON text, or deflated when that saves space. */
export function payloadAttribute(payload: string): Item {
  const raw = Buffer.from(payload, 'utf8');
  if (raw.length > COMPRESS_ABOVE_BYTES) {
    const z = deflateRawSync(raw);
    if (z.length < raw.length) return { payloadZ: { B: z } };
  }
  return { payload: { S: payload } };
}

/** The payload text of a row written by {@link payloadAttribute}. */
export function payloadOf(item: Item): string {
  if (item.payloadZ?.B) return inflateRawSync(item.payloadZ.B).toString('utf8');
  return item.payload?.S ?? 'null';
}

/** The row's `prio` attribute: only for a priority other than the default 5 (none is 5). */
export function prioAttribute(priority: number | undefined): Item {
  return priority === undefined || priority === DEFAULT_PRIORITY ? {} : { prio: { N: String(priority) } };
}

/**
 * A workflow job's row attributes: `wf` (the workflow's id) and `wpar` (its parents' summary, JSON
 * text, deflated when that saves space: it holds up to 1,000 parents and their results).
 */
function workflowAttributes(row: Pick<JobRow, 'workflow' | 'parents'>): Item {
  if (row.workflow === undefined) return {};
  if (row.parents === undefined) return { wf: { S: row.workflow } };
  const raw = Buffer.from(row.parents, 'utf8');
  const z = raw.length > COMPRESS_ABOVE_BYTES ? deflateRawSync(raw) : undefined;
  return { wf: { S: row.workflow }, wpar: z && z.length < raw.length ? { B: z } : { S: row.parents } };
}

/** The text of an attribute {@link workflowAttributes} wrote: plain, or deflated. */
function textOf(value: AttributeValue): string {
  return value.B ? inflateRawSync(value.B).toString('utf8') : (value.S ?? '');
}

/** The row's `tags` attribute (a list of strings): only for a job with tags. */
export function tagsAttribute(tags: readonly string[] | undefined): Item {
  return tags && tags.length > 0 ? { tags: { L: tags.map((t) => ({ S: t })) } } : {};
}

/** The row's `ck` and `cl` attributes: only for a job with a concurrency key. */
export function concurrencyAttributes(c: JobRow['concurrency']): Item {
  return c ? { ck: { S: c.key }, cl: { N: String(c.limit) } } : {};
}

/** A job's trace, when its submit carried one (`tc`, `ts`: docs/tracing.md); nothing for one whose trace its id derives. */
export function traceAttributes(trace: JobRow['trace']): Item {
  if (!trace) return {};
  return { tc: { S: packTrace(trace) }, ...(trace.state !== undefined ? { ts: { S: trace.state } } : {}) };
}

/** `{trace}` of an item with a `tc` attribute. */
export function traceOf(item: Item): { trace?: TraceContext } {
  const trace = unpackTrace(item.tc?.S, item.ts?.S);
  return trace ? { trace } : {};
}

/** A debounced row's `dkey` and `dver` attributes (docs/flow-control.md#debounce). */
export function debounceAttributes(d: JobRow['debounce']): Item {
  return d ? { dkey: { S: d.key }, ...(d.ver !== '' ? { dver: { S: d.ver } } : {}) } : {};
}

/** `{debounce}` of an item with a `dkey` attribute (a marker's has no `dver`: empty). */
export function debounceOf(item: Item): { debounce?: { key: string; ver: string } } {
  const key = item.dkey?.S;
  return key !== undefined ? { debounce: { key, ver: item.dver?.S ?? '' } } : {};
}

/** `{concurrency}` of an item with a `ck` attribute; nothing for one without. */
export function concurrencyOf(item: Item): { concurrency?: { key: string; limit: number } } {
  const key = item.ck?.S;
  return key !== undefined ? { concurrency: { key, limit: Number(item.cl?.N ?? 1) || 1 } } : {};
}

/** `{tags}` of an item with a `tags` attribute; nothing for one without. */
export function tagsOf(item: Item): { tags?: string[] } {
  const tags = item.tags?.L?.flatMap((v) => (v.S !== undefined ? [v.S] : []));
  return tags && tags.length > 0 ? { tags } : {};
}

/** `{priority}` of an item with a `prio` attribute; nothing for a default row. */
function priorityOf(item: Item): { priority?: number } {
  const n = Number(item.prio?.N);
  return Number.isInteger(n) && n !== DEFAULT_PRIORITY ? { priority: n } : {};
}

const ttlSeconds = (ms: number) => ({ N: String(Math.ceil(ms / 1000)) });

const STATES = new Set<RowState>(['SCHEDULED', 'ACQUIRED', 'CANCELLED', 'QUEUED', 'DEAD']);
const stateOf = (item: Item): RowState => {
  const s = item.state?.S as RowState | undefined;
  return s && STATES.has(s) ? s : 'SCHEDULED';
};

export const isConditionFailure = (err: unknown) =>
  err instanceof ConditionalCheckFailedException || (err as Error)?.name === 'ConditionalCheckFailedException';

const THROTTLE_NAMES = new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded']);

/** Rethrows throttling as {@link ThrottledError}, so rounds back off instead of failing. */
export function rethrow(err: unknown): never {
  if (THROTTLE_NAMES.has((err as Error)?.name)) throw new ThrottledError(`DynamoDB throttled: ${(err as Error).message}`, err);
  throw err;
}

/** A group's rest in its lease item (core/model/ports.ts, `GroupRest`): epoch, pending since, wake-up time. */
const REST = { epoch: 'restEpoch', pendingAt: 'restPendingAt', wakeAt: 'restWakeAt', since: 'restSince', asleep: 'restAsleep' } as const;

/** Latest due time a sort key can hold (13 digits). */
const MAX_DUE_MS = 9_999_999_999_999;

function restOf(item: Item | undefined): GroupRest | undefined {
  const epoch = item?.[REST.epoch]?.S;
  if (epoch === undefined) return undefined;
  const wakeAtMs = Number(item?.[REST.wakeAt]?.N);
  const restingSinceMs = Number(item?.[REST.since]?.N);
  const asleepSinceMs = Number(item?.[REST.asleep]?.N);
  return {
    epoch,
    pendingAtMs: Number(item?.[REST.pendingAt]?.N ?? 0),
    ...(item?.[REST.wakeAt]?.N !== undefined && Number.isFinite(wakeAtMs) ? { wakeAtMs } : {}),
    ...(item?.[REST.since]?.N !== undefined && Number.isFinite(restingSinceMs) ? { restingSinceMs } : {}),
    ...(item?.[REST.asleep]?.N !== undefined && Number.isFinite(asleepSinceMs) ? { asleepSinceMs } : {}),
  };
}

function marksOf(item: Item | undefined): ShardMarks {
  const out: ShardMarks = {};
  for (const [k, v] of Object.entries(item?.marks?.M ?? {})) {
    const shard = Number(k);
    const ms = Number(v.N);
    if (Number.isInteger(shard) && Number.isFinite(ms)) out[shard] = ms;
  }
  return out;
}

/**
 * The {@link JobStore} on DynamoDB. Every state change is one conditional write whose condition
 * is explained beside it; nothing reads and then writes.
 */
export class DynamoJobStore implements JobStore, GroupResting, TenantStore, ListingStore {
  readonly stats: StoreStats = { itemsRead: 0 };

  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async putJob(row: JobRow): Promise<'created' | 'exists'> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            ...keys.row(row),
            tenant: { S: row.tenant },
            state: { S: 'SCHEDULED' },
            leaseUntil: { N: '0' },
            ...payloadAttribute(row.payload),
            ...(row.schedule !== undefined ? { sched: { S: row.schedule } } : {}),
            // Priority only when not the default: a default row is the bytes (and write units) it was.
            ...prioAttribute(row.priority),
            ...tagsAttribute(row.tags),
            ...concurrencyAttributes(row.concurrency),
            ...debounceAttributes(row.debounce),
            ...traceAttributes(row.trace),
            ...workflowAttributes(row),
            ...(row.sentAtMs !== undefined ? { sa: { N: String(row.sentAtMs) } } : {}),
          },
          // Only into an empty key: a redelivered message finds its row, a cancelled job its
          // tombstone, a delivered one its marker. A DEAD record gives way: the job was redriven
          // from the inbound dead-letter queue.
          ConditionExpression: 'attribute_not_exists(pk) OR #state = :dead',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: { ':dead': { S: 'DEAD' } },
        }),
      );
      return 'created';
    } catch (err) {
      if (isConditionFailure(err)) return 'exists';
      rethrow(err);
    }
  }

  async readDue(shard: number, range: { readonly after?: string; readonly through: string }, limit: number): Promise<DuePage> {
    const rows: DueKey[] = [];
    let last: string | undefined;
    const more = await this.dueRange(
      shard,
      {
        after: range.after,
        through: range.through,
        limit,
        consistent: true,
        projection: 'sk, #state, leaseUntil, prio',
        names: { '#state': 'state' },
      },
      (item, key) => {
        last = item.sk?.S;
        if (key) rows.push({ shard, ...key, state: stateOf(item), leaseUntil: Number(item.leaseUntil?.N ?? 0), ...priorityOf(item) });
      },
    );
    return { rows, last, more };
  }

  async dueTimes(shard: number, untilMs: number, limit: number, fromMs?: number): Promise<{ dueMs: number[]; more: boolean }> {
    const dueMs: number[] = [];
    const after = fromMs === undefined ? undefined : positionBefore(fromMs);
    const more = await this.dueRange(
      shard,
      { after, through: positionThrough(untilMs), limit, projection: 'sk, #state', names: { '#state': 'state' } },
      (item, key) => {
        const state = stateOf(item);
        if (key && (state === 'SCHEDULED' || state === 'ACQUIRED')) dueMs.push(key.dueMs);
      },
    );
    return { dueMs, more };
  }

  /**
   * Reads a shard's items with `after < sk <= through` (from the shard's start without `after`),
   * page by page, projecting `projection` only, and stops after `limit` items (no filter, so
   * Limit bounds exactly the items read). Returns whether items may remain. TypeScript-private
   * rather than `#private`: the bench wraps the store with `Object.create`, which carries no `#`
   * brand.
   */
  private async dueRange(
    shard: number,
    opts: { after?: string; through: string; limit: number; consistent?: boolean; projection: string; names?: Record<string, string> },
    onItem: (item: Item, key: { dueMs: number; jobId: string } | undefined) => void,
  ): Promise<boolean> {
    // `after + ' '` is the least sort key above `after` that a row can have: every job id
    // character sorts after the space.
    const lo = opts.after === undefined ? undefined : `${opts.after} `;
    if (lo !== undefined && lo > opts.through) return false;
    let start: Item | undefined;
    let n = 0;
    do {
      let page: QueryCommandOutput;
      try {
        page = await this.client.send(
          new QueryCommand({
            TableName: this.tableName,
            KeyConditionExpression: lo === undefined ? 'pk = :pk AND sk <= :hi' : 'pk = :pk AND sk BETWEEN :lo AND :hi',
            ExpressionAttributeNames: opts.names,
            ExpressionAttributeValues: {
              ':pk': { S: String(shard) },
              ':hi': { S: opts.through },
              ...(lo === undefined ? {} : { ':lo': { S: lo } }),
            },
            ProjectionExpression: opts.projection,
            ConsistentRead: opts.consistent,
            Limit: opts.limit - n,
            ExclusiveStartKey: start,
          }),
        );
      } catch (err) {
        rethrow(err);
      }
      this.stats.itemsRead += page.ScannedCount ?? 0;
      for (const item of page.Items ?? []) {
        n++;
        onItem(item, parseSortKey(item.sk?.S ?? ''));
      }
      start = page.LastEvaluatedKey;
    } while (start && n < opts.limit);
    return start !== undefined;
  }

  async listRange(partition: string, range: ListRange, limit: number, filter: ListFilter): Promise<ListedPage> {
    const names: Record<string, string> = { '#state': 'state' };
    const values: Item = {
      ':pk': { S: partition },
      ':lo': { S: range.fromSk },
      ':hi': { S: range.toSk },
      ':tenant': { S: filter.tenant },
    };
    // A recurring schedule's blocker (a tombstone at an occurrence never materialised) is no job.
    values[':none'] = { S: 'NONE' };
    const conditions = ['tenant = :tenant', '(attribute_not_exists(priorState) OR priorState <> :none)'];
    if (filter.states) {
      filter.states.forEach((state, i) => (values[`:s${i}`] = { S: state }));
      conditions.push(`#state IN (${filter.states.map((_, i) => `:s${i}`).join(', ')})`);
    }
    if (filter.schedule !== undefined) {
      values[':sched'] = { S: filter.schedule };
      conditions.push('sched = :sched');
    }
    if (filter.tag !== undefined) {
      // contains() on a list: one of its elements is the tag.
      values[':tag'] = { S: filter.tag };
      conditions.push('contains(tags, :tag)');
    }
    if (filter.concurrencyKey !== undefined) {
      values[':ck'] = { S: filter.concurrencyKey };
      conditions.push('ck = :ck');
    }
    if (filter.debounceKey !== undefined) {
      values[':dk'] = { S: filter.debounceKey };
      conditions.push('dkey = :dk');
    }
    let page: QueryCommandOutput;
    try {
      page = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk AND sk BETWEEN :lo AND :hi',
          // Filtered items are read (and paid for) all the same: Limit bounds the items evaluated.
          FilterExpression: conditions.join(' AND '),
          // Never the payload: a listing shows status fields only (`prio` adds no cost: a Query is
          // billed by the items' sizes, not the projection's).
          ProjectionExpression: 'sk, tenant, #state, sched, deliveredAt, expiresAt, prio, tags, ck, cl, dkey, tc',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ScanIndexForward: !range.desc,
          // Strongly consistent, as status reads: a job stored before the read began is in it.
          ConsistentRead: true,
          Limit: limit,
          ReturnConsumedCapacity: 'TOTAL',
          ...(range.afterSk !== undefined ? { ExclusiveStartKey: { pk: { S: partition }, sk: { S: range.afterSk } } } : {}),
        }),
      );
    } catch (err) {
      rethrow(err);
    }
    const read = page.ScannedCount ?? 0;
    this.stats.itemsRead += read;
    this.stats.listingReadUnits = (this.stats.listingReadUnits ?? 0) + (page.ConsumedCapacity?.CapacityUnits ?? 0);
    const items: ListedItem[] = (page.Items ?? []).map((item) => ({
      sk: item.sk?.S ?? '',
      tenant: item.tenant?.S ?? '',
      state: item.state?.S ?? 'SCHEDULED',
      ...(item.sched?.S !== undefined ? { schedule: item.sched.S } : {}),
      ...(item.deliveredAt?.N ? { deliveredAtMs: Number(item.deliveredAt.N) } : {}),
      ...(item.expiresAt?.N ? { expiresAtMs: Number(item.expiresAt.N) * 1000 } : {}),
      ...priorityOf(item),
      ...concurrencyOf(item),
      ...tagsOf(item),
      ...(item.dkey?.S !== undefined ? { debounceKey: item.dkey.S } : {}),
      ...traceOf(item),
    }));
    const last = page.LastEvaluatedKey?.sk?.S;
    return { items, more: last !== undefined, read, ...(last !== undefined ? { last } : {}) };
  }

  async putLatePointer(key: RowKey): Promise<void> {
    try {
      // Unconditional: a pointer says only "look at this key"; writing it twice is harmless.
      await this.client.send(new PutItemCommand({ TableName: this.tableName, Item: keys.latePointer(key) }));
    } catch (err) {
      rethrow(err);
    }
  }

  async readLate(shard: number, untilMs: number, limit: number): Promise<RowKey[]> {
    let page: QueryCommandOutput;
    try {
      page = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk AND sk <= :hi',
          ExpressionAttributeValues: { ':pk': { S: `l#${shard}` }, ':hi': { S: positionThrough(untilMs) } },
          ProjectionExpression: 'sk',
          Limit: limit,
        }),
      );
    } catch (err) {
      rethrow(err);
    }
    this.stats.itemsRead += page.ScannedCount ?? 0;
    return (page.Items ?? []).flatMap((item) => {
      const k = parseSortKey(item.sk?.S ?? '');
      return k ? [{ shard, ...k }] : [];
    });
  }

  async deleteLatePointers(rowKeys: readonly RowKey[]): Promise<RowKey[]> {
    return this.batchWrite(
      rowKeys,
      (k) => ({ DeleteRequest: { Key: keys.latePointer(k) } }),
      (r) => r.DeleteRequest?.Key?.sk?.S,
    );
  }

  async putHeldPointers(pointers: readonly HeldPointer[]): Promise<HeldPointer[]> {
    // Unconditional: a pointer says only "this row is held"; writing it twice is harmless.
    return this.heldWrite(pointers, (p) => ({ PutRequest: { Item: keys.heldPointer(p) } }));
  }

  async deleteHeldPointers(pointers: readonly HeldPointer[]): Promise<HeldPointer[]> {
    return this.heldWrite(pointers, (p) => ({ DeleteRequest: { Key: keys.heldPointer(p) } }));
  }

  async readHeld(shard: number, range: { readonly tenant?: string; readonly after?: string }, limit: number): Promise<HeldPage> {
    const values: Item = { ':pk': { S: `p#${shard}` } };
    let condition = 'pk = :pk';
    let start: string | undefined;
    if (range.tenant !== undefined) {
      values[':prefix'] = { S: `${range.tenant}#` };
      condition += ' AND begins_with(sk, :prefix)';
      start = range.after; // a pointer's sk
    } else if (range.after !== undefined) {
      values[':after'] = { S: range.after };
      condition += ' AND sk > :after'; // any position, e.g. past a tenant's pointers
    }
    let page: QueryCommandOutput;
    try {
      page = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: condition,
          ExpressionAttributeValues: values,
          ProjectionExpression: 'sk',
          // Eventually consistent (half the read units): a pointer written moments ago is found by the next
          // scan; one deleted moments ago is skipped by the round's memory of what it deleted.
          ConsistentRead: false,
          Limit: limit,
          ...(start !== undefined ? { ExclusiveStartKey: { pk: { S: `p#${shard}` }, sk: { S: start } } } : {}),
        }),
      );
    } catch (err) {
      rethrow(err);
    }
    this.stats.itemsRead += page.ScannedCount ?? 0;
    const pointers = (page.Items ?? []).flatMap((item) => {
      const p = parseHeldSortKey(shard, item.sk?.S ?? '');
      return p ? [p] : [];
    });
    const last = page.LastEvaluatedKey?.sk?.S;
    return { pointers, more: last !== undefined, ...(last !== undefined ? { last } : {}) };
  }

  async unacquire(key: RowKey, heldLeaseUntil: number): Promise<boolean> {
    return this.updateWhileHeld(key, heldLeaseUntil, 'SET #state = :scheduled REMOVE leaseUntil', { ':scheduled': { S: 'SCHEDULED' } });
  }

  private async heldWrite(pointers: readonly HeldPointer[], request: (p: HeldPointer) => WriteRequest): Promise<HeldPointer[]> {
    const failed: HeldPointer[] = [];
    for (let i = 0; i < pointers.length; i += 25) {
      const chunk = pointers.slice(i, i + 25);
      try {
        const res = await this.client.send(new BatchWriteItemCommand({ RequestItems: { [this.tableName]: chunk.map(request) } }));
        const left = new Set(
          (res.UnprocessedItems?.[this.tableName] ?? []).map((r) => (r.PutRequest?.Item ?? r.DeleteRequest?.Key)?.sk?.S),
        );
        for (const p of chunk) if (left.has(heldSortKey(p))) failed.push(p);
      } catch {
        failed.push(...chunk);
      }
    }
    return failed;
  }

  async acquire(key: RowKey, nowMs: number, leaseUntil: number): Promise<AcquiredRow | undefined> {
    try {
      const res = await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.row(key),
          UpdateExpression: 'SET #state = :acquired, leaseUntil = :lease',
          // SCHEDULED, or ACQUIRED by a dispatcher whose lease has run out. Never a tombstone,
          // never a row another round holds, never a key that is gone (sent and deleted).
          ConditionExpression: 'attribute_exists(pk) AND (#state = :scheduled OR (#state = :acquired AND leaseUntil < :now))',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: {
            ':acquired': { S: 'ACQUIRED' },
            ':scheduled': { S: 'SCHEDULED' },
            ':lease': { N: String(leaseUntil) },
            ':now': { N: String(nowMs) },
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      const a = res.Attributes ?? {};
      return {
        ...key,
        tenant: a.tenant?.S ?? '',
        payload: payloadOf(a),
        leaseUntil,
        ...(a.sched?.S !== undefined ? { schedule: a.sched.S } : {}),
        ...priorityOf(a),
        ...(a.wf?.S !== undefined ? { workflow: a.wf.S } : {}),
        ...(a.wpar !== undefined ? { parents: textOf(a.wpar) } : {}),
        ...tagsOf(a),
        ...concurrencyOf(a),
        ...debounceOf(a),
        ...traceOf(a),
      };
    } catch (err) {
      if (isConditionFailure(err)) return undefined;
      rethrow(err);
    }
  }

  async renew(key: RowKey, heldLeaseUntil: number, newLeaseUntil: number): Promise<boolean> {
    return this.updateWhileHeld(key, heldLeaseUntil, 'SET leaseUntil = :new', { ':new': { N: String(newLeaseUntil) } });
  }

  /**
   * An update of a row this round still holds: ACQUIRED with the lease it wrote (another round's
   * acquire changed it). False when it does not hold it any more.
   */
  private async updateWhileHeld(key: RowKey, heldLeaseUntil: number, update: string, values: Item): Promise<boolean> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.row(key),
          UpdateExpression: update,
          ConditionExpression: '#state = :acquired AND leaseUntil = :held',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: { ':acquired': { S: 'ACQUIRED' }, ':held': { N: String(heldLeaseUntil) }, ...values },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }

  async markDelivered(
    rows: readonly (RowKey & {
      readonly tenant: string;
      readonly expiresAtMs: number;
      readonly schedule?: string;
      readonly tags?: readonly string[];
      readonly concurrency?: { readonly key: string; readonly limit: number };
      readonly debounce?: { readonly key: string };
      readonly trace?: TraceContext;
    })[],
    deliveredAtMs: number,
  ): Promise<RowKey[]> {
    // Unconditional: the send succeeded, so the job is delivered whoever holds the row now. A
    // put of the small marker costs what a delete costs (1 WRU) and leaves a record status reads.
    return this.batchWrite(
      rows,
      (r) => ({
        PutRequest: {
          Item: {
            ...keys.row(r),
            state: { S: 'QUEUED' },
            tenant: { S: r.tenant },
            deliveredAt: { N: String(deliveredAtMs) },
            expiresAt: ttlSeconds(r.expiresAtMs),
            // The occurrence's schedule stays on its marker: `schedule=` listings find QUEUED ones too;
            // so do the job's tags, for `tag=` listings and GET (a few bytes: still one write unit).
            ...(r.schedule !== undefined ? { sched: { S: r.schedule } } : {}),
            ...tagsAttribute(r.tags),
            ...concurrencyAttributes(r.concurrency),
            ...(r.debounce ? { dkey: { S: r.debounce.key } } : {}),
            // The trace its submit carried (50 bytes, still one write unit): GET shows its id once delivered.
            ...traceAttributes(r.trace),
          },
        },
      }),
      (req) => req.PutRequest?.Item?.sk?.S,
    );
  }

  /** BatchWriteItem in chunks of 25; returns the keys whose request was not processed. */
  private async batchWrite<K extends RowKey>(
    rowKeys: readonly K[],
    request: (k: K) => WriteRequest,
    skOf: (req: WriteRequest) => string | undefined,
  ): Promise<RowKey[]> {
    const failed: RowKey[] = [];
    for (let i = 0; i < rowKeys.length; i += 25) {
      const chunk = rowKeys.slice(i, i + 25);
      try {
        const res = await this.client.send(new BatchWriteItemCommand({ RequestItems: { [this.tableName]: chunk.map(request) } }));
        const left = new Set((res.UnprocessedItems?.[this.tableName] ?? []).map(skOf));
        for (const k of chunk) if (left.has(sortKey(k.dueMs, k.jobId))) failed.push(k);
      } catch {
        failed.push(...chunk);
      }
    }
    return failed;
  }

  async cancel(
    key: RowKey,
    tenant: string,
    expiresAtMs: number,
    opts: { readonly occurrence?: boolean } = {},
  ): Promise<'cancelled' | 'acquired'> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.row(key),
          // An occurrence's tombstone keeps what was there before (`NONE`: never materialised).
          UpdateExpression: `SET #state = :cancelled, tenant = :tenant, expiresAt = :exp${opts.occurrence ? ', priorState = if_not_exists(#state, :none)' : ''} REMOVE payload, payloadZ, leaseUntil, deadAt, prio`,
          // SCHEDULED, already CANCELLED (a repeated cancel), no row yet (the job still waits in
          // the inbound queue: this tombstone makes its ingest fail) or DEAD (in the inbound DLQ:
          // a redrive then meets the tombstone). Never ACQUIRED, never a delivered marker.
          ConditionExpression: 'attribute_not_exists(pk) OR #state = :scheduled OR #state = :cancelled OR #state = :dead',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: {
            ':cancelled': { S: 'CANCELLED' },
            ':scheduled': { S: 'SCHEDULED' },
            ':dead': { S: 'DEAD' },
            ':tenant': { S: tenant },
            ':exp': { N: String(Math.ceil(expiresAtMs / 1000)) },
            ...(opts.occurrence ? { ':none': { S: 'NONE' } } : {}),
          },
        }),
      );
      return 'cancelled';
    } catch (err) {
      if (isConditionFailure(err)) return 'acquired';
      rethrow(err);
    }
  }

  async cancelWaiting(key: RowKey, tenant: string, heldLeaseUntil: number, expiresAtMs: number): Promise<boolean> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.row(key),
          UpdateExpression:
            'SET #state = :cancelled, tenant = :tenant, expiresAt = :exp REMOVE payload, payloadZ, leaseUntil, deadAt, prio',
          ConditionExpression: '#state = :acquired AND leaseUntil = :held AND attribute_exists(ck)',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: {
            ':cancelled': { S: 'CANCELLED' },
            ':acquired': { S: 'ACQUIRED' },
            ':held': { N: String(heldLeaseUntil) },
            ':tenant': { S: tenant },
            ':exp': { N: String(Math.ceil(expiresAtMs / 1000)) },
          },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      return rethrow(err);
    }
  }

  async getRow(key: RowKey): Promise<StoredRow | undefined> {
    const res = await this.client.send(
      new GetItemCommand({
        TableName: this.tableName,
        Key: keys.row(key),
        ConsistentRead: true,
        // `prio` costs nothing more: a GetItem is billed by the item's size, not the projection's.
        ProjectionExpression: '#state, tenant, leaseUntil, deliveredAt, expiresAt, prio, tags, ck, cl, dkey, dver, tc',
        ExpressionAttributeNames: { '#state': 'state' },
      }),
    );
    const item = res.Item;
    if (!item) return undefined;
    return {
      state: stateOf(item),
      tenant: item.tenant?.S ?? '',
      leaseUntil: Number(item.leaseUntil?.N ?? 0),
      ...(item.deliveredAt?.N ? { deliveredAtMs: Number(item.deliveredAt.N) } : {}),
      ...(item.expiresAt?.N ? { expiresAtMs: Number(item.expiresAt.N) * 1000 } : {}),
      ...priorityOf(item),
      ...tagsOf(item),
      ...concurrencyOf(item),
      ...debounceOf(item),
      ...traceOf(item),
    };
  }

  async putDead(key: RowKey, tenant: string, atMs: number, expiresAtMs: number): Promise<boolean> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            ...keys.row(key),
            state: { S: 'DEAD' },
            tenant: { S: tenant },
            deadAt: { N: String(atMs) },
            expiresAt: ttlSeconds(expiresAtMs),
          },
          // Only where nothing is: never over a row, a tombstone or a delivered marker.
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }

  async putCancelRecord(key: RowKey, record: CancelRecord, expiresAtMs: number): Promise<boolean> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            ...keys.cancelRecord(key),
            kind: { S: record.kind },
            atMs: { N: String(record.atMs) },
            expiresAt: { N: String(Math.ceil(expiresAtMs / 1000)) },
          },
          // First writer wins: a late ingest's claim or a round's cancel record, never both.
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }

  async getCancelRecord(key: RowKey): Promise<CancelRecord | undefined> {
    const res = await this.client.send(
      new GetItemCommand({ TableName: this.tableName, Key: keys.cancelRecord(key), ConsistentRead: true }),
    );
    if (!res.Item) return undefined;
    return { kind: res.Item.kind?.S === 'CANCELLED' ? 'CANCELLED' : 'INGESTED', atMs: Number(res.Item.atMs?.N ?? 0) };
  }

  async takeGroupLease(
    group: number,
    owner: string,
    ownerStartMs: number,
    nowMs: number,
    untilMs: number,
    marks?: ShardMarks,
  ): Promise<{ held: boolean; marks: ShardMarks }> {
    try {
      const res = await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.groupLease(group),
          // A group taken is not asleep (a dispatcher runs for it): writers need not start one.
          UpdateExpression: `SET #owner = :owner, ownerStart = :start, leaseUntil = :until${marks ? ', marks = :marks' : ''} REMOVE ${REST.asleep}`,
          // Free, expired, ours already, or held by an older execution (the newer one takes over).
          ConditionExpression: 'attribute_not_exists(pk) OR leaseUntil < :now OR #owner = :owner OR ownerStart < :start',
          ExpressionAttributeNames: { '#owner': 'owner' },
          ExpressionAttributeValues: {
            ':owner': { S: owner },
            ':start': { N: String(ownerStartMs) },
            ':until': { N: String(untilMs) },
            ':now': { N: String(nowMs) },
            ...(marks ? { ':marks': { M: Object.fromEntries(Object.entries(marks).map(([k, v]) => [k, { N: String(v) }])) } } : {}),
          },
          ReturnValues: 'ALL_NEW',
        }),
      );
      const rest = restOf(res.Attributes);
      return { held: true, marks: marksOf(res.Attributes), ...(rest ? { rest } : {}) };
    } catch (err) {
      if (isConditionFailure(err)) return { held: false, marks: {} };
      rethrow(err);
    }
  }

  async readRest(group: number): Promise<GroupRest | undefined> {
    const res = await this.client
      .send(
        new GetItemCommand({
          TableName: this.tableName,
          Key: keys.groupLease(group),
          ConsistentRead: true,
          ProjectionExpression: `${REST.epoch}, ${REST.pendingAt}, ${REST.wakeAt}, ${REST.since}, ${REST.asleep}`,
        }),
      )
      .catch(rethrow);
    return restOf(res.Item);
  }

  async wakeBy(group: number, dueMs: number): Promise<WakeBy> {
    try {
      const res = await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.groupLease(group),
          UpdateExpression: `SET ${REST.wakeAt} = :due`,
          ConditionExpression: `attribute_exists(${REST.epoch}) AND (attribute_not_exists(${REST.wakeAt}) OR ${REST.wakeAt} > :due)`,
          ExpressionAttributeValues: { ':due': { N: String(dueMs) } },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return { moved: true, asleep: res.Attributes?.[REST.asleep] !== undefined };
    } catch (err) {
      if (isConditionFailure(err)) return { moved: false, asleep: false };
      rethrow(err);
    }
  }

  async rouse(group: number): Promise<boolean> {
    return this.restUpdate({
      Key: keys.groupLease(group),
      UpdateExpression: `REMOVE ${REST.asleep}`,
      ConditionExpression: `attribute_exists(${REST.asleep})`,
    });
  }

  async sleep(group: number, owner: string, epoch: string, wakeAtMs: number, nowMs: number): Promise<boolean> {
    return this.restUpdate({
      Key: keys.groupLease(group),
      UpdateExpression: `SET ${REST.asleep} = :now, leaseUntil = :now`,
      ConditionExpression: `#owner = :owner AND ${REST.epoch} = :epoch AND ${REST.wakeAt} = :at AND attribute_exists(${REST.since})`,
      ExpressionAttributeNames: { '#owner': 'owner' },
      ExpressionAttributeValues: {
        ':owner': { S: owner },
        ':epoch': { S: epoch },
        ':at': { N: String(wakeAtMs) },
        ':now': { N: String(nowMs) },
      },
    });
  }

  async intendRest(group: number, owner: string, epoch: string, nowMs: number): Promise<boolean> {
    return this.restUpdate({
      Key: keys.groupLease(group),
      UpdateExpression: `SET ${REST.epoch} = :epoch, ${REST.pendingAt} = :now REMOVE ${REST.wakeAt}, ${REST.since}, ${REST.asleep}`,
      ConditionExpression: '#owner = :owner',
      ExpressionAttributeNames: { '#owner': 'owner' },
      ExpressionAttributeValues: { ':owner': { S: owner }, ':epoch': { S: epoch }, ':now': { N: String(nowMs) } },
    });
  }

  async rest(group: number, owner: string, epoch: string, wakeAtMs: number, nowMs: number): Promise<boolean> {
    return this.restUpdate({
      Key: keys.groupLease(group),
      UpdateExpression: `SET ${REST.wakeAt} = :at, ${REST.since} = :now`,
      ConditionExpression: `#owner = :owner AND ${REST.epoch} = :epoch AND attribute_not_exists(${REST.wakeAt})`,
      ExpressionAttributeNames: { '#owner': 'owner' },
      ExpressionAttributeValues: {
        ':owner': { S: owner },
        ':epoch': { S: epoch },
        ':at': { N: String(wakeAtMs) },
        ':now': { N: String(nowMs) },
      },
    });
  }

  async wake(group: number, owner: string): Promise<void> {
    await this.restUpdate({
      Key: keys.groupLease(group),
      UpdateExpression: `REMOVE ${REST.epoch}, ${REST.pendingAt}, ${REST.wakeAt}, ${REST.since}, ${REST.asleep}`,
      ConditionExpression: '#owner = :owner',
      ExpressionAttributeNames: { '#owner': 'owner' },
      ExpressionAttributeValues: { ':owner': { S: owner } },
    });
  }

  async firstDue(shard: number, fromMs: number | undefined): Promise<number | undefined> {
    let first: number | undefined;
    const row = this.dueRange(
      shard,
      {
        after: fromMs === undefined ? undefined : positionBefore(fromMs),
        through: positionThrough(MAX_DUE_MS),
        limit: 1,
        consistent: true,
        projection: 'sk',
      },
      (_item, key) => {
        // An item that is not a row (none is kept there) counts as due at once: waking early is harmless.
        first = Math.min(first ?? Number.POSITIVE_INFINITY, key?.dueMs ?? 0);
      },
    );
    // The late lane too, strongly consistent (rounds read it eventually consistent, every look): a
    // row behind the read position is there only.
    const late = this.client
      .send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: `l#${shard}` } },
          ProjectionExpression: 'sk',
          ConsistentRead: true,
          Limit: 1,
        }),
      )
      .catch(rethrow);
    const [, page] = await Promise.all([row, late]);
    this.stats.itemsRead += page.ScannedCount ?? 0;
    const pointer = page.Items?.[0];
    if (pointer) first = Math.min(first ?? Number.POSITIVE_INFINITY, parseSortKey(pointer.sk?.S ?? '')?.dueMs ?? 0);
    return first;
  }

  /** One conditional update of a group's lease item: false when its condition failed (TypeScript-private, as `dueRange`). */
  private async restUpdate(input: Omit<ConstructorParameters<typeof UpdateItemCommand>[0], 'TableName'>): Promise<boolean> {
    try {
      await this.client.send(new UpdateItemCommand({ TableName: this.tableName, ...input }));
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }

  async groupMarks(group: number): Promise<ShardMarks> {
    // A query rather than GetItem: the tick's role may query the table and nothing more.
    const res = await this.client.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': keys.groupLease(group).pk! },
        ProjectionExpression: 'marks',
      }),
    );
    this.stats.itemsRead += res.ScannedCount ?? 0;
    return marksOf(res.Items?.[0]);
  }

  async getTenant(name: string): Promise<TenantRecord | undefined> {
    const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: keys.tenant(name) }));
    if (!res.Item) return undefined;
    const historyTtlMs = Number(res.Item[TENANT_ATTRIBUTES.historyTtlMs]?.N);
    return {
      name,
      queueUrl: res.Item.queueUrl?.S ?? '',
      dlqUrl: res.Item.dlqUrl?.S ?? '',
      ...(historyTtlMs > 0 ? { historyTtlMs } : {}),
    };
  }

  async putTenant(record: TenantRecord): Promise<void> {
    await this.client.send(
      new PutItemCommand({
        TableName: this.tableName,
        Item: {
          ...keys.tenant(record.name),
          queueUrl: { S: record.queueUrl },
          dlqUrl: { S: record.dlqUrl },
          ...(record.historyTtlMs !== undefined ? { [TENANT_ATTRIBUTES.historyTtlMs]: { N: String(record.historyTtlMs) } } : {}),
        },
      }),
    );
  }
}

/** A hold-lane pointer's sort key: by tenant, then higher priority first, then due time. */
export function heldSortKey(p: Pick<HeldPointer, 'tenant' | 'priority' | 'dueMs' | 'jobId'>): string {
  return `${p.tenant}#${9 - p.priority}#${sortKey(p.dueMs, p.jobId)}`;
}

function parseHeldSortKey(shard: number, sk: string): HeldPointer | undefined {
  const m = /^([^#]+)#([0-8])#(.+)$/.exec(sk);
  if (!m) return undefined;
  const k = parseSortKey(m[3]!);
  return k ? { shard, tenant: m[1]!, priority: 9 - Number(m[2]), ...k } : undefined;
}
