import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CONTROLS_TTL_MS } from '../../core/tenants/controls.js';
import { CLOCK_MARGIN_MS, needsFreshControls, place } from '../../core/submit/submitter.js';

/** A fixed "now" (the clock is injected): 2030-01-01T00:00:00Z. */
const NOW = Date.UTC(2030, 0, 1);
const LOOKAHEAD = 5_000;
/** SQS's largest DelaySeconds. */
const SQS_MAX_DELAY_S = 900;

describe('place', () => {
  it('sends a job due within the lookahead straight to its queue, delay rounded up', () => {
    expect(place({ dueMs: NOW + 1, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 1 });
    expect(place({ dueMs: NOW + 999, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 1 });
    expect(place({ dueMs: NOW + 1_000, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 1 });
    expect(place({ dueMs: NOW + 1_001, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 2 });
    expect(place({ dueMs: NOW + 4_999, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 5 });
    // "within 5 s" includes 5 s.
    expect(place({ dueMs: NOW + LOOKAHEAD, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 5 });
  });

  it('sends a job due now or in the past at once (delay 0)', () => {
    expect(place({ dueMs: NOW, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 0 });
    expect(place({ dueMs: NOW - 1, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 0 });
    expect(place({ dueMs: NOW - 3_600_000, cancellable: false }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 0 });
    expect(place({ dueMs: 0, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 0 });
  });

  it('puts a cancellable job due after the lookahead in the table (path t, no delay)', () => {
    expect(place({ dueMs: NOW + LOOKAHEAD + 1, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 't' });
    expect(place({ dueMs: NOW + 60_000, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 't' });
    expect(place({ dueMs: NOW + 365 * 86_400_000, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 't' });
  });

  it('sends a cancellable: false job due within 900 s (after rounding up) straight to its queue', () => {
    expect(place({ dueMs: NOW + 60_000, cancellable: false }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 60 });
    expect(place({ dueMs: NOW + 899_001, cancellable: false }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 900 });
    expect(place({ dueMs: NOW + 900_000, cancellable: false }, NOW, LOOKAHEAD)).toEqual({ path: 'd', delaySeconds: 900 });
  });

  it('puts a cancellable: false job due after 900 s in the table as path u (900.001 s rounds up to 901)', () => {
    expect(place({ dueMs: NOW + 900_001, cancellable: false }, NOW, LOOKAHEAD)).toEqual({ path: 'u' });
    expect(place({ dueMs: NOW + 86_400_000, cancellable: false }, NOW, LOOKAHEAD)).toEqual({ path: 'u' });
    // The same due time with cancellable: true goes to the table as t.
    expect(place({ dueMs: NOW + 900_000, cancellable: true }, NOW, LOOKAHEAD)).toEqual({ path: 't' });
  });

  it('never uses the direct path for a held tenant (paused, or its controls unreadable): t, or u for cancellable: false', () => {
    fc.assert(
      fc.property(fc.integer({ min: -86_400_000, max: 2_000_000 }), fc.boolean(), (offsetMs, cancellable) => {
        expect(place({ dueMs: NOW + offsetMs, cancellable }, NOW, LOOKAHEAD, true)).toEqual({ path: cancellable ? 't' : 'u' });
      }),
    );
  });

  it('reads the controls fresh for every job that would go direct, or is due within the cache ttl plus the clock margin', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: -86_400_000, max: 2_000_000 }),
        fc.boolean(),
        fc.integer({ min: 1_000, max: 60_000 }),
        (offsetMs, cancellable, lookaheadMs) => {
          const job = { dueMs: NOW + offsetMs, cancellable };
          const fresh = needsFreshControls(job, NOW, lookaheadMs);
          if (place(job, NOW, lookaheadMs).path === 'd') expect(fresh).toBe(true);
          if (offsetMs <= CONTROLS_TTL_MS + CLOCK_MARGIN_MS) expect(fresh).toBe(true);
          if (offsetMs > Math.max(lookaheadMs, CONTROLS_TTL_MS + CLOCK_MARGIN_MS) && (cancellable || offsetMs > 900_000))
            expect(fresh).toBe(false);
        },
      ),
    );
  });

  it('follows the configured lookahead', () => {
    expect(place({ dueMs: NOW + 30_000, cancellable: true }, NOW, 60_000)).toEqual({ path: 'd', delaySeconds: 30 });
    expect(place({ dueMs: NOW + 1_001, cancellable: true }, NOW, 1_000)).toEqual({ path: 't' });
  });

  it('never sends early, at most one second late, never beyond SQS limits, and picks the right path (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 4_000_000_000_000 }),
        fc.integer({ min: -86_400_000, max: 2_000_000 }),
        fc.boolean(),
        fc.integer({ min: 1_000, max: 60_000 }),
        (now, offsetMs, cancellable, lookaheadMs) => {
          const dueMs = now + offsetMs;
          const p = place({ dueMs, cancellable }, now, lookaheadMs);
          // Direct when due within the lookahead, or not cancellable and due within 900 s: for an
          // integer number of ms, "ceil(ms / 1000) ≤ 900" is "ms ≤ 900,000".
          const direct = offsetMs <= lookaheadMs || (!cancellable && offsetMs <= SQS_MAX_DELAY_S * 1000);
          if (!direct) {
            expect(p).toEqual({ path: cancellable ? 't' : 'u' });
            return;
          }
          expect(p.path).toBe('d');
          const delay = p.delaySeconds!;
          expect(Number.isInteger(delay)).toBe(true);
          expect(delay).toBeGreaterThanOrEqual(0);
          expect(delay).toBeLessThanOrEqual(SQS_MAX_DELAY_S);
          // Never early: the message becomes visible no sooner than its due time.
          expect(now + delay * 1000).toBeGreaterThanOrEqual(dueMs);
          // Up to a second late (SQS delays are whole seconds), and no delay at all when due already.
          expect(delay * 1000).toBeLessThan(Math.max(0, offsetMs) + 1000);
          if (offsetMs <= 0) expect(delay).toBe(0);
        },
      ),
      { numRuns: 5_000 },
    );
  });

  it('never sends early, around the 900 s edge in particular (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 895_000, max: 905_000 }), fc.boolean(), (offsetMs, cancellable) => {
        const p = place({ dueMs: NOW + offsetMs, cancellable }, NOW, LOOKAHEAD);
        if (p.path === 'd') {
          expect(p.delaySeconds! * 1000).toBeGreaterThanOrEqual(offsetMs);
          expect(p.delaySeconds).toBeLessThanOrEqual(SQS_MAX_DELAY_S);
        } else {
          expect(p.delaySeconds).toBeUndefined();
        }
        expect(p.path).toBe(cancellable ? 't' : offsetMs <= 900_000 ? 'd' : 'u');
      }),
      { numRuns: 2_000 },
    );
  });
});
