import { BatchWriteItemCommand, DynamoDBClient, GetItemCommand, type AttributeValue, type WriteRequest } from '@aws-sdk/client-dynamodb';
import { sleep } from '../core/backoff.js';
import { OUTCOMES, type HistoryStore, type Outcome, type OutcomeRecord } from '../core/history.js';
import { parseSortKey, sortKey } from '../core/jobId.js';
import type { RowKey } from '../core/ports.js';
import { rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** The partition of shard `shard`'s outcome records (IAM: `dynamodb:LeadingKeys` `h#*`). */
export const historyPartition = (shard: number): string => `h#${shard}`;

const key = (k: RowKey): Item => ({ pk: { S: historyPartition(k.shard) }, sk: { S: sortKey(k.dueMs, k.jobId) } });

/** The item of an outcome record. */
export function outcomeItem(r: OutcomeRecord): Item {
  return {
    ...key(r),
    tenant: { S: r.tenant },
    outcome: { S: r.outcome },
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
 * `historyStatus(outcomeRecordOf(item))` (core/history.ts).
 */
export function outcomeRecordOf(item: Item): OutcomeRecord | undefined {
  const shard = /^h#(\d+)$/.exec(item.pk?.S ?? '')?.[1];
  const sk = parseSortKey(item.sk?.S ?? '');
  const outcome = item.outcome?.S as Outcome | undefined;
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

  async putOutcomes(records: readonly OutcomeRecord[]): Promise<number[]> {
    const failed: number[] = [];
    const chunks: number[][] = [];
    for (let i = 0; i < records.length; i += 25) chunks.push(records.slice(i, i + 25).map((_, j) => i + j));
    await Promise.all(
      chunks.map(async (indexes) => {
        const bySk = new Map(
          indexes.map((i) => [`${historyPartition(records[i]!.shard)}/${sortKey(records[i]!.dueMs, records[i]!.jobId)}`, i]),
        );
        let pending: WriteRequest[] = indexes.map((i) => ({ PutRequest: { Item: outcomeItem(records[i]!) } }));
        for (let attempt = 0; pending.length > 0; attempt++) {
          if (attempt >= 4) {
            for (const w of pending) failed.push(bySk.get(`${w.PutRequest!.Item!.pk!.S}/${w.PutRequest!.Item!.sk!.S}`)!);
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
    return failed.sort((a, b) => a - b);
  }

  async getOutcome(k: RowKey): Promise<OutcomeRecord | undefined> {
    const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: key(k), ConsistentRead: true }));
    return res.Item ? outcomeRecordOf(res.Item) : undefined;
  }
}
