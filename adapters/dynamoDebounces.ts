import {
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import type { Debounces, Generation, GenerationState } from '../core/debounce/index.js';
import { type RowKey, TABLE_KEY } from '../core/model/index.js';
import { isConditionFailure, keys, rethrow } from './dynamoJobStore.js';
import { markAttribute } from './dynamoOperationStore.js';

type Item = Record<string, AttributeValue>;

/** The partition of a tenant's debounce key (IAM: `dynamodb:LeadingKeys` `db#*`). */
export const debouncePointerPartition = (tenant: string, key: string): string => `db#${tenant}#${key}`;
/** The partition of a debounced job's generation item (IAM: `dg#*`). */
export const generationPartition = (jobId: string): string => `dg#${jobId}`;

/** A bulk cancel's mark on a generation: one attribute per operation, as on rows. */
const MARK_PREFIX = markAttribute('op1.');

const n = (v: number): AttributeValue => ({ N: String(v) });
const ttl = (ms: number): AttributeValue => n(Math.ceil(ms / 1000));

/**
 * Debounce's items in the scheduler table (core/debounce/ports.ts {@link Debounces}): the
 * pointer `db#<tenant>#<key>` / `p` {jobId} and the generation `dg#<jobId>` / `g` {tenant, dkey,
 * shard, gstate, ver, due, first, cap?}.
 */
export class DynamoDebounces implements Debounces {
  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async pointer(tenant: string, key: string): Promise<{ jobId: string; atMs: number } | undefined> {
    const res = await this.client.send(
      new GetItemCommand({
        TableName: this.tableName,
        Key: pointerKey(tenant, key),
        ConsistentRead: true,
        ProjectionExpression: 'jobId, #at',
        ExpressionAttributeNames: { '#at': 'at' },
      }),
    );
    const jobId = res.Item?.jobId?.S;
    return jobId !== undefined ? { jobId, atMs: Number(res.Item?.at?.N ?? 0) } : undefined;
  }

  async setPointer(
    tenant: string,
    key: string,
    jobId: string,
    expected: string | undefined,
    atMs: number,
    expiresAtMs: number,
  ): Promise<boolean> {
    return this.#conditional(
      new PutItemCommand({
        TableName: this.tableName,
        Item: { ...pointerKey(tenant, key), jobId: { S: jobId }, at: n(atMs), [TABLE_KEY.ttlAttribute]: ttl(expiresAtMs) },
        ...(expected === undefined
          ? { ConditionExpression: 'attribute_not_exists(pk)' }
          : { ConditionExpression: 'jobId = :seen', ExpressionAttributeValues: { ':seen': { S: expected } } }),
      }),
    );
  }

  async generation(jobId: string): Promise<Generation | undefined> {
    const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: generationKey(jobId), ConsistentRead: true }));
    return res.Item ? generationOf(jobId, res.Item) : undefined;
  }

  async create(gen: Generation, expiresAtMs: number): Promise<boolean> {
    return this.#conditional(
      new PutItemCommand({
        TableName: this.tableName,
        Item: {
          ...generationKey(gen.jobId),
          tenant: { S: gen.tenant },
          dkey: { S: gen.key },
          shard: n(gen.shard),
          gstate: { S: gen.state },
          ver: { S: gen.ver },
          due: n(gen.dueMs),
          first: n(gen.firstMs),
          ...(gen.capMs !== undefined ? { cap: n(gen.capMs) } : {}),
          [TABLE_KEY.ttlAttribute]: ttl(expiresAtMs),
        },
        // Two first submits of a key may name the same job (one finished the other's pointer): the first write stands.
        ConditionExpression: 'attribute_not_exists(pk)',
      }),
    );
  }

  async move(jobId: string, fromVer: string, to: { readonly ver: string; readonly dueMs: number }, expiresAtMs: number): Promise<boolean> {
    return this.#conditional(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: generationKey(jobId),
        UpdateExpression: 'SET ver = :ver, due = :due, #ttl = :ttl',
        // Still pending, and still at the version the submit read: a dispatcher's claim, a cancel
        // or another replace since makes this one read again.
        ConditionExpression: 'gstate = :open AND ver = :from',
        ExpressionAttributeNames: { '#ttl': TABLE_KEY.ttlAttribute },
        ExpressionAttributeValues: {
          ':ver': { S: to.ver },
          ':due': n(to.dueMs),
          ':ttl': ttl(expiresAtMs),
          ':open': state('OPEN'),
          ':from': { S: fromVer },
        },
      }),
    );
  }

  async claim(jobId: string, ver: string): Promise<boolean> {
    return this.#conditional(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: generationKey(jobId),
        UpdateExpression: 'SET gstate = :sending',
        ConditionExpression: 'ver = :ver AND gstate IN (:open, :sending)',
        ExpressionAttributeValues: { ':sending': state('SENDING'), ':open': state('OPEN'), ':ver': { S: ver } },
      }),
    );
  }

  async cancel(jobId: string): Promise<Generation | undefined> {
    try {
      const res = await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: generationKey(jobId),
          UpdateExpression: 'SET gstate = :cancelled',
          ConditionExpression: 'gstate = :open',
          ExpressionAttributeValues: { ':cancelled': state('CANCELLED'), ':open': state('OPEN') },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return generationOf(jobId, res.Attributes ?? {});
    } catch (err) {
      if (!isConditionFailure(err)) rethrow(err);
      return this.generation(jobId);
    }
  }

  async markForOperation(jobId: string, operationId: string, mark: string, how: 'cancel' | 'count', beforeMs: number): Promise<boolean> {
    const values: Item = { ':mark': { S: mark } };
    let update = 'SET #mark = :mark';
    let condition: string;
    if (how === 'cancel') {
      update += ', gstate = :cancelled';
      condition = 'gstate = :open AND #first < :before';
      Object.assign(values, { ':cancelled': state('CANCELLED'), ':open': state('OPEN'), ':before': n(beforeMs) });
    } else {
      condition = 'gstate = :sending AND attribute_not_exists(#mark)';
      values[':sending'] = state('SENDING');
    }
    return this.#conditional(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: generationKey(jobId),
        UpdateExpression: update,
        ConditionExpression: condition,
        ExpressionAttributeNames: { '#mark': markAttribute(operationId), ...(how === 'cancel' ? { '#first': 'first' } : {}) },
        ExpressionAttributeValues: values,
      }),
    );
  }

  async deleteRow(key: RowKey, ver: string): Promise<void> {
    await this.#conditional(
      new DeleteItemCommand({
        TableName: this.tableName,
        Key: keys.row(key),
        // Only the version named, and never a row a dispatcher holds (it drops it itself).
        ConditionExpression: 'dver = :ver AND #state = :scheduled',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':ver': { S: ver }, ':scheduled': { S: 'SCHEDULED' } },
      }),
    );
  }

  async dropAcquired(key: RowKey, heldLeaseUntil: number): Promise<boolean> {
    return this.#conditional(
      new DeleteItemCommand({
        TableName: this.tableName,
        Key: keys.row(key),
        ConditionExpression: '#state = :acquired AND leaseUntil = :held AND attribute_exists(dkey)',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: { ':acquired': { S: 'ACQUIRED' }, ':held': n(heldLeaseUntil) },
      }),
    );
  }

  /** Sends a conditional write: false when its condition failed. */
  async #conditional(command: PutItemCommand | UpdateItemCommand | DeleteItemCommand): Promise<boolean> {
    try {
      await this.client.send(command as UpdateItemCommand);
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }
}

