import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { InvalidJobIdError } from './errors.js';

/**
 * Job ids are self-describing, authenticated tokens:
 *
 *   j1.<tenant>.<shard>.<dueMs>.<path>.<random>.<mac>
 *
 * - `path` is `t` (table, cancellable), `u` (table, not cancellable), `d` (sent straight to
 *   the tenant queue) or `w` (a job of a workflow: the time field is the workflow's creation,
 *   since its due time is not known until its parents end; its waiting record, `w#<shard>` at
 *   that sort key, says where it went) or `b` (a debounced job, docs/flow-control.md#debounce:
 *   the time field is its first due time; its generation item, `dg#<jobId>`, holds where its row
 *   is now and whether it is still pending);
 * - `random` is 12 random bytes in base64url;
 * - `mac` is the first 16 bytes of HMAC-SHA256(key, everything before it), base64url.
 *
 * Status and cancel therefore find the row with one key lookup (`pk = shard`,
 * `sk = dueMs#jobId`) and tell a forged or altered id apart from a real one without reading.
 */
export type JobPath = 't' | 'u' | 'd' | 'w' | 'b';

export interface JobIdParts {
  readonly tenant: string;
  readonly shard: number;
  readonly dueMs: number;
  readonly path: JobPath;
  readonly random: string;
}

export interface ParsedJobId extends JobIdParts {
  readonly jobId: string;
}

export const TENANT_PATTERN = /^[a-z0-9][a-z0-9-]{0,39}$/;
const ID_PATTERN =
  /^j1\.([a-z0-9][a-z0-9-]{0,39})\.(0|[1-9]\d{0,3})\.(0|[1-9]\d{0,14})\.([tudwb])\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22})$/;
const MAX_ID_LENGTH = 120;
const WORKFLOW_ID_PATTERN = /^wf1\.([a-z0-9][a-z0-9-]{0,39})\.(0|[1-9]\d{0,14})\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22})$/;

/** A workflow id this deployment issued (issue #25): `wf1.<tenant>.<createdMs>.<random>.<mac>`. */
export interface ParsedWorkflowId {
  readonly workflowId: string;
  readonly tenant: string;
  /** When the workflow was submitted, epoch ms. */
  readonly createdMs: number;
}

/** Signs and parses job ids with one per-deployment key (at least 32 bytes). */
export class JobIdCodec {
  readonly #key: Buffer;

  constructor(key: Buffer) {
    if (key.length < 32) throw new RangeError(`job id key must be at least 32 bytes, got ${key.length}`);
    this.#key = Buffer.from(key);
  }

  /** Builds the signed id for `parts`. */
  encode(parts: JobIdParts): string {
    const body = `j1.${parts.tenant}.${parts.shard}.${parts.dueMs}.${parts.path}.${parts.random}`;
    return `${body}.${this.#mac(body)}`;
  }

  /**
   * Parses and verifies an id; throws {@link InvalidJobIdError} for anything this deployment did
   * not issue (malformed, altered, or signed with another key).
   */
  parse(jobId: string): ParsedJobId {
    if (typeof jobId !== 'string' || jobId.length > MAX_ID_LENGTH) throw new InvalidJobIdError();
    const m = ID_PATTERN.exec(jobId);
    if (!m) throw new InvalidJobIdError();
    const [, tenant, shard, dueMs, path, random, mac] = m as unknown as [string, string, string, string, JobPath, string, string];
    const expected = Buffer.from(this.#mac(jobId.slice(0, jobId.length - mac.length - 1)));
    const given = Buffer.from(mac);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) throw new InvalidJobIdError();
    const due = Number(dueMs);
    if (!Number.isSafeInteger(due)) throw new InvalidJobIdError();
    return { jobId, tenant, shard: Number(shard), dueMs: due, path, random };
  }

  /**
   * A new workflow's id: `wf1.<tenant>.<createdMs>.<random 12 bytes>.<mac>`, signed as job ids are
   * (the `wf1.` prefix keeps the two apart), so that a tenant's workflow is found, and another
   * tenant's or a forged one told apart, without a read.
   */
  workflowId(tenant: string, createdMs: number): string {
    const body = `wf1.${tenant}.${createdMs}.${randomBytes(12).toString('base64url')}`;
    return `${body}.${this.#mac(body)}`;
  }

