import {
  type AttributeValue,
  BatchGetItemCommand,
  type DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
  UpdateItemCommand,
} from '@aws-sdk/client-dynamodb';
import { type RowKey, sortKey } from '../core/model/index.js';
import { backoffMs, limiter, sleep } from '../core/util/index.js';
import type {
  JobEnd,
  NewWaitingChild,
  RecordedEnd,
  ParentFailurePolicy,
  WaitingChildren,
  WaitingRecord,
  WaitingState,
} from '../core/workflows/index.js';
import { isConditionFailure, rethrow, traceAttributes, traceOf } from './dynamoJobStore.js';
import { specAttributes, timingItem, timingOf } from './workflowItems.js';

type Item = Record<string, AttributeValue>;

/** The partition of shard `shard`'s waiting children (IAM: `dynamodb:LeadingKeys` `w#*`). */
export const waitingPartition = (shard: number): string => `w#${shard}`;

/** Puts in flight at once when a workflow's children are written. */
const PUTS_IN_FLIGHT = 16;
const STATES = new Set<WaitingState>(['WAITING', 'RELEASING', 'QUEUING', 'QUEUED', 'CANCELLED']);
const ENDS = new Set<JobEnd['outcome']>(['SUCCEEDED', 'DEAD', 'CANCELLED']);

const keyOf = (k: RowKey): Item => ({ pk: { S: waitingPartition(k.shard) }, sk: { S: sortKey(k.dueMs, k.jobId) } });
/** The item holding the ends of a child's parents `k * perItem` onwards, beside its record. */
const endsItemKey = (k: RowKey, item: number): Item => ({
  pk: { S: waitingPartition(k.shard) },
  sk: { S: `${sortKey(k.dueMs, k.jobId)}#e${item}` },
});

/**
 * Waiting children in the scheduler table (`pk = w#<shard>`, `sk = <createdMs 13>#<jobId>`):
 * `state`, `n` (parents), `e` (a map from a parent's index to its end: `+atMs` succeeded, `-atMs`
 * failed), the timing (`tk` `at` / `delay` / `now`, `tv` its ms), `pol`, `due` once released, and
 * the job's own end once it ended (`o` SUCCEEDED / DEAD / CANCELLED, `oat`; `msg` why cancelled),
 * `hat`, when its hand-over straight to its queue began, `by` (the parent whose end's report
 * handed it over, for a child of several), `res` its result (JSON text) and `rk`
 * (the end was recorded with its result, if any) with its end, `rat` (when the report that
 * recorded it began releasing its children), `told` once its children were all told of its end,
 * and `cx`, the children of it alone cancelled before it ended (a string set of job ids).
 * A parent's end is one `SET e.#i` conditional on `e.#i` being absent: the first report of a parent
 * stands, and a repeated one changes nothing. The payload is not here (kept apart: each of these
 * updates rewrites the whole item, a few bytes a parent). A child of many parents (`bk`, ends
 * per item) keeps them in items beside its record instead (`<sk>#e<k>`, `p<index>` each) and
 * its record a summary of each full one (`s<k>`): see {@link recordParentEnd}.
 */
export class DynamoWaitingChildren implements WaitingChildren {
  readonly #puts = limiter(PUTS_IN_FLIGHT);

  constructor(
    private readonly ddb: DynamoDBClient,
    private readonly tableName: string,
  ) {}

