import { DynamoDBClient, GetItemCommand, UpdateItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { DEFAULT_WEIGHT, type ControlChange, type ControlsReader, type TenantControls } from '../core/controls.js';
import type { RateCounterKey, RateCounterStore } from '../core/submitRate.js';
import { isConditionFailure, rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** A submit-rate counter's key: `pk = rate#<tenant>#<slot>`, `sk = <epoch second>`. */
export const rateCounterKey = (k: RateCounterKey): Item => ({ pk: { S: `rate#${k.tenant}#${k.slot}` }, sk: { S: String(k.second) } });

/**
 * The submit-rate counters (core/submitRate.ts) in the scheduler table: attribute `n` (jobs
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

/**
 * A minimal {@link ControlsReader} over the controls item (`pk = tenant#<name>`, `sk = controls`;
 * format in COORD-15 / docs/tenant-controls.md), for submit's rate limit only. Kept small and apart
 * so that the full store (adapters/dynamoControlsStore.ts) can replace it in the wiring.
 */
export function dynamoControlsReader(tableName: string, client: DynamoDBClient): ControlsReader {
  return {
    async getControls(tenant: string): Promise<TenantControls | undefined> {
      const res = await client.send(
        new GetItemCommand({
          TableName: tableName,
          Key: { pk: { S: `tenant#${tenant}` }, sk: { S: 'controls' } },
          ConsistentRead: true,
        }),
      );
      const item = res.Item;
      if (!item) return undefined;
      const num = (a: AttributeValue | undefined) => (a?.N !== undefined && Number.isFinite(Number(a.N)) ? Number(a.N) : undefined);
      let changes: ControlChange[] = [];
      try {
        changes = item.changes?.S ? (JSON.parse(item.changes.S) as ControlChange[]) : [];
      } catch {
        changes = [];
      }
      const maxDeliveriesPerSecond = num(item.maxDeliveriesPerSecond);
      const maxSubmitsPerSecond = num(item.maxSubmitsPerSecond);
      const pausedAtMs = num(item.pausedAt);
      return {
        paused: item.paused?.BOOL === true,
        ...(pausedAtMs !== undefined ? { pausedAtMs } : {}),
        ...(maxDeliveriesPerSecond !== undefined ? { maxDeliveriesPerSecond } : {}),
        ...(maxSubmitsPerSecond !== undefined ? { maxSubmitsPerSecond } : {}),
        weight: num(item.weight) ?? DEFAULT_WEIGHT,
        rev: num(item.rev) ?? 0,
        changes,
      };
    },
  };
}