  /** The parts of a workflow id this deployment issued; undefined for anything else (malformed, altered, another key's). */
  parseWorkflowId(workflowId: string): ParsedWorkflowId | undefined {
    if (typeof workflowId !== 'string' || workflowId.length > MAX_ID_LENGTH) return undefined;
    const m = WORKFLOW_ID_PATTERN.exec(workflowId);
    if (!m) return undefined;
    const [, tenant, createdMs, , mac] = m as unknown as [string, string, string, string, string];
    const expected = Buffer.from(this.#mac(workflowId.slice(0, workflowId.length - mac.length - 1)));
    const given = Buffer.from(mac);
    if (expected.length !== given.length || !timingSafeEqual(expected, given)) return undefined;
    const created = Number(createdMs);
    return Number.isSafeInteger(created) ? { workflowId, tenant, createdMs: created } : undefined;
  }

  /**
   * The id of job `jobKey` of workflow `workflowId` (created at `createdMs`): path `w`, shard and
   * random part derived (HMAC) from the two, so that a retried submit names the same jobs.
   */
  workflowJobId(workflow: ParsedWorkflowId, jobKey: string, shardCount: number): string {
    const h = createHmac('sha256', this.#key).update(`wfjob\n${workflow.workflowId}\n${jobKey}`).digest();
    const shard = h.readUInt32BE(12) % shardCount;
    return this.encode({
      tenant: workflow.tenant,
      shard,
      dueMs: workflow.createdMs,
      path: 'w',
      random: h.subarray(0, 12).toString('base64url'),
    });
  }

  /** Shard and random part for a new job: uniformly random. */
  placement(_tenant: string, shardCount: number): { shard: number; random: string } {
    return { shard: randomInt(shardCount), random: randomBytes(12).toString('base64url') };
  }

  /**
   * Shard and random part of a recurring schedule's occurrence: derived (HMAC) from the tenant,
   * the schedule, its revision and the occurrence's due time, so that a repeated firing, or a
   * retried one, names the same job and its conditional put finds it.
   */
  occurrencePlacement(tenant: string, schedule: string, rev: string, dueMs: number, shardCount: number): { shard: number; random: string } {
    const h = createHmac('sha256', this.#key).update(`occ\n${tenant}\n${schedule}\n${rev}\n${dueMs}`).digest();
    return { shard: h.readUInt32BE(12) % shardCount, random: h.subarray(0, 12).toString('base64url') };
  }

  /**
   * A tag proving this deployment wrote `text` for `purpose` (paging cursors): 16 bytes of
   * HMAC-SHA256, base64url. Each purpose and scope (a tenant) signs apart.
   */
  tag(purpose: string, text: string): string {
    return createHmac('sha256', this.#key).update(`tag\n${purpose}\n${text}`).digest().subarray(0, 16).toString('base64url');
  }

  /**
   * The id of an idempotency key within its tenant: HMAC-SHA256(tenant, key), 16 bytes in
   * base64url. The idempotency record lives under it (spread over partitions, fixed length,
   * whatever characters the key holds).
   */
  keyId(tenant: string, idempotencyKey: string): string {
    return createHmac('sha256', this.#key).update(`idem\n${tenant}\n${idempotencyKey}`).digest().subarray(0, 16).toString('base64url');
  }

  #mac(body: string): string {
    return createHmac('sha256', this.#key).update(`mac\n${body}`).digest().subarray(0, 16).toString('base64url');
  }
}

/** Zero-padded due time: lexicographic order of sort keys is due order. */
export function sortKey(dueMs: number, jobId: string): string {
  return `${String(dueMs).padStart(13, '0')}#${jobId}`;
}

/** Inverse of {@link sortKey}; returns undefined for keys that are not job rows. */
export function parseSortKey(sk: string): { dueMs: number; jobId: string } | undefined {
  const hash = sk.indexOf('#');
  if (hash !== 13) return undefined;
  const dueMs = Number(sk.slice(0, 13));
  return Number.isSafeInteger(dueMs) ? { dueMs, jobId: sk.slice(14) } : undefined;
}
