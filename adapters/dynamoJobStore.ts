import {
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
  type AttributeValue,
  type QueryCommandOutput,
} from '@aws-sdk/client-dynamodb';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { ThrottledError } from '../core/errors.js';
import { parseSortKey, sortKey } from '../core/jobId.js';
import { tenantItemKey } from '../core/schema.js';
import type { AcquiredRow, CancelRecord, DueKey, JobRow, JobStore, RowKey, RowState, StoredRow, TenantRecord, TenantStore } from '../core/ports.js';

type Item = Record<string, AttributeValue>;

/**
 * Item layout of the scheduler table (one table, pk/sk strings):
 *
 * | item            | pk              | sk                   |
 * |-----------------|-----------------|----------------------|
 * | job row         | `<shard>`       | `<dueMs 13>#<jobId>` |
 * | cancel record   | `c#<shard>`     | `<dueMs 13>#<jobId>` |
 * | group lease     | `lease#<group>` | `lease`              |
 * | tenant          | `tenant#<name>` | `tenant`             |
 */
export const keys = {
  row: (k: RowKey): Item => ({ pk: { S: String(k.shard) }, sk: { S: sortKey(k.dueMs, k.jobId) } }),
  cancelRecord: (k: RowKey): Item => ({ pk: { S: `c#${k.shard}` }, sk: { S: sortKey(k.dueMs, k.jobId) } }),
  groupLease: (group: number): Item => ({ pk: { S: `lease#${group}` }, sk: { S: 'lease' } }),
  tenant: (name: string): Item => {
    const k = tenantItemKey(name); // core/schema.ts: the CDK registration writes the same key
    return { pk: { S: k.pk }, sk: { S: k.sk } };
  },
};

