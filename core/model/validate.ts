import type { SchedulerSettings } from './config.js';
import { PayloadTooLargeError, ValidationError } from './errors.js';
import {
  describeSqsUnsafeChar,
  duplicateKeysOf,
  findSqsUnsafeChar,
  type JsonPath,
  JsonSyntaxError,
  JsonTooDeepError,
  parseJson,
  pathText,
  RawJson,
} from '../util/index.js';
import { DEFAULT_PRIORITY, MAX_PRIORITY, MIN_PRIORITY } from './ports.js';

/** A job request after validation. */
export interface JobRequest {
  /** When it is due, epoch ms (a fraction of a millisecond rounds up: never early). */
  readonly dueMs: number;
  /** The payload as the JSON text the client sent, byte for byte (`null` when omitted). */
  readonly payloadText: string;
  readonly idempotencyKey?: string;
  readonly cancellable: boolean;
  /**
   * How the due time was given, for the idempotency fingerprint: `runAt:<ms>` (the instant
   * `runAt` names) or `delay:<ms>` (the delay, not the due time it moves with).
   */
  readonly schedule: string;
  /**
   * 1..9, default 5: among a tenant's due jobs, higher goes first (never early). Carried to the
   * row only when ≠ 5; a job on the direct path (due within the lookahead) ignores it.
   */
  readonly priority: number;
  /** Names for acting on many jobs at once (docs/flow-control.md): up to 10, each 1 to 64 characters, none repeated; empty when none. */
  readonly tags: readonly string[];
  /** Concurrency by key (docs/flow-control.md): jobs of the tenant with this key run at most `limit` at a time. */
  readonly concurrency?: JobConcurrency;
  /**
   * Debounce (docs/flow-control.md#debounce): the pending job of this key takes this job's
   * payload and moves to `dueMs`; without one, this job starts it. Its `dueMs` is the submit's
   * time plus the period.
   */
  readonly debounce?: JobDebounce;
}

/** A job's `debounce`: its key, its period and the longest it may wait after its first submit. */
export interface JobDebounce {
  readonly key: string;
  readonly periodMs: number;
  /** From the first submit of the pending job: it is never due later than that plus this. */
  readonly maxWaitMs?: number;
}

/** Bounds of a debounce's `periodSeconds` and `maxWaitSeconds`. */
export const MAX_DEBOUNCE_PERIOD_SECONDS = 86_400;
export const MAX_DEBOUNCE_WAIT_SECONDS = 604_800;

const DEBOUNCE_SHAPE = '{"key": "profile-7", "periodSeconds": 30, "maxWaitSeconds"?: 300}';

/**
 * A job's `debounce`: absent is none; else an object of a `key` (1 to 128 characters, no control
 * characters), a `periodSeconds` from 1 to 86,400 and an optional `maxWaitSeconds` from the
 * period to 604,800 (fractions of a second round up: never early).
 *
 * @throws ValidationError naming the field at fault
 */
export function parseDebounce(value: unknown): JobDebounce | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value) || value instanceof RawJson)
    throw new ValidationError(`debounce must be an object like ${DEBOUNCE_SHAPE}`);
  assertNoDuplicateFields(value, 'debounce');
  const o = value as Record<string, unknown>;
  const unknown = Object.keys(o).filter((k) => k !== 'key' && k !== 'periodSeconds' && k !== 'maxWaitSeconds');
  if (unknown.length > 0)
    throw new ValidationError(`unknown field ${unknown.map((k) => `'${k}'`).join(', ')} in debounce: send ${DEBOUNCE_SHAPE}`);
  const key = o.key;
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_CONCURRENCY_KEY_LENGTH)
    throw new ValidationError(
      `debounce.key must be a string of 1 to ${MAX_CONCURRENCY_KEY_LENGTH} characters, like "profile-7", got ${JSON.stringify(key)?.slice(0, 80)}`,
    );
  if (/\p{Cc}/u.test(key) || !isWellFormed(key))
    throw new ValidationError('debounce.key holds a control character or an unpaired surrogate: keys are names, use printable characters');
  const seconds = (v: unknown, field: string, min: number, max: number): number => {
    if (typeof v !== 'number' || !Number.isFinite(v) || v < min || v > max)
      throw new ValidationError(
        `debounce.${field} must be a number of seconds from ${min} to ${max}, got ${JSON.stringify(v)?.slice(0, 40)}`,
      );
    return Math.ceil(v * 1000);
  };
  const periodMs = seconds(o.periodSeconds, 'periodSeconds', 1, MAX_DEBOUNCE_PERIOD_SECONDS);
  if (o.maxWaitSeconds === undefined) return { key, periodMs };
  const maxWaitMs = seconds(o.maxWaitSeconds, 'maxWaitSeconds', periodMs / 1000, MAX_DEBOUNCE_WAIT_SECONDS);
  return { key, periodMs, maxWaitMs };
}

