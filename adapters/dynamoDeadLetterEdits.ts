import { BatchWriteItemCommand, DynamoDBClient, QueryCommand, type AttributeValue, type WriteRequest } from '@aws-sdk/client-dynamodb';
import type { DeadLetterEdit, DeadLetterEdits } from '../core/deadLetters/index.js';
import { type RowKey, sortKey, TABLE_KEY } from '../core/model/index.js';
import { sleep } from '../core/util/index.js';
import { rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** The partition of a tenant's edit entries (IAM: `dynamodb:LeadingKeys` `dlqa#*`). */
export const auditPartition = (tenant: string): string => `dlqa#${tenant}`;

/** The partition of shard `shard`'s jobs' edit entries, for their timelines (`h#e#*`). */
export const jobEditsPartition = (shard: number): string => `h#e#${shard}`;

/** How long an edit's entries are kept: a year. */
export const EDIT_RETENTION_MS = 365 * 86_400_000;

const at13 = (ms: number) => String(ms).padStart(13, '0');

/**
 * The audit trail of dead-letter edits in the scheduler table: each edit two items written in one
 * BatchWriteItem, one in its tenant's partition (`dlqa#<tenant>`, newest first by its sort key
 * `<atMs>#<jobId>#<messageId>`) and one beside its job's outcome records (`h#e#<shard>`, sort key
 * `<the job's sort key>#<atMs>`), both expiring after {@link EDIT_RETENTION_MS}.
 */
export class DynamoDeadLetterEdits implements DeadLetterEdits {
  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async record(edit: DeadLetterEdit, key: RowKey): Promise<void> {
    const fields: Item = {
      tenant: { S: edit.tenant },
      jobId: { S: edit.jobId },
      by: { S: edit.by },
      at: { N: String(edit.atMs) },
      oldSha256: { S: edit.oldPayloadSha256 },
      newSha256: { S: edit.newPayloadSha256 },
      messageId: { S: edit.messageId },
      [TABLE_KEY.ttlAttribute]: { N: String(Math.ceil((edit.atMs + EDIT_RETENTION_MS) / 1000)) },
    };
    let pending: WriteRequest[] = [
      {
        PutRequest: {
          Item: { pk: { S: auditPartition(edit.tenant) }, sk: { S: `${at13(edit.atMs)}#${edit.jobId}#${edit.messageId}` }, ...fields },
        },
      },
      {
        PutRequest: {
          Item: { pk: { S: jobEditsPartition(key.shard) }, sk: { S: `${sortKey(key.dueMs, key.jobId)}#${at13(edit.atMs)}` }, ...fields },
        },
      },
    ];
    for (let attempt = 0; pending.length > 0; attempt++) {
      if (attempt >= 4) throw new Error(`the audit entry of the edit of ${edit.jobId} could not be written (unprocessed after 4 attempts)`);
      if (attempt > 0) await sleep(50 * 2 ** attempt);
      try {
        const res = await this.client.send(new BatchWriteItemCommand({ RequestItems: { [this.tableName]: pending } }));
        pending = res.UnprocessedItems?.[this.tableName] ?? [];
      } catch (err) {
        return rethrow(err);
      }
    }
  }

  async list(tenant: string, limit: number, cursor?: string): Promise<{ edits: DeadLetterEdit[]; cursor?: string }> {
    try {
      const pk = auditPartition(tenant);
      const res = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk',
          ExpressionAttributeValues: { ':pk': { S: pk } },
          ScanIndexForward: false,
          Limit: limit,
          ...(cursor !== undefined ? { ExclusiveStartKey: { pk: { S: pk }, sk: { S: cursor } } } : {}),
        }),
      );
      const last = res.LastEvaluatedKey?.sk?.S;
      return { edits: (res.Items ?? []).flatMap((item) => editOf(item) ?? []), ...(last !== undefined ? { cursor: last } : {}) };
    } catch (err) {
      return rethrow(err);
    }
  }

  async ofJob(key: RowKey): Promise<DeadLetterEdit[]> {
    try {
      const res = await this.client.send(
        new QueryCommand({
          TableName: this.tableName,
          KeyConditionExpression: 'pk = :pk AND begins_with(sk, :prefix)',
          ExpressionAttributeValues: { ':pk': { S: jobEditsPartition(key.shard) }, ':prefix': { S: `${sortKey(key.dueMs, key.jobId)}#` } },
          ConsistentRead: true,
          Limit: 100,
        }),
      );
      return (res.Items ?? []).flatMap((item) => editOf(item) ?? []);
    } catch (err) {
      return rethrow(err);
    }
  }
}

function editOf(item: Item): DeadLetterEdit | undefined {
  const s = (name: string) => item[name]?.S;
  const [tenant, jobId, by, oldSha, newSha, messageId] = ['tenant', 'jobId', 'by', 'oldSha256', 'newSha256', 'messageId'].map(s);
  const atMs = Number(item.at?.N);
  if (!tenant || !jobId || by === undefined || !oldSha || !newSha || !messageId || !Number.isSafeInteger(atMs)) return undefined;
  return { atMs, tenant, jobId, by, oldPayloadSha256: oldSha, newPayloadSha256: newSha, messageId };
}
