import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { parseJson, RawJson, type JsonPath } from '../util/index.js';
import type { ParsedJobId } from './jobId.js';
import { DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY, type OutgoingMessage } from './ports.js';
import { jobTrace, MAX_TRACESTATE_LENGTH, newSpanId, packTrace, type TraceContext, traceparent, unpackTrace } from './traceContext.js';

/** Largest total size of one SendMessageBatch call we build (SQS's classic 256 KiB limit). */
export const MAX_BATCH_BYTES = 256 * 1024;
export const MAX_BATCH_ENTRIES = 10;

/** RFC 3339 with milliseconds, as delivered messages carry it. */
export function isoMs(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * The body delivered to a tenant queue: `{"jobId", "tenant", "runAt", "payload"}`, and for an
 * occurrence of a recurring schedule `"schedule"` before the payload (and a `schedule` message
 * attribute); for a job of a workflow `"workflow"` (and a `workflow` attribute), and for one with
 * parents `"parents"` (the summary, spliced in as the text it was stored as), before the payload. The payload is spliced in as the JSON text it was stored as, never parsed again.
 * For a tenant with history on (`history`), the attribute `dynein-history` = `1` asks the worker
 * to report the outcome (docs/history.md). A job with a `concurrencyKey` carries it as an
 * attribute: the worker reports its outcome (and heartbeats) with it, whatever the history setting.
 * Every message carries the job's trace (docs/tracing.md): the attribute `traceparent`, whose
 * parent span is this send (a new span id), and `tracestate` when the submit had one.
 */
export function deliveryMessage(
  id: string,
  job: {
    jobId: string;
    tenant: string;
    dueMs: number;
    payload: string;
    schedule?: string;
    workflow?: string;
    parents?: string;
    concurrency?: { readonly key: string };
    trace?: TraceContext;
  },
  delaySeconds?: number,
  opts: { history?: boolean } = {},
): OutgoingMessage {
  const runAt = isoMs(job.dueMs);
  const trace = job.trace ?? jobTrace(job.jobId);
  const schedule = job.schedule === undefined ? '' : `"schedule":${JSON.stringify(job.schedule)},`;
  const workflow =
    (job.workflow === undefined ? '' : `"workflow":${JSON.stringify(job.workflow)},`) +
    (job.parents === undefined ? '' : `"parents":${job.parents},`);
  return {
    id,
    body: `{"jobId":${JSON.stringify(job.jobId)},"tenant":${JSON.stringify(job.tenant)},"runAt":"${runAt}",${schedule}${workflow}"payload":${job.payload}}`,
    attributes: {
      runAt,
      ...(job.schedule === undefined ? {} : { schedule: job.schedule }),
      ...(job.workflow === undefined ? {} : { workflow: job.workflow }),
      // A keyed job holds its key's slot until the worker reports its end (docs/flow-control.md).
      ...(job.concurrency === undefined ? {} : { concurrencyKey: job.concurrency.key }),
      ...(opts.history ? { 'dynein-history': '1' } : {}),
      traceparent: traceparent(trace, newSpanId()),
      ...(trace.state !== undefined ? { tracestate: trace.state } : {}),
    },
    ...(delaySeconds !== undefined ? { delaySeconds } : {}),
  };
}

/** An inbound job: what ingest needs to write the row. */
export interface InboundJob {
  readonly jobId: string;
  readonly tenant: string;
  readonly shard: number;
  readonly dueMs: number;
  readonly payload: string;
  /** An occurrence of a recurring schedule: its name. */
  readonly schedule?: string;
  /** 1..9; carried (`"priority"`) only when not the default 5. */
  readonly priority?: number;
  /** Its tags (`"tags"`), only when it has some. */
  readonly tags?: readonly string[];
  /** A job of a workflow: the workflow's id (`"workflow"`). */
  readonly workflow?: string;
  /** Concurrency by key (`"ck"`, `"cl"`): its key and the limit submitted with it. */
  readonly concurrency?: { readonly key: string; readonly limit: number };
  /** Its parents' summary, a JSON array's text (`"parents"`, spliced in and read back as text). */
  readonly parents?: string;
  /** The trace its submit carried (`"tc"`, `"ts"`: docs/tracing.md); absent: the trace its id derives. */
  readonly trace?: TraceContext;
}

/**
 * Whether an inbound job is the one its id names: the id's tenant and shard, and its due time
 * (a workflow job's id, path `w`, carries the workflow's creation time instead: its due time is
 * the release's, and it is a workflow's job). Never a job sent straight to its queue (path `d`).
 */
export function inboundMatchesId(id: ParsedJobId, job: InboundJob): boolean {
  if (id.tenant !== job.tenant || id.shard !== job.shard || id.path === 'd') return false;
  return id.path === 'w' ? job.workflow !== undefined : id.dueMs === job.dueMs;
}

/**
 * Largest inbound message body we build: SQS's classic 256 KiB limit, less room for attributes.
 * Submit packs the table-path jobs of a request into as few messages as fit, so a batch of 100
 * small jobs costs one send, one receive and one delete instead of ten of each.
 */
export const MAX_INBOUND_MESSAGE_BYTES = 256 * 1024 - 1024;

function inboundJobJson(job: InboundJob): string {
  // The default priority is left out: a default job's entry (and its row) is byte for byte what it was before priorities.
  const prio = job.priority === undefined || job.priority === DEFAULT_PRIORITY ? '' : `"priority":${job.priority},`;
  const tags = job.tags && job.tags.length > 0 ? `"tags":${JSON.stringify(job.tags)},` : '';
  const keyed = job.concurrency ? `"ck":${JSON.stringify(job.concurrency.key)},"cl":${job.concurrency.limit},` : '';
  const workflow =
    (job.workflow === undefined ? '' : `"workflow":${JSON.stringify(job.workflow)},`) +
    (job.parents === undefined ? '' : `"parents":${job.parents},`);
  const trace = job.trace
    ? `"tc":"${packTrace(job.trace)}",${job.trace.state !== undefined ? `"ts":${JSON.stringify(job.trace.state)},` : ''}`
    : '';
  return `{"jobId":${JSON.stringify(job.jobId)},"tenant":${JSON.stringify(job.tenant)},"shard":${job.shard},"dueMs":${job.dueMs},${prio}${tags}${keyed}${workflow}${trace}"payload":${job.payload}}`;
}

/** An inbound message body carrying `jobs` (version 2: `{"v":2,"jobs":[...]}`). */
export function inboundBody(jobs: readonly InboundJob[]): string {
  return bodyOfParts(jobs.map(inboundJobJson));
}

function bodyOfParts(parts: readonly string[]): string {
  return `{"v":2,"jobs":[${parts.join(',')}]}`;
}

/** SQS bills a message by 64 KiB chunk: each chunk of a send (and of a receive) is one request. */
export const SQS_BILLING_CHUNK_BYTES = 64 * 1024;

/**
 * Largest body a version 4 message may inflate to. Submit never packs a version 2 body above
 * {@link MAX_INBOUND_MESSAGE_BYTES}; the bound keeps a hostile message from inflating without end.
 */
const MAX_INFLATED_BYTES = 1024 * 1024;

/**
 * The inbound message body submit sends for `jobs`: the version 2 body ({@link inboundBody}), or,
 * when that saves SQS a billed 64 KiB chunk, version 4: the same text deflated (raw deflate) and
 * base64-encoded, `{"v":4,"z":"..."}` (version 3 is a schedule's firing, core/recurring/ports.ts).
 * A batch of 100 jobs of 1 KB (about 110 KB: two chunks on
 * the send and two on the receive) then travels in one chunk. Ingest inflates it back to the exact
 * version 2 text, so payloads stay byte for byte what submit wrote.
 */
export function inboundMessageBody(jobs: readonly InboundJob[]): string {
  return compactInbound(inboundBody(jobs));
}

/** A version 2 body, or its version 4 form when that is billed fewer 64 KiB chunks. */
export function compactInbound(v2: string): string {
  const bytes = Buffer.byteLength(v2, 'utf8');
  if (bytes <= SQS_BILLING_CHUNK_BYTES) return v2;
  const raw = Buffer.from(v2, 'utf8');
  // The fastest level first (under a millisecond for 100 KB); the default level only when that
  // does not save a chunk.
  for (const level of [1, 6]) {
    const v4 = `{"v":4,"z":"${deflateRawSync(raw, { level }).toString('base64')}"}`;
    if (chunks(v4.length) < chunks(bytes)) return v4;
  }
  return v2;
}

const chunks = (bytes: number) => Math.max(1, Math.ceil(bytes / SQS_BILLING_CHUNK_BYTES));

/** The version 2 text inside a version 4 body, or undefined when it is not one. */
function inflateInbound(body: string): string | undefined {
  const m = /^\{"v":4,"z":"([A-Za-z0-9+/]*={0,2})"\}$/.exec(body);
  if (!m) return undefined;
  try {
    const text = inflateRawSync(Buffer.from(m[1]!, 'base64'), { maxOutputLength: MAX_INFLATED_BYTES }).toString('utf8');
    return text.startsWith('{"v":2,') ? text : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Packs jobs into inbound message bodies of at most {@link MAX_INBOUND_MESSAGE_BYTES}, keeping
 * order; each body lists the indexes (into `jobs`) it carries. A job too large to share a
 * message travels alone (submit's payload limit keeps it under SQS's).
 */
export function packInbound(jobs: readonly InboundJob[]): { body: string; indexes: number[] }[] {
  const parts = jobs.map(inboundJobJson);
  const room = MAX_INBOUND_MESSAGE_BYTES - Buffer.byteLength(bodyOfParts([]));
  // Each part counts with its comma.
  const runs = packGreedy(
    parts.map((_, i) => i),
    (i) => Buffer.byteLength(parts[i]!) + 1,
    Number.POSITIVE_INFINITY,
    room,
  );
  return runs.map((indexes) => ({ body: bodyOfParts(indexes.map((i) => parts[i]!)), indexes }));
}

function parseInboundJob(m: unknown): InboundJob | undefined {
  if (typeof m !== 'object' || m === null || Array.isArray(m)) return undefined;
  const o = m as Record<string, unknown>;
  if (
    typeof o.jobId !== 'string' ||
    typeof o.tenant !== 'string' ||
    !Number.isSafeInteger(o.shard) ||
    !Number.isSafeInteger(o.dueMs) ||
    !(o.payload instanceof RawJson) ||
    (o.workflow !== undefined && typeof o.workflow !== 'string') ||
    (o.parents !== undefined && !(o.parents instanceof RawJson && o.parents.text.startsWith('['))) ||
    (o.tags !== undefined && !(Array.isArray(o.tags) && o.tags.length > 0 && o.tags.every((t) => typeof t === 'string'))) ||
    (o.ck !== undefined && !(typeof o.ck === 'string' && Number.isInteger(o.cl) && (o.cl as number) >= 1))
  ) {
    return undefined;
  }
  // Entries written before priorities existed carry none: the default.
  const priority = o.priority;
  if (
    priority !== undefined &&
    !(Number.isInteger(priority) && (priority as number) >= MIN_PRIORITY && (priority as number) <= MAX_PRIORITY)
  )
    return undefined;
  return {
    jobId: o.jobId,
    tenant: o.tenant,
    shard: o.shard as number,
    dueMs: o.dueMs as number,
    payload: o.payload.text,
    ...(priority !== undefined && priority !== DEFAULT_PRIORITY ? { priority: priority as number } : {}),
    ...(Array.isArray(o.tags) ? { tags: o.tags as string[] } : {}),
    ...(typeof o.ck === 'string' ? { concurrency: { key: o.ck, limit: o.cl as number } } : {}),
    ...(typeof o.workflow === 'string' ? { workflow: o.workflow } : {}),
    ...(o.parents instanceof RawJson ? { parents: o.parents.text } : {}),
    ...traceOf(o.tc, o.ts),
  };
}

/** An inbound entry's trace (`tc`, `ts`); a malformed one is dropped (the job keeps the trace its id derives). */
function traceOf(tc: unknown, ts: unknown): { trace?: TraceContext } {
  const state = typeof ts === 'string' && ts.length <= MAX_TRACESTATE_LENGTH ? ts : undefined;
  const trace = unpackTrace(typeof tc === 'string' ? tc : undefined, state);
  return trace ? { trace } : {};
}

/**
 * The payloads of an inbound body, kept as the text submit wrote (version 1: `payload`; 2:
 * `jobs[i].payload`), and a workflow job's `jobs[i].parents`.
 */
const INBOUND_PAYLOADS = (path: JsonPath) =>
  (path.length === 1 && path[0] === 'payload') ||
  (path.length === 3 && path[0] === 'jobs' && (path[2] === 'payload' || path[2] === 'parents'));

/**
 * Parses an inbound message body into its jobs, each on its own: a job entry that is not one
 * submit wrote is `undefined` in its place, so that the others are still written. Undefined as a
 * whole when the body is not an inbound message. Reads version 4 (`{"v":4,"z":"..."}`: a
 * deflated version 2 body, see {@link inboundMessageBody}), version 2 (`{"v":2,"jobs":[...]}`) and
 * version 1 (one job: `{"v":1,"jobId":...}`), which earlier releases wrote and which may still
 * wait in the queue after an upgrade. Payloads stay the JSON text they were sent as.
 */
export function parseInboundJobs(body: string): (InboundJob | undefined)[] | undefined {
  if (body.startsWith('{"v":4,')) {
    const inner = inflateInbound(body);
    return inner === undefined ? undefined : parseInboundJobs(inner);
  }
  let m: unknown;
  try {
    m = parseJson(body, { raw: INBOUND_PAYLOADS });
  } catch {
    return undefined;
  }
  if (typeof m !== 'object' || m === null) return undefined;
  const o = m as Record<string, unknown>;
  if (o.v === 1) {
    const job = parseInboundJob(o);
    return job && [job];
  }
  if (o.v !== 2 || !Array.isArray(o.jobs) || o.jobs.length === 0) return undefined;
  return o.jobs.map(parseInboundJob);
}

/** {@link parseInboundJobs}, undefined unless every job of the body is well formed. */
export function parseInboundBody(body: string): InboundJob[] | undefined {
  const jobs = parseInboundJobs(body);
  return jobs?.every((j) => j !== undefined) ? (jobs as InboundJob[]) : undefined;
}

/** Bytes SQS counts for a message: body plus attribute names, types and values. */
export function messageBytes(m: OutgoingMessage): number {
  let n = Buffer.byteLength(m.body, 'utf8');
  for (const [k, v] of Object.entries(m.attributes ?? {})) n += Buffer.byteLength(k) + Buffer.byteLength(v) + 6; // "String"
  return n;
}

/**
 * Splits `items`, in order, into runs of at most `maxCount` items whose `size`s sum to at most
 * `maxBytes`; an item larger than `maxBytes` goes alone. Greedy: a run closes only when the next
 * item would not fit.
 */
export function packGreedy<T>(items: readonly T[], size: (item: T) => number, maxCount: number, maxBytes: number): T[][] {
  const runs: T[][] = [];
  let current: T[] = [];
  let bytes = 0;
  for (const item of items) {
    const n = size(item);
    if (current.length > 0 && (current.length === maxCount || bytes + n > maxBytes)) {
      runs.push(current);
      current = [];
      bytes = 0;
    }
    current.push(item);
    bytes += n;
  }
  if (current.length > 0) runs.push(current);
  return runs;
}

/** Packs messages into SendMessageBatch calls of at most 10 entries and 256 KiB, keeping order. */
export function packBatches(messages: readonly OutgoingMessage[]): OutgoingMessage[][] {
  return packGreedy(messages, messageBytes, MAX_BATCH_ENTRIES, MAX_BATCH_BYTES);
}
