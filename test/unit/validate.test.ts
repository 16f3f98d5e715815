import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveSettings } from '../../core/model/config.js';
import { PayloadTooLargeError, ValidationError } from '../../core/model/errors.js';
import { BATCH_PAYLOADS, JOB_PAYLOAD, MAX_PAYLOAD_DEPTH, parseJsonBody, parseRunAt, validateJob } from '../../core/model/validate.js';
import { ALTERED_BY_PARSE } from '../support/payloads.js';

const settings = resolveSettings();
/** A fixed "now" (the clock is injected): 2030-01-01T00:00:00Z. */
const NOW = Date.UTC(2030, 0, 1);
const KIB = 1024;
/** DESIGN.md: "A payload is at most 240 KiB serialized". */
const MAX_PAYLOAD = 240 * KIB;
const DAY = 24 * 3600 * 1000;

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  return undefined;
}

function expectValidationError(fn: () => unknown, messagePart?: RegExp): void {
  const err = thrown(fn);
  expect(err).toBeInstanceOf(ValidationError);
  expect(err).toMatchObject({ status: 400, code: 'ValidationError' });
  if (messagePart) expect((err as Error).message).toMatch(messagePart);
}

function expectTooLarge(fn: () => unknown): void {
  const err = thrown(fn);
  expect(err).toBeInstanceOf(PayloadTooLargeError);
  expect(err).toMatchObject({ status: 413, code: 'PayloadTooLarge' });
}

/** "+05:30" / "-00:45" for an offset in minutes. */
function formatOffset(min: number): string {
  const a = Math.abs(min);
  return `${min < 0 ? '-' : '+'}${String(Math.floor(a / 60)).padStart(2, '0')}:${String(a % 60).padStart(2, '0')}`;
}

