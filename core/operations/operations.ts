import { randomBytes } from 'node:crypto';
import {
  ApiError,
  CLOCK_SKEW_ALLOWANCE_MS,
  type Clock,
  INBOUND_MESSAGE_LIFETIME_MS,
  type InboundJob,
  type KeySlots,
  isoMs,
  type QueueSender,
  type SchedulerSettings,
  tombstoneExpiresAtMs,
  ValidationError,
} from '../model/index.js';
import type { TenantRegistry } from '../tenants/index.js';
import { limiter } from '../util/index.js';
import { type CancelFilter, filterJson, matches, parseCancelRequest } from './filter.js';
import { NO_COUNTS, type OperationCounts, type OperationHead, type OperationStore, type PartProgress, type SeenRow } from './ports.js';
import { bulkCancellable, settle, type SettleDeps, type Settled, tally } from './settle.js';

/**
 * Bulk cancel (docs/flow-control.md): `POST /v1/tenants/{tenant}/jobs/cancel` stores the
 * operation, then starts its passes through the inbound queue (ingest runs them: a message per
 * group of shards, each pass resumable from its saved progress). Jobs accepted before the request
 * but still in the inbound queue are the other half: ingest, after writing a message's rows,
 * reads the tenant's operations created after the message was sent and settles its matching jobs
 * itself. Between them every matching job is reached, whichever writes first, and counted once.
 */

/** Shards one pass message covers. */
export const SHARDS_PER_PASS = 8;
/** Rows of one page a pass settles at once. */
const SETTLE_CONCURRENCY = 16;
/** Shards one pass message reads at once. */
const SHARD_CONCURRENCY = 4;

export const OPERATION_ID_PATTERN = /^op1\.[A-Za-z0-9_-]{22}$/;

/** An operation's items expire when no inbound message sent before it can still arrive. */
export const operationExpiresAtMs = (createdAtMs: number): number => createdAtMs + INBOUND_MESSAGE_LIFETIME_MS;

/** A pass message: the operation and the shards it covers (`{"v":5,"op":...}` on the inbound queue). */
export interface PassMessage {
  readonly operationId: string;
  readonly shards: readonly number[];
}

export function passBody(pass: PassMessage): string {
  return JSON.stringify({ v: 5, op: pass.operationId, shards: pass.shards });
}

/** The pass an inbound body names, or undefined when it is not one. */
export function parsePass(body: string): PassMessage | undefined {
  if (!body.startsWith('{"v":5,')) return undefined;
  try {
    const o = JSON.parse(body) as { op?: unknown; shards?: unknown };
    if (typeof o.op !== 'string' || !OPERATION_ID_PATTERN.test(o.op)) return undefined;
    if (!Array.isArray(o.shards) || !o.shards.every((s) => Number.isSafeInteger(s) && s >= 0)) return undefined;
    return { operationId: o.op, shards: o.shards as number[] };
  } catch {
    return undefined;
  }
}

export interface OperationDeps {
  readonly store: OperationStore;
  readonly settings: SchedulerSettings;
  readonly clock: Clock;
  /** Concurrency keys' slots: a keyed row waiting for its slot (holding none) is still cancelled. Absent: it counts as queued. */
  readonly keySlots?: Pick<KeySlots, 'holds'>;
  /** Debounced jobs' generations (docs/flow-control.md#debounce). Absent: their rows count as not cancellable. */
  readonly debounces?: SettleDeps['debounces'];
}

/**
 * Runs a pass until it is done or `deadlineMs` passes: each shard from its saved progress, a page
 * at a time, its counts and position saved after each page. Resolves true when every shard of the
 * pass is done (false: send the pass again to go on). Rows settled but not yet saved when a
 * Lambda dies are settled again by the retry and counted once (their marks name the claimer).
 */
export async function runPass(deps: OperationDeps, pass: PassMessage, deadlineMs: number): Promise<boolean> {
  const found = await deps.store.read(pass.operationId);
  // Expired, or removed because its passes could not be started: nothing to do.
  if (!found) return true;
  const { head, parts } = found;
  const shards = limiter(SHARD_CONCURRENCY);
  const done = await Promise.all(
    pass.shards.map((shard) => shards(() => passShard(deps, head, shard, parts.get(`s#${shard}`), deadlineMs))),
  );
  return done.every(Boolean);
}

