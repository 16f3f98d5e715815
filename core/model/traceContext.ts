import { createHash, randomBytes } from 'node:crypto';

/**
 * W3C Trace Context (https://www.w3.org/TR/trace-context/) as jobs carry it (docs/tracing.md): the
 * trace a job belongs to, the span that scheduled it (its parent in the scheduler's spans) and
 * the flags (bit 0: sampled); `state` is the `tracestate` header, passed on as given.
 */
export interface TraceContext {
  /** 32 lowercase hex digits, not all zero. */
  readonly traceId: string;
  /** 16 lowercase hex digits, not all zero. */
  readonly spanId: string;
  /** The trace flags byte (bit 0: sampled). */
  readonly flags: number;
  /** The `tracestate` header (at most 512 characters), when one came with it. */
  readonly state?: string;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = '0'.repeat(32);
const ZERO_SPAN = '0'.repeat(16);
/** Longest `tracestate` kept (the specification's 32 members of at most 256 characters would be larger; vendors keep 512). */
export const MAX_TRACESTATE_LENGTH = 512;

/**
 * The trace context of a `traceparent` header (and its `tracestate`), or undefined when it is
 * absent or invalid: as the specification asks, an invalid header is ignored (the scheduler then
 * starts a trace of its own), never an error. Version `00` exactly as specified; a later version
 * is read by its first four fields; version `ff` is invalid.
 */
export function parseTraceparent(header: string | undefined, tracestate?: string): TraceContext | undefined {
  if (header === undefined) return undefined;
  const m = TRACEPARENT.exec(header.trim());
  if (!m) return undefined;
  const [, version, traceId, spanId, flags, rest] = m as unknown as [string, string, string, string, string, string | undefined];
  if (version === 'ff' || (version === '00' && rest !== undefined)) return undefined;
  if (traceId === ZERO_TRACE || spanId === ZERO_SPAN) return undefined;
  const state = tracestate?.trim();
  return {
    traceId,
    spanId,
    flags: parseInt(flags, 16),
    ...(state && state.length <= MAX_TRACESTATE_LENGTH && !/[^\x20-\x7e]/.test(state) ? { state } : {}),
  };
}

/** The `traceparent` header of a span `spanId` in the trace of `ctx` (version 00). */
export function traceparent(ctx: Pick<TraceContext, 'traceId' | 'flags'>, spanId: string): string {
  return `00-${ctx.traceId}-${spanId}-${(ctx.flags & 0xff).toString(16).padStart(2, '0')}`;
}

/** A new span id: 8 random bytes, hex (never all zero). */
export function newSpanId(): string {
  for (;;) {
    const id = randomBytes(8).toString('hex');
    if (id !== ZERO_SPAN) return id;
  }
}

/** A new trace, sampled: what the scheduler starts for a job submitted without a `traceparent`. */
export function newTrace(): TraceContext {
  let traceId = randomBytes(16).toString('hex');
  while (traceId === ZERO_TRACE) traceId = randomBytes(16).toString('hex');
  return { traceId, spanId: newSpanId(), flags: 1 };
}

/** Whether the trace's sampled flag is set: only then are spans recorded and exported. */
export function sampled(ctx: Pick<TraceContext, 'flags'>): boolean {
  return (ctx.flags & 1) === 1;
}

/**
 * The compact form a job carries (its inbound entry and its row, attribute `tc`): trace id, span
 * id and flags, 50 hex digits; `state` travels apart (`ts`).
 */
export function packTrace(ctx: TraceContext): string {
  return `${ctx.traceId}${ctx.spanId}${(ctx.flags & 0xff).toString(16).padStart(2, '0')}`;
}

/** Inverse of {@link packTrace} (with the `state` stored beside it); undefined for anything else. */
export function unpackTrace(packed: string | undefined, state?: string): TraceContext | undefined {
  if (packed === undefined || !/^[0-9a-f]{50}$/.test(packed)) return undefined;
  return { traceId: packed.slice(0, 32), spanId: packed.slice(32, 48), flags: parseInt(packed.slice(48), 16), ...(state ? { state } : {}) };
}

/**
 * The trace of a job submitted without a `traceparent`: derived from its id (SHA-256, no key:
 * every function, with or without the id key, derives the same), so that nothing is stored for
 * it. Its span id stands for the submit that started the trace; sampled.
 */
export function jobTrace(jobId: string): TraceContext {
  return derivedTrace(`trace\n${jobId}`);
}

/**
 * The trace of a workflow submitted without a `traceparent`: derived from its id as
 * {@link jobTrace} from a job's, so that every job of the workflow is in one trace and nothing is
 * stored for it. Its span id stands for the workflow's submit.
 */
export function workflowTrace(workflowId: string): TraceContext {
  return derivedTrace(`workflow trace\n${workflowId}`);
}

function derivedTrace(seed: string): TraceContext {
  const h = createHash('sha256').update(seed).digest('hex');
  const traceId = h.slice(0, 32) === ZERO_TRACE ? `${h.slice(0, 31)}1` : h.slice(0, 32);
  const spanId = h.slice(32, 48) === ZERO_SPAN ? `${h.slice(32, 47)}1` : h.slice(32, 48);
  return { traceId, spanId, flags: 1 };
}
