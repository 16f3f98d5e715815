import type { OutgoingMessage } from './ports';

/** Largest total size of one SendMessageBatch call we build (SQS's classic 256 KiB limit). */
export const MAX_BATCH_BYTES = 256 * 1024;
export const MAX_BATCH_ENTRIES = 10;

/** RFC 3339 with milliseconds, as delivered messages carry it. */
export function isoMs(ms: number): string {
  return new Date(ms).toISOString();
}

/**
 * The body delivered to a tenant queue: `{"jobId", "tenant", "runAt", "payload"}`. The payload
 * is spliced in as the JSON text it was stored as, never parsed again.
 */
export function deliveryMessage(id: string, job: { jobId: string; tenant: string; dueMs: number; payload: string }, delaySeconds?: number): OutgoingMessage {
  const runAt = isoMs(job.dueMs);
  return {
    id,
    body: `{"jobId":${JSON.stringify(job.jobId)},"tenant":${JSON.stringify(job.tenant)},"runAt":"${runAt}","payload":${job.payload}}`,
    attributes: { runAt },
    ...(delaySeconds !== undefined ? { delaySeconds } : {}),
  };
}

/** An inbound message: what ingest needs to write the row. */
export interface InboundJob {
  readonly jobId: string;
  readonly tenant: string;
  readonly shard: number;
  readonly dueMs: number;
  readonly payload: string;
}

export function inboundBody(job: InboundJob): string {
  return `{"v":1,"jobId":${JSON.stringify(job.jobId)},"tenant":${JSON.stringify(job.tenant)},"shard":${job.shard},"dueMs":${job.dueMs},"payload":${job.payload}}`;
}

/** Parses an inbound message body; returns undefined when it is not one. */
export function parseInboundBody(body: string): InboundJob | undefined {
  let m: unknown;
  try {
    m = JSON.parse(body);
  } catch {
    return undefined;
  }
  if (typeof m !== 'object' || m === null) return undefined;
  const o = m as Record<string, unknown>;
  if (o.v !== 1 || typeof o.jobId !== 'string' || typeof o.tenant !== 'string' || !Number.isSafeInteger(o.shard) || !Number.isSafeInteger(o.dueMs) || !('payload' in o)) {
    return undefined;
  }
  return { jobId: o.jobId, tenant: o.tenant, shard: o.shard as number, dueMs: o.dueMs as number, payload: JSON.stringify(o.payload) };
}

/** Bytes SQS counts for a message: body plus attribute names, types and values. */
export function messageBytes(m: OutgoingMessage): number {
  let n = Buffer.byteLength(m.body, 'utf8');
  for (const [k, v] of Object.entries(m.attributes ?? {})) n += Buffer.byteLength(k) + Buffer.byteLength(v) + 6; // "String"
  return n;
}

/** Packs messages into SendMessageBatch calls of at most 10 entries and 256 KiB, keeping order. */
export function packBatches(messages: readonly OutgoingMessage[]): OutgoingMessage[][] {
  const batches: OutgoingMessage[][] = [];
  let current: OutgoingMessage[] = [];
  let bytes = 0;
  for (const m of messages) {
    const size = messageBytes(m);
    if (current.length > 0 && (current.length === MAX_BATCH_ENTRIES || bytes + size > MAX_BATCH_BYTES)) {
      batches.push(current);
      current = [];
      bytes = 0;
    }
    current.push(m);
    bytes += size;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}