describe('parseRunAt', () => {
  it('reads UTC times with Z', () => {
    expect(parseRunAt('2030-01-31T14:03:07.250Z')).toBe(Date.UTC(2030, 0, 31, 14, 3, 7, 250));
    expect(parseRunAt('2030-01-31T14:03:07Z')).toBe(Date.UTC(2030, 0, 31, 14, 3, 7));
    expect(parseRunAt('1970-01-01T00:00:00Z')).toBe(0);
    expect(parseRunAt('2030-01-31t14:03:07z')).toBe(Date.UTC(2030, 0, 31, 14, 3, 7));
  });

  it('reads explicit offsets', () => {
    expect(parseRunAt('2030-01-31T15:03:07+01:00')).toBe(Date.UTC(2030, 0, 31, 14, 3, 7));
    expect(parseRunAt('2030-01-31T08:33:07.5-05:30')).toBe(Date.UTC(2030, 0, 31, 14, 3, 7, 500));
    expect(parseRunAt('2030-01-01T00:30:00+23:59')).toBe(Date.UTC(2029, 11, 31, 0, 31));
    expect(parseRunAt('2030-01-31T14:03:07-00:00')).toBe(Date.UTC(2030, 0, 31, 14, 3, 7));
    // A wall time before 1970 in a zone west of UTC can still be after the epoch.
    expect(parseRunAt('1969-12-31T23:30:00-01:00')).toBe(30 * 60_000);
  });

  it('round-trips any millisecond, in UTC and in any offset', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: Date.UTC(1970, 0, 2), max: Date.UTC(9998, 0, 1) }),
        fc.integer({ min: -(23 * 60 + 59), max: 23 * 60 + 59 }),
        (ms, offsetMin) => {
          expect(parseRunAt(new Date(ms).toISOString())).toBe(ms);
          const wall = new Date(ms + offsetMin * 60_000).toISOString().slice(0, -1);
          expect(parseRunAt(wall + formatOffset(offsetMin))).toBe(ms);
        },
      ),
      { numRuns: 1_000 },
    );
  });

  it('reads short fractions as fractions of a second', () => {
    expect(parseRunAt('2030-01-01T00:00:00.5Z')).toBe(NOW + 500);
    expect(parseRunAt('2030-01-01T00:00:00.05Z')).toBe(NOW + 50);
    expect(parseRunAt('2030-01-01T00:00:00.005Z')).toBe(NOW + 5);
  });

  it('rounds fractions beyond the millisecond up, never early', () => {
    expect(parseRunAt('2030-01-01T00:00:00.0001Z')).toBe(NOW + 1);
    expect(parseRunAt('2030-01-01T00:00:00.000000001Z')).toBe(NOW + 1);
    expect(parseRunAt('2030-01-01T00:00:00.250000Z')).toBe(NOW + 250);
    expect(parseRunAt('2030-01-01T00:00:00.2500001Z')).toBe(NOW + 251);
    expect(parseRunAt('2030-01-01T23:59:59.9999Z')).toBe(NOW + DAY);
    expect(parseRunAt(`2030-01-01T00:00:00.${'0'.repeat(29)}1Z`)).toBe(NOW + 1);
    expect(parseRunAt(`2030-01-01T00:00:00.${'9'.repeat(30)}Z`)).toBe(NOW + 1_000);
  });

  it('accepts a leap second, landing on the next second (never early)', () => {
    expect(parseRunAt('2030-01-01T23:59:60Z')).toBe(NOW + DAY);
    expect(parseRunAt('2030-01-01T23:59:60.5Z')).toBe(NOW + DAY + 500);
    expect(parseRunAt('2030-01-02T00:59:60+01:00')).toBe(NOW + DAY);
  });

  it('is the exact time rounded up to the next millisecond (property, nanosecond arithmetic)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 253_000_000_000 }), fc.stringMatching(/^\d{1,30}$/), (sec, frac) => {
        const text = `${new Date(sec * 1000).toISOString().slice(0, 19)}.${frac}Z`;
        // Exact time in units of 1e-30 s; one millisecond is 1e27 of them.
        const exact = BigInt(sec) * 10n ** 30n + BigInt(frac.padEnd(30, '0'));
        const got = BigInt(parseRunAt(text)) * 10n ** 27n;
        expect(got).toBeGreaterThanOrEqual(exact); // never early
        expect(got - exact).toBeLessThan(10n ** 27n); // less than 1 ms late
      }),
      { numRuns: 1_000 },
    );
  });

  it('rejects dates and times that do not exist', () => {
    for (const v of [
      '2030-02-30T00:00:00Z',
      '2027-02-29T00:00:00Z',
      '2100-02-29T00:00:00Z',
      '2030-04-31T00:00:00Z',
      '2030-00-10T00:00:00Z',
      '2030-13-01T00:00:00Z',
      '2030-01-00T00:00:00Z',
      '2030-01-32T00:00:00Z',
      '2030-01-01T24:00:00Z',
      '2030-01-01T23:60:00Z',
      '2030-01-01T23:59:61Z',
      '2030-01-01T23:59:99Z',
      '2030-01-01T00:00:00+24:00',
      '2030-01-01T00:00:00+05:60',
    ]) {
      expectValidationError(() => parseRunAt(v), /RFC 3339/);
    }
    // Real leap days are fine.
    expect(parseRunAt('2028-02-29T00:00:00Z')).toBe(Date.UTC(2028, 1, 29));
    expect(parseRunAt('2000-02-29T12:00:00Z')).toBe(Date.UTC(2000, 1, 29, 12));
  });

  it('rejects anything but an RFC 3339 date-time with a zone', () => {
    for (const v of [
      '2030-01-01T00:00:00',
      '2030-01-01T00:00:00.000',
      '2030-01-01',
      '2030-01-01T00:00Z',
      '2030-01-01T00:00:00+0100',
      '2030-01-01T00:00:00+01',
      '2030-01-01T00:00:00 Z',
      '2030-01-01T00:00:00.Z',
      `2030-01-01T00:00:00.${'0'.repeat(31)}Z`,
      '2030-1-01T00:00:00Z',
      '+02030-01-01T00:00:00Z',
      ' 2030-01-01T00:00:00Z',
      '2030-01-01T00:00:00Z ',
      'Tue, 01 Jan 2030 00:00:00 GMT',
      '1893456000000',
      '',
    ]) {
      expectValidationError(() => parseRunAt(v));
    }
    for (const v of [undefined, null, NOW, true, {}, [], new Date(NOW)]) expectValidationError(() => parseRunAt(v));
  });

  it('treats times before 1970 as past ("now"): never a negative epoch', () => {
    expect(parseRunAt('1969-12-31T23:59:59.999Z')).toBe(0);
    expect(parseRunAt('1970-01-01T00:30:00+01:00')).toBe(0);
    expect(parseRunAt('1900-06-01T00:00:00Z')).toBe(0);
    expect(parseRunAt('0001-01-01T00:00:00Z')).toBe(0);
    expect(parseRunAt('0070-01-01T00:00:00Z')).toBe(0); // year 70, not 1970
    expect(parseRunAt('1970-01-01T00:00:00.001Z')).toBe(1);
  });

  it('keeps two-digit years as written (not 19xx): Feb 29 of year 0004 exists, of 1900 does not', () => {
    expect(parseRunAt('0004-02-29T00:00:00Z')).toBe(0);
    expectValidationError(() => parseRunAt('1900-02-29T00:00:00Z'), /RFC 3339/);
    expectValidationError(() => parseRunAt('0001-02-29T00:00:00Z'), /RFC 3339/);
  });
});

