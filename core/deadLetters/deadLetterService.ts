import {
  type Clock,
  type JobIdCodec,
  MAX_BATCH_BYTES,
  MAX_BATCH_ENTRIES,
  packGreedy,
  parseJsonBody,
  ValidationError,
} from '../model/index.js';
import { assertTenantName, type TenantRegistry } from '../tenants/index.js';

/**
 * A tenant's dead-letter queue through the API: peek, redrive all or some, delete some.
 *
 * A message is named by an opaque handle: its SQS message id, signed for the tenant
 * (`codec.tag`), so a handle the API did not issue, or issued to another tenant, is a 400 before
 * any queue is touched (an SQS receipt handle would not do: it changes with every receive, and
 * an emulator may accept any string). Acting on handles receives the DLQ until it has met every
 * named message (others are kept invisible meanwhile and made visible again at the end), then
 * sends or deletes those: a message leaves the DLQ only after its copy was sent.
 */

/** One message attribute: its SQS data type and its value (binary values in base64). */
export interface DlqAttribute {
  readonly dataType: string;
  readonly value: string;
}

/** A message received from a dead-letter queue. */
export interface DlqMessage {
  readonly messageId: string;
  /** This receive's handle (for release, delete). */
  readonly receiptHandle: string;
  readonly body: string;
  readonly attributes: Readonly<Record<string, DlqAttribute>>;
  /** `ApproximateReceiveCount`: receives in the tenant queue and in the DLQ (peeks included). */
  readonly receiveCount: number;
  /** `SentTimestamp`: when the message was first sent (SQS keeps it through the move to the DLQ). */
  readonly sentAtMs?: number;
  /** `ApproximateFirstReceiveTimestamp`: the first delivery to a worker. */
  readonly firstReceivedAtMs?: number;
}

/** The queue operations the service needs (adapters/sqsDeadLetters.ts on SQS). */
export interface DeadLetterQueues {
  /** Up to `max` (1 to 10) messages, hidden for `visibilitySeconds`, waiting up to `waitSeconds` when none. */
  receive(queueUrl: string, max: number, visibilitySeconds: number, waitSeconds: number): Promise<DlqMessage[]>;
  /** Makes received messages visible again at once (visibility 0). */
  release(queueUrl: string, receiptHandles: readonly string[]): Promise<void>;
  /**
   * Sends copies (body and attributes) in `SendMessageBatch` calls packed by
   * {@link packDeadLetters}; answers the ids (of `messages[].id`) that were not sent.
   */
  send(queueUrl: string, messages: readonly DlqCopy[]): Promise<string[]>;
  /** Deletes received messages; answers the receipt handles that failed. */
  delete(queueUrl: string, receiptHandles: readonly string[]): Promise<string[]>;
  /** Starts a move of every message from `dlqUrl` to `queueUrl` (SQS `StartMessageMoveTask`); undefined where unsupported. */
  startMove(dlqUrl: string, queueUrl: string): Promise<{ taskHandle: string } | undefined>;
  /** The latest moves out of `dlqUrl`, newest first (SQS `ListMessageMoveTasks`); none where unsupported. */
  moveTasks(dlqUrl: string): Promise<MoveTask[]>;
  /** `ApproximateNumberOfMessages` (visible messages). */
  depth(queueUrl: string): Promise<number>;
}

/** A move of a DLQ's messages back to its queue, as SQS reports it (counts are approximate). */
export interface MoveTask {
  /** Only while `RUNNING` (SQS names a task only while it can be cancelled). */
  readonly taskHandle?: string;
  readonly status: 'RUNNING' | 'COMPLETED' | 'CANCELLING' | 'CANCELLED' | 'FAILED';
  readonly moved: number;
  /** The messages the task found to move when it started. */
  readonly toMove?: number;
  readonly startedAt: string;
  readonly failureReason?: string;
}

/** A copy of a dead letter to send: its id within the call, body and attributes. */
export interface DlqCopy {
  readonly id: string;
  readonly body: string;
  readonly attributes: DlqMessage['attributes'];
}

/**
 * Bytes SQS counts for a message against a batch's 256 KiB: the body, and each attribute's name,
 * data type and value (a binary value as its bytes, not its base64).
 */
