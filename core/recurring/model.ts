/**
 * Recurring schedules as the API sees them: the definition a tenant PUTs, how it is validated,
 * the record the table keeps, and the reply. Grammar and semantics of the expressions:
 * docs/schedules.md; the API: docs/api.md.
 */
import {
  assertNoDuplicateFields,
  isoMs,
  parseJsonBody,
  parseRunAt,
  payloadTextOf,
  type SchedulerSettings,
  ValidationError,
} from '../model/index.js';
import { RawJson, shortText } from '../util/index.js';
import { nextRuns, parseSchedule, type Schedule } from './expression/index.js';

/** Schedule names: what EventBridge Scheduler allows, 1 to 64 characters. */
export const SCHEDULE_NAME_PATTERN = /^[0-9A-Za-z_.-]{1,64}$/;

export type ScheduleState = 'ENABLED' | 'DISABLED';

/** What decides a schedule's occurrences (kept with a retired revision, to find its jobs again). */
export interface Timing {
  readonly expression: string;
  /** IANA zone; `UTC` when none was given. */
  readonly timezone: string;
  readonly startAtMs?: number;
  readonly endAtMs?: number;
}

/** A validated definition, as a PUT body gives it. */
export interface ScheduleDefinition extends Timing {
  /** The payload's JSON text, byte for byte as sent (`null` when omitted). */
  readonly payload: string;
  readonly state: ScheduleState;
}

/**
 * A retired revision whose materialised occurrences due after `fromMs` are still to be cancelled
 * (written before the cancels, removed after them: a crash in between leaves it for the next call
 * or firing to finish).
 */
export interface PendingCancel extends Timing {
  readonly rev: string;
  readonly anchorMs: number;
  readonly shardCount: number;
  /** Exclusive: occurrences due after it are cancelled (the call's time plus the lookahead). */
  readonly fromMs: number;
  /** Inclusive: the furthest occurrence the revision may have materialised. */
  readonly throughMs: number;
}

/** A schedule as the scheduler table keeps it (item `pk = sched#<tenant>`, `sk = <name>`). */
export interface ScheduleRecord extends ScheduleDefinition {
  readonly tenant: string;
  readonly name: string;
  /** Random per change: occurrence ids derive from it, and every conditional write checks it. */
  readonly rev: string;
  /** The shard count occurrence ids of this revision were placed with. */
  readonly shardCount: number;
  /** `rate()` without `startAt` counts from here: the schedule's creation (kept when it is replaced). */
  readonly anchorMs: number;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  /**
   * The watermark. Enabled: this revision's occurrences due up to here (inclusive) are
   * materialised as jobs. Disabled or deleted: the **floor**, the last instant whose occurrences
   * an earlier revision keeps (its cut-off, or an occurrence after it a dispatcher already held):
   * a revision that follows starts after it, so no occurrence time is written by two revisions.
   */
  readonly throughMs: number;
  /**
   * The clock fires every this many ms (`rate()` in EventBridge Scheduler) instead of at the
   * schedule's own occurrences: chosen for schedules that run more often than that, so one firing
   * materialises several occurrences. Absent: the clock mirrors the expression.
   */
  readonly clockPeriodMs?: number;
  readonly pending: readonly PendingCancel[];
  /**
   * The trace of the call that defined this revision, when it carried a `traceparent` (packed as
   * a job's: core/model/traceContext.ts): each occurrence's `dynein.schedule.fire` span links to
   * it (docs/tracing.md).
   */
  readonly definedBy?: string;
  /** A delete in progress: the schedule is gone for every reader. */
  readonly deleting?: boolean;
  /**
   * The delete is finished (cancels, clock): the item stays only as the floor for a schedule
   * re-created under the name, until `expiresAtMs` (the table's TTL removes it).
   */
  readonly deleted?: boolean;
  readonly expiresAtMs?: number;
}

/** The API's view of a schedule. */
export interface ScheduleReply {
  readonly tenant: string;
  readonly name: string;
  readonly expression: string;
  readonly timezone: string;
  readonly startAt?: string;
  readonly endAt?: string;
  /** The payload as sent (spliced into the reply as its JSON text). */
  readonly payload: RawJson;
  readonly state: ScheduleState;
  readonly createdAt: string;
  readonly updatedAt: string;
  /** Next occurrences (RFC 3339 UTC, ms) at or after max(now, startAt), before endAt; none while DISABLED. */
  readonly nextRuns: string[];
}

const FIELDS = ['expression', 'timezone', 'startAt', 'endAt', 'payload', 'state'] as const;
const PAYLOAD_PATH = (path: readonly (string | number)[]) => path.length === 1 && path[0] === 'payload';

