import {
  type AttributeValue,
  BatchWriteItemCommand,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { type RowKey, sortKey, TABLE_KEY } from '../core/model/index.js';
import {
  filterJson,
  filterOfJson,
  type OperationHead,
  type OperationStore,
  type PartProgress,
  type SeenRow,
} from '../core/operations/index.js';
import { isConditionFailure, keys, rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** An operation's partition: its head (`sk = head`) and its parts' progress (IAM: `op#*`). */
export const operationPartition = (operationId: string): string => `op#${operationId}`;
/** A tenant's index of operations, newest last by `<createdAt 13>#<operationId>` (ingest reads it; `ops#*`). */
export const operationIndexPartition = (tenant: string): string => `ops#${tenant}`;

const at13 = (ms: number) => String(ms).padStart(13, '0');
const THROTTLES = new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded']);
const ttl = (ms: number): AttributeValue => ({ N: String(Math.ceil(ms / 1000)) });
/** The attribute a row carries an operation's mark in: one per operation, so operations never meet. */
/** A bulk cancel's mark on an item: one attribute per operation (`o_<id without op1.>`). */
export const markAttribute = (operationId: string) => `o_${operationId.slice(4)}`;

/**
 * Bulk cancels' items in the scheduler table, and their reads and writes of job rows: the rows of
 * a shard are read as the listing reads them (a Query of the shard with the tenant and the filter
 * in a FilterExpression, no payloads), then cancelled or marked one conditional UpdateItem each.
 */
export class DynamoOperationStore implements OperationStore {
  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async create(head: OperationHead, expiresAtMs: number): Promise<void> {
    const fields: Item = {
      tenant: { S: head.tenant },
      filter: { S: JSON.stringify(filterJson(head.filter)) },
      createdAt: { N: String(head.createdAtMs) },
      shardCount: { N: String(head.shardCount) },
      [TABLE_KEY.ttlAttribute]: ttl(expiresAtMs),
    };
    try {
      // The head first: ingest finds an operation by its index entry, and reads its head's filter from the entry itself.
      await this.#put({ pk: { S: operationPartition(head.operationId) }, sk: { S: 'head' }, ...fields });
      await this.#put({
        pk: { S: operationIndexPartition(head.tenant) },
        sk: { S: `${at13(head.createdAtMs)}#${head.operationId}` },
        ...fields,
      });
    } catch (err) {
      rethrow(err);
    }
  }

  async remove(head: OperationHead): Promise<void> {
    try {
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: operationIndexPartition(head.tenant) }, sk: { S: `${at13(head.createdAtMs)}#${head.operationId}` } },
        }),
      );
      await this.client.send(
        new DeleteItemCommand({ TableName: this.tableName, Key: { pk: { S: operationPartition(head.operationId) }, sk: { S: 'head' } } }),
      );
    } catch (err) {
      rethrow(err);
    }
  }

  async read(operationId: string): Promise<{ head: OperationHead; parts: ReadonlyMap<string, PartProgress> } | undefined> {
    const items = await this.#queryAll('pk = :pk', { ':pk': { S: operationPartition(operationId) } });
    const headItem = items.find((i) => i.sk?.S === 'head');
    const head = headItem && headOf(operationId, headItem);
    if (!head || expired(headItem)) return undefined;
    const parts = new Map<string, PartProgress>();
    for (const item of items) {
      const name = item.sk?.S;
      if (name === undefined || name === 'head') continue;
      parts.set(name, {
        cancelled: Number(item.cancelled?.N ?? 0),
        alreadyQueued: Number(item.alreadyQueued?.N ?? 0),
        notCancellable: Number(item.notCancellable?.N ?? 0),
        ...(item.afterSk?.S !== undefined ? { afterSk: item.afterSk.S } : {}),
        done: item.done?.BOOL === true,
      });
    }
    return { head, parts };
  }

  async hasOperations(tenant: string, afterMs: number): Promise<boolean> {
    try {
      const res = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk AND sk >= :from',
          ExpressionAttributeValues: { ':pk': { S: operationIndexPartition(tenant) }, ':from': { S: at13(afterMs + 1) } },
          ConsistentRead: true,
          Limit: 1,
          ProjectionExpression: 'sk',
        }),
      );
      return (res.Items?.length ?? 0) > 0;
    } catch (err) {
      return rethrow(err);
    }
  }

  async createdAfter(tenant: string, afterMs: number): Promise<OperationHead[]> {
    const items = await this.#queryAll('pk = :pk AND sk >= :from', {
      ':pk': { S: operationIndexPartition(tenant) },
      ':from': { S: at13(afterMs + 1) },
    });
    return items.flatMap((item) => {
      const id = item.sk?.S?.slice(14);
      const head = id !== undefined ? headOf(id, item) : undefined;
      return head && !expired(item) ? [head] : [];
    });
  }

  /** Every item of a key condition, strongly consistent, page after page (an operation's items are few). */
  async #queryAll(condition: string, values: Item): Promise<Item[]> {
    const items: Item[] = [];
    try {
      let start: Item | undefined;
      do {
        const res = await this.client.send(
          new QueryCommand({
            TableName: this.tableName,
            KeyConditionExpression: condition,
            ExpressionAttributeValues: values,
            ConsistentRead: true,
            ...(start ? { ExclusiveStartKey: start } : {}),
          }),
        );
        items.push(...(res.Items ?? []));
        start = res.LastEvaluatedKey;
      } while (start);
    } catch (err) {
      rethrow(err);
    }
    return items;
  }

  async saveProgress(operationId: string, part: string, p: PartProgress, expiresAtMs: number): Promise<void> {
    try {
      await this.#put({
        pk: { S: operationPartition(operationId) },
        sk: { S: part },
        cancelled: { N: String(p.cancelled) },
        alreadyQueued: { N: String(p.alreadyQueued) },
        notCancellable: { N: String(p.notCancellable) },
        ...(p.afterSk !== undefined ? { afterSk: { S: p.afterSk } } : {}),
        done: { BOOL: p.done },
        [TABLE_KEY.ttlAttribute]: ttl(expiresAtMs),
      });
    } catch (err) {
      rethrow(err);
    }
  }

  async readShard(
    shard: number,
    head: OperationHead,
    afterSk: string | undefined,
  ): Promise<{ rows: SeenRow[]; last?: string; more: boolean }> {
    const f = head.filter;
    const values: Item = {
      ':pk': { S: String(shard) },
      ':tenant': { S: head.tenant },
      ':scheduled': { S: 'SCHEDULED' },
      ':acquired': { S: 'ACQUIRED' },
      ':created': { N: String(head.createdAtMs) },
    };
    const names: Record<string, string> = { '#state': 'state', '#mark': markAttribute(head.operationId) };
    let range = 'pk = :pk';
    let match: string;
    if ('state' in f) {
      values[':lo'] = { S: sortKey(f.fromMs ?? 0, '') };
      values[':hi'] = { S: sortKey(f.toMs ?? 9_999_999_999_999, '~') };
      range += ' AND sk BETWEEN :lo AND :hi';
      match = '#state IN (:scheduled, :acquired)';
    } else {
      values[':dead'] = { S: 'DEAD' };
      match = '#state IN (:scheduled, :acquired, :dead)';
      if ('tag' in f) {
        values[':v'] = { S: f.tag };
        match += ' AND contains(tags, :v)';
      } else {
        values[':v'] = { S: 'concurrencyKey' in f ? f.concurrencyKey : f.debounceKey };
        names['#key'] = 'concurrencyKey' in f ? 'ck' : 'dkey';
        match += ' AND #key = :v';
      }
    }
    try {
      const res = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: range,
          // The operation's own marks stay visible whatever the row became: a retried pass counts them again.
          // Jobs accepted after the request (their message sent after it, `sa`) are not the operation's.
          FilterExpression: `tenant = :tenant AND (((${match}) AND (attribute_not_exists(sa) OR sa < :created)) OR attribute_exists(#mark))`,
          ProjectionExpression: 'sk, #state, #mark, tags, sched, sa, leaseUntil, ck, cl',
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: values,
          ConsistentRead: true,
          ...(afterSk !== undefined ? { ExclusiveStartKey: { pk: { S: String(shard) }, sk: { S: afterSk } } } : {}),
        }),
      );
      const rows: SeenRow[] = [];
      for (const item of res.Items ?? []) {
        const row = seenOf(shard, item, names['#mark']!);
        if (row) rows.push(row);
      }
      const last = res.LastEvaluatedKey?.sk?.S ?? res.Items?.at(-1)?.sk?.S;
      return { rows, ...(last !== undefined ? { last } : {}), more: res.LastEvaluatedKey !== undefined };
    } catch (err) {
      rethrow(err);
    }
  }

  async getRow(key: RowKey, head: OperationHead): Promise<SeenRow | undefined> {
    const mark = markAttribute(head.operationId);
    try {
      const res = await this.client.send(
        new GetItemCommand({
          TableName: this.tableName,
          Key: keys.row(key),
          ConsistentRead: true,
          ProjectionExpression: 'sk, tenant, #state, #mark, leaseUntil, ck',
          ExpressionAttributeNames: { '#state': 'state', '#mark': mark },
        }),
      );
      if (!res.Item || res.Item.tenant?.S !== head.tenant) return undefined;
      return seenOf(key.shard, res.Item, mark);
    } catch (err) {
      rethrow(err);
    }
  }

  async cancelRow(key: RowKey, head: OperationHead, mark: string, expiresAtMs: number): Promise<boolean> {
    return this.#update(key, {
      UpdateExpression: 'SET #state = :cancelled, #mark = :mark, expiresAt = :exp REMOVE payload, payloadZ, leaseUntil, deadAt, prio',
      // As a single cancel's, never an ACQUIRED row or a delivered marker; and only once.
      ConditionExpression: 'tenant = :tenant AND #state IN (:scheduled, :dead) AND attribute_not_exists(#mark)',
      ExpressionAttributeNames: { '#state': 'state', '#mark': markAttribute(head.operationId) },
      ExpressionAttributeValues: {
        ':cancelled': { S: 'CANCELLED' },
        ':scheduled': { S: 'SCHEDULED' },
        ':dead': { S: 'DEAD' },
        ':tenant': { S: head.tenant },
        ':mark': { S: mark },
        ':exp': ttl(expiresAtMs),
      },
    });
  }

  async cancelWaitingRow(key: RowKey, head: OperationHead, mark: string, heldLeaseUntil: number, expiresAtMs: number): Promise<boolean> {
    return this.#update(key, {
      UpdateExpression: 'SET #state = :cancelled, #mark = :mark, expiresAt = :exp REMOVE payload, payloadZ, leaseUntil, deadAt, prio',
      // The dispatcher renews this lease once the row holds its slot, before the send: one of the two fails.
      ConditionExpression:
        'tenant = :tenant AND #state = :acquired AND leaseUntil = :held AND attribute_exists(ck) AND attribute_not_exists(#mark)',
      ExpressionAttributeNames: { '#state': 'state', '#mark': markAttribute(head.operationId) },
      ExpressionAttributeValues: {
        ':cancelled': { S: 'CANCELLED' },
        ':acquired': { S: 'ACQUIRED' },
        ':held': { N: String(heldLeaseUntil) },
        ':tenant': { S: head.tenant },
        ':mark': { S: mark },
        ':exp': ttl(expiresAtMs),
      },
    });
  }

  async markRow(key: RowKey, head: OperationHead, mark: string, state: string): Promise<boolean> {
    return this.#update(key, {
      UpdateExpression: 'SET #mark = :mark',
      ConditionExpression: 'tenant = :tenant AND #state = :state AND (attribute_not_exists(#mark) OR #mark = :mark)',
      ExpressionAttributeNames: { '#state': 'state', '#mark': markAttribute(head.operationId) },
      ExpressionAttributeValues: { ':tenant': { S: head.tenant }, ':state': { S: state }, ':mark': { S: mark } },
    });
  }

  async cancelFar(
    rows: readonly SeenRow[],
    head: OperationHead,
    mark: string,
    expiresAtMs: (row: SeenRow) => number,
    untilMs: number,
  ): Promise<SeenRow[]> {
    const markName = markAttribute(head.operationId);
    const bySk = new Map(rows.map((r) => [sortKey(r.key.dueMs, r.key.jobId), r]));
    const left: SeenRow[] = [];
    const batches: SeenRow[][] = [];
    for (let i = 0; i < rows.length; i += 25) batches.push(rows.slice(i, i + 25));
    // A few requests at once: the rows of one page, in the order read.
    await Promise.all(
      Array.from({ length: Math.min(4, batches.length) }, async () => {
        for (let batch = batches.shift(); batch; batch = batches.shift()) {
          let pending: { PutRequest: { Item: Item } }[] = batch.map((row) => ({
            PutRequest: {
              Item: {
                ...keys.row(row.key),
                tenant: { S: head.tenant },
                state: { S: 'CANCELLED' },
                ...(row.tags && row.tags.length > 0 ? { tags: { L: row.tags.map((t) => ({ S: t })) } } : {}),
                // A keyed job's tombstone keeps its key, as a single cancel's does (listings by key find it).
                ...(row.concurrencyKey !== undefined
                  ? { ck: { S: row.concurrencyKey }, cl: { N: String(row.concurrencyLimit ?? 1) } }
                  : {}),
                ...(row.sentAtMs !== undefined ? { sa: { N: String(row.sentAtMs) } } : {}),
                [markName]: { S: mark },
                [TABLE_KEY.ttlAttribute]: ttl(expiresAtMs(row)),
              },
            },
          }));
          for (let attempt = 0; pending.length > 0; attempt++) {
            // Past the window, what is left goes back to the caller (one conditional write each).
            if (Date.now() >= untilMs || attempt >= 5) break;
            if (attempt > 0) await new Promise((r) => setTimeout(r, 25 * 2 ** attempt));
            try {
              const res = await this.client.send(new BatchWriteItemCommand({ RequestItems: { [this.tableName]: pending } }));
              pending = (res.UnprocessedItems?.[this.tableName] ?? []).flatMap((r) =>
                r.PutRequest?.Item ? [{ PutRequest: { Item: r.PutRequest.Item } }] : [],
              );
            } catch (err) {
              // Throttled or failed: the rows are settled one by one instead.
              if (!THROTTLES.has((err as Error)?.name)) throw err;
            }
          }
          for (const req of pending) left.push(bySk.get(req.PutRequest.Item.sk!.S!)!);
        }
      }),
    );
    return left;
  }

  async #update(
    key: RowKey,
    input: Pick<
      ConstructorParameters<typeof UpdateItemCommand>[0],
      'UpdateExpression' | 'ConditionExpression' | 'ExpressionAttributeNames' | 'ExpressionAttributeValues'
    >,
  ): Promise<boolean> {
    try {
      await this.client.send(new UpdateItemCommand({ TableName: this.tableName, Key: keys.row(key), ...input }));
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }

  async #put(item: Item): Promise<void> {
    await this.client.send(new PutItemCommand({ TableName: this.tableName, Item: item }));
  }
}