export function deadLetterBytes(m: Pick<DlqCopy, 'body' | 'attributes'>): number {
  let n = Buffer.byteLength(m.body, 'utf8');
  for (const [name, a] of Object.entries(m.attributes))
    n +=
      Buffer.byteLength(name, 'utf8') +
      Buffer.byteLength(a.dataType, 'utf8') +
      (a.dataType.startsWith('Binary') ? Buffer.byteLength(a.value, 'base64') : Buffer.byteLength(a.value, 'utf8'));
  return n;
}

/** Copies in order, in `SendMessageBatch` calls of at most 10 entries and 256 KiB (a larger one alone). */
export function packDeadLetters<T extends Pick<DlqCopy, 'body' | 'attributes'>>(copies: readonly T[]): T[][] {
  return packGreedy(copies, deadLetterBytes, MAX_BATCH_ENTRIES, MAX_BATCH_BYTES);
}

export interface DeadLetterDeps {
  readonly queues: DeadLetterQueues;
  readonly tenants: TenantRegistry;
  readonly codec: JobIdCodec;
  readonly clock: Clock;
}

/** A dead letter as the API shows it. */
export interface DeadLetter {
  /** Names the message in redrive and delete requests of the same tenant. */
  readonly handle: string;
  readonly messageId: string;
  readonly body: string;
  /** Message attributes: `runAt`, `schedule` (Dynein deliveries), `dyneinError` (a worker's UnrecoverableError), others as sent. */
  readonly attributes: Readonly<Record<string, string>>;
  readonly receiveCount: number;
  /** When the message was first sent to the tenant queue (RFC 3339). */
  readonly sentAt?: string;
  /** Its first delivery to a worker, the first attempt that failed (RFC 3339). */
  readonly firstReceivedAt?: string;
  /** Parsed from the body when it is a Dynein delivery. */
  readonly jobId?: string;
  readonly runAt?: string;
  readonly schedule?: string;
}

export const PEEK_MAX = 10;
/** Handles one redrive or delete request may name. */
export const HANDLES_MAX = 100;
/** How long a peek hides the messages it returns if making them visible again failed. */
const PEEK_VISIBILITY_SECONDS = 5;
/** How long a scan for named messages hides the others (made visible again at its end). */
const SCAN_VISIBILITY_SECONDS = 30;
/** A scan stops after this many receives or this long, within the API's 30 s. */
const SCAN_RECEIVES = 50;
const SCAN_MS = 12_000;
/** Attributes a redrive does not carry back to the queue (the worker's error of the failed attempt). */
const DROPPED_ON_REDRIVE = new Set(['dyneinError']);

export class DeadLetterService {
  constructor(private readonly deps: DeadLetterDeps) {}