/** A job's `concurrencyKey` and `concurrencyLimit` (default 1). */
export interface JobConcurrency {
  readonly key: string;
  readonly limit: number;
}

/** A concurrency key's length in characters (UTF-16 code units), and the most jobs of one key at a time. */
export const MAX_CONCURRENCY_KEY_LENGTH = 128;
export const MAX_CONCURRENCY_LIMIT = 1_000;

/**
 * A job's `concurrencyKey` and `concurrencyLimit`: both absent is none; a key of 1 to
 * {@link MAX_CONCURRENCY_KEY_LENGTH} characters without control characters; a limit, only with a
 * key, a whole number from 1 to {@link MAX_CONCURRENCY_LIMIT} (default 1).
 *
 * @throws ValidationError naming the field at fault
 */
export function parseConcurrency(key: unknown, limit: unknown): JobConcurrency | undefined {
  if (key === undefined) {
    if (limit !== undefined) throw new ValidationError('concurrencyLimit needs a concurrencyKey: give the key whose jobs it limits');
    return undefined;
  }
  if (typeof key !== 'string' || key.length === 0 || key.length > MAX_CONCURRENCY_KEY_LENGTH)
    throw new ValidationError(
      `concurrencyKey must be a string of 1 to ${MAX_CONCURRENCY_KEY_LENGTH} characters, like "customer-42", got ${JSON.stringify(key)?.slice(0, 80)}`,
    );
  if (/\p{Cc}/u.test(key)) throw new ValidationError('concurrencyKey holds a control character: keys are names, use printable characters');
  if (limit === undefined) return { key, limit: 1 };
  if (typeof limit !== 'number' || !Number.isInteger(limit) || limit < 1 || limit > MAX_CONCURRENCY_LIMIT)
    throw new ValidationError(
      `concurrencyLimit must be a whole number from 1 to ${MAX_CONCURRENCY_LIMIT}, got ${JSON.stringify(limit)?.slice(0, 40)}`,
    );
  return { key, limit };
}

/** Tags a job may carry, and their length in characters (UTF-16 code units). */
export const MAX_TAGS = 10;
export const MAX_TAG_LENGTH = 64;

/**
 * A job's `tags`: absent is none; else an array of up to {@link MAX_TAGS} distinct strings of 1 to
 * {@link MAX_TAG_LENGTH} characters without control characters.
 *
 * @throws ValidationError naming the tag at fault
 */
export function parseTags(value: unknown): string[] {
  if (value === undefined) return [];
  if (!Array.isArray(value) || value.length > MAX_TAGS)
    throw new ValidationError(`tags must be an array of up to ${MAX_TAGS} strings, like ["order-42", "reminders"]`);
  value.forEach((tag, i) => {
    if (typeof tag !== 'string' || tag.length === 0 || tag.length > MAX_TAG_LENGTH)
      throw new ValidationError(
        `tags[${i}] must be a string of 1 to ${MAX_TAG_LENGTH} characters, got ${JSON.stringify(tag)?.slice(0, 80)}`,
      );
    // eslint-disable-next-line no-control-regex
    if (/[\u0000-\u001f\u007f]/.test(tag))
      throw new ValidationError(`tags[${i}] holds a control character: tags are names, use printable characters`);
    if (value.indexOf(tag) !== i) throw new ValidationError(`tags[${i}] repeats ${JSON.stringify(tag)}: give each tag once`);
  });
  return value as string[];
}

const FIELDS = new Set([
  'payload',
  'runAt',
  'delaySeconds',
  'idempotencyKey',
  'cancellable',
  'priority',
  'tags',
  'concurrencyKey',
  'concurrencyLimit',
  'debounce',
]);
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,30}))?([Zz]|[+-]\d{2}:\d{2})$/;

