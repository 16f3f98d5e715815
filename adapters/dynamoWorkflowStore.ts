import {
  type AttributeValue,
  BatchWriteItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { type RowKey, sortKey } from '../core/model/index.js';
import { backoffMs, sleep } from '../core/util/index.js';
import type { WorkflowClaim, WorkflowJobSpec, WorkflowRecord, WorkflowStore } from '../core/workflows/index.js';
import { isConditionFailure, rethrow } from './dynamoJobStore.js';
import { batchGetByJob, waitingPartition } from './dynamoWaitingChildren.js';
import { specAttributes, specOf } from './workflowItems.js';

type Item = Record<string, AttributeValue>;

/** The partition of shard `shard`'s workflow job specs (IAM: `dynamodb:LeadingKeys` `wp#*`). */
export const specPartition = (shard: number): string => `wp#${shard}`;
/** The partition of a tenant's workflows and their idempotency claims (IAM: `wf#*`). */
export const workflowPartition = (tenant: string): string => `wf#${tenant}`;

/** Rounds of BatchWriteItem for the items it leaves unprocessed (throttling) before giving up. */
const BATCH_ROUNDS = 8;

const specKey = (k: RowKey): Item => ({ pk: { S: specPartition(k.shard) }, sk: { S: sortKey(k.dueMs, k.jobId) } });
const workflowKey = (tenant: string, workflowId: string): Item => ({ pk: { S: workflowPartition(tenant) }, sk: { S: workflowId } });
const graphKey = (tenant: string, workflowId: string): Item => ({ pk: { S: workflowPartition(tenant) }, sk: { S: `g#${workflowId}` } });
/** A job's waiting record (adapters/dynamoWaitingChildren.ts), where a small spec is kept. */
const recordKey = (k: RowKey): Item => ({ pk: { S: waitingPartition(k.shard) }, sk: { S: sortKey(k.dueMs, k.jobId) } });
const claimKey = (tenant: string, idempotencyKey: string): Item => ({
  pk: { S: workflowPartition(tenant) },
  sk: { S: `k#${idempotencyKey}` },
});

/**
 * Workflows in the scheduler table:
 *
 * - a job's spec (`pk = wp#<shard>`, `sk` that of its waiting record): `tenant`, `wf`, `key`,
 *   the payload (`payload` or deflated `payloadZ`, as rows keep it), `prio` (when not 5), `nc`
 *   (not cancellable), `shards` (the shard count its workflow's ids were derived with), its
 *   timing and failure policy as its waiting record has them (`tk`, `tv`, `pol`), `eb` (its
 *   parents' ends kept that many to an item, for a child of many parents) and `links`, the
 *   deflated JSON `{"p": [parent keys], "c": [[child key, index], ...]}`;
 * - a workflow (`pk = wf#<tenant>`, `sk = <workflowId>`): `created` and `jobs`, the deflated JSON
 *   `[[key, jobId], ...]` in the request's order;
 * - its graph (`pk = wf#<tenant>`, `sk = g#<workflowId>`): `after`, the deflated JSON
 *   `[[key, [parent keys]], ...]` of the jobs with parents (read by GET of the workflow only);
 * - an idempotency claim (`pk = wf#<tenant>`, `sk = k#<idempotencyKey>`): `wf`, `created`, `fp`,
 *   `shards`, and `started` once the workflow's jobs without parents were handed over.
 *
 * Each is written whole by one put; the claim's is conditional (the first claim stands).
 */
export class DynamoWorkflowStore implements WorkflowStore {
  constructor(
    private readonly ddb: DynamoDBClient,
    private readonly tableName: string,
  ) {}

  async claim(tenant: string, idempotencyKey: string, claim: WorkflowClaim): Promise<WorkflowClaim> {
    try {
      await this.ddb.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            ...claimKey(tenant, idempotencyKey),
            wf: { S: claim.workflowId },
            created: { N: String(claim.createdMs) },
            fp: { S: claim.fingerprint },
            shards: { N: String(claim.shardCount) },
          },
          // The first request with this key claims it; a retry (or another body) finds its claim.
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return claim;
    } catch (err) {
      if (!isConditionFailure(err)) return rethrow(err);
    }
    const out = await this.#get(claimKey(tenant, idempotencyKey));
    if (!out?.wf?.S || !out.fp?.S) throw new Error(`the claim of idempotency key '${idempotencyKey}' vanished`);
    return {
      workflowId: out.wf.S,
      createdMs: Number(out.created?.N ?? 0),
      fingerprint: out.fp.S,
      shardCount: Number(out.shards?.N ?? 1),
      ...(out.started?.BOOL === true ? { started: true } : {}),
    };
  }

  async markStarted(tenant: string, idempotencyKey: string): Promise<void> {
    try {
      await this.ddb.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: claimKey(tenant, idempotencyKey),
          UpdateExpression: 'SET started = :t',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: { ':t': { BOOL: true } },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) rethrow(err);
    }
  }

  async putSpecs(specs: readonly WorkflowJobSpec[]): Promise<void> {
    const requests: WriteRequest[] = specs.map((s) => ({ PutRequest: { Item: { ...specKey(s.key), ...specAttributes(s) } } }));
    for (let i = 0; i < requests.length; i += 25) await this.#batchWrite(requests.slice(i, i + 25));
  }

  /** Read on its waiting record first (where a small spec is kept), then apart. */
  async getSpec(key: RowKey): Promise<WorkflowJobSpec | undefined> {
    const record = await this.#get(recordKey(key));
    const onRecord = record && specOf(key, record);
    if (onRecord) return onRecord;
    const item = await this.#get(specKey(key));
    return item && specOf(key, item);
  }

  async getSpecs(keys: readonly RowKey[]): Promise<Map<string, WorkflowJobSpec>> {
    const onRecords = await batchGetByJob(this.ddb, this.tableName, keys, recordKey, specOf, 'workflow job specs');
    const apart = keys.filter((k) => !onRecords.has(k.jobId));
    if (apart.length === 0) return onRecords;
    const specs = await batchGetByJob(this.ddb, this.tableName, apart, specKey, specOf, 'workflow job specs');
    return new Map([...onRecords, ...specs]);
  }

  async putWorkflow(record: WorkflowRecord): Promise<void> {
    try {
      await this.ddb.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            ...workflowKey(record.tenant, record.workflowId),
            created: { N: String(record.createdMs) },
            jobs: { B: deflateRawSync(JSON.stringify([...record.jobs])) },
          },
        }),
      );
    } catch (err) {
      rethrow(err);
    }
  }

  async putGraph(tenant: string, workflowId: string, after: ReadonlyMap<string, readonly string[]>): Promise<void> {
    try {
      await this.ddb.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: { ...graphKey(tenant, workflowId), after: { B: deflateRawSync(JSON.stringify([...after])) } },
        }),
      );
    } catch (err) {
      rethrow(err);
    }
  }

  async getGraph(tenant: string, workflowId: string): Promise<ReadonlyMap<string, readonly string[]>> {
    const item = await this.#get(graphKey(tenant, workflowId));
    if (!item?.after?.B) return new Map();
    return new Map(JSON.parse(inflateRawSync(item.after.B).toString('utf8')) as [string, string[]][]);
  }

  async getWorkflow(tenant: string, workflowId: string): Promise<WorkflowRecord | undefined> {
    const item = await this.#get(workflowKey(tenant, workflowId));
    if (!item?.jobs?.B) return undefined;
    const jobs = JSON.parse(inflateRawSync(item.jobs.B).toString('utf8')) as [string, string][];
    return { workflowId, tenant, createdMs: Number(item.created?.N ?? 0), jobs: new Map(jobs) };
  }

  async #get(key: Item): Promise<Item | undefined> {
    try {
      const out = await this.ddb.send(new GetItemCommand({ TableName: this.tableName, Key: key, ConsistentRead: true }));
      return out.Item;
    } catch (err) {
      return rethrow(err);
    }
  }

  /** One BatchWriteItem of at most 25 puts, its unprocessed items written again with backoff. */
  async #batchWrite(requests: WriteRequest[]): Promise<void> {
    let left = requests;
    for (let round = 0; left.length > 0; round++) {
      if (round === BATCH_ROUNDS) throw new Error(`${left.length} workflow items were not written after ${BATCH_ROUNDS} rounds`);
      if (round > 0) await sleep(backoffMs(round - 1, { baseMs: 50, capMs: 1_000 }));
      try {
        const out = await this.ddb.send(new BatchWriteItemCommand({ RequestItems: { [this.tableName]: left } }));
        left = out.UnprocessedItems?.[this.tableName] ?? [];
      } catch (err) {
        rethrow(err);
      }
    }
  }
}
