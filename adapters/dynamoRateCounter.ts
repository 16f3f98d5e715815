import { DynamoDBClient, UpdateItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import type { RateCounterKey, RateCounterStore } from '../core/submit/index.js';
import { isConditionFailure, rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** A submit-rate counter's key: `pk = rate#<tenant>#<slot>`, `sk = <epoch second>`. */
export const rateCounterKey = (k: RateCounterKey): Item => ({ pk: { S: `rate#${k.tenant}#${k.slot}` }, sk: { S: String(k.second) } });

/**
 * The submit-rate counters (core/submit/submitRateLimit.ts) in the scheduler table: attribute `n` (jobs
 * counted) and `expiresAt` (the table's TTL attribute, epoch seconds). One conditional
 * UpdateItem per admitted or refused request of a limited tenant; nothing for the others.
 */
export class DynamoRateCounterStore implements RateCounterStore {
  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async add(key: RateCounterKey, n: number, allowance: number, expiresAtMs: number): Promise<boolean> {
    if (n > allowance) return false;
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: rateCounterKey(key),
          UpdateExpression: 'ADD n :n SET expiresAt = :exp',
          // The count after the add stays within the slot's allowance: a new counter always takes
          // `n` (≤ allowance), an existing one only while `count + n ≤ allowance`.
          ConditionExpression: 'attribute_not_exists(n) OR n <= :room',
          ExpressionAttributeValues: {
            ':n': { N: String(n) },
            ':room': { N: String(allowance - n) },
            ':exp': { N: String(Math.ceil(expiresAtMs / 1000)) },
          },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }
}