/** Counts what the store read, for the backlog-independence test and the benchmark. */
export interface StoreStats {
  itemsRead: number;
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

const isConditionFailure = (err: unknown) => err instanceof ConditionalCheckFailedException || (err as Error)?.name === 'ConditionalCheckFailedException';

const THROTTLE_NAMES = new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded']);

/** Rethrows throttling as {@link ThrottledError}, so rounds back off instead of failing. */
function rethrow(err: unknown): never {
  if (THROTTLE_NAMES.has((err as Error)?.name)) throw new ThrottledError(`DynamoDB throttled: ${(err as Error).message}`, err);
  throw err;
}

/**
 * The {@link JobStore} on DynamoDB. Every state change is one conditional write whose condition
 * is explained beside it; nothing reads and then writes.
 */
export class DynamoJobStore implements JobStore, TenantStore {
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
          },
          // Only into an empty key: a redelivered message finds its row, a cancelled job its tombstone.
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return 'created';
    } catch (err) {
      if (isConditionFailure(err)) return 'exists';
      rethrow(err);
    }
  }

  async queryDue(shard: number, untilMs: number): Promise<DueKey[]> {
    const out: DueKey[] = [];
    await this.dueRange(shard, untilMs, { projection: 'sk, #state, leaseUntil', names: { '#state': 'state' } }, (item, key) => {
      out.push({ shard, ...key, state: (item.state?.S ?? 'SCHEDULED') as RowState, leaseUntil: Number(item.leaseUntil?.N ?? 0) });
    });
    return out;
  }

  async dueTimes(shard: number, untilMs: number, limit: number): Promise<{ dueMs: number[]; more: boolean }> {
    const dueMs: number[] = [];
    const more = await this.dueRange(shard, untilMs, { projection: 'sk', limit }, (_, key) => void dueMs.push(key.dueMs));
    return { dueMs, more };
  }

  /**
   * Reads a shard's rows due before `untilMs`, from the shard's start (late ingests and expired
   * leases are found however old), page by page, projecting `projection` only; stops after
   * `limit` rows when given (no filter, so Limit bounds exactly the rows returned). Returns
   * whether rows may remain (the read stopped at the limit). TypeScript-private rather than
   * `#private`: the bench wraps the store with `Object.create`, which carries no `#` brand.
   */
  private async dueRange(
    shard: number,
    untilMs: number,
    opts: { projection: string; names?: Record<string, string>; limit?: number },
    onRow: (item: Item, key: { dueMs: number; jobId: string }) => void,
  ): Promise<boolean> {
    let start: Item | undefined;
    let rows = 0;
    do {
      let page: QueryCommandOutput;
      try {
        page = await this.client.send(
          new QueryCommand({
            TableName: this.tableName,
            KeyConditionExpression: 'pk = :pk AND sk < :until',
            ExpressionAttributeNames: opts.names,
            ExpressionAttributeValues: { ':pk': { S: String(shard) }, ':until': { S: `${String(untilMs + 1).padStart(13, '0')}#` } },
            ProjectionExpression: opts.projection,
            Limit: opts.limit === undefined ? undefined : opts.limit - rows,
            ExclusiveStartKey: start,
          }),
        );
      } catch (err) {
        rethrow(err);
      }
      this.stats.itemsRead += page.ScannedCount ?? 0;
      for (const item of page.Items ?? []) {
        rows++;
        const parsed = parseSortKey(item.sk?.S ?? '');
        if (parsed) onRow(item, parsed);
      }
      start = page.LastEvaluatedKey;
    } while (start && (opts.limit === undefined || rows < opts.limit));
    return start !== undefined;
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
      return { ...key, tenant: a.tenant?.S ?? '', payload: payloadOf(a), leaseUntil };
    } catch (err) {
      if (isConditionFailure(err)) return undefined;
      rethrow(err);
    }
  }

  async renew(key: RowKey, heldLeaseUntil: number, newLeaseUntil: number): Promise<boolean> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.row(key),
          UpdateExpression: 'SET leaseUntil = :new',
          // Still ours: ACQUIRED with the lease we wrote. Another round's acquire changed it.
          ConditionExpression: '#state = :acquired AND leaseUntil = :held',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: { ':acquired': { S: 'ACQUIRED' }, ':held': { N: String(heldLeaseUntil) }, ':new': { N: String(newLeaseUntil) } },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }

  async deleteRows(rowKeys: readonly RowKey[]): Promise<RowKey[]> {
    const failed: RowKey[] = [];
    for (let i = 0; i < rowKeys.length; i += 25) {
      const chunk = rowKeys.slice(i, i + 25);
      try {
        // Unconditional: the send succeeded, so the row is done whoever holds it now.
        const res = await this.client.send(
          new BatchWriteItemCommand({ RequestItems: { [this.tableName]: chunk.map((k) => ({ DeleteRequest: { Key: keys.row(k) } })) } }),
        );
        const left = new Set((res.UnprocessedItems?.[this.tableName] ?? []).map((r) => r.DeleteRequest?.Key?.sk?.S));
        for (const k of chunk) if (left.has(sortKey(k.dueMs, k.jobId))) failed.push(k);
      } catch {
        failed.push(...chunk);
      }
    }
    return failed;
  }

  async cancel(key: RowKey, tenant: string, expiresAtMs: number): Promise<'cancelled' | 'acquired'> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.row(key),
          UpdateExpression: 'SET #state = :cancelled, tenant = :tenant, expiresAt = :exp REMOVE payload, payloadZ, leaseUntil',
          // SCHEDULED, already CANCELLED (a repeated cancel), or no row yet: the job still waits
          // in the inbound queue and this tombstone makes its ingest fail. Never ACQUIRED.
          ConditionExpression: 'attribute_not_exists(pk) OR #state = :scheduled OR #state = :cancelled',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: {
            ':cancelled': { S: 'CANCELLED' },
            ':scheduled': { S: 'SCHEDULED' },
            ':tenant': { S: tenant },
            ':exp': { N: String(Math.ceil(expiresAtMs / 1000)) },
          },
        }),
      );
      return 'cancelled';
    } catch (err) {
      if (isConditionFailure(err)) return 'acquired';
      rethrow(err);
    }
  }

  async getRow(key: RowKey): Promise<StoredRow | undefined> {
    const res = await this.client.send(
      new GetItemCommand({ TableName: this.tableName, Key: keys.row(key), ConsistentRead: true, ProjectionExpression: '#state, tenant', ExpressionAttributeNames: { '#state': 'state' } }),
    );
    if (!res.Item) return undefined;
    return { state: (res.Item.state?.S ?? 'SCHEDULED') as RowState, tenant: res.Item.tenant?.S ?? '' };
  }

  async putCancelRecord(key: RowKey, record: CancelRecord, expiresAtMs: number): Promise<boolean> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: { ...keys.cancelRecord(key), kind: { S: record.kind }, atMs: { N: String(record.atMs) }, expiresAt: { N: String(Math.ceil(expiresAtMs / 1000)) } },
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
    const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: keys.cancelRecord(key), ConsistentRead: true }));
    if (!res.Item) return undefined;
    return { kind: res.Item.kind?.S === 'CANCELLED' ? 'CANCELLED' : 'INGESTED', atMs: Number(res.Item.atMs?.N ?? 0) };
  }

  async convertClaim(key: RowKey, claimAtMs: number, nowMs: number): Promise<boolean> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.cancelRecord(key),
          UpdateExpression: 'SET kind = :cancelled, atMs = :now',
          // The very claim we judged old enough: its ingest has finished (and failed on the tombstone).
          ConditionExpression: 'kind = :ingested AND atMs = :claim',
          ExpressionAttributeValues: { ':cancelled': { S: 'CANCELLED' }, ':ingested': { S: 'INGESTED' }, ':claim': { N: String(claimAtMs) }, ':now': { N: String(nowMs) } },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }

  async deleteTombstone(key: RowKey): Promise<void> {
    try {
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.tableName,
          Key: keys.row(key),
          // Only a tombstone: never a live row.
          ConditionExpression: '#state = :cancelled',
          ExpressionAttributeNames: { '#state': 'state' },
          ExpressionAttributeValues: { ':cancelled': { S: 'CANCELLED' } },
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) return;
      rethrow(err);
    }
  }

  async takeGroupLease(group: number, owner: string, ownerStartMs: number, nowMs: number, untilMs: number): Promise<boolean> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keys.groupLease(group),
          UpdateExpression: 'SET #owner = :owner, ownerStart = :start, leaseUntil = :until',
          // Free, expired, ours already, or held by an older execution (the newer one takes over).
          ConditionExpression: 'attribute_not_exists(pk) OR leaseUntil < :now OR #owner = :owner OR ownerStart < :start',
          ExpressionAttributeNames: { '#owner': 'owner' },
          ExpressionAttributeValues: { ':owner': { S: owner }, ':start': { N: String(ownerStartMs) }, ':until': { N: String(untilMs) }, ':now': { N: String(nowMs) } },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }

  async getTenant(name: string): Promise<TenantRecord | undefined> {
    const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: keys.tenant(name) }));
    if (!res.Item) return undefined;
    return { name, queueUrl: res.Item.queueUrl?.S ?? '', dlqUrl: res.Item.dlqUrl?.S ?? '' };
  }

  async putTenant(record: TenantRecord): Promise<void> {
    await this.client.send(
      new PutItemCommand({ TableName: this.tableName, Item: { ...keys.tenant(record.name), queueUrl: { S: record.queueUrl }, dlqUrl: { S: record.dlqUrl } } }),
    );
  }
}
