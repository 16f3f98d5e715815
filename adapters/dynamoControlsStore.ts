import { DynamoDBClient, GetItemCommand, PutItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { type ControlChange, type ControlsStore, DEFAULT_WEIGHT, type TenantControls } from '../core/tenants/index.js';
import { isConditionFailure, rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** The controls item's key: beside the tenant's registration (`tenant#<name>`/`tenant`), never in it. */
export const controlsKey = (tenant: string): Item => ({ pk: { S: `tenant#${tenant}` }, sk: { S: 'controls' } });

/**
 * A tenant's controls in the scheduler table (docs/tenant-controls.md): `pk = tenant#<name>`,
 * `sk = controls`, attributes `paused` (BOOL), `pausedAt` (N, epoch ms), `maxDeliveriesPerSecond`,
 * `maxSubmitsPerSecond`, `weight`, `keyLeaseSeconds` (N; absent limits and lease left out), `rev`
 * (N, the condition of every write) and `changes` (S, the audit trail as JSON text).
 */
export class DynamoControlsStore implements ControlsStore {
  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async getControls(tenant: string): Promise<TenantControls | undefined> {
    try {
      const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: controlsKey(tenant), ConsistentRead: true }));
      return res.Item ? controlsOf(res.Item) : undefined;
    } catch (err) {
      rethrow(err);
    }
  }

  async putControls(tenant: string, controls: TenantControls, expectedRev: number): Promise<boolean> {
    const num = (n: number | undefined) => (n === undefined ? {} : { N: String(n) });
    const item: Item = {
      ...controlsKey(tenant),
      paused: { BOOL: controls.paused },
      weight: { N: String(controls.weight) },
      rev: { N: String(controls.rev) },
      changes: { S: JSON.stringify(controls.changes) },
    };
    if (controls.paused && controls.pausedAtMs !== undefined) item.pausedAt = num(controls.pausedAtMs) as AttributeValue;
    if (controls.maxDeliveriesPerSecond !== undefined) item.maxDeliveriesPerSecond = num(controls.maxDeliveriesPerSecond) as AttributeValue;
    if (controls.maxSubmitsPerSecond !== undefined) item.maxSubmitsPerSecond = num(controls.maxSubmitsPerSecond) as AttributeValue;
    if (controls.keyLeaseSeconds !== undefined) item.keyLeaseSeconds = num(controls.keyLeaseSeconds) as AttributeValue;
    try {
      await this.client.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: item,
          // Optimistic concurrency: the write lands only on the revision it was computed from (rev
          // 0: no item, or one without a revision), so two operators never lose a change.
          ConditionExpression: expectedRev === 0 ? 'attribute_not_exists(rev) OR rev = :rev' : 'rev = :rev',
          ExpressionAttributeValues: { ':rev': { N: String(expectedRev) } },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }
}

function controlsOf(item: Item): TenantControls {
  const n = (a: AttributeValue | undefined) => (a?.N !== undefined && Number.isFinite(Number(a.N)) ? Number(a.N) : undefined);
  let changes: ControlChange[] = [];
  try {
    const parsed: unknown = JSON.parse(item.changes?.S ?? '[]');
    if (Array.isArray(parsed)) changes = parsed as ControlChange[];
  } catch {
    // An unreadable audit trail never hides the controls themselves; the next change starts a new one.
  }
  const paused = item.paused?.BOOL === true;
  const pausedAtMs = n(item.pausedAt);
  const maxDeliveriesPerSecond = n(item.maxDeliveriesPerSecond);
  const maxSubmitsPerSecond = n(item.maxSubmitsPerSecond);
  const keyLeaseSeconds = n(item.keyLeaseSeconds);
  return {
    paused,
    ...(paused && pausedAtMs !== undefined ? { pausedAtMs } : {}),
    ...(maxDeliveriesPerSecond !== undefined ? { maxDeliveriesPerSecond } : {}),
    ...(maxSubmitsPerSecond !== undefined ? { maxSubmitsPerSecond } : {}),
    weight: n(item.weight) ?? DEFAULT_WEIGHT,
    ...(keyLeaseSeconds !== undefined ? { keyLeaseSeconds } : {}),
    rev: n(item.rev) ?? 0,
    changes,
  };
}
