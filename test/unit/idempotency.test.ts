import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { fingerprint, IDEMPOTENCY_WINDOW_MS } from '../../core/submit/idempotency.js';

const req = (payloadText: string, schedule = 'delay:30000', cancellable = true) => ({ payloadText, schedule, cancellable });

describe('fingerprint: what counts as the same request for an idempotency key', () => {
  it('is the same for the same payload text, schedule and cancellable', () => {
    fc.assert(
      fc.property(fc.json(), fc.boolean(), fc.nat(), (text, c, ms) => {
        expect(fingerprint(req(text, `runAt:${ms}`, c))).toBe(fingerprint(req(text, `runAt:${ms}`, c)));
      }),
    );
  });

  it('differs when any of them differs, byte for byte in the payload', () => {
    const base = fingerprint(req('{"amount":1.0}'));
    for (const other of [
      req('{"amount":1}'),
      req('{"amount": 1.0}'),
      req('{"amount":1.0}', 'delay:30001'),
      req('{"amount":1.0}', 'runAt:30000'),
      req('{"amount":1.0}', 'delay:30000', false),
    ]) {
      expect(fingerprint(other)).not.toBe(base);
    }
  });

  it('keeps the fields apart (no ambiguity where the schedule ends and the payload begins)', () => {
    expect(fingerprint(req('Y', 'delay:0\nc\nX'))).not.toBe(fingerprint(req('X\nc\nY', 'delay:0')));
    fc.assert(
      fc.property(fc.string(), fc.string(), fc.string(), fc.string(), (p1, s1, p2, s2) => {
        fc.pre(p1 !== p2 || s1 !== s2);
        expect(fingerprint(req(p1, s1))).not.toBe(fingerprint(req(p2, s2)));
      }),
    );
  });

  it('the window is at least 24 hours', () => {
    expect(IDEMPOTENCY_WINDOW_MS).toBeGreaterThanOrEqual(24 * 3_600_000);
  });
});