  async create(children: readonly NewWaitingChild[]): Promise<number> {
    const written = await Promise.all(children.map((c) => this.#puts(() => this.#put(c))));
    return written.filter(Boolean).length;
  }

  async #put(child: NewWaitingChild): Promise<boolean> {
    try {
      await this.ddb.send(
        new PutItemCommand({
          TableName: this.tableName,
          Item: {
            ...keyOf(child.key),
            tenant: { S: child.tenant },
            state: { S: child.moved?.to ?? 'WAITING' },
            ...(child.moved ? { due: { N: String(child.moved.dueMs) } } : {}),
            n: { N: String(child.parents) },
            e: { M: {} },
            ...(child.endsPerItem !== undefined ? { bk: { N: String(child.endsPerItem) } } : {}),
            // A small spec kept here (its attributes are the spec item's, none shared with the record's but equal ones).
            ...(child.spec ? specAttributes(child.spec) : {}),
            // The same attributes a spec keeps its trace in (a spec kept here holds the same trace).
            ...traceAttributes(child.trace),
            ...timingItem(child.timing),
            pol: { S: child.onParentFailure },
          },
          ConditionExpression: 'attribute_not_exists(pk)',
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      return rethrow(err);
    }
  }

  async recordParentEnd(
    key: RowKey,
    parent: number,
    ok: boolean,
    atMs: number,
    bucketed?: { readonly perItem: number; readonly parents: number },
  ): Promise<WaitingRecord | 'waiting' | undefined> {
    if (!Number.isInteger(parent) || parent < 0) throw new RangeError(`a parent's index is a whole number ≥ 0, got ${parent}`);
    if (!Number.isSafeInteger(atMs) || atMs <= 0) throw new RangeError(`a parent's end is an epoch ms > 0, got ${atMs}`);
    if (bucketed) return this.#recordInItem(key, parent, ok, atMs, bucketed);
    return recordOf(key, await this.#setOnce(keyOf(key), ['e', String(parent)], { N: String(ok ? atMs : -atMs) }, true));
  }

  /**
   * Sets the attribute at `path` of the item at `itemKey` to `value` unless it has one (the first
   * write stands), on an item that must exist already when `existing`; returns the item after,
   * read strongly consistent when the write found the attribute set (or, `existing`, no item).
   */
  async #setOnce(itemKey: Item, path: readonly string[], value: AttributeValue, existing: boolean): Promise<Item | undefined> {
    const names = Object.fromEntries(path.map((name, i) => [`#n${i}`, name]));
    const at = Object.keys(names).join('.');
    try {
      const out = await this.ddb.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: itemKey,
          UpdateExpression: `SET ${at} = :v`,
          ConditionExpression: `${existing ? 'attribute_exists(pk) AND ' : ''}attribute_not_exists(${at})`,
          ExpressionAttributeNames: names,
          ExpressionAttributeValues: { ':v': value },
          ReturnValues: 'ALL_NEW',
        }),
      );
      return out.Attributes;
    } catch (err) {
      if (!isConditionFailure(err)) return rethrow(err);
    }
    try {
      return (await this.ddb.send(new GetItemCommand({ TableName: this.tableName, Key: itemKey, ConsistentRead: true }))).Item;
    } catch (err) {
      return rethrow(err);
    }
  }

  /**
   * A parent's end kept in the item of its `perItem` (`<sk>#e<k>`, one attribute `p<index>` per
   * parent: the first end stands), then, once every parent of that item ended, the item's summary
   * on the record (`s<k>`: the latest end, and the failed parents' indexes), conditional on its
   * absence: whichever report sees the item full writes it, the same each time. A failure is put
   * on the record at once as well for a child its first failed parent cancels.
   */
  async #recordInItem(
    key: RowKey,
    parent: number,
    ok: boolean,
    atMs: number,
    { perItem, parents }: { readonly perItem: number; readonly parents: number },
  ): Promise<WaitingRecord | 'waiting' | undefined> {
    if (parent >= parents) throw new RangeError(`parent ${parent} of a child of ${parents} parents`);
    const k = Math.floor(parent / perItem);
    const size = Math.min(perItem, parents - k * perItem);
    const ends = await this.#endInItem(key, k, parent, ok ? atMs : -atMs);
    if (!ok) await this.#failureOnRecord(key, parent, atMs);
    if (ends.size < size) return ok ? 'waiting' : this.get(key);
    const values = [...ends.values()];
    const failed = [...ends].filter(([, v]) => v < 0).map(([i]) => i);
    const summary = [String(Math.max(...values.map(Math.abs))), ...failed].join(',');
    return recordOf(key, await this.#setOnce(keyOf(key), [`s${k}`], { S: summary }, true));
  }

  /** Puts a parent's end (`±atMs`) in item `k` unless one is there; returns the item's ends after, by parent index. */
  async #endInItem(key: RowKey, k: number, parent: number, end: number): Promise<Map<number, number>> {
    const item = await this.#setOnce(endsItemKey(key, k), [`p${parent}`], { N: String(end) }, false);
    const ends = new Map<number, number>();
    for (const [name, value] of Object.entries(item ?? {}))
      if (/^p\d+$/.test(name) && value.N !== undefined) ends.set(Number(name.slice(1)), Number(value.N));
    return ends;
  }

