import {
  BatchWriteItemCommand,
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  type AttributeValue,
  type WriteRequest,
} from '@aws-sdk/client-dynamodb';
import { ThrottledError } from '../core/model/index.js';
import type { IdempotencyEntry, IdempotencyRecord, IdempotencyStore } from '../core/submit/index.js';

type Item = Record<string, AttributeValue>;

/**
 * Idempotency records in the scheduler table: `pk = idem#<keyId>`, `sk = idem`, with `jobId`,
 * `fp` (the request's fingerprint), `sent` and `expiresAt` (epoch seconds, the table's TTL
 * attribute: the end of the window). One item per key, so the keys spread over partitions.
 */
export const idempotencyKey = (keyId: string): Item => ({ pk: { S: `idem#${keyId}` }, sk: { S: 'idem' } });

const seconds = (ms: number) => Math.ceil(ms / 1000);

function itemOf(e: IdempotencyEntry, sent: boolean): Item {
  return {
    ...idempotencyKey(e.keyId),
    jobId: { S: e.jobId },
    fp: { S: e.fingerprint },
    sent: { BOOL: sent },
    expiresAt: { N: String(seconds(e.expiresAtMs)) },
  };
}

const isConditionFailure = (err: unknown): err is ConditionalCheckFailedException =>
  err instanceof ConditionalCheckFailedException || (err as Error)?.name === 'ConditionalCheckFailedException';

const THROTTLE_NAMES = new Set(['ProvisionedThroughputExceededException', 'ThrottlingException', 'RequestLimitExceeded']);

function rethrow(err: unknown): never {
  if (THROTTLE_NAMES.has((err as Error)?.name)) throw new ThrottledError(`DynamoDB throttled: ${(err as Error).message}`, err);
  throw err;
}

/** The {@link IdempotencyStore} on DynamoDB; each state change one conditional write. */
export class DynamoIdempotencyStore implements IdempotencyStore {
  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async claim(
    entry: IdempotencyEntry,
    nowMs: number,
  ): Promise<{ claimed: true } | { claimed: false; existing: IdempotencyRecord | undefined }> {
    // A record counts until the second its window ends; TTL deletes it some time after.
    const nowSeconds = Math.floor(nowMs / 1000);
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: itemOf(entry, false),
          // First writer wins, or over a record whose window has ended (not yet removed by TTL).
          ConditionExpression: 'attribute_not_exists(pk) OR expiresAt < :now',
          ExpressionAttributeValues: { ':now': { N: String(nowSeconds) } },
          // DynamoDB answers the record with the refusal (no second read); dynalite does not.
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        }),
      );
      return { claimed: true };
    } catch (err) {
      if (!isConditionFailure(err)) rethrow(err);
      const item =
        err.Item ??
        (await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: idempotencyKey(entry.keyId), ConsistentRead: true })))
          .Item;
      if (!item || Number(item.expiresAt?.N ?? 0) < nowSeconds) return { claimed: false, existing: undefined };
      return {
        claimed: false,
        existing: {
          jobId: item.jobId?.S ?? '',
          fingerprint: item.fp?.S ?? '',
          sent: item.sent?.BOOL === true,
          expiresAtMs: Number(item.expiresAt?.N ?? 0) * 1000,
        },
      };
    }
  }

  async markSent(entries: readonly IdempotencyEntry[]): Promise<void> {
    for (let i = 0; i < entries.length; i += 25) {
      // Unconditional puts of the whole record, 25 a request: the record is this request's (or
      // the one it replays) for the whole window, far longer than a request lives.
      let requests: WriteRequest[] = entries.slice(i, i + 25).map((e) => ({ PutRequest: { Item: itemOf(e, true) } }));
      for (let tries = 0; tries < 3 && requests.length > 0; tries++) {
        const res = await this.client.send(new BatchWriteItemCommand({ RequestItems: { [this.tableName]: requests } }));
        requests = res.UnprocessedItems?.[this.tableName] ?? [];
      }
    }
  }

  async release(keyId: string, jobId: string): Promise<void> {
    try {
      await this.client.send(
        new DeleteItemCommand({
          TableName: this.tableName,
          Key: idempotencyKey(keyId),
          // Only our own record, and only while its job was never sent.
          ConditionExpression: 'jobId = :jobId AND sent = :false',
          ExpressionAttributeValues: { ':jobId': { S: jobId }, ':false': { BOOL: false } },
        }),
      );
    } catch (err) {
      if (isConditionFailure(err)) return;
      rethrow(err);
    }
  }
}
