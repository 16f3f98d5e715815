import type { SchedulerSettings } from './config.js';
import { PayloadTooLargeError, ValidationError } from './errors.js';

/** A job request after validation. */
export interface JobRequest {
  /** When it is due, epoch ms (a fraction of a millisecond rounds up: never early). */
  readonly dueMs: number;
  /** The payload serialized as JSON text. */
  readonly payloadText: string;
  readonly idempotencyKey?: string;
  readonly cancellable: boolean;
}

const FIELDS = new Set(['payload', 'runAt', 'delaySeconds', 'idempotencyKey', 'cancellable']);
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,30}))?([Zz]|[+-]\d{2}:\d{2})$/;

/**
 * Parses a request body as JSON, refusing bodies above `maxBytes` before parsing them.
 * @throws PayloadTooLargeError, ValidationError
 */
export function parseJsonBody(raw: string | undefined, maxBytes: number): unknown {
  if (raw === undefined || raw === '') throw new ValidationError('request body is empty: send a JSON object');
  const bytes = Buffer.byteLength(raw, 'utf8');
  if (bytes > maxBytes) throw new PayloadTooLargeError(`request body is ${bytes} bytes, above the limit of ${maxBytes}: split it into smaller requests`);
  try {
    return JSON.parse(raw);
  } catch (err) {
    throw new ValidationError(`request body is not valid JSON (${(err as Error).message}): send a JSON object`);
  }
}

/**
 * Validates one job body as DESIGN.md's API table describes it.
 *
 * @example validateJob({ payload: { a: 1 }, delaySeconds: 30 }, settings, Date.now())
 * @throws ValidationError, PayloadTooLargeError
 */
export function validateJob(body: unknown, settings: SchedulerSettings, nowMs: number): JobRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ValidationError('a job must be a JSON object like {"payload": ..., "runAt": "2030-01-01T00:00:00Z"}');
  }
  const job = body as Record<string, unknown>;
  const unknown = Object.keys(job).filter((k) => !FIELDS.has(k));
  if (unknown.length > 0) {
    throw new ValidationError(`unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `'${k}'`).join(', ')}: allowed are payload, runAt, delaySeconds, idempotencyKey, cancellable`);
  }
  const hasRunAt = job.runAt !== undefined;
  const hasDelay = job.delaySeconds !== undefined;
  if (hasRunAt === hasDelay) {
    throw new ValidationError(hasRunAt ? 'give either runAt or delaySeconds, not both' : 'give exactly one of runAt (RFC 3339 time) or delaySeconds (number of seconds from now)');
  }
  const dueMs = hasRunAt ? parseRunAt(job.runAt) : nowMs + parseDelay(job.delaySeconds);
  if (!(dueMs - nowMs <= settings.horizonMs)) {
    const when = Number.isFinite(dueMs) && dueMs < 8.64e15 ? new Date(dueMs).toISOString() : 'too far ahead';
    throw new ValidationError(`the job is due ${when}, beyond the horizon of ${Math.round(settings.horizonMs / 86_400_000)} days from now: schedule it nearer`);
  }

  let idempotencyKey: string | undefined;
  if (job.idempotencyKey !== undefined) {
    if (typeof job.idempotencyKey !== 'string' || job.idempotencyKey.length < 1 || job.idempotencyKey.length > 128) {
      throw new ValidationError('idempotencyKey must be a string of 1 to 128 characters');
    }
    idempotencyKey = job.idempotencyKey;
  }
  if (job.cancellable !== undefined && typeof job.cancellable !== 'boolean') {
    throw new ValidationError('cancellable must be true or false');
  }
  let payloadText: string;
  try {
    payloadText = JSON.stringify(job.payload === undefined ? null : job.payload);
  } catch {
    throw new ValidationError('payload nests too deeply to serialize: flatten it');
  }
  const payloadBytes = Buffer.byteLength(payloadText, 'utf8');
  if (payloadBytes > settings.maxPayloadBytes) {
    throw new PayloadTooLargeError(`payload is ${payloadBytes} bytes serialized, above the limit of ${settings.maxPayloadBytes}: store large data elsewhere (S3) and send a reference`);
  }
  return { dueMs, payloadText, idempotencyKey, cancellable: job.cancellable !== false };
}

/** Epoch ms of an RFC 3339 time with an explicit offset; sub-millisecond fractions round up. */
export function parseRunAt(value: unknown): number {
  const bad = () => new ValidationError(`runAt ${JSON.stringify(value)} is not an RFC 3339 time: use a form like "2030-01-31T14:03:07.250Z" or "2030-01-31T15:03:07+01:00"`);
  if (typeof value !== 'string') throw bad();
  const m = RFC3339.exec(value);
  if (!m) throw bad();
  const [, y, mo, d, h, mi, s, frac = '', zone] = m as unknown as string[];
  // setUTCFullYear, unlike Date.UTC, keeps years 0-99 as written.
  const date = new Date(0);
  date.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  // Out-of-range fields roll over (Feb 30 would become Mar 2): refuse them instead. A leap
  // second (:60) is accepted and lands on the next second, which is never early.
  if (date.getUTCFullYear() !== Number(y) || date.getUTCMonth() !== Number(mo) - 1 || date.getUTCDate() !== Number(d) || Number(h) > 23 || Number(mi) > 59 || Number(s) > 60) {
    throw bad();
  }
  const ms = date.getTime() + ((Number(h) * 60 + Number(mi)) * 60 + Number(s)) * 1000;
  const fracMs = Number(frac.padEnd(3, '0').slice(0, 3));
  const roundUp = /[1-9]/.test(frac.slice(3)) ? 1 : 0;
  let offsetMin = 0;
  if (zone !== undefined && zone.toUpperCase() !== 'Z') {
    const sign = zone.startsWith('-') ? -1 : 1;
    const oh = Number(zone.slice(1, 3));
    const om = Number(zone.slice(4, 6));
    if (oh > 23 || om > 59) throw bad();
    offsetMin = sign * (oh * 60 + om);
  }
  // A time in the past means "now"; times before 1970 are clamped to the epoch (also past).
  return Math.max(0, ms + fracMs + roundUp - offsetMin * 60_000);
}

function parseDelay(value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new ValidationError(`delaySeconds must be a number of seconds ≥ 0, got ${JSON.stringify(value)}`);
  }
  return Math.ceil(value * 1000);
}