async function passShard(
  deps: OperationDeps,
  head: OperationHead,
  shard: number,
  saved: PartProgress | undefined,
  deadlineMs: number,
): Promise<boolean> {
  let progress: PartProgress = saved ?? { ...NO_COUNTS, done: false };
  const limit = limiter(SETTLE_CONCURRENCY);
  const claimer = `s${shard}`;
  while (!progress.done) {
    if (deps.clock.now() >= deadlineMs) return false;
    const readAtMs = deps.clock.now();
    const page = await deps.store.readShard(shard, head, progress.afterSk);
    const now = deps.clock.now();
    // Rows far from their due time are cancelled 25 a request; the others (and any the batches
    // did not write in time) one conditional write each.
    const far = page.rows.filter((row) => farFromDue(row, readAtMs, deps.settings));
    const expiresAt = (row: SeenRow) => tombstoneExpiresAtMs(row.key.dueMs, now, deps.settings);
    const unwritten =
      far.length > 0 ? await deps.store.cancelFar(far, head, `c|${claimer}`, expiresAt, readAtMs + FAR_WRITE_WINDOW_MS) : [];
    const rest = page.rows.filter((row) => !far.includes(row) || unwritten.includes(row));
    const settled: Settled[] = [
      ...far.filter((row) => !unwritten.includes(row)).map((): Settled => 'cancelled'),
      ...(await Promise.all(rest.map((row) => limit(() => settle(deps, head, claimer, row, now))))),
    ];
    const counts = settled.reduce<OperationCounts>(tally, progress);
    const afterSk = page.last ?? progress.afterSk;
    progress = { ...counts, ...(afterSk !== undefined ? { afterSk } : {}), done: !page.more };
    await deps.store.saveProgress(head.operationId, `s#${shard}`, progress, operationExpiresAtMs(head.createdAtMs));
  }
  return true;
}

/**
 * How long after a page's read its far rows may still be written whole. A row is far when it is
 * due more than the lookahead plus {@link FAR_GUARD_MS} after the read: no dispatcher reads a row
 * before its due time less the lookahead, so until then nothing but a cancel writes it (submit
 * writes only into an empty key; occurrences, which schedule changes rewrite, and workflow jobs
 * are never written whole), and the window ends well before that.
 */
export const FAR_WRITE_WINDOW_MS = 30_000;
export const FAR_GUARD_MS = 60_000;

/** Whether a pass may write the row's tombstone whole (see {@link FAR_WRITE_WINDOW_MS}). */
export function farFromDue(row: SeenRow, readAtMs: number, settings: Pick<SchedulerSettings, 'lookaheadMs'>): boolean {
  return (
    row.state === 'SCHEDULED' &&
    row.mark === undefined &&
    row.schedule === undefined &&
    bulkCancellable(row.key.jobId) &&
    row.key.dueMs > readAtMs + settings.lookaheadMs + CLOCK_SKEW_ALLOWANCE_MS + FAR_GUARD_MS
  );
}

/** An inbound message whose jobs ingest wrote: when it was sent, and its jobs. */
export interface IngestedMessage {
  readonly messageId: string;
  readonly sentAtMs: number;
  readonly jobs: readonly InboundJob[];
}

/**
 * After ingest wrote the rows of a tenant's messages: the tenant's operations created after the
 * oldest was sent (a consistent read, after the writes) settle the matching jobs of the messages
 * sent before them. An operation created before the read is seen here; one created after it
 * started its passes after these rows were written, so its passes find them.
 */
export async function settleIngested(deps: OperationDeps, tenant: string, messages: readonly IngestedMessage[]): Promise<void> {
  if (messages.length === 0) return;
  const oldest = Math.min(...messages.map((m) => m.sentAtMs));
  const operations = await deps.store.createdAfter(tenant, oldest);
  for (const head of operations) {
    for (const m of messages) {
      if (m.sentAtMs >= head.createdAtMs) continue;
      const jobs = m.jobs.filter((j) => j.tenant === tenant && matches(head.filter, j));
      if (jobs.length === 0) continue;
      const now = deps.clock.now();
      const limit = limiter(SETTLE_CONCURRENCY);
      // The cancel is tried first (its condition tells what is there); the row is read only when it fails.
      const settled: Settled[] = await Promise.all(
        jobs.map((j) =>
          limit(() =>
            settle(deps, head, `m${m.messageId}`, { key: { shard: j.shard, dueMs: j.dueMs, jobId: j.jobId }, state: 'SCHEDULED' }, now),
          ),
        ),
      );
      const counts = settled.reduce<OperationCounts>(tally, NO_COUNTS);
      if (settled.some((s) => s !== 'none'))
        await deps.store.saveProgress(
          head.operationId,
          `m#${m.messageId}`,
          { ...counts, done: true },
          operationExpiresAtMs(head.createdAtMs),
        );
    }
  }
}