describe('validateJob', () => {
  it('accepts runAt alone and delaySeconds alone', () => {
    expect(validateJob({ payload: 1, runAt: '2030-01-01T00:01:00Z' }, settings, NOW)).toMatchObject({ dueMs: NOW + 60_000 });
    expect(validateJob({ payload: 1, delaySeconds: 60 }, settings, NOW)).toMatchObject({ dueMs: NOW + 60_000 });
    expect(validateJob({ payload: 1, delaySeconds: 0 }, settings, NOW)).toMatchObject({ dueMs: NOW });
  });

  it('requires exactly one of runAt and delaySeconds', () => {
    expectValidationError(() => validateJob({ payload: 1 }, settings, NOW), /exactly one/);
    expectValidationError(() => validateJob({ payload: 1, runAt: '2030-01-01T00:01:00Z', delaySeconds: 60 }, settings, NOW), /not both/);
  });

  it('keeps a runAt in the past (it means "now"; placement sends it at once)', () => {
    expect(validateJob({ payload: 1, runAt: '2020-01-01T00:00:00Z' }, settings, NOW).dueMs).toBe(Date.UTC(2020, 0, 1));
  });

  it('turns a delay into a due time that is never early and at most 1 ms late', () => {
    fc.assert(
      fc.property(fc.double({ min: 0, max: 300_000_000, noNaN: true }), (delaySeconds) => {
        const { dueMs } = validateJob({ payload: 1, delaySeconds }, settings, NOW);
        expect(Number.isInteger(dueMs)).toBe(true);
        expect(dueMs - NOW).toBeGreaterThanOrEqual(delaySeconds * 1000);
        expect(dueMs - NOW - 1).toBeLessThan(delaySeconds * 1000);
      }),
      { numRuns: 1_000 },
    );
    expect(validateJob({ payload: 1, delaySeconds: 0.0001 }, settings, NOW).dueMs).toBe(NOW + 1);
    expect(validateJob({ payload: 1, delaySeconds: 1.5 }, settings, NOW).dueMs).toBe(NOW + 1_500);
  });

  it('rejects negative, NaN, infinite and non-number delays', () => {
    for (const delaySeconds of [
      -1,
      -0.001,
      Number.NEGATIVE_INFINITY,
      Number.NaN,
      Number.POSITIVE_INFINITY,
      '30',
      null,
      true,
      [30],
      { s: 30 },
    ]) {
      expectValidationError(() => validateJob({ payload: 1, delaySeconds }, settings, NOW), /delaySeconds/);
    }
  });

  it('rejects a runAt that is not a valid time', () => {
    for (const runAt of ['tomorrow', '2030-02-30T00:00:00Z', null, 1_900_000_000_000]) {
      expectValidationError(() => validateJob({ payload: 1, runAt }, settings, NOW), /runAt/);
    }
  });

  it('accepts up to the horizon and rejects one millisecond beyond it', () => {
    const horizon = settings.horizonMs;
    // DESIGN.md: the horizon is 10 years.
    expect(horizon).toBeGreaterThanOrEqual(10 * 365 * DAY);
    expect(horizon).toBeLessThanOrEqual(10 * 366 * DAY);
    expect(validateJob({ payload: 1, runAt: new Date(NOW + horizon).toISOString() }, settings, NOW).dueMs).toBe(NOW + horizon);
    expectValidationError(() => validateJob({ payload: 1, runAt: new Date(NOW + horizon + 1).toISOString() }, settings, NOW), /horizon/);
    expect(validateJob({ payload: 1, delaySeconds: horizon / 1000 }, settings, NOW).dueMs).toBe(NOW + horizon);
    expectValidationError(() => validateJob({ payload: 1, delaySeconds: horizon / 1000 + 0.001 }, settings, NOW), /horizon/);
    expectValidationError(() => validateJob({ payload: 1, runAt: '2041-01-01T00:00:00Z' }, settings, NOW), /horizon/);
    expectValidationError(() => validateJob({ payload: 1, runAt: '9999-12-31T23:59:59.999Z' }, settings, NOW), /horizon/);
  });

  it('uses the configured horizon', () => {
    const short = resolveSettings({ horizonMs: 60_000 });
    expect(validateJob({ payload: 1, delaySeconds: 60 }, short, NOW).dueMs).toBe(NOW + 60_000);
    expectValidationError(() => validateJob({ payload: 1, delaySeconds: 60.001 }, short, NOW), /horizon/);
  });

  it('rejects a delay beyond the largest Date with a ValidationError, not a RangeError (a 400, not a 500)', () => {
    for (const delaySeconds of [1e13, 1e300, Number.MAX_VALUE]) {
      expectValidationError(() => validateJob({ payload: 1, delaySeconds }, settings, NOW), /horizon/);
    }
  });

  it('rejects a payload too deep to serialize with a ValidationError', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 1_000_000; i++) deep = [deep];
    expectValidationError(() => validateJob({ payload: deep, delaySeconds: 1 }, settings, NOW), /payload/);
  });

  it('accepts a payload of exactly 240 KiB serialized and rejects one byte more with PayloadTooLargeError', () => {
    expect(settings.maxPayloadBytes).toBe(MAX_PAYLOAD);
    // A string of n ASCII characters serializes to n + 2 bytes (the quotes).
    const atLimit = 'x'.repeat(MAX_PAYLOAD - 2);
    expect(validateJob({ payload: atLimit, delaySeconds: 1 }, settings, NOW).payloadText).toHaveLength(MAX_PAYLOAD);
    expectTooLarge(() => validateJob({ payload: atLimit + 'x', delaySeconds: 1 }, settings, NOW));
    // In an object: {"data":"..."} adds 11 bytes.
    expect(validateJob({ payload: { data: 'x'.repeat(MAX_PAYLOAD - 11) }, delaySeconds: 1 }, settings, NOW).payloadText).toHaveLength(
      MAX_PAYLOAD,
    );
    expectTooLarge(() => validateJob({ payload: { data: 'x'.repeat(MAX_PAYLOAD - 10) }, delaySeconds: 1 }, settings, NOW));
  });

  it('counts the payload in UTF-8 bytes of its JSON text, not in characters', () => {
    // "é" is 2 bytes in UTF-8: (MAX - 2) / 2 of them fill the limit exactly.
    const n = (MAX_PAYLOAD - 2) / 2;
    const at = validateJob({ payload: 'é'.repeat(n), delaySeconds: 1 }, settings, NOW);
    expect(Buffer.byteLength(at.payloadText, 'utf8')).toBe(MAX_PAYLOAD);
    expectTooLarge(() => validateJob({ payload: 'é'.repeat(n + 1), delaySeconds: 1 }, settings, NOW));
    // A quote serializes as \" (2 bytes).
    expect(validateJob({ payload: '"'.repeat(n), delaySeconds: 1 }, settings, NOW).payloadText).toHaveLength(MAX_PAYLOAD);
    expectTooLarge(() => validateJob({ payload: '"'.repeat(n + 1), delaySeconds: 1 }, settings, NOW));
  });

  it('uses the configured payload limit', () => {
    const small = resolveSettings({ maxPayloadBytes: 10 });
    expect(validateJob({ payload: 'x'.repeat(8), delaySeconds: 1 }, small, NOW).payloadText).toBe(`"${'x'.repeat(8)}"`);
    expectTooLarge(() => validateJob({ payload: 'x'.repeat(9), delaySeconds: 1 }, small, NOW));
  });

  it('accepts idempotency keys of 1 to 128 characters', () => {
    expect(validateJob({ payload: 1, delaySeconds: 1, idempotencyKey: 'k' }, settings, NOW).idempotencyKey).toBe('k');
    const k128 = 'k'.repeat(128);
    expect(validateJob({ payload: 1, delaySeconds: 1, idempotencyKey: k128 }, settings, NOW).idempotencyKey).toBe(k128);
    expect(validateJob({ payload: 1, delaySeconds: 1 }, settings, NOW).idempotencyKey).toBeUndefined();
    for (const idempotencyKey of ['k'.repeat(129), '', 5, null, ['k'], { k: 1 }]) {
      expectValidationError(() => validateJob({ payload: 1, delaySeconds: 1, idempotencyKey }, settings, NOW), /idempotencyKey/);
    }
  });

  it('requires cancellable to be a boolean, defaulting to true', () => {
    expect(validateJob({ payload: 1, delaySeconds: 1 }, settings, NOW).cancellable).toBe(true);
    expect(validateJob({ payload: 1, delaySeconds: 1, cancellable: true }, settings, NOW).cancellable).toBe(true);
    expect(validateJob({ payload: 1, delaySeconds: 1, cancellable: false }, settings, NOW).cancellable).toBe(false);
    for (const cancellable of ['false', 'true', 0, 1, null, [], {}]) {
      expectValidationError(() => validateJob({ payload: 1, delaySeconds: 1, cancellable }, settings, NOW), /cancellable/);
    }
  });

  it('rejects unknown fields, naming them', () => {
    expectValidationError(() => validateJob({ payload: 1, delaySeconds: 1, foo: 1 }, settings, NOW), /'foo'/);
    expectValidationError(() => validateJob({ payload: 1, runat: '2030-01-01T00:00:00Z' }, settings, NOW), /'runat'/);
    expectValidationError(() => validateJob({ payload: 1, delaySeconds: 1, a: 1, b: 2 }, settings, NOW), /'a'.*'b'/);
    // JSON.parse makes "__proto__" an own property: it is an unknown field too, not a prototype.
    expectValidationError(() => validateJob(JSON.parse('{"payload":1,"delaySeconds":1,"__proto__":{"x":1}}'), settings, NOW), /__proto__/);
  });

  it('rejects bodies that are not JSON objects', () => {
    for (const body of [null, undefined, [], [{ payload: 1, delaySeconds: 1 }], 'job', 42, true]) {
      expectValidationError(() => validateJob(body, settings, NOW));
    }
  });

  it('serializes a missing or null payload as "null"', () => {
    expect(validateJob({ delaySeconds: 1 }, settings, NOW).payloadText).toBe('null');
    expect(validateJob({ payload: undefined, delaySeconds: 1 }, settings, NOW).payloadText).toBe('null');
    expect(validateJob({ payload: null, delaySeconds: 1 }, settings, NOW).payloadText).toBe('null');
  });

  it('keeps any JSON payload as JSON text equal to it', () => {
    // JSON.parse(JSON.stringify(v)) normalizes -0, which JSON cannot carry.
    const payloadArb = fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as unknown);
    fc.assert(
      fc.property(payloadArb, fc.boolean(), (payload, cancellable) => {
        const job = validateJob({ payload, delaySeconds: 5, cancellable }, settings, NOW);
        expect(JSON.parse(job.payloadText)).toEqual(payload);
        expect(job.cancellable).toBe(cancellable);
      }),
      { numRuns: 300 },
    );
  });
});

