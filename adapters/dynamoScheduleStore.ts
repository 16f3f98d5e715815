import {
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  QueryCommand,
  UpdateItemCommand,
  type AttributeValue,
} from '@aws-sdk/client-dynamodb';
import type { OccurrenceAudits, PendingCancel, ScheduleRecord, ScheduleStore } from '../core/recurring/index.js';
import { isConditionFailure, payloadAttribute, payloadOf, rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** Partition of a tenant's schedule items: one per tenant, read by the list (a query). */
export const schedulePk = (tenant: string) => `sched#${tenant}`;

/**
 * The never-fired check's items (core/recurring/audit.ts), one partition: `sk = tenants` (string
 * set `t`: the tenants with schedules) and `sk = audit` (`through`: the last check's window end).
 */
const AUDIT_PK = 'schedaudit';

/** What the item's `doc` attribute holds: the record without its key, revision, watermark and payload. */
type Doc = Omit<ScheduleRecord, 'tenant' | 'name' | 'rev' | 'throughMs' | 'payload'>;

/**
 * The schedule items of the scheduler table: `pk = sched#<tenant>`, `sk = <name>`, attributes
 * `rev` (conditions), `through` (the watermark, moved by firings without touching the rest),
 * `doc` (the definition as JSON) and the payload (as job rows store it).
 */
export class DynamoScheduleStore implements ScheduleStore, OccurrenceAudits {
  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async getSchedule(tenant: string, name: string): Promise<ScheduleRecord | undefined> {
    try {
      const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: key(tenant, name), ConsistentRead: true }));
      return res.Item ? recordOf(res.Item) : undefined;
    } catch (err) {
      rethrow(err);
    }
  }

  async putSchedule(record: ScheduleRecord, expectedRev: string | undefined): Promise<boolean> {
    const { tenant, name, rev, throughMs, payload, ...doc } = record;
    return this.#conditional(
      new PutItemCommand({
        TableName: this.tableName,
        Item: {
          ...key(tenant, name),
          rev: { S: rev },
          through: { N: String(throughMs) },
          doc: { S: JSON.stringify(doc satisfies Doc) },
          ...payloadAttribute(payload),
          // A deleted schedule's marker: the table's TTL removes it.
          ...(doc.expiresAtMs !== undefined ? { expiresAt: { N: String(Math.ceil(doc.expiresAtMs / 1000)) } } : {}),
        },
        ...(expectedRev === undefined
          ? { ConditionExpression: 'attribute_not_exists(pk)' }
          : { ConditionExpression: 'rev = :rev', ExpressionAttributeValues: { ':rev': { S: expectedRev } } }),
      }),
    );
  }

  advanceThrough(tenant: string, name: string, rev: string, throughMs: number): Promise<boolean> {
    return this.#conditional(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: key(tenant, name),
        UpdateExpression: 'SET through = :t',
        ConditionExpression: 'rev = :rev AND through < :t',
        ExpressionAttributeValues: { ':rev': { S: rev }, ':t': { N: String(throughMs) } },
      }),
    );
  }

  async clearPending(tenant: string, name: string, rev: string, revs: readonly string[]): Promise<boolean> {
    // The pending list lives in `doc`: read it, drop those revisions, write it back at the same revision.
    const item = await this.getSchedule(tenant, name);
    if (!item || item.rev !== rev) return false;
    const pending: PendingCancel[] = item.pending.filter((p) => !revs.includes(p.rev));
    if (pending.length === item.pending.length) return true;
    const { tenant: _t, name: _n, rev: _r, throughMs: _th, payload: _p, ...doc } = { ...item, pending };
    return this.#conditional(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: key(tenant, name),
        UpdateExpression: 'SET doc = :doc',
        ConditionExpression: 'rev = :rev',
        ExpressionAttributeValues: { ':rev': { S: rev }, ':doc': { S: JSON.stringify(doc satisfies Doc) } },
      }),
    );
  }

  deleteSchedule(tenant: string, name: string, rev: string): Promise<boolean> {
    return this.#conditional(
      new DeleteItemCommand({
        TableName: this.tableName,
        Key: key(tenant, name),
        ConditionExpression: 'rev = :rev',
        ExpressionAttributeValues: { ':rev': { S: rev } },
      }),
    );
  }

  async listSchedules(tenant: string, limit: number, afterName?: string): Promise<{ records: ScheduleRecord[]; more: boolean }> {
    try {
      const res = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: schedulePk(tenant) } },
          ...(afterName !== undefined ? { ExclusiveStartKey: key(tenant, afterName) } : {}),
          Limit: limit,
          ConsistentRead: true,
        }),
      );
      return { records: (res.Items ?? []).map(recordOf), more: res.LastEvaluatedKey !== undefined };
    } catch (err) {
      rethrow(err);
    }
  }

  async noteScheduleTenant(tenant: string): Promise<void> {
    try {
      await this.client.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: { pk: { S: AUDIT_PK }, sk: { S: 'tenants' } },
          UpdateExpression: 'ADD t :t',
          ExpressionAttributeValues: { ':t': { SS: [tenant] } },
        }),
      );
    } catch (err) {
      rethrow(err);
    }
  }

  async scheduleTenants(): Promise<string[]> {
    const item = await this.#auditItem('tenants');
    return [...(item?.t?.SS ?? [])].sort();
  }

  async auditedThrough(): Promise<number | undefined> {
    const through = (await this.#auditItem('audit'))?.through?.N;
    return through === undefined ? undefined : Number(through);
  }

  async markAudited(throughMs: number): Promise<void> {
    // Never back: a check that ran long must not undo a later one's mark.
    await this.#conditional(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: { pk: { S: AUDIT_PK }, sk: { S: 'audit' } },
        UpdateExpression: 'SET through = :t',
        ConditionExpression: 'attribute_not_exists(through) OR through < :t',
        ExpressionAttributeValues: { ':t': { N: String(throughMs) } },
      }),
    );
  }

  async #auditItem(sk: string): Promise<Item | undefined> {
    try {
      const res = await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: { pk: { S: AUDIT_PK }, sk: { S: sk } } }));
      return res.Item;
    } catch (err) {
      rethrow(err);
    }
  }

  async #conditional(command: PutItemCommand | UpdateItemCommand | DeleteItemCommand): Promise<boolean> {
    try {
      // One client, three command types: the union does not narrow `send`'s overloads.
      await this.client.send(command as PutItemCommand);
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      rethrow(err);
    }
  }
}

function key(tenant: string, name: string): Item {
  return { pk: { S: schedulePk(tenant) }, sk: { S: name } };
}

function recordOf(item: Item): ScheduleRecord {
  const [, tenant = ''] = /^sched#(.*)$/.exec(item.pk?.S ?? '') ?? [];
  const doc = JSON.parse(item.doc?.S ?? '{}') as Doc;
  return {
    ...doc,
    pending: doc.pending ?? [],
    tenant,
    name: item.sk?.S ?? '',
    rev: item.rev?.S ?? '',
    throughMs: Number(item.through?.N ?? 0),
    payload: payloadOf(item),
  };
}