  /**
   * Up to `max` messages of the tenant's DLQ, left in it: received with a short visibility and
   * made visible again at once. Each receive counts in the message's receive count.
   */
  async peek(
    tenant: string,
    query: Readonly<Record<string, string | undefined>>,
  ): Promise<{ messages: DeadLetter[]; approximateDepth: number }> {
    assertTenantName(tenant);
    const raw = query.max;
    if (raw !== undefined && (!/^\d{1,2}$/.test(raw) || Number(raw) < 1 || Number(raw) > PEEK_MAX))
      throw new ValidationError(`max must be a whole number from 1 to ${PEEK_MAX}, got ${JSON.stringify(raw)}`);
    const max = raw === undefined ? PEEK_MAX : Number(raw);
    const { dlqUrl } = await this.deps.tenants.require(tenant);
    const { queues } = this.deps;
    const msgs = await queues.receive(dlqUrl, max, PEEK_VISIBILITY_SECONDS, 1);
    const [depth] = await Promise.all([
      queues.depth(dlqUrl),
      msgs.length > 0
        ? queues.release(
            dlqUrl,
            msgs.map((m) => m.receiptHandle),
          )
        : undefined,
    ]);
    return { messages: msgs.map((m) => this.#show(tenant, m)), approximateDepth: depth + msgs.length };
  }

  /**
   * `{"all": true}`: every message back to the tenant queue (`StartMessageMoveTask`, or where the
   * queue service lacks it, receive, send, delete until the DLQ is empty or the time is up).
   * `{"handles": [...]}`: those messages back, with their attributes, each deleted once sent.
   */
  async redrive(tenant: string, body: string | undefined): Promise<RedriveReply> {
    assertTenantName(tenant);
    const request = parseRequest(body, true);
    const ids = 'handles' in request ? this.#ids(tenant, request.handles) : undefined;
    const record = await this.deps.tenants.require(tenant);
    if (!ids) return this.#redriveAll(tenant, record.dlqUrl, record.queueUrl);
    const { done, notFound, failed, sentNotDeleted } = await this.#onFound(record.dlqUrl, ids, (found) =>
      this.#move(record.queueUrl, record.dlqUrl, found),
    );
    return {
      redriven: done,
      notFound,
      ...(failed.length > 0 ? { failed } : {}),
      ...(sentNotDeleted.length > 0 ? { sentNotDeleted } : {}),
    };
  }

  /**
   * The latest moves of the tenant's DLQ back to its queue, newest first: what `{"all": true}`
   * started on AWS, with its progress. Empty where the queue service has no move tasks (the local
   * stack's, where `{"all": true}` copies within the request).
   */
  async redriveStatus(tenant: string): Promise<{ tasks: MoveTask[] }> {
    assertTenantName(tenant);
    const { dlqUrl } = await this.deps.tenants.require(tenant);
    return { tasks: await this.deps.queues.moveTasks(dlqUrl) };
  }

  /** `{"handles": [...]}`: deletes those messages from the tenant's DLQ. */
  async delete(tenant: string, body: string | undefined): Promise<{ deleted: string[]; notFound: string[]; failed?: string[] }> {
    assertTenantName(tenant);
    const request = parseRequest(body, false) as { handles: string[] };
    const ids = this.#ids(tenant, request.handles);
    const { dlqUrl } = await this.deps.tenants.require(tenant);
    const { done, notFound, failed } = await this.#onFound(dlqUrl, ids, async (found) => {
      const notDeleted = await this.#deleteAll(dlqUrl, found);
      return { done: found.filter((m) => !notDeleted.has(m)), failed: found.filter((m) => notDeleted.has(m)) };
    });
    return { deleted: done, notFound, ...(failed.length > 0 ? { failed } : {}) };
  }

  /**
   * Sends copies of `msgs` to the tenant queue, then deletes from the DLQ those sent: `done`
   * (sent and deleted), `failed` (not sent: still only in the DLQ), `sentNotDeleted` (sent, and
   * still in the DLQ too: sending it again would deliver it twice; it is to be deleted).
   */
  async #move(
    queueUrl: string,
    dlqUrl: string,
    msgs: readonly DlqMessage[],
  ): Promise<{ done: DlqMessage[]; failed: DlqMessage[]; sentNotDeleted: DlqMessage[] }> {
    const copies = msgs.map((m, i) => ({
      id: String(i),
      body: m.body,
      attributes: Object.fromEntries(Object.entries(m.attributes).filter(([k]) => !DROPPED_ON_REDRIVE.has(k))),
    }));
    // A send that threw as a whole is taken as sending nothing (its messages stay in the DLQ only).
    const notSent = new Set(await this.deps.queues.send(queueUrl, copies).catch(() => copies.map((c) => c.id)));
    const sent = msgs.filter((_, i) => !notSent.has(String(i)));
    const notDeleted = await this.#deleteAll(dlqUrl, sent);
    return {
      done: sent.filter((m) => !notDeleted.has(m)),
      failed: msgs.filter((_, i) => notSent.has(String(i))),
      sentNotDeleted: sent.filter((m) => notDeleted.has(m)),
    };
  }

  /** Deletes received messages from the DLQ; answers those not deleted (all of them when the call threw). */
  async #deleteAll(dlqUrl: string, msgs: readonly DlqMessage[]): Promise<Set<DlqMessage>> {
    if (msgs.length === 0) return new Set();
    const handles = msgs.map((m) => m.receiptHandle);
    const failed = new Set(await this.deps.queues.delete(dlqUrl, handles).catch(() => handles));
    return new Set(msgs.filter((m) => failed.has(m.receiptHandle)));
  }

  /** The handle of a message for a tenant. */
  handleOf(tenant: string, messageId: string): string {
    return `${Buffer.from(messageId, 'utf8').toString('base64url')}.${this.deps.codec.tag(`dlq\n${tenant}`, messageId)}`;
  }

  /** Message ids of the handles (request order) mapped to their handles; a bad handle is a 400 naming it. */
  #ids(tenant: string, handles: readonly string[]): Map<string, string> {
    const ids = new Map<string, string>();
    handles.forEach((handle, i) => {
      const dot = handle.indexOf('.');
      const messageId = dot > 0 ? Buffer.from(handle.slice(0, dot), 'base64url').toString('utf8') : '';
      if (dot <= 0 || this.handleOf(tenant, messageId) !== handle)
        throw new ValidationError(
          `handles[${i}] is not a handle this API issued for tenant '${tenant}': use the handles of GET /v1/tenants/${tenant}/dlq`,
        );
      ids.set(messageId, handle);
    });
    return ids;
  }

  /**
   * Receives the DLQ until every named message was met (or it is empty, or the scan's budget is
   * spent), acts on those found, and makes every other message visible again.
   */
  async #onFound(
    dlqUrl: string,
    ids: ReadonlyMap<string, string>,
    act: (found: DlqMessage[]) => Promise<{ done: DlqMessage[]; failed: DlqMessage[]; sentNotDeleted?: DlqMessage[] }>,
  ): Promise<{ done: string[]; notFound: string[]; failed: string[]; sentNotDeleted: string[] }> {
    const { queues, clock } = this.deps;
    const found = new Map<string, DlqMessage>();
    const others: string[] = [];
    const until = clock.now() + SCAN_MS;
    let acted: { done: DlqMessage[]; failed: DlqMessage[]; sentNotDeleted?: DlqMessage[] } = { done: [], failed: [] };
    try {
      for (let i = 0; i < SCAN_RECEIVES && found.size < ids.size && clock.now() < until; i++) {
        const msgs = await queues.receive(dlqUrl, 10, SCAN_VISIBILITY_SECONDS, 1);
        if (msgs.length === 0) break;
        for (const m of msgs) {
          if (ids.has(m.messageId) && !found.has(m.messageId)) found.set(m.messageId, m);
          else others.push(m.receiptHandle);
        }
      }
      if (found.size > 0) acted = await act([...found.values()]);
    } finally {
      // What was not acted on goes back at once (the rest of the scan, and any failure; a message
      // sent but not deleted too, so that a delete by its handle finds it at once).
      const doneHandles = new Set(acted.done.map((m) => m.receiptHandle));
      const back = [...others, ...[...found.values()].filter((m) => !doneHandles.has(m.receiptHandle)).map((m) => m.receiptHandle)];
      if (back.length > 0) await queues.release(dlqUrl, back).catch(() => undefined);
    }
    const handle = (m: DlqMessage) => ids.get(m.messageId)!;
    return {
      done: acted.done.map(handle),
      failed: acted.failed.map(handle),
      sentNotDeleted: (acted.sentNotDeleted ?? []).map(handle),
      notFound: [...ids].filter(([id]) => !found.has(id)).map(([, h]) => h),
    };
  }

  async #redriveAll(tenant: string, dlqUrl: string, queueUrl: string): Promise<RedriveReply> {
    const { queues, clock } = this.deps;
    const task = await queues.startMove(dlqUrl, queueUrl);
    if (task) return { method: 'StartMessageMoveTask', taskHandle: task.taskHandle };
    // No move task here (the local stack's SQS): receive, send, delete, for as long as the request may take.
    let moved = 0;
    const until = clock.now() + SCAN_MS;
    for (;;) {
      if (clock.now() >= until) return { method: 'copy', moved, complete: false };
      const msgs = await queues.receive(dlqUrl, 10, 60, 1);
      if (msgs.length === 0) return { method: 'copy', moved, complete: true };
      const { done, failed, sentNotDeleted } = await this.#move(queueUrl, dlqUrl, msgs);
      moved += done.length;
      if (failed.length > 0 || sentNotDeleted.length > 0) {
        // Stop: receiving on would send the undeleted ones again. Both kinds are made visible at
        // once: the failed for the next redrive, the sent ones for a delete by their handles.
        await queues
          .release(
            dlqUrl,
            [...failed, ...sentNotDeleted].map((m) => m.receiptHandle),
          )
          .catch(() => undefined);
        return {
          method: 'copy',
          moved,
          complete: false,
          ...(sentNotDeleted.length > 0 ? { sentNotDeleted: sentNotDeleted.map((m) => this.handleOf(tenant, m.messageId)) } : {}),
        };
      }
    }
  }

  #show(tenant: string, m: DlqMessage): DeadLetter {
    const attributes = Object.fromEntries(Object.entries(m.attributes).map(([k, a]) => [k, a.value]));
    return {
      handle: this.handleOf(tenant, m.messageId),
      messageId: m.messageId,
      body: m.body,
      attributes,
      receiveCount: m.receiveCount,
      ...(m.sentAtMs !== undefined ? { sentAt: new Date(m.sentAtMs).toISOString() } : {}),
      ...(m.firstReceivedAtMs !== undefined ? { firstReceivedAt: new Date(m.firstReceivedAtMs).toISOString() } : {}),
      ...deliveryFields(m.body, tenant),
    };
  }
}