/** Deepest nesting of arrays and objects a payload may have (workers' parsers have limits too). */
export const MAX_PAYLOAD_DEPTH = 1_000;

/** Where the payloads sit in a single-job body and in a batch body: kept as raw text. */
export const JOB_PAYLOAD = (path: JsonPath) => path.length === 1 && path[0] === 'payload';
export const BATCH_PAYLOADS = (path: JsonPath) =>
  path.length === 3 && path[0] === 'jobs' && typeof path[1] === 'number' && path[2] === 'payload';

/**
 * Deepest nesting of arrays and objects a request body may have outside its payloads (which
 * {@link MAX_PAYLOAD_DEPTH} bounds): every route's body is a small envelope of a few levels.
 */
export const MAX_BODY_DEPTH = 64;

/**
 * Parses a request body as JSON: the one parser of every route that takes a body. It refuses a
 * body above `maxBytes` before parsing it, and a body nesting deeper than {@link MAX_BODY_DEPTH}
 * outside the `raw` paths (400, never a stack overflow: the parser and everything after it work
 * on bounded depth). Values at the paths `raw` selects (payloads) are kept as {@link RawJson}:
 * their exact source text, at any depth. `example` ends the error messages ("send ...").
 *
 * @example parseJsonBody('{"handles": ["h1"]}', Infinity, undefined, '{"handles": ["<handle>", ...]}')
 * @throws PayloadTooLargeError, ValidationError
 */
export function parseJsonBody(
  raw: string | undefined,
  maxBytes: number,
  rawPaths?: (path: JsonPath) => boolean,
  example = 'a JSON object',
): unknown {
  if (raw === undefined || raw === '') throw new ValidationError(`request body is empty: send ${example}`);
  if (Number.isFinite(maxBytes)) {
    const bytes = Buffer.byteLength(raw, 'utf8');
    if (bytes > maxBytes)
      throw new PayloadTooLargeError(`request body is ${bytes} bytes, above the limit of ${maxBytes}: split it into smaller requests`);
  }
  try {
    return parseJson(raw, { raw: rawPaths, maxBuildDepth: MAX_BODY_DEPTH, deeper: 'refuse' });
  } catch (err) {
    if (err instanceof JsonTooDeepError)
      throw new ValidationError(
        `request body nests more than ${MAX_BODY_DEPTH} levels of arrays and objects (at ${pathText(err.path.slice(0, 8))}${err.path.length > 8 ? '...' : ''}): send ${example}`,
      );
    if (!(err instanceof JsonSyntaxError)) throw err;
    throw new ValidationError(`request body is not JSON (${err.message}): send ${example}`);
  }
}

/** Refuses an object whose members repeat (`{"payload": 1, "payload": 2}`): which one was meant? */
export function assertNoDuplicateFields(obj: object, where: string): void {
  const dup = duplicateKeysOf(obj);
  if (dup.length > 0)
    throw new ValidationError(`${where} has the field ${dup.map((k) => `'${k}'`).join(', ')} more than once: send each field once`);
}

/**
 * Validates one job body as DESIGN.md's API table describes it. The HTTP path passes the body as
 * {@link parseJsonBody} read it, the payload a {@link RawJson} kept byte for byte; a payload
 * given as a JavaScript value (programmatic callers) is serialized with `JSON.stringify`.
 * `source` is the request body the job came from, for error positions.
 *
 * @example validateJob(parseJsonBody('{"payload": {"a": 1.0}, "delaySeconds": 30}', 1e6, JOB_PAYLOAD), settings, Date.now())
 * @throws ValidationError, PayloadTooLargeError
 */
