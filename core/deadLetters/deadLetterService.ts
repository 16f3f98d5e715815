import {
  ApiError,
  type Clock,
  InvalidJobIdError,
  isoMs,
  type JobIdCodec,
  MAX_BATCH_BYTES,
  MAX_BATCH_ENTRIES,
  packGreedy,
  parseJsonBody,
  payloadTextOf,
  PayloadTooLargeError,
  type SchedulerSettings,
  ValidationError,
} from '../model/index.js';
import { assertTenantName, type TenantRegistry } from '../tenants/index.js';
import { type DeadLetterEdit, type DeadLetterEdits, sha256, withPayload } from './edits.js';

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
  /** The edits' audit trail (edit and audit need it). */
  readonly edits?: DeadLetterEdits;
  /** An edited payload's limit, as submit's. @default DEFAULT_SETTINGS' */
  readonly settings?: Pick<SchedulerSettings, 'maxPayloadBytes'>;
}

/** What an edit answers: the job put back, the payloads' hashes, and a send whose delete failed. */
export interface EditReply {
  readonly jobId: string;
  readonly editedAt: string;
  readonly oldPayloadSha256: string;
  readonly newPayloadSha256: string;
  /** Sent with its new payload, and still in the DLQ too (its delete failed): delete it by its handle, never edit or redrive it again. */
  readonly sentNotDeleted?: true;
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

