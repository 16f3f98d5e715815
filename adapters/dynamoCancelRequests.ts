import { BatchGetItemCommand, DynamoDBClient, GetItemCommand, PutItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import type { CancelRequests } from '../core/jobs/index.js';
import { type RowKey, sortKey, TABLE_KEY } from '../core/model/index.js';
import { sleep } from '../core/util/index.js';
import { rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** The partition of shard `shard`'s jobs' cancel requests (IAM: `dynamodb:LeadingKeys` `cr#*`). */
export const cancelRequestPartition = (shard: number): string => `cr#${shard}`;

const keyOf = (key: RowKey): Item => ({ pk: { S: cancelRequestPartition(key.shard) }, sk: { S: sortKey(key.dueMs, key.jobId) } });

/**
 * Requests to cancel running jobs (docs/flow-control.md): one item per job beside its outcome
 * records' shard (`cr#<shard>`, the job's sort key), written by `DELETE` of the job, read by the
 * workers' heartbeats (`BatchGetItem`, one request for up to 100 jobs) and by status.
 */
export class DynamoCancelRequests implements CancelRequests {
  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async request(key: RowKey, tenant: string, atMs: number, expiresAtMs: number): Promise<void> {
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            ...keyOf(key),
            tenant: { S: tenant },
            at: { N: String(atMs) },
            [TABLE_KEY.ttlAttribute]: { N: String(Math.ceil(expiresAtMs / 1000)) },
          },
          // The first request's time stands: a repeated DELETE changes nothing.
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
    } catch (err) {
      if ((err as Error)?.name === 'ConditionalCheckFailedException') return;
      rethrow(err);
    }
  }

  async requestedAt(key: RowKey): Promise<number | undefined> {
    try {
      const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: keyOf(key), ConsistentRead: true }));
      const at = Number(res.Item?.at?.N);
      return Number.isSafeInteger(at) ? at : undefined;
    } catch (err) {
      return rethrow(err);
    }
  }

  async requested(keys: readonly RowKey[]): Promise<Set<string>> {
    const out = new Set<string>();
    let pending: Item[] = [...new Map(keys.map((k) => [sortKey(k.dueMs, k.jobId) + k.shard, keyOf(k)])).values()];
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt >= 5) throw new Error(`cancel requests of ${pending.length} jobs could not be read (unprocessed after 5 attempts)`);
      if (attempt > 0) await sleep(25 * 2 ** attempt);
      try {
        const res = await this.client.send(
          new BatchGetItemCommand({
            RequestItems: { [this.tableName]: { Keys: pending, ConsistentRead: true, ProjectionExpression: 'sk' } },
          }),
        );
        for (const item of res.Responses?.[this.tableName] ?? []) {
          const sk = item.sk?.S;
          if (sk !== undefined) out.add(sk.slice(14));
        }
        pending = res.UnprocessedKeys?.[this.tableName]?.Keys ?? [];
      } catch (err) {
        return rethrow(err);
      }
    }
    return out;
  }
}