/**
 * `failed`: not sent, still in the DLQ (redrive them again). `sentNotDeleted`: sent to the
 * queue but still in the DLQ as well (the delete failed): delete them by these handles, never
 * redrive them again (that would deliver them twice). `moved` counts only messages sent and deleted.
 */
export type RedriveReply =
  | { readonly method: 'StartMessageMoveTask'; readonly taskHandle: string }
  | { readonly method: 'copy'; readonly moved: number; readonly complete: boolean; readonly sentNotDeleted?: string[] }
  | { readonly redriven: string[]; readonly notFound: string[]; readonly failed?: string[]; readonly sentNotDeleted?: string[] };

/** `jobId`, `runAt` and `schedule` of a Dynein delivery body of this tenant; nothing for another body. */
export function deliveryFields(body: string, tenant: string): { jobId?: string; runAt?: string; schedule?: string } {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    return {};
  }
  if (typeof v !== 'object' || v === null) return {};
  const o = v as Record<string, unknown>;
  if (typeof o.jobId !== 'string' || typeof o.runAt !== 'string' || o.tenant !== tenant) return {};
  return { jobId: o.jobId, runAt: o.runAt, ...(typeof o.schedule === 'string' ? { schedule: o.schedule } : {}) };
}

/** The body of a redrive (`{"all": true}` or `{"handles": [...]}`) or delete (`{"handles": [...]}`) request. */
function parseRequest(body: string | undefined, allowAll: boolean): { all: true } | { handles: string[] } {
  const shape = allowAll ? '{"all": true} or {"handles": ["<handle>", ...]}' : '{"handles": ["<handle>", ...]}';
  const v = parseJsonBody(body, Number.POSITIVE_INFINITY, undefined, `JSON: ${shape}`);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ValidationError(`the body must be a JSON object: ${shape}`);
  const o = v as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => k !== 'handles' && !(allowAll && k === 'all'));
  if (unknown.length > 0) throw new ValidationError(`unknown field ${unknown[0]}: the body is ${shape}`);
  if (allowAll && 'all' in o) {
    if (o.all !== true) throw new ValidationError(`all must be true, got ${JSON.stringify(o.all)}`);
    if ('handles' in o) throw new ValidationError('give all or handles, not both');
    return { all: true };
  }
  const handles = o.handles;
  if (!Array.isArray(handles) || handles.length === 0 || handles.length > HANDLES_MAX)
    throw new ValidationError(`handles must be an array of 1 to ${HANDLES_MAX} handles: ${shape}`);
  const bad = handles.findIndex((h) => typeof h !== 'string' || h.length === 0 || h.length > 1024);
  if (bad >= 0) throw new ValidationError(`handles[${bad}] must be a handle string, got ${JSON.stringify(handles[bad])}`);
  if (new Set(handles).size !== handles.length) throw new ValidationError('handles must not repeat a handle');
  return { handles: handles as string[] };
}