  /** A failed parent on a record whose policy cancels the child at its first one (`pol = cancel`); nothing otherwise. */
  async #failureOnRecord(key: RowKey, parent: number, atMs: number): Promise<void> {
    try {
      await this.ddb.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keyOf(key),
          UpdateExpression: 'SET e.#i = :end',
          ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(e.#i) AND pol = :cancel',
          ExpressionAttributeNames: { '#i': String(parent) },
          ExpressionAttributeValues: { ':end': { N: String(-atMs) }, ':cancel': { S: 'cancel' } },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) rethrow(err);
    }
  }

  async moveOnParentEnd(
    key: RowKey,
    parent: number,
    atMs: number,
    to: 'QUEUING' | 'RELEASING',
    dueMs: number,
    handedAtMs?: number,
  ): Promise<boolean> {
    if (!Number.isInteger(parent) || parent < 0) throw new RangeError(`a parent's index is a whole number ≥ 0, got ${parent}`);
    if (!Number.isSafeInteger(atMs) || atMs <= 0) throw new RangeError(`a parent's end is an epoch ms > 0, got ${atMs}`);
    const hat: Item = handedAtMs === undefined ? {} : { ':hat': { N: String(handedAtMs) } };
    try {
      await this.ddb.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keyOf(key),
          UpdateExpression: `SET e.#i = :end, #s = :to, due = :due${handedAtMs === undefined ? '' : ', hat = :hat'}`,
          ConditionExpression: '#s = :waiting AND attribute_not_exists(e.#i)',
          ExpressionAttributeNames: { '#i': String(parent), '#s': 'state' },
          ExpressionAttributeValues: {
            ':end': { N: String(atMs) },
            ':to': { S: to },
            ':due': { N: String(dueMs) },
            ':waiting': { S: 'WAITING' },
            ...hat,
          },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      return rethrow(err);
    }
  }

  async markChildrenTold(key: RowKey): Promise<void> {
    try {
      await this.ddb.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keyOf(key),
          UpdateExpression: 'SET told = :t',
          ConditionExpression: 'attribute_exists(pk)',
          ExpressionAttributeValues: { ':t': { BOOL: true } },
        }),
      );
    } catch (err) {
      if (!isConditionFailure(err)) rethrow(err);
    }
  }

  async get(key: RowKey): Promise<WaitingRecord | undefined> {
    try {
      const out = await this.ddb.send(new GetItemCommand({ TableName: this.tableName, Key: keyOf(key), ConsistentRead: true }));
      return recordOf(key, out.Item);
    } catch (err) {
      return rethrow(err);
    }
  }

  async cancelWaiting(key: RowKey, message: string, atMs: number): Promise<boolean> {
    try {
      await this.ddb.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keyOf(key),
          // Only a job still waiting: one handed over is in its queue's or the table's hands.
          UpdateExpression: 'SET #s = :cancelled, msg = :msg, o = if_not_exists(o, :o), oat = if_not_exists(oat, :at)',
          ConditionExpression: '#s = :waiting',
          ExpressionAttributeNames: { '#s': 'state' },
          ExpressionAttributeValues: {
            ':cancelled': { S: 'CANCELLED' },
            ':waiting': { S: 'WAITING' },
            ':msg': { S: message },
            ':o': { S: 'CANCELLED' },
            ':at': { N: String(atMs) },
          },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      return rethrow(err);
    }
  }

  async recordEnd(key: RowKey, end: JobEnd, result?: string, releasingAtMs?: number): Promise<RecordedEnd | undefined> {
    const sets: Item = {
      ':o': { S: end.outcome },
      ':at': { N: String(end.atMs) },
      ':kept': { BOOL: true },
      ...(result === undefined ? {} : { ':res': { S: result } }),
      ...(releasingAtMs === undefined ? {} : { ':rat': { N: String(releasingAtMs) } }),
    };
    try {
      const out = await this.ddb.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keyOf(key),
          UpdateExpression: `SET o = :o, oat = :at, rk = :kept${result === undefined ? '' : ', res = :res'}${releasingAtMs === undefined ? '' : ', rat = :rat'}`,
          // The first end stands: a repeated or retried report finds it and goes on with it.
          ConditionExpression: 'attribute_exists(pk) AND attribute_not_exists(o)',
          ExpressionAttributeValues: sets,
          // The record before (without the result just written): the children held back before this end.
          ReturnValues: 'ALL_OLD',
        }),
      );
      return {
        end,
        recordedNow: true,
        childrenTold: false,
        heldBack: new Set(out.Attributes?.cx?.SS ?? []),
        ...(releasingAtMs !== undefined ? { releasingAtMs } : {}),
      };
    } catch (err) {
      if (!isConditionFailure(err)) return rethrow(err);
    }
    const record = await this.get(key);
    if (!record?.end) return undefined;
    return {
      end: record.end,
      recordedNow: false,
      childrenTold: record.childrenTold === true,
      heldBack: record.heldBack ?? new Set(),
      ...(record.releasingAtMs !== undefined ? { releasingAtMs: record.releasingAtMs } : {}),
    };
  }

  async holdBack(parent: RowKey, childJobId: string): Promise<boolean> {
    try {
      await this.ddb.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keyOf(parent),
          UpdateExpression: 'ADD cx :c',
          // Only while the parent has not succeeded: its success, one write, reads the set it
          // releases by. A parent that failed releases or cancels its children the long way
          // (each child's own record moves before it is sent), which the child's cancel races there.
          ConditionExpression: 'attribute_exists(pk) AND (attribute_not_exists(o) OR o <> :ok)',
          ExpressionAttributeValues: { ':c': { SS: [childJobId] }, ':ok': { S: 'SUCCEEDED' } },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      return rethrow(err);
    }
  }

  async getMany(keys: readonly RowKey[]): Promise<Map<string, WaitingRecord>> {
    return batchGetByJob(this.ddb, this.tableName, keys, keyOf, recordOf, 'waiting records');
  }

  async transition(
    key: RowKey,
    from: WaitingState,
    to: WaitingState,
    dueMs?: number,
    handedAtMs?: number,
    releasedBy?: number,
  ): Promise<boolean> {
    const sets: Record<string, AttributeValue> = {
      ...(dueMs === undefined ? {} : { due: { N: String(dueMs) } }),
      ...(handedAtMs === undefined ? {} : { hat: { N: String(handedAtMs) } }),
      ...(releasedBy === undefined ? {} : { by: { N: String(releasedBy) } }),
    };
    const names = Object.keys(sets);
    try {
      await this.ddb.send(
        new UpdateItemCommand({
          TableName: this.tableName,
          Key: keyOf(key),
          UpdateExpression: `SET ${['#s = :to', ...names.map((n) => `#${n} = :${n}`)].join(', ')}`,
          ConditionExpression: '#s = :from',
          ExpressionAttributeNames: { '#s': 'state', ...Object.fromEntries(names.map((n) => [`#${n}`, n])) },
          ExpressionAttributeValues: {
            ':from': { S: from },
            ':to': { S: to },
            ...Object.fromEntries(names.map((n) => [`:${n}`, sets[n]!])),
          },
        }),
      );
      return true;
    } catch (err) {
      if (isConditionFailure(err)) return false;
      return rethrow(err);
    }
  }
}

