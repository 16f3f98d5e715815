/**
 * What a bulk cancel matches (`POST /v1/tenants/{tenant}/jobs/cancel`, docs/flow-control.md):
 * exactly one of a tag, a concurrency key, a debounce key, or the state `SCHEDULED` with an
 * optional due-time range. The same filter is applied to the rows a pass reads and to the jobs
 * ingest writes after the request, so both sides agree on what matched.
 */
import { assertNoDuplicateFields, isoMs, MAX_TAG_LENGTH, parseJsonBody, parseRunAt, ValidationError } from '../model/index.js';

/** Longest concurrency or debounce key (docs/flow-control.md). */
export const MAX_FLOW_KEY_LENGTH = 128;

export type CancelFilter =
  | { readonly tag: string }
  | { readonly concurrencyKey: string }
  | { readonly debounceKey: string }
  | { readonly state: 'SCHEDULED'; readonly fromMs?: number; readonly toMs?: number };

/** What the filter reads of a job: its due time and the keys it was submitted with. */
export interface FilterableJob {
  readonly dueMs: number;
  readonly tags?: readonly string[];
  /** Its concurrency key and limit (the limit plays no part). */
  readonly concurrency?: { readonly key: string };
  readonly debounceKey?: string;
}

const SHAPE =
  '{"tag": "<tag>"}, {"concurrencyKey": "<key>"}, {"debounceKey": "<key>"} or {"state": "SCHEDULED", "from"?: "<RFC 3339>", "to"?: "<RFC 3339>"}';
const SELECTORS = ['tag', 'concurrencyKey', 'debounceKey', 'state'] as const;

/**
 * The filter of a bulk cancel's body.
 * @example parseCancelRequest('{"tag": "order-42"}') // { tag: 'order-42' }
 * @throws ValidationError (400: nothing was written)
 */
export function parseCancelRequest(body: string | undefined): CancelFilter {
  const v = parseJsonBody(body, Number.POSITIVE_INFINITY, undefined, `one of ${SHAPE}`);
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ValidationError(`the body must be a JSON object: one of ${SHAPE}`);
  assertNoDuplicateFields(v, 'the body');
  const o = v as Record<string, unknown>;
  const unknown = Object.keys(o).find((k) => !(SELECTORS as readonly string[]).includes(k) && k !== 'from' && k !== 'to');
  if (unknown !== undefined) throw new ValidationError(`unknown field ${unknown}: send one of ${SHAPE}`);
  const given = SELECTORS.filter((k) => k in o);
  if (given.length !== 1)
    throw new ValidationError(
      `${given.length === 0 ? 'no selector given' : `${given.join(' and ')} given together`}: send exactly one of ${SHAPE}`,
    );
  const selector = given[0]!;
  if (selector !== 'state' && ('from' in o || 'to' in o))
    throw new ValidationError(`from and to go with {"state": "SCHEDULED"} only: send one of ${SHAPE}`);
  switch (selector) {
    case 'tag': {
      const tag = o.tag;
      // eslint-disable-next-line no-control-regex
      if (typeof tag !== 'string' || tag.length === 0 || tag.length > MAX_TAG_LENGTH || /[\u0000-\u001f\u007f]/.test(tag))
        throw new ValidationError(
          `tag must be a string of 1 to ${MAX_TAG_LENGTH} characters without control characters, as submitted in a job's tags`,
        );
      return { tag };
    }
    case 'concurrencyKey':
    case 'debounceKey':
      return { [selector]: parseFlowKey(o[selector], selector) } as CancelFilter;
    case 'state': {
      if (o.state !== 'SCHEDULED')
        throw new ValidationError(
          `state ${JSON.stringify(o.state)} cannot be cancelled: only "SCHEDULED" jobs can (send {"state": "SCHEDULED"})`,
        );
      const fromMs = o.from === undefined ? undefined : parseBound(o.from, 'from');
      const toMs = o.to === undefined ? undefined : parseBound(o.to, 'to');
      if (fromMs !== undefined && toMs !== undefined && fromMs > toMs)
        throw new ValidationError(`from (${isoMs(fromMs)}) is after to (${isoMs(toMs)}): swap them`);
      return { state: 'SCHEDULED', ...(fromMs !== undefined ? { fromMs } : {}), ...(toMs !== undefined ? { toMs } : {}) };
    }
  }
}

/** A concurrency or debounce key: 1 to 128 characters, no control characters. */
export function parseFlowKey(value: unknown, field: string): string {
  if (typeof value !== 'string' || value.length === 0 || value.length > MAX_FLOW_KEY_LENGTH || /\p{Cc}/u.test(value))
    throw new ValidationError(`${field} must be a string of 1 to ${MAX_FLOW_KEY_LENGTH} characters without control characters`);
  return value;
}

function parseBound(value: unknown, field: string): number {
  try {
    return parseRunAt(value);
  } catch {
    throw new ValidationError(`${field} ${JSON.stringify(value)} is not an RFC 3339 time: use a form like "2030-01-31T14:03:07Z"`);
  }
}

/** Whether `job` is one the filter names (state aside: the caller knows the job is pending). */
export function matches(filter: CancelFilter, job: FilterableJob): boolean {
  if ('tag' in filter) return job.tags?.includes(filter.tag) ?? false;
  if ('concurrencyKey' in filter) return job.concurrency?.key === filter.concurrencyKey;
  if ('debounceKey' in filter) return job.debounceKey === filter.debounceKey;
  return (filter.fromMs === undefined || job.dueMs >= filter.fromMs) && (filter.toMs === undefined || job.dueMs <= filter.toMs);
}

/** The filter as the operation's reply and the stored items show it (times as RFC 3339). */
export function filterJson(filter: CancelFilter): Record<string, string> {
  if (!('state' in filter)) return { ...filter };
  return {
    state: filter.state,
    ...(filter.fromMs !== undefined ? { from: isoMs(filter.fromMs) } : {}),
    ...(filter.toMs !== undefined ? { to: isoMs(filter.toMs) } : {}),
  };
}

/** Inverse of {@link filterJson} for what this module stored; undefined for anything else. */
export function filterOfJson(value: unknown): CancelFilter | undefined {
  if (typeof value !== 'object' || value === null) return undefined;
  const o = value as Record<string, unknown>;
  for (const k of ['tag', 'concurrencyKey', 'debounceKey'] as const)
    if (typeof o[k] === 'string' && Object.keys(o).length === 1) return { [k]: o[k] } as CancelFilter;
  if (o.state !== 'SCHEDULED') return undefined;
  const fromMs = typeof o.from === 'string' ? Date.parse(o.from) : undefined;
  const toMs = typeof o.to === 'string' ? Date.parse(o.to) : undefined;
  if (Number.isNaN(fromMs) || Number.isNaN(toMs)) return undefined;
  return { state: 'SCHEDULED', ...(fromMs !== undefined ? { fromMs } : {}), ...(toMs !== undefined ? { toMs } : {}) };
}