/** Throws a 400 naming `name` unless it is a valid schedule name. */
export function assertScheduleName(name: string): void {
  // '.' and '..' match the pattern, but no URL path can name them (clients resolve them away).
  if (!SCHEDULE_NAME_PATTERN.test(name) || name === '.' || name === '..') {
    const shown = shortText(name, 70);
    throw new ValidationError(
      `name ${JSON.stringify(shown)} is not a schedule name: use 1 to 64 letters, digits, '_', '.' or '-'${name.length > 64 ? ` (it has ${name.length} characters)` : ''}`,
    );
  }
}

/**
 * Validates a PUT body: every problem is a 400 `ValidationError` naming its field, and nothing is
 * stored. Returns the definition and its parsed expression.
 * @throws ValidationError, PayloadTooLargeError
 */
export function parseDefinition(
  raw: string | undefined,
  settings: Pick<SchedulerSettings, 'maxPayloadBytes' | 'maxBatchBytes'>,
): { definition: ScheduleDefinition; schedule: Schedule } {
  const body = parseJsonBody(raw, settings.maxBatchBytes, PAYLOAD_PATH);
  if (typeof body !== 'object' || body === null || Array.isArray(body) || body instanceof RawJson) {
    throw new ValidationError(
      'a schedule must be a JSON object like {"expression": "cron(0 9 ? * MON-FRI *)", "timezone": "Europe/Paris"}',
    );
  }
  const o = body as Record<string, unknown>;
  assertNoDuplicateFields(o, 'the schedule');
  const unknown = Object.keys(o).filter((k) => !(FIELDS as readonly string[]).includes(k));
  if (unknown.length > 0)
    throw new ValidationError(
      `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `'${k}'`).join(', ')}: allowed are ${FIELDS.join(', ')}`,
    );
  if (o.expression === undefined) throw new ValidationError('expression is required: cron(...), rate(...) or at(...)');
  if (o.timezone !== undefined && typeof o.timezone !== 'string')
    throw new ValidationError('timezone must be a string naming an IANA time zone, like "Europe/Paris"');
  const schedule = parseSchedule(o.expression, o.timezone ?? 'UTC');
  const startAtMs = instant(o.startAt, 'startAt');
  const endAtMs = instant(o.endAt, 'endAt');
  if (startAtMs !== undefined && endAtMs !== undefined && endAtMs <= startAtMs)
    throw new ValidationError(`endAt (${isoMs(endAtMs)}) must be after startAt (${isoMs(startAtMs)})`);
  if (o.state !== undefined && o.state !== 'ENABLED' && o.state !== 'DISABLED')
    throw new ValidationError(`state must be "ENABLED" or "DISABLED", got ${JSON.stringify(o.state)}`);
  let payload: string;
  try {
    payload = payloadTextOf(o.payload, settings, raw);
  } catch (err) {
    if (err instanceof ValidationError && !err.message.startsWith('payload')) throw new ValidationError(`payload: ${err.message}`);
    throw err;
  }
  return {
    definition: {
      expression: schedule.expression,
      timezone: schedule.timezone,
      ...(startAtMs !== undefined ? { startAtMs } : {}),
      ...(endAtMs !== undefined ? { endAtMs } : {}),
      payload,
      state: (o.state as ScheduleState | undefined) ?? 'ENABLED',
    },
    schedule,
  };
}

function instant(value: unknown, field: 'startAt' | 'endAt'): number | undefined {
  if (value === undefined) return undefined;
  try {
    return parseRunAt(value);
  } catch {
    throw new ValidationError(
      `${field} ${JSON.stringify(value)} is not an RFC 3339 time: use a form like "2030-01-31T14:03:07Z" or "2030-01-31T15:03:07+01:00"`,
    );
  }
}

/** The occurrences of a timing at or after `after` (epoch ms), at most `count`. */
export function occurrencesOf(t: Timing & { readonly anchorMs: number }, after: number, count: number, endAt?: number): number[] {
  const end = endAt === undefined ? t.endAtMs : t.endAtMs === undefined ? endAt : Math.min(endAt, t.endAtMs);
  return nextRuns(parseSchedule(t.expression, t.timezone), {
    after,
    count,
    ...(t.startAtMs !== undefined ? { startAt: t.startAtMs } : {}),
    ...(end !== undefined ? { endAt: end } : {}),
    createdAt: t.anchorMs,
  });
}

/** The API reply for a stored schedule: its definition and its next `count` runs after `nowMs`. */
export function renderSchedule(r: ScheduleRecord, nowMs: number, count = 5): ScheduleReply {
  return {
    tenant: r.tenant,
    name: r.name,
    expression: r.expression,
    timezone: r.timezone,
    ...(r.startAtMs !== undefined ? { startAt: isoMs(r.startAtMs) } : {}),
    ...(r.endAtMs !== undefined ? { endAt: isoMs(r.endAtMs) } : {}),
    payload: new RawJson(r.payload, 0, 0),
    state: r.state,
    createdAt: isoMs(r.createdAtMs),
    updatedAt: isoMs(r.updatedAtMs),
    nextRuns: r.state === 'ENABLED' ? occurrencesOf(r, nowMs, count).map(isoMs) : [],
  };
}
