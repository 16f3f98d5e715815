import {
  BatchWriteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  QueryCommand,
  type AttributeValue,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { sleep } from '../core/util/index.js';
import { type HistoryStore, type Outcome, type OutcomeRecord, OUTCOMES } from '../core/jobs/index.js';
import { parseSortKey, type RowKey, sortKey } from '../core/model/index.js';
import { rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** The partition of shard `shard`'s outcome records (IAM: `dynamodb:LeadingKeys` `h#*`). */
export const historyPartition = (shard: number): string => `h#${shard}`;

/** The partition of shard `shard`'s attempt items: one per failed attempt, for the timeline. */
export const attemptPartition = (shard: number): string => `h#a#${shard}`;

const key = (k: RowKey): Item => ({ pk: { S: historyPartition(k.shard) }, sk: { S: sortKey(k.dueMs, k.jobId) } });
/** An attempt item's key: the job's sort key and the attempt, zero-padded (attempts sort in order). */
const attemptKey = (r: OutcomeRecord): Item => ({
  pk: { S: attemptPartition(r.shard) },
  sk: { S: `${sortKey(r.dueMs, r.jobId)}#${String(r.attempt).padStart(4, '0')}` },
});

/** The item of an outcome record. */
export function outcomeItem(r: OutcomeRecord): Item {
  return {
    ...key(r),
    tenant: { S: r.tenant },
    // `state`, as the shards' items call it: a listing filters and shows it (core/jobs/listing.ts).
    state: { S: r.outcome },
    attempt: { N: String(r.attempt) },
    receivedAt: { N: String(r.receivedAtMs) },
    durationMs: { N: String(r.durationMs) },
    reportedAt: { N: String(r.reportedAtMs) },
    expiresAt: { N: String(Math.ceil(r.expiresAtMs / 1000)) },
    ...(r.error !== undefined ? { error: { S: r.error } } : {}),
    ...(r.result !== undefined ? { result: { S: r.result } } : {}),
  };
}

/**
 * An outcome record from its item (an `h#<shard>` item, as a listing's Query returns it);
 * undefined for an item that is not one. For list14's JobLister: map with
 * `historyStatus(outcomeRecordOf(item))` (core/jobs/history.ts).
 */
export function outcomeRecordOf(item: Item): OutcomeRecord | undefined {
  const shard = /^h#(?:a#)?(\d+)$/.exec(item.pk?.S ?? '')?.[1];
  const sk = parseSortKey(item.sk?.S?.replace(/#\d{4}$/, '') ?? '');
  const outcome = item.state?.S as Outcome | undefined;
  if (shard === undefined || !sk || !outcome || !OUTCOMES.includes(outcome) || !item.tenant?.S) return undefined;
  return {
    shard: Number(shard),
    dueMs: sk.dueMs,
    jobId: sk.jobId,
    tenant: item.tenant.S,
    outcome,
    attempt: Number(item.attempt?.N ?? 1),
    receivedAtMs: Number(item.receivedAt?.N ?? 0),
    durationMs: Number(item.durationMs?.N ?? 0),
    ...(item.error?.S !== undefined ? { error: item.error.S } : {}),
    ...(item.result?.S !== undefined ? { result: item.result.S } : {}),
    reportedAtMs: Number(item.reportedAt?.N ?? 0),
    expiresAtMs: Number(item.expiresAt?.N ?? 0) * 1000,
  };
}

/** Outcome records in the scheduler table: unconditional puts (a record holds the latest outcome). */
export class DynamoHistoryStore implements HistoryStore {
  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async putOutcomes(records: readonly OutcomeRecord[], failures: readonly OutcomeRecord[] = []): Promise<number[]> {
    // Each record, and an attempt item per failure (kept for the timeline), failed as its job's record.
    const writes: { item: Item; index: number }[] = records.map((r, index) => ({ item: outcomeItem(r), index }));
    const recordOf = new Map(records.map((r, index) => [r.jobId, index]));
    for (const f of failures) {
      const index = recordOf.get(f.jobId);
      if (index !== undefined) writes.push({ item: { ...outcomeItem(f), ...attemptKey(f) }, index });
    }
    const failed = new Set<number>();
    const chunks: (typeof writes)[] = [];
    for (let i = 0; i < writes.length; i += 25) chunks.push(writes.slice(i, i + 25));
    await Promise.all(
      chunks.map(async (chunk) => {
        const indexOf = new Map(chunk.map((w) => [`${w.item.pk!.S}/${w.item.sk!.S}`, w.index]));
        let pending: WriteRequest[] = chunk.map((w) => ({ PutRequest: { Item: w.item } }));
        for (let attempt = 0; pending.length > 0; attempt++) {
          if (attempt >= 4) {
            for (const w of pending) failed.add(indexOf.get(`${w.PutRequest!.Item!.pk!.S}/${w.PutRequest!.Item!.sk!.S}`)!);
            return;
          }
          if (attempt > 0) await sleep(50 * 2 ** attempt);
          try {
            const res = await this.client.send(new BatchWriteItemCommand({ RequestItems: { [this.tableName]: pending } }));
            pending = res.UnprocessedItems?.[this.tableName] ?? [];
          } catch (err) {
            if (attempt >= 3) rethrow(err);
          }
        }
      }),
    );
    return [...failed].sort((a, b) => a - b);
  }

  async getOutcome(k: RowKey): Promise<OutcomeRecord | undefined> {
    const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: key(k), ConsistentRead: true }));
    return res.Item ? outcomeRecordOf(res.Item) : undefined;
  }

  async getFailedAttempts(k: RowKey, limit: number): Promise<OutcomeRecord[]> {
    const res = await this.client.send(
      new QueryCommand({
        TableName: this.tableName,
        KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
        ExpressionAttributeValues: { ':pk': { S: attemptPartition(k.shard) }, ':prefix': { S: `${sortKey(k.dueMs, k.jobId)}#` } },
        ConsistentRead: true,
        Limit: limit,
      }),
    );
    return (res.Items ?? []).flatMap((item) => outcomeRecordOf(item) ?? []);
  }
}