export function validateJob(body: unknown, settings: SchedulerSettings, nowMs: number, source?: string): JobRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body) || body instanceof RawJson) {
    throw new ValidationError('a job must be a JSON object like {"payload": ..., "runAt": "2030-01-01T00:00:00Z"}');
  }
  const job = body as Record<string, unknown>;
  assertNoDuplicateFields(job, 'the job');
  const unknown = Object.keys(job).filter((k) => !FIELDS.has(k));
  if (unknown.length > 0) {
    throw new ValidationError(
      `unknown field${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `'${k}'`).join(', ')}: allowed are payload, runAt, delaySeconds, idempotencyKey, cancellable, priority, tags, concurrencyKey, concurrencyLimit, debounce`,
    );
  }
  const hasRunAt = job.runAt !== undefined;
  const hasDelay = job.delaySeconds !== undefined;
  if (job.debounce !== undefined) return debouncedJob(job, settings, nowMs, source);
  if (hasRunAt === hasDelay) {
    throw new ValidationError(
      hasRunAt
        ? 'give either runAt or delaySeconds, not both'
        : 'give exactly one of runAt (RFC 3339 time) or delaySeconds (number of seconds from now)',
    );
  }
  const dueMs = hasRunAt ? parseRunAt(job.runAt) : nowMs + parseDelaySeconds(job.delaySeconds);
  if (!(dueMs - nowMs <= settings.horizonMs)) {
    const when = Number.isFinite(dueMs) && dueMs < 8.64e15 ? new Date(dueMs).toISOString() : 'too far ahead';
    throw new ValidationError(
      `the job is due ${when}, beyond the horizon of ${Math.round(settings.horizonMs / 86_400_000)} days from now: schedule it nearer`,
    );
  }

  const idempotencyKey = parseIdempotencyKey(job.idempotencyKey);
  if (job.cancellable !== undefined && typeof job.cancellable !== 'boolean') {
    throw new ValidationError('cancellable must be true or false');
  }
  const priority = parsePriority(job.priority);
  const tags = parseTags(job.tags);
  const concurrency = parseConcurrency(job.concurrencyKey, job.concurrencyLimit);
  const payloadText = payloadTextOf(job.payload, settings, source);
  const schedule = hasRunAt ? `runAt:${dueMs}` : `delay:${dueMs - nowMs}`;
  return {
    dueMs,
    payloadText,
    idempotencyKey,
    cancellable: job.cancellable !== false,
    schedule,
    priority,
    tags,
    ...(concurrency ? { concurrency } : {}),
  };
}

/**
 * A job with `debounce` (docs/flow-control.md#debounce): due `periodSeconds` after its submit, so
 * it takes neither `runAt` nor `delaySeconds`; a pending job of its key is replaced, so it takes
 * no `idempotencyKey` (the key already names the job), no `cancellable: false` and no
 * `concurrencyKey` either.
 */
function debouncedJob(job: Record<string, unknown>, settings: SchedulerSettings, nowMs: number, source?: string): JobRequest {
  const debounce = parseDebounce(job.debounce)!;
  const refused = (['runAt', 'delaySeconds', 'idempotencyKey', 'concurrencyKey', 'concurrencyLimit'] as const).find(
    (f) => job[f] !== undefined,
  );
  if (refused === 'runAt' || refused === 'delaySeconds')
    throw new ValidationError(
      `a debounced job is due debounce.periodSeconds after its latest submit: leave out ${refused} (or leave out debounce for a job due at a time of its own)`,
    );
  if (refused === 'idempotencyKey')
    throw new ValidationError(
      'debounce and idempotencyKey cannot be combined: a retried debounced submit replaces the pending job with the same payload, so it needs no idempotency key; leave one out',
    );
  if (refused !== undefined) throw new ValidationError(`debounce and ${refused} cannot be combined yet: leave one out`);
  if (job.cancellable !== undefined && typeof job.cancellable !== 'boolean') throw new ValidationError('cancellable must be true or false');
  if (job.cancellable === false)
    throw new ValidationError(
      'debounce and cancellable: false cannot be combined: a debounced job is replaced (and cancelled) until it is due',
    );
  const priority = parsePriority(job.priority);
  const tags = parseTags(job.tags);
  const payloadText = payloadTextOf(job.payload, settings, source);
  const dueMs = nowMs + debounce.periodMs;
  return { dueMs, payloadText, cancellable: true, schedule: `debounce:${debounce.periodMs}`, priority, tags, debounce };
}

/**
 * The payload's JSON text, checked: size, nesting, and the characters SQS carries. An omitted
 * payload is `null`, like an explicit one.
 */