/** `GET /v1/tenants/{tenant}/operations/{operationId}`. */
export interface OperationReply extends OperationCounts {
  readonly operationId: string;
  readonly tenant: string;
  readonly kind: 'cancel';
  readonly filter: Record<string, string>;
  readonly createdAt: string;
  /** `DONE` once every shard's pass has read its whole shard. */
  readonly state: 'RUNNING' | 'DONE';
  readonly matched: number;
}

export interface OperationsServiceDeps extends OperationDeps {
  readonly tenants: TenantRegistry;
  readonly sender: QueueSender;
  readonly inboundQueueUrl?: string;
}

/** `POST /v1/tenants/{tenant}/jobs/cancel` and `GET /v1/tenants/{tenant}/operations/{operationId}`. */
export class OperationsService {
  constructor(private readonly deps: OperationsServiceDeps) {}

  /** Stores a bulk cancel and starts its passes; answers its id (202). */
  async cancel(tenant: string, body: string | undefined): Promise<{ operationId: string; state: 'RUNNING' }> {
    const filter = parseCancelRequest(body);
    await this.deps.tenants.require(tenant);
    const { store, sender, inboundQueueUrl, settings, clock } = this.deps;
    if (!inboundQueueUrl)
      throw new Error('bulk cancel needs the inbound queue (its passes run in ingest): this function has none configured');
    const head: OperationHead = {
      operationId: `op1.${randomBytes(16).toString('base64url')}`,
      tenant,
      filter,
      createdAtMs: clock.now(),
      shardCount: settings.shardCount,
    };
    await store.create(head, operationExpiresAtMs(head.createdAtMs));
    try {
      await startPasses(sender, inboundQueueUrl, head);
    } catch (err) {
      // Without its passes the operation would stay RUNNING: take it back (best effort; its
      // items expire anyway) and let the caller send the request again.
      await store.remove(head).catch(() => undefined);
      throw err;
    }
    return { operationId: head.operationId, state: 'RUNNING' };
  }

  async get(tenant: string, operationId: string): Promise<OperationReply> {
    await this.deps.tenants.require(tenant);
    if (!OPERATION_ID_PATTERN.test(operationId))
      throw new ValidationError(
        `operationId ${JSON.stringify(operationId.slice(0, 80))} is not an operation id: pass it as POST .../jobs/cancel returned it (op1.<22 characters>)`,
      );
    const found = await this.deps.store.read(operationId);
    if (!found || found.head.tenant !== tenant) throw new OperationNotFoundError(tenant);
    return replyOf(found.head, found.parts);
  }
}

async function startPasses(sender: QueueSender, queueUrl: string, head: OperationHead): Promise<void> {
  const shards = Array.from({ length: head.shardCount }, (_, i) => i);
  const messages = [];
  for (let i = 0; i < shards.length; i += SHARDS_PER_PASS) {
    messages.push({
      id: String(messages.length),
      body: passBody({ operationId: head.operationId, shards: shards.slice(i, i + SHARDS_PER_PASS) }),
    });
  }
  for (let i = 0; i < messages.length; i += 10) {
    let batch = messages.slice(i, i + 10);
    for (let attempt = 0; batch.length > 0; attempt++) {
      const failed = await sender.sendBatch(queueUrl, batch);
      if (failed.length > 0 && (attempt >= 2 || failed.some((f) => !f.retryable)))
        throw new Error(`starting the operation's passes failed: ${failed[0]!.message}`);
      batch = batch.filter((m) => failed.some((f) => f.id === m.id));
    }
  }
}

function replyOf(head: OperationHead, parts: ReadonlyMap<string, PartProgress>): OperationReply {
  let counts: OperationCounts = NO_COUNTS;
  let shardsDone = 0;
  for (const [name, p] of parts) {
    counts = {
      cancelled: counts.cancelled + p.cancelled,
      alreadyQueued: counts.alreadyQueued + p.alreadyQueued,
      notCancellable: counts.notCancellable + p.notCancellable,
    };
    if (name.startsWith('s#') && p.done) shardsDone++;
  }
  return {
    operationId: head.operationId,
    tenant: head.tenant,
    kind: 'cancel',
    filter: filterJson(head.filter),
    createdAt: isoMs(head.createdAtMs),
    state: shardsDone >= head.shardCount ? 'DONE' : 'RUNNING',
    matched: counts.cancelled + counts.alreadyQueued + counts.notCancellable,
    ...counts,
  };
}

/** 404: no operation of the tenant has that id (or it expired). */
export class OperationNotFoundError extends ApiError {
  readonly status = 404;
  readonly code = 'OperationNotFound';
  constructor(tenant: string) {
    super(`tenant '${tenant}' has no such operation: operation ids are only valid under the tenant that started them, and kept 21 days`);
    this.name = 'OperationNotFoundError';
  }
}

export type { CancelFilter };