describe('parseJsonBody', () => {
  it('parses JSON', () => {
    expect(parseJsonBody('{"payload":{"a":[1,2]},"delaySeconds":3}', 1_000)).toEqual({ payload: { a: [1, 2] }, delaySeconds: 3 });
    expect(parseJsonBody('[1]', 1_000)).toEqual([1]);
  });

  it('rejects an empty or missing body', () => {
    expectValidationError(() => parseJsonBody(undefined, 1_000), /empty/);
    expectValidationError(() => parseJsonBody('', 1_000), /empty/);
  });

  it('rejects bad JSON with a 400', () => {
    for (const raw of ['{', '{"a":1', "{'a':1}", 'undefined', '{"a":1,}', 'NaN', ' ', '\u0000']) {
      expectValidationError(() => parseJsonBody(raw, 1_000), /JSON/);
    }
  });

  it('refuses a body above the limit with a 413, before parsing it, counting UTF-8 bytes', () => {
    const body = JSON.stringify({ data: 'x'.repeat(100) });
    expect(parseJsonBody(body, body.length)).toEqual({ data: 'x'.repeat(100) });
    expectTooLarge(() => parseJsonBody(body, body.length - 1));
    // Too large and not JSON either: the size is what the client must fix first.
    expectTooLarge(() => parseJsonBody('{'.repeat(2_000), 1_999));
    // "é" is 2 bytes: 6 characters, 10 bytes.
    expect(parseJsonBody('"éééé"', 10)).toBe('éééé');
    expectTooLarge(() => parseJsonBody('"éééé"', 9));
  });

  it('applies the 5 MiB batch limit of the settings', () => {
    expect(settings.maxBatchBytes).toBe(5 * 1024 * KIB);
    const raw = `"${'x'.repeat(settings.maxBatchBytes - 2)}"`;
    expect(parseJsonBody(raw, settings.maxBatchBytes)).toHaveLength(settings.maxBatchBytes - 2);
    expectTooLarge(() => parseJsonBody(`${raw} `, settings.maxBatchBytes));
  });
});