function pointerKey(tenant: string, key: string): Item {
  return { [TABLE_KEY.partitionKey]: { S: debouncePointerPartition(tenant, key) }, [TABLE_KEY.sortKey]: { S: 'p' } };
}

function generationKey(jobId: string): Item {
  return { [TABLE_KEY.partitionKey]: { S: generationPartition(jobId) }, [TABLE_KEY.sortKey]: { S: 'g' } };
}

function state(s: GenerationState): AttributeValue {
  return { S: s };
}

function generationOf(jobId: string, item: Item): Generation {
  const marks: Record<string, string> = {};
  for (const [name, v] of Object.entries(item)) if (name.startsWith(MARK_PREFIX) && v.S !== undefined) marks[`op1.${name.slice(2)}`] = v.S;
  return {
    jobId,
    tenant: item.tenant?.S ?? '',
    key: item.dkey?.S ?? '',
    shard: Number(item.shard?.N ?? 0),
    state: (item.gstate?.S as GenerationState | undefined) ?? 'OPEN',
    ver: item.ver?.S ?? '',
    dueMs: Number(item.due?.N ?? 0),
    firstMs: Number(item.first?.N ?? 0),
    ...(item.cap?.N !== undefined ? { capMs: Number(item.cap.N) } : {}),
    ...(Object.keys(marks).length > 0 ? { marks } : {}),
  };
}