function headOf(operationId: string, item: Item): OperationHead | undefined {
  const tenant = item.tenant?.S;
  const createdAtMs = Number(item.createdAt?.N);
  const shardCount = Number(item.shardCount?.N);
  let filter;
  try {
    filter = filterOfJson(JSON.parse(item.filter?.S ?? 'null'));
  } catch {
    return undefined;
  }
  if (!tenant || !filter || !Number.isSafeInteger(createdAtMs) || !Number.isSafeInteger(shardCount)) return undefined;
  return { operationId, tenant, filter, createdAtMs, shardCount };
}

function seenOf(shard: number, item: Item, mark: string): SeenRow | undefined {
  const sk = item.sk?.S;
  if (sk === undefined || sk.indexOf('#') !== 13) return undefined;
  const dueMs = Number(sk.slice(0, 13));
  const m = item[mark]?.S;
  const tags = item.tags?.L?.flatMap((t) => (t.S !== undefined ? [t.S] : []));
  return {
    key: { shard, dueMs, jobId: sk.slice(14) },
    state: item.state?.S ?? 'SCHEDULED',
    ...(m !== undefined ? { mark: m } : {}),
    ...(tags !== undefined ? { tags } : {}),
    ...(item.sched?.S !== undefined ? { schedule: item.sched.S } : {}),
    ...(item.sa?.N !== undefined ? { sentAtMs: Number(item.sa.N) } : {}),
    ...(item.leaseUntil?.N !== undefined ? { leaseUntil: Number(item.leaseUntil.N) } : {}),
    ...(item.ck?.S !== undefined ? { concurrencyKey: item.ck.S, concurrencyLimit: Number(item.cl?.N ?? 1) || 1 } : {}),
  };
}

const expired = (item: Item) => item.expiresAt?.N !== undefined && Number(item.expiresAt.N) * 1000 <= Date.now();
