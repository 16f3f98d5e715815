import { DynamoDBClient, GetItemCommand, UpdateItemCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { type KeyFull, type KeySlots, TABLE_KEY } from '../core/model/index.js';
import { isConditionFailure, rethrow } from './dynamoJobStore.js';

type Item = Record<string, AttributeValue>;

/** The partition of a tenant's key (IAM: `dynamodb:LeadingKeys` `ck#*`). */
export const keySlotsPartition = (tenant: string, key: string): string => `ck#${tenant}#${key}`;

/**
 * How long a key item read after a refused take serves the next refusals, and how many are kept.
 * The holders serve only to evict a lease that ran out (10 s at the least, 900 s by default):
 * a copy half the shortest lease old finds it at most 5 s late, and a key whose slots stay full
 * costs one read per 5 s rather than one per refused ask.
 */
const COPY_MS = 5_000;
const MAX_COPIES = 1_000;

/** A key item is kept this long past its last write (its TTL): then a take starts it afresh. */
const KEEP_MS = 86_400_000;

/**
 * The slots of concurrency keys in the scheduler table (core/model/ports.ts {@link KeySlots}):
 * one item per tenant and key, `lim` (the latest submitted limit), `limAt` (when it was
 * submitted) and `h`, the map of the jobs holding a slot to their lease's end.
 */
export class DynamoKeySlots implements KeySlots {
  /** Key items read after a refused take, where the refusal did not carry the item (emulators). */
  readonly #copies = new Map<string, { item: Item; at: number }>();

  constructor(
    private readonly tableName: string,
    private readonly client: DynamoDBClient = new DynamoDBClient({}),
  ) {}

  async setLimit(tenant: string, key: string, limit: number, atMs: number): Promise<void> {
    try {
      await this.#update(tenant, key, {
        UpdateExpression: 'SET lim = :lim, limAt = :at, h = if_not_exists(h, :none), #ttl = :ttl',
        ConditionExpression: 'attribute_not_exists(limAt) OR limAt <= :at',
        ExpressionAttributeNames: { '#ttl': TABLE_KEY.ttlAttribute },
        ExpressionAttributeValues: { ':lim': n(limit), ':at': n(atMs), ':none': { M: {} }, ':ttl': ttl(atMs) },
      });
    } catch (err) {
      if (isConditionFailure(err)) return; // a later submit's limit stands
      rethrow(err);
    }
  }

  async take(tenant: string, key: string, jobId: string, untilMs: number, limit: number, nowMs: number): Promise<true | KeyFull> {
    for (let attempt = 0; ; attempt++) {
      try {
        await this.#update(tenant, key, {
          UpdateExpression: 'SET h.#job = :until, #ttl = :ttl',
          ConditionExpression: 'attribute_exists(h.#job) OR size(h) < lim',
          ExpressionAttributeNames: { '#job': jobId, '#ttl': TABLE_KEY.ttlAttribute },
          ExpressionAttributeValues: { ':until': n(untilMs), ':ttl': ttl(untilMs) },
          ReturnValuesOnConditionCheckFailure: 'ALL_OLD',
        });
        return true;
      } catch (err) {
        if (!isConditionFailure(err)) rethrow(err);
        // DynamoDB answers the item with the failure; an emulator without that reads it, at most
        // once per COPY_MS per key (the holders serve only to evict expired leases, each
        // conditional on the lease read, so an older copy is safe: at worst an eviction fails).
        const old = (err as { Item?: Item }).Item ?? (await this.#recent(tenant, key));
        if (old?.h?.M !== undefined && old.lim?.N !== undefined) return fullOf(old);
        // No item (or one without slots): start it with this job's limit, then take again.
        if (attempt > 0) return { holders: new Map(), limit };
        await this.#update(tenant, key, {
          UpdateExpression: 'SET lim = if_not_exists(lim, :lim), h = if_not_exists(h, :none), #ttl = :ttl',
          ExpressionAttributeNames: { '#ttl': TABLE_KEY.ttlAttribute },
          ExpressionAttributeValues: { ':lim': n(limit), ':none': { M: {} }, ':ttl': ttl(nowMs) },
        }).catch(rethrow);
      }
    }
  }

  async evict(tenant: string, key: string, holders: ReadonlyMap<string, number>): Promise<number> {
    const freed = await Promise.all(
      [...holders].map(async ([jobId, until]) => {
        try {
          await this.#update(tenant, key, {
            UpdateExpression: 'REMOVE h.#job',
            ConditionExpression: 'h.#job = :until',
            ExpressionAttributeNames: { '#job': jobId },
            ExpressionAttributeValues: { ':until': n(until) },
          });
          return 1;
        } catch (err) {
          if (isConditionFailure(err)) return 0; // renewed, or freed already
          return rethrow(err);
        }
      }),
    );
    return freed.reduce<number>((a, b) => a + b, 0);
  }

  async release(tenant: string, key: string, jobId: string): Promise<void> {
    try {
      await this.#update(tenant, key, {
        UpdateExpression: 'REMOVE h.#job',
        ConditionExpression: 'attribute_exists(h.#job)',
        ExpressionAttributeNames: { '#job': jobId },
      });
    } catch (err) {
      if (isConditionFailure(err)) return; // freed already (a repeated report, an expired lease)
      rethrow(err);
    }
  }

  async extend(tenant: string, key: string, jobId: string, untilMs: number): Promise<boolean> {
    try {
      await this.#update(tenant, key, {
        UpdateExpression: 'SET h.#job = :until, #ttl = :ttl',
        ConditionExpression: 'attribute_exists(h.#job)',
        ExpressionAttributeNames: { '#job': jobId, '#ttl': TABLE_KEY.ttlAttribute },
        ExpressionAttributeValues: { ':until': n(untilMs), ':ttl': ttl(untilMs) },
      });
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      return rethrow(err);
    }
  }

  async #recent(tenant: string, key: string): Promise<Item | undefined> {
    const id = keySlotsPartition(tenant, key);
    const now = Date.now();
    const copy = this.#copies.get(id);
    if (copy && now - copy.at < COPY_MS) return copy.item;
    const item = await this.#read(tenant, key);
    if (item?.h?.M !== undefined && item.lim?.N !== undefined) {
      if (this.#copies.size >= MAX_COPIES) this.#copies.delete(this.#copies.keys().next().value!);
      this.#copies.set(id, { item, at: now });
    }
    return item;
  }

  async holds(tenant: string, key: string, jobId: string): Promise<boolean> {
    return (await this.#read(tenant, key))?.h?.M?.[jobId] !== undefined;
  }

  async #read(tenant: string, key: string): Promise<Item | undefined> {
    try {
      return (await this.client.send(new GetItemCommand({ TableName: this.tableName, Key: keyOf(tenant, key), ConsistentRead: true })))
        .Item;
    } catch (err) {
      return rethrow(err);
    }
  }

  #update(
    tenant: string,
    key: string,
    input: Omit<ConstructorParameters<typeof UpdateItemCommand>[0], 'TableName' | 'Key'>,
  ): Promise<unknown> {
    return this.client.send(
      new UpdateItemCommand({
        TableName: this.tableName,
        Key: keyOf(tenant, key),
        ...input,
      }),
    );
  }
}

const keyOf = (tenant: string, key: string): Item => ({
  [TABLE_KEY.partitionKey]: { S: keySlotsPartition(tenant, key) },
  [TABLE_KEY.sortKey]: { S: 'k' },
});
const n = (v: number): AttributeValue => ({ N: String(v) });
const ttl = (fromMs: number): AttributeValue => n(Math.ceil((fromMs + KEEP_MS) / 1000));

function fullOf(item: Item): KeyFull {
  const holders = new Map<string, number>();
  for (const [jobId, v] of Object.entries(item.h?.M ?? {})) holders.set(jobId, Number(v.N ?? 0));
  return { holders, limit: Number(item.lim?.N ?? 1) };
}