describe('validateJob on a request body as parsed (payload kept as raw text)', () => {
  /** What the submit route does: parse the body with the payload kept raw, then validate. */
  const fromBody = (body: string, s = settings) => validateJob(parseJsonBody(body, s.maxBatchBytes, JOB_PAYLOAD), s, NOW, body);

  it('keeps the payload exactly as written, whatever JSON.parse would make of it', () => {
    for (const p of ALTERED_BY_PARSE) {
      expect(fromBody(`{"delaySeconds": 1, "payload" :  ${p}  }`).payloadText).toBe(p);
    }
  });

  it('delivers an omitted payload and an explicit null alike, as null', () => {
    expect(fromBody('{"delaySeconds": 1}').payloadText).toBe('null');
    expect(fromBody('{"delaySeconds": 1, "payload": null}').payloadText).toBe('null');
  });

  it('counts the payload limit on the text as sent, whitespace included', () => {
    const small = resolveSettings({ maxPayloadBytes: 10 });
    expect(fromBody('{"delaySeconds":1,"payload":[1, 2, 3]}', small).payloadText).toBe('[1, 2, 3]');
    expectTooLarge(() => fromBody('{"delaySeconds":1,"payload":[1,  2,  3]}', small));
  });

  it('refuses characters SQS cannot carry, naming the character and where it is, and accepts their escapes', () => {
    const body = '{"delaySeconds":1,"payload":{"é":"\uFFFF"}}';
    const err = thrown(() => fromBody(body));
    expect(err).toBeInstanceOf(ValidationError);
    // Byte 7 of {"é":"<U+FFFF>"} (é is two bytes); byte 35 of the body.
    expect((err as Error).message).toMatch(/U\+FFFF .*byte 7 of the payload, byte 35 of the request body.*"\\uFFFF"/);
    expect(Buffer.from(body, 'utf8').subarray(35, 38)).toEqual(Buffer.from('\uFFFF', 'utf8'));
    expectValidationError(() => fromBody('{"delaySeconds":1,"payload":"\uFFFE"}'), /U\+FFFE/);
    expect(fromBody('{"delaySeconds":1,"payload":"\\uFFFF\\uFFFE"}').payloadText).toBe('"\\uFFFF\\uFFFE"');
    expect(fromBody('{"delaySeconds":1,"payload":"\u{10FFFF}\uFFFD\uE000\uD7FF"}').payloadText).toBe('"\u{10FFFF}\uFFFD\uE000\uD7FF"');
    // Text holding a lone surrogate (no UTF-8 body can; a caller passing a string could): refused too.
    expectValidationError(() => fromBody('{"delaySeconds":1,"payload":"a\ud800"}'), /U\+D800 \(an unpaired surrogate/);
    // JSON.stringify escapes one (a programmatic caller's value): fine.
    expect(validateJob({ payload: 'a\ud800', delaySeconds: 1 }, settings, NOW).payloadText).toBe('"a\\ud800"');
  });

  it('refuses a payload nested deeper than 1,000 levels, and accepts 1,000', () => {
    expect(MAX_PAYLOAD_DEPTH).toBe(1_000);
    const nested = (n: number) => `{"delaySeconds":1,"payload":${'['.repeat(n)}${']'.repeat(n)}}`;
    expect(fromBody(nested(1_000)).payloadText).toHaveLength(2_000);
    expectValidationError(() => fromBody(nested(1_001)), /nests 1001 levels deep, more than 1000/);
  });

  it('refuses a field given twice (which one was meant?)', () => {
    expectValidationError(() => fromBody('{"payload":1,"delaySeconds":1,"payload":2}'), /'payload' more than once/);
    expectValidationError(() => fromBody('{"delaySeconds":1,"delaySeconds":1}'), /'delaySeconds' more than once/);
    // Inside the payload, repeated keys are the client's business: kept as sent.
    expect(fromBody('{"delaySeconds":1,"payload":{"a":1,"a":2}}').payloadText).toBe('{"a":1,"a":2}');
  });

  it('records how the time was given: the runAt instant, or the delay (not the due time it moves with)', () => {
    expect(fromBody('{"runAt":"2030-01-01T00:01:00Z"}').schedule).toBe(`runAt:${NOW + 60_000}`);
    expect(fromBody('{"runAt":"2030-01-01T01:01:00+01:00"}').schedule).toBe(`runAt:${NOW + 60_000}`);
    expect(fromBody('{"delaySeconds":1.5}').schedule).toBe('delay:1500');
    expect(validateJob(parseJsonBody('{"delaySeconds":1.5}', 1_000, JOB_PAYLOAD), settings, NOW + 7).schedule).toBe('delay:1500');
  });

  it('refuses an idempotency key holding an unpaired surrogate (it has no UTF-8 form)', () => {
    expectValidationError(() => fromBody('{"delaySeconds":1,"idempotencyKey":"k\\ud800"}'), /idempotencyKey/);
    expect(fromBody('{"delaySeconds":1,"idempotencyKey":"k\\ud83d\\ude00"}').idempotencyKey).toBe('k😀');
  });
});

describe('a batch body as parsed', () => {
  it('refuses a body nested deeper than 64 levels outside its payloads when parsing it (a 400, never a deep value to recurse over)', () => {
    const arrays = `{"jobs":[${'['.repeat(100)}${']'.repeat(100)}]}`;
    expectValidationError(() => parseJsonBody(arrays, 1_000_000, BATCH_PAYLOADS), /nests more than 64 levels/);
    const objects = `{"jobs":[${'{"a":'.repeat(100)}1${'}'.repeat(100)}]}`;
    expectValidationError(() => parseJsonBody(objects, 1_000_000, BATCH_PAYLOADS), /nests more than 64 levels/);
    // 64 levels are built; a payload nests as deep as its own limit allows.
    const at64 = `{"jobs":[${'['.repeat(62)}${']'.repeat(62)}]}`;
    expect((parseJsonBody(at64, 1_000_000, BATCH_PAYLOADS) as { jobs: unknown[] }).jobs).toHaveLength(1);
    const deepPayload = `{"jobs":[{"payload":${'['.repeat(1_000)}${']'.repeat(1_000)},"delaySeconds":1}]}`;
    const parsed = parseJsonBody(deepPayload, 1_000_000, BATCH_PAYLOADS) as { jobs: unknown[] };
    expect(validateJob(parsed.jobs[0], settings, NOW, deepPayload).payloadText).toHaveLength(2_000);
  });
});

describe('validateJob with debounce (docs/flow-control.md#debounce)', () => {
  const settings = resolveSettings();
  const now = 1_900_000_000_000;
  const job = (debounce: unknown, extra: object = {}) => validateJob({ payload: { a: 1 }, debounce, ...extra }, settings, now);

  it('is due periodSeconds after the submit (a fraction of a ms rounds up), and keeps key, period and maxWait', () => {
    expect(job({ key: 'k', periodSeconds: 30 })).toMatchObject({
      dueMs: now + 30_000,
      debounce: { key: 'k', periodMs: 30_000 },
      cancellable: true,
    });
    expect(job({ key: 'k', periodSeconds: 1.0001 }).dueMs).toBe(now + 1_001);
    expect(job({ key: 'k', periodSeconds: 86_400, maxWaitSeconds: 604_800 }).debounce).toEqual({
      key: 'k',
      periodMs: 86_400_000,
      maxWaitMs: 604_800_000,
    });
    // maxWaitSeconds may equal the period: every submit after the first is due at the same cap.
    expect(job({ key: 'k', periodSeconds: 5, maxWaitSeconds: 5 }).debounce?.maxWaitMs).toBe(5_000);
    expect(job({ key: 'x'.repeat(128), periodSeconds: 1 }).debounce?.key).toHaveLength(128);
    expect(job({ key: 'k', periodSeconds: 1 }, { tags: ['t'], priority: 9 })).toMatchObject({ tags: ['t'], priority: 9 });
  });

  it.each([
    [{ key: 'k', periodSeconds: 0.5 }, /periodSeconds must be a number of seconds from 1 to 86400/],
    [{ key: 'k', periodSeconds: Number.NaN }, /periodSeconds/],
    [{ key: 'k', periodSeconds: '30' }, /periodSeconds/],
    [{ key: 'k' }, /periodSeconds/],
    [{ periodSeconds: 3 }, /debounce.key must be a string of 1 to 128/],
    [{ key: 'x'.repeat(129), periodSeconds: 3 }, /debounce.key/],
    [{ key: 7, periodSeconds: 3 }, /debounce.key/],
    [{ key: 'a\nb', periodSeconds: 3 }, /control character/],
    [{ key: '\ud800', periodSeconds: 3 }, /unpaired surrogate/],
    [{ key: 'k', periodSeconds: 10, maxWaitSeconds: 9 }, /maxWaitSeconds must be a number of seconds from 10 to 604800/],
    [{ key: 'k', periodSeconds: 10, maxWaitSeconds: 604_801 }, /maxWaitSeconds/],
    [{ key: 'k', periodSeconds: 10, wait: 1 }, /unknown field 'wait' in debounce/],
    [null, /debounce must be an object/],
    [['k', 10], /debounce must be an object/],
  ])('refuses debounce %j', (debounce, message) => {
    expect(() => job(debounce)).toThrow(ValidationError);
    expect(() => job(debounce)).toThrow(message);
  });

  it.each([
    [{ runAt: '2030-01-01T00:00:00Z' }, /leave out runAt/],
    [{ delaySeconds: 0 }, /leave out delaySeconds/],
    [{ idempotencyKey: 'i' }, /debounce and idempotencyKey cannot be combined/],
    [{ cancellable: false }, /debounce and cancellable: false/],
    [{ cancellable: 'no' }, /cancellable must be true or false/],
    [{ concurrencyKey: 'c' }, /debounce and concurrencyKey cannot be combined/],
    [{ concurrencyLimit: 2 }, /debounce and concurrencyLimit cannot be combined/],
  ])('refuses debounce with %j', (extra, message) => {
    expect(() => job({ key: 'k', periodSeconds: 3 }, extra)).toThrow(message);
  });
});