/** Keys read by one BatchGetItem (DynamoDB's limit), and rounds for the keys it leaves unprocessed. */
const BATCH_GET_KEYS = 100;
const BATCH_GET_ROUNDS = 8;

/**
 * Workflow items of jobs (sort key `<13 digits>#<jobId>`) at `keys`, strongly consistent, a hundred
 * a BatchGetItem, the keys it leaves unprocessed read again with backoff; each item made a value by
 * `valueOf` (undefined: left out), by job id. `what` names them in the error after the last round.
 */
export async function batchGetByJob<T>(
  ddb: DynamoDBClient,
  tableName: string,
  keys: readonly RowKey[],
  itemKey: (key: RowKey) => Item,
  valueOf: (key: RowKey, item: Item) => T | undefined,
  what: string,
): Promise<Map<string, T>> {
  const out = new Map<string, T>();
  const byId = new Map(keys.map((k) => [k.jobId, k]));
  for (let i = 0; i < keys.length; i += BATCH_GET_KEYS) {
    let left: Item[] = keys.slice(i, i + BATCH_GET_KEYS).map(itemKey);
    for (let round = 0; left.length > 0; round++) {
      if (round === BATCH_GET_ROUNDS) throw new Error(`${left.length} ${what} were not read after ${BATCH_GET_ROUNDS} rounds`);
      if (round > 0) await sleep(backoffMs(round - 1, { baseMs: 50, capMs: 1_000 }));
      try {
        const res = await ddb.send(new BatchGetItemCommand({ RequestItems: { [tableName]: { Keys: left, ConsistentRead: true } } }));
        for (const item of res.Responses?.[tableName] ?? []) {
          const key = byId.get(item.sk?.S?.slice(14) ?? '');
          const value = key && valueOf(key, item);
          if (key && value !== undefined) out.set(key.jobId, value);
        }
        left = res.UnprocessedKeys?.[tableName]?.Keys ?? [];
      } catch (err) {
        rethrow(err);
      }
    }
  }
  return out;
}