export function payloadTextOf(payload: unknown, settings: Pick<SchedulerSettings, 'maxPayloadBytes'>, source: string | undefined): string {
  let text: string;
  let depth = 0;
  let start: number | undefined;
  if (payload instanceof RawJson) {
    ({ text, depth, start } = payload);
  } else {
    try {
      text = JSON.stringify(payload === undefined ? null : payload);
    } catch {
      throw new ValidationError(`payload nests more than ${MAX_PAYLOAD_DEPTH} levels deep: flatten it`);
    }
    depth = nesting(text);
  }
  const payloadBytes = Buffer.byteLength(text, 'utf8');
  if (payloadBytes > settings.maxPayloadBytes) {
    throw new PayloadTooLargeError(
      `payload is ${payloadBytes} bytes serialized, above the limit of ${settings.maxPayloadBytes}: store large data elsewhere (S3) and send a reference`,
    );
  }
  if (depth > MAX_PAYLOAD_DEPTH)
    throw new ValidationError(`payload nests ${depth} levels deep, more than ${MAX_PAYLOAD_DEPTH}: flatten it`);
  const bad = findSqsUnsafeChar(text);
  if (bad) {
    const inPayload = Buffer.byteLength(text.slice(0, bad.index), 'utf8');
    const inBody =
      start !== undefined && source !== undefined
        ? `, byte ${Buffer.byteLength(source.slice(0, start + bad.index), 'utf8')} of the request body`
        : '';
    throw new ValidationError(
      `payload holds ${describeSqsUnsafeChar(bad.codePoint)} at byte ${inPayload} of the payload${inBody}: write it as the JSON escape "\\u${bad.codePoint.toString(16).toUpperCase().padStart(4, '0')}" inside the string, which travels as six ASCII characters`,
    );
  }
  return text;
}

/** Nesting depth of JSON text serialized by JSON.stringify (brackets outside strings). */
function nesting(text: string): number {
  const raw = parseJson(`{"p":${text}}`, { raw: (path) => path.length === 1 }) as { p: RawJson };
  return raw.p.depth;
}

/** No unpaired surrogate (a `\uD800` escape can make one): such a string has no UTF-8 form. */
function isWellFormed(s: string): boolean {
  return !/\p{Surrogate}/u.test(s);
}

/** Epoch ms of an RFC 3339 time with an explicit offset; sub-millisecond fractions round up. */
export function parseRunAt(value: unknown): number {
  const bad = () =>
    new ValidationError(
      `runAt ${JSON.stringify(value)} is not an RFC 3339 time: use a form like "2030-01-31T14:03:07.250Z" or "2030-01-31T15:03:07+01:00"`,
    );
  if (typeof value !== 'string') throw bad();
  const m = RFC3339.exec(value);
  if (!m) throw bad();
  const [, y, mo, d, h, mi, s, frac = '', zone] = m as unknown as string[];
  // setUTCFullYear, unlike Date.UTC, keeps years 0-99 as written.
  const date = new Date(0);
  date.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  // Out-of-range fields roll over (Feb 30 would become Mar 2): refuse them instead. A leap
  // second (:60) is accepted and lands on the next second, which is never early.
  if (
    date.getUTCFullYear() !== Number(y) ||
    date.getUTCMonth() !== Number(mo) - 1 ||
    date.getUTCDate() !== Number(d) ||
    Number(h) > 23 ||
    Number(mi) > 59 ||
    Number(s) > 60
  ) {
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

/** A job's `priority`: an integer from 1 to 9; omitted is the default, 5. */
export function parsePriority(value: unknown): number {
  if (value === undefined) return DEFAULT_PRIORITY;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < MIN_PRIORITY || value > MAX_PRIORITY) {
    throw new ValidationError(
      `priority must be a whole number from ${MIN_PRIORITY} (lowest) to ${MAX_PRIORITY} (highest), default ${DEFAULT_PRIORITY}; got ${JSON.stringify(value)}`,
    );
  }
  return value;
}

/** An `idempotencyKey`: a string of 1 to 128 characters with a UTF-8 form; omitted is none. */
export function parseIdempotencyKey(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || value.length < 1 || value.length > 128 || !isWellFormed(value)) {
    throw new ValidationError('idempotencyKey must be a string of 1 to 128 characters (no unpaired surrogate escapes)');
  }
  return value;
}

/** `delaySeconds`: a number of seconds ≥ 0, as milliseconds (a fraction of one rounds up: never early). */
export function parseDelaySeconds(value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value < 0) {
    throw new ValidationError(`delaySeconds must be a number of seconds ≥ 0, got ${JSON.stringify(value)}`);
  }
  return Math.ceil(value * 1000);
}