  /**
   * `{"handle", "payload"}`: the dead letter back on the tenant queue with `payload` (its JSON text
   * as sent, byte for byte) in place of its own, every other byte of its body and its attributes
   * kept (the worker's error dropped, as a redrive drops it), then deleted from the DLQ; its audit
   * entry (`by`, the payloads' SHA-256) written before the send. Only a Dynein delivery of the
   * tenant can be edited.
   *
   * @throws ValidationError, PayloadTooLargeError, DeadLetterNotFoundError, NotADeliveryError,
   *   EditFailedError (nothing sent: the message is still in the DLQ)
   */
  async edit(tenant: string, body: string | undefined, by: string): Promise<EditReply> {
    assertTenantName(tenant);
    const edits = this.#edits();
    const request = parseEditRequest(body, this.deps.settings ?? { maxPayloadBytes: 240 * 1024 });
    const ids = this.#ids(tenant, [request.handle], 'handle');
    const record = await this.deps.tenants.require(tenant);
    let reply: EditReply | undefined;
    const { done, notFound, sentNotDeleted } = await this.#onFound(record.dlqUrl, ids, async ([m]) => {
      const edit = this.#edited(tenant, m!, request.payload, by);
      await edits.record(edit.entry, edit.key);
      reply = {
        jobId: edit.entry.jobId,
        editedAt: isoMs(edit.entry.atMs),
        oldPayloadSha256: edit.entry.oldPayloadSha256,
        newPayloadSha256: edit.entry.newPayloadSha256,
      };
      return this.#move(record.queueUrl, record.dlqUrl, [m!], () => edit.body);
    });
    if (notFound.length > 0) throw new DeadLetterNotFoundError(tenant);
    if (done.length === 0 && sentNotDeleted.length === 0) throw new EditFailedError();
    return { ...reply!, ...(sentNotDeleted.length > 0 ? { sentNotDeleted: true as const } : {}) };
  }

  /**
   * The tenant's edits, newest first: `?limit=` (1 to 100, default 50) and `?cursor=` (the
   * previous page's).
   */
  async audit(tenant: string, query: Readonly<Record<string, string | undefined>>): Promise<{ edits: AuditEntry[]; cursor?: string }> {
    assertTenantName(tenant);
    const edits = this.#edits();
    const raw = query.limit;
    if (raw !== undefined && (!/^\d{1,3}$/.test(raw) || Number(raw) < 1 || Number(raw) > AUDIT_PAGE_MAX))
      throw new ValidationError(`limit must be a whole number from 1 to ${AUDIT_PAGE_MAX}, got ${JSON.stringify(raw)}`);
    const cursor = query.cursor;
    const from = cursor === undefined ? undefined : this.#cursorValue(tenant, cursor);
    await this.deps.tenants.require(tenant);
    const page = await edits.list(tenant, raw === undefined ? AUDIT_PAGE_DEFAULT : Number(raw), from);
    return {
      edits: page.edits.map(auditEntry),
      ...(page.cursor !== undefined ? { cursor: this.#cursor(tenant, page.cursor) } : {}),
    };
  }

  #edits(): DeadLetterEdits {
    // Every wiring has one (lambdas/runtime/wiring.ts); a service built without it is a programming error.
    if (!this.deps.edits) throw new Error('DeadLetterService: no audit trail (deps.edits) for edits');
    return this.deps.edits;
  }

  /** The edit of `m`: its new body, its audit entry and its job's key; refused for a message that is not the tenant's delivery, or too large once edited. */
  #edited(tenant: string, m: DlqMessage, payload: string, by: string) {
    const fields = deliveryFields(m.body, tenant);
    const replaced = withPayload(m.body, payload);
    let id;
    try {
      id = fields.jobId !== undefined ? this.deps.codec.parse(fields.jobId) : undefined;
    } catch (err) {
      if (!(err instanceof InvalidJobIdError)) throw err;
    }
    if (!replaced || !id || id.tenant !== tenant) throw new NotADeliveryError(tenant);
    const attributes = carried(m.attributes);
    const bytes = deadLetterBytes({ body: replaced.body, attributes });
    if (bytes > MAX_BATCH_BYTES)
      throw new PayloadTooLargeError(
        `the edited message would be ${bytes} bytes with its attributes, above SQS's ${MAX_BATCH_BYTES}: send a smaller payload; nothing was changed`,
      );
    const entry: DeadLetterEdit = {
      atMs: this.deps.clock.now(),
      tenant,
      jobId: id.jobId,
      by,
      oldPayloadSha256: sha256(replaced.oldPayload),
      newPayloadSha256: sha256(payload),
      messageId: m.messageId,
    };
    return { body: replaced.body, entry, key: { shard: id.shard, dueMs: id.dueMs, jobId: id.jobId } };
  }

  /** A cursor of the tenant's audit: the store's, signed for the tenant. */
  #cursor(tenant: string, value: string): string {
    return `${Buffer.from(value, 'utf8').toString('base64url')}.${this.deps.codec.tag(`dlq-audit\n${tenant}`, value)}`;
  }

  #cursorValue(tenant: string, cursor: string): string {
    const dot = cursor.indexOf('.');
    const value = dot > 0 ? Buffer.from(cursor.slice(0, dot), 'base64url').toString('utf8') : '';
    if (dot <= 0 || this.#cursor(tenant, value) !== cursor)
      throw new ValidationError(`cursor is not one this API issued for tenant '${tenant}': use the cursor of the previous page's reply`);
    return value;
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
    bodyOf: (m: DlqMessage) => string = (m) => m.body,
  ): Promise<{ done: DlqMessage[]; failed: DlqMessage[]; sentNotDeleted: DlqMessage[] }> {
    const copies = msgs.map((m, i) => ({ id: String(i), body: bodyOf(m), attributes: carried(m.attributes) }));
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
  #ids(tenant: string, handles: readonly string[], field = 'handles'): Map<string, string> {
    const ids = new Map<string, string>();
    handles.forEach((handle, i) => {
      const dot = handle.indexOf('.');
      const messageId = dot > 0 ? Buffer.from(handle.slice(0, dot), 'base64url').toString('utf8') : '';
      if (dot <= 0 || this.handleOf(tenant, messageId) !== handle)
        throw new ValidationError(
          `${field === 'handles' ? `handles[${i}]` : field} is not a handle this API issued for tenant '${tenant}': use the handles of GET /v1/tenants/${tenant}/dlq`,
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

/** The attributes a copy sent back to the queue carries: all but the failed attempt's error. */
function carried(attributes: DlqMessage['attributes']): DlqMessage['attributes'] {
  return Object.fromEntries(Object.entries(attributes).filter(([k]) => !DROPPED_ON_REDRIVE.has(k)));
}

/** Audit entries a page holds at most, and by default. */
export const AUDIT_PAGE_MAX = 100;
const AUDIT_PAGE_DEFAULT = 50;

/** An edit as `GET .../dlq/audit` and the job's timeline show it. */
export interface AuditEntry {
  readonly at: string;
  readonly jobId: string;
  readonly by: string;
  readonly oldPayloadSha256: string;
  readonly newPayloadSha256: string;
  readonly messageId: string;
}

export function auditEntry(e: DeadLetterEdit): AuditEntry {
  return {
    at: isoMs(e.atMs),
    jobId: e.jobId,
    by: e.by,
    oldPayloadSha256: e.oldPayloadSha256,
    newPayloadSha256: e.newPayloadSha256,
    messageId: e.messageId,
  };
}

/** The body of an edit: `{"handle": "<handle>", "payload": <JSON>}`, the payload checked as submit checks it. */
function parseEditRequest(
  body: string | undefined,
  settings: Pick<SchedulerSettings, 'maxPayloadBytes'>,
): { handle: string; payload: string } {
  const shape = '{"handle": "<handle>", "payload": <the new payload>}';
  const v = parseJsonBody(body, settings.maxPayloadBytes + 4096, (path) => path.length === 1 && path[0] === 'payload', `JSON: ${shape}`);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ValidationError(`the body must be a JSON object: ${shape}`);
  const o = v as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => k !== 'handle' && k !== 'payload');
  if (unknown.length > 0) throw new ValidationError(`unknown field ${unknown[0]}: the body is ${shape}`);
  if (typeof o.handle !== 'string' || o.handle.length === 0 || o.handle.length > 1024)
    throw new ValidationError(`handle must be a handle string from GET .../dlq: the body is ${shape}`);
  if (!('payload' in o)) throw new ValidationError(`payload is missing (send null for a null payload): the body is ${shape}`);
  return { handle: o.handle, payload: payloadTextOf(o.payload, settings, body) };
}

/** 404: no message of the tenant's DLQ has that handle now (redriven, deleted, edited, or expired). */
export class DeadLetterNotFoundError extends ApiError {
  readonly status = 404;
  readonly code = 'DeadLetterNotFound';
  constructor(tenant: string) {
    super(
      `the tenant '${tenant}' DLQ holds no message with that handle now (redriven, deleted, edited or expired): list it again with GET /v1/tenants/${tenant}/dlq; nothing was changed`,
    );
    this.name = 'DeadLetterNotFoundError';
  }
}

/** 409: the message is not a Dynein delivery of the tenant (sent to its queue by something else): it has no payload to edit. */
export class NotADeliveryError extends ApiError {
  readonly status = 409;
  readonly code = 'NotADelivery';
  constructor(tenant: string) {
    super(
      `the message is not a Dynein delivery of tenant '${tenant}', so it has no payload to edit: redrive or delete it instead; nothing was changed`,
    );
    this.name = 'NotADeliveryError';
  }
}

/** 500: the edited message could not be sent; the dead letter is still in the DLQ, unchanged. */
export class EditFailedError extends ApiError {
  readonly status = 500;
  readonly code = 'InternalError';
  constructor() {
    super('the edited message could not be sent to the queue; the dead letter is still in the DLQ, unchanged: retry the request');
    this.name = 'EditFailedError';
  }
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
