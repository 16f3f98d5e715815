/**
 * Issue #15: job priority (1..9, default 5) as submit validates it, as the inbound message
 * carries it (only when ≠ 5) and as the idempotency fingerprint counts it; and the submit rate
 * limiter's arithmetic (slots, allowances, Retry-After) over an in-memory counter store.
 */
import { describe, expect, it } from 'vitest';
import { resolveSettings } from '../../core/model/config.js';
import { ControlsCache, DEFAULT_CONTROLS, type TenantControls } from '../../core/tenants/controls.js';
import { ValidationError } from '../../core/model/errors.js';
import { fingerprint } from '../../core/submit/idempotency.js';
import { inboundBody, parseInboundBody, parseInboundJobs, type InboundJob } from '../../core/model/messages.js';
import {
  MAX_COUNTS_PER_SLOT,
  slotAllowance,
  slotCount,
  SubmitRateLimiter,
  SubmitThrottledError,
  type RateCounterKey,
  type RateCounterStore,
} from '../../core/submit/submitRateLimit.js';
import { validateJob } from '../../core/model/validate.js';

const settings = resolveSettings();
const NOW = Date.UTC(2030, 0, 1);
const job = (extra: object) => validateJob({ payload: 1, delaySeconds: 60, ...extra }, settings, NOW);

describe('priority', () => {
  it('is a whole number from 1 to 9, 5 when omitted', () => {
    expect(job({}).priority).toBe(5);
    for (const p of [1, 5, 9]) expect(job({ priority: p }).priority).toBe(p);
  });

  it.each([0, 10, -1, 5.5, '9', null, true, [9], { p: 9 }, Number.NaN])('refuses %j with a 400 naming priority', (p) => {
    let err: unknown;
    try {
      job({ priority: p });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as Error).message).toMatch(/^priority must be a whole number from 1 \(lowest\) to 9 \(highest\)/);
  });

  it('travels in the inbound entry only when not 5: a default entry is the bytes it always was', () => {
    const base: InboundJob = { jobId: 'j', tenant: 'demo', shard: 3, dueMs: NOW, payload: '{"a":1}' };
    expect(inboundBody([base])).toBe(`{"v":2,"jobs":[{"jobId":"j","tenant":"demo","shard":3,"dueMs":${NOW},"payload":{"a":1}}]}`);
    expect(inboundBody([{ ...base, priority: 5 }])).toBe(inboundBody([base]));
    const high = inboundBody([{ ...base, priority: 9 }]);
    expect(high).toContain('"priority":9,');
    expect(parseInboundBody(high)).toEqual([{ ...base, priority: 9 }]);
    expect(parseInboundBody(inboundBody([{ ...base, priority: 5 }]))).toEqual([base]);
    // An entry with a priority submit never writes is malformed (its neighbours still read).
    const bad = high.replace('"priority":9', '"priority":12');
    expect(parseInboundJobs(bad)).toEqual([undefined]);
  });

  it('counts in the idempotency fingerprint only when not 5 (records written before priorities still match)', () => {
    const plain = job({});
    expect(fingerprint(job({ priority: 5 }))).toBe(fingerprint(plain));
    expect(fingerprint({ schedule: plain.schedule, cancellable: true, payloadText: '1' })).toBe(fingerprint(plain));
    expect(fingerprint(job({ priority: 9 }))).not.toBe(fingerprint(plain));
    expect(fingerprint(job({ priority: 9 }))).not.toBe(fingerprint(job({ priority: 1 })));
  });
});

/** Counters in memory, as the DynamoDB store keeps them (conditional add). */
class MemoryCounters implements RateCounterStore {
  readonly counts = new Map<string, number>();
  writes = 0;
  async add(key: RateCounterKey, n: number, allowance: number): Promise<boolean> {
    this.writes++;
    const k = `${key.tenant}#${key.slot}@${key.second}`;
    const c = this.counts.get(k) ?? 0;
    if (c + n > allowance) return false;
    this.counts.set(k, c + n);
    return true;
  }
}

function limiter(controls: Partial<TenantControls>, nowMs: { t: number }, random = () => 0) {
  const counters = new MemoryCounters();
  const cache = new ControlsCache({ getControls: async () => ({ ...DEFAULT_CONTROLS, ...controls }) });
  const rate = new SubmitRateLimiter({ controls: cache, counters, clock: { now: () => nowMs.t }, random });
  return { rate, counters };
}

describe('submit rate limiter', () => {
  it('spreads a limit over slots of at most 500 per second whose allowances sum to the limit', () => {
    for (const limit of [1, 7, 500, 501, 1_000, 1_001, 12_345, 100_000]) {
      const slots = slotCount(limit);
      const shares = Array.from({ length: slots }, (_, i) => slotAllowance(limit, slots, i));
      expect(shares.reduce((a, b) => a + b, 0)).toBe(limit);
      expect(Math.max(...shares)).toBeLessThanOrEqual(MAX_COUNTS_PER_SLOT);
      expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(1);
    }
    expect(slotCount(500)).toBe(1);
    expect(slotCount(501)).toBe(2);
  });

  it('admits the limit per second, then answers 429 Throttled with Retry-After ≥ 1 until the next second', async () => {
    const now = { t: NOW + 250 };
    const { rate, counters } = limiter({ maxSubmitsPerSecond: 3 }, now);
    for (let i = 0; i < 3; i++) await rate.admit('demo', 1);
    const err = await rate.admit('demo', 1).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SubmitThrottledError);
    expect(err).toMatchObject({ status: 429, code: 'Throttled', retryAfterSeconds: 1, headers: { 'retry-after': '1' } });
    expect((err as Error).message).toContain('limited to 3 submitted jobs per second (maxSubmitsPerSecond)');
    now.t = NOW + 1_000;
    await rate.admit('demo', 2);
    await expect(rate.admit('demo', 2)).rejects.toBeInstanceOf(SubmitThrottledError);
    await rate.admit('demo', 1);
    expect(counters.writes).toBe(7); // refused requests cost their write too
  });

  it('admits a batch whole or refuses it whole, and refuses with a 400 a request larger than a second allows', async () => {
    const now = { t: NOW };
    const { rate, counters } = limiter({ maxSubmitsPerSecond: 10 }, now);
    await rate.admit('demo', 8);
    await expect(rate.admit('demo', 3)).rejects.toBeInstanceOf(SubmitThrottledError);
    await rate.admit('demo', 2);
    const err = await rate.admit('demo', 11).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as Error).message).toContain('maxSubmitsPerSecond');
    expect(counters.writes).toBe(3);
  });

  it('tries a second slot before refusing, so a full slot beside one with room costs one more write, not a 429', async () => {
    const now = { t: NOW };
    const { rate, counters } = limiter({ maxSubmitsPerSecond: 1_000 }, now, () => 0);
    await rate.admit('demo', 100);
    for (let i = 0; i < 4; i++) await rate.admit('demo', 100); // slot 0 holds 500
    await rate.admit('demo', 100); // slot 0 is full: slot 1 takes it
    expect(counters.counts.get(`demo#0@${NOW / 1000}`)).toBe(500);
    expect(counters.counts.get(`demo#1@${NOW / 1000}`)).toBe(100);
    expect(counters.writes).toBe(7);
  });

  it('costs nothing for a tenant without a limit', async () => {
    const { rate, counters } = limiter({}, { t: NOW });
    for (let i = 0; i < 5; i++) await rate.admit('demo', 100);
    expect(counters.writes).toBe(0);
  });
});