/** The record of an item; undefined for none (or for an item that is not a waiting child). */
function recordOf(key: RowKey, item: Item | undefined): WaitingRecord | undefined {
  const state = item?.state?.S as WaitingState | undefined;
  if (!item || !state || !STATES.has(state) || !item.tenant?.S) return undefined;
  const succeeded = new Set<number>();
  const failed = new Set<number>();
  let lastEndMs = 0;
  for (const [index, end] of Object.entries(item.e?.M ?? {})) {
    const value = Number(end.N);
    (value > 0 ? succeeded : failed).add(Number(index));
    lastEndMs = Math.max(lastEndMs, Math.abs(value));
  }
  // A child of many parents: each full item's summary (`s<k>`: its latest end, then its failed parents).
  const perItem = Number(item.bk?.N ?? 0);
  const parents = Number(item.n?.N ?? 0);
  if (perItem > 0)
    for (const [name, value] of Object.entries(item)) {
      if (!/^s\d+$/.test(name) || value.S === undefined) continue;
      const k = Number(name.slice(1));
      const [latest, ...failures] = value.S.split(',').map(Number);
      const bad = new Set(failures);
      for (let i = k * perItem; i < Math.min(parents, (k + 1) * perItem); i++) (bad.has(i) ? failed : succeeded).add(i);
      lastEndMs = Math.max(lastEndMs, latest ?? 0);
    }
  // A failure put on the record at once and summed up with its item later is counted failed, not both.
  for (const i of failed) succeeded.delete(i);
  return {
    key,
    tenant: item.tenant.S,
    state,
    parents,
    succeeded,
    failed,
    lastEndMs,
    timing: timingOf(item),
    onParentFailure: (item.pol?.S === 'run' ? 'run' : 'cancel') satisfies ParentFailurePolicy,
    ...(item.due?.N !== undefined ? { dueMs: Number(item.due.N) } : {}),
    ...(item.hat?.N !== undefined ? { handedAtMs: Number(item.hat.N) } : {}),
    ...(item.by?.N !== undefined ? { releasedBy: Number(item.by.N) } : {}),
    ...(item.o?.S !== undefined && ENDS.has(item.o.S as JobEnd['outcome'])
      ? { end: { outcome: item.o.S as JobEnd['outcome'], atMs: Number(item.oat?.N ?? 0) } }
      : {}),
    ...(item.msg?.S !== undefined ? { message: item.msg.S } : {}),
    ...(item.told?.BOOL === true ? { childrenTold: true } : {}),
    ...(item.cx?.SS !== undefined ? { heldBack: new Set(item.cx.SS) } : {}),
    ...(item.rat?.N !== undefined ? { releasingAtMs: Number(item.rat.N) } : {}),
    ...(item.rk?.BOOL === true ? { resultKept: true } : {}),
    ...traceOf(item),
    ...(item.res?.S !== undefined ? { result: item.res.S } : {}),
  };
}
