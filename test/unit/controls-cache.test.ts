import { describe, expect, it } from 'vitest';
import { ControlsCache, DEFAULT_CONTROLS, isUnknown, UNKNOWN_CONTROLS, type TenantControls } from '../../core/tenants/controls.js';

/** A controls store the test edits, whose reads can be made to hang (a slow table under load). */
function store() {
  const stored = new Map<string, TenantControls>();
  const s = {
    reads: 0,
    hang: false,
    release: [] as (() => void)[],
    fail: false,
    stored,
    async getControls(tenant: string) {
      s.reads++;
      if (s.fail) throw new Error('throttled');
      if (s.hang) await new Promise<void>((r) => s.release.push(r));
      return stored.get(tenant);
    },
  };
  return s;
}

describe('ControlsCache', () => {
  it('never serves a copy older than its ttl: a pause is seen within 5 s', async () => {
    let now = 0;
    const s = store();
    const cache = new ControlsCache(s, { ttlMs: 5_000, clock: { now: () => now } });
    expect((await cache.get('a')).paused).toBe(false);
    s.stored.set('a', { ...DEFAULT_CONTROLS, paused: true });
    // Whenever the dispatcher asks, the answer is at most 5 s old.
    for (now = 0; now <= 5_000; now += 250) {
      const c = await cache.get('a');
      await new Promise((r) => setImmediate(r)); // let a background read land
      if (now >= 5_000) expect(c.paused).toBe(true);
    }
  });

  it('reads a copy past half its life again in the background while serving it: a tenant in use never waits', async () => {
    let now = 0;
    const s = store();
    const cache = new ControlsCache(s, { ttlMs: 5_000, clock: { now: () => now } });
    await cache.get('a');
    expect(s.reads).toBe(1);
    s.hang = true;
    now = 3_000;
    s.stored.set('a', { ...DEFAULT_CONTROLS, weight: 3 });
    // Answered at once from the copy (still within its ttl) although the read it started hangs.
    expect((await cache.get('a')).weight).toBe(1);
    expect(await cache.get('a')).toEqual(DEFAULT_CONTROLS);
    expect(s.reads).toBe(2); // one background read at a time
    s.release.forEach((r) => r());
    await new Promise((r) => setImmediate(r));
    expect((await cache.get('a')).weight).toBe(3);
    expect(cache.peek('a').weight).toBe(3);
  });

  it('keeps the copy it had while reads fail, reading again every retry interval, for at most maxStaleMs after its read', async () => {
    let now = 0;
    const s = store();
    s.stored.set('a', { ...DEFAULT_CONTROLS, maxDeliveriesPerSecond: 10 });
    const cache = new ControlsCache(s, { ttlMs: 5_000, maxStaleMs: 30_000, retryMs: 1_000, clock: { now: () => now } });
    await cache.get('a');
    s.fail = true;
    now = 4_000;
    expect((await cache.get('a')).maxDeliveriesPerSecond).toBe(10); // starts a background read, which fails
    await settle();
    expect(cache.peek('a').maxDeliveriesPerSecond).toBe(10);
    expect(cache.takeReadFailures()).toBe(1);
    const reads = s.reads;
    now = 4_500; // within the retry interval: no read
    expect((await cache.get('a')).maxDeliveriesPerSecond).toBe(10);
    expect(s.reads).toBe(reads);
    // Past its ttl the copy is still served while reads fail, one read per retry interval...
    for (now = 5_001; now < 30_000; now += 500) {
      expect((await cache.get('a')).maxDeliveriesPerSecond).toBe(10);
      await settle();
    }
    expect(s.reads - reads).toBeLessThanOrEqual(26);
    expect(s.reads - reads).toBeGreaterThanOrEqual(20);
    expect(cache.takeReadFailures()).toBe(s.reads - reads);
    // ...and no longer once maxStaleMs have passed since its read began: held, as if paused.
    now = 30_000;
    const c = await cache.get('a');
    expect(isUnknown(c)).toBe(true);
    expect(c.paused).toBe(true);
    s.fail = false;
    s.stored.set('a', { ...DEFAULT_CONTROLS });
    now = 31_000;
    await cache.get('a'); // the retry (in the background)
    await settle();
    expect(await cache.get('a')).toEqual(DEFAULT_CONTROLS);
  });

  it('fails closed: a tenant never read whose read fails is held (UNKNOWN_CONTROLS, paused) and read again after retryMs', async () => {
    let now = 0;
    const s = store();
    s.fail = true;
    const cache = new ControlsCache(s, { ttlMs: 5_000, retryMs: 1_000, clock: { now: () => now } });
    const c = await cache.get('new');
    expect(c).toBe(UNKNOWN_CONTROLS);
    expect(c.paused).toBe(true);
    expect(cache.peek('new').paused).toBe(true);
    expect(cache.has('new')).toBe(true); // looked up: dispatch goes on to hold its rows
    expect(cache.takeReadFailures()).toBe(1);
    expect(cache.takeReadFailures()).toBe(0);
    // Lookups within the retry interval answer at once, without a read (no storm of reads).
    for (now = 0; now < 1_000; now += 100) expect((await cache.get('new')).paused).toBe(true);
    expect(s.reads).toBe(1);
    s.fail = false;
    now = 1_000;
    expect((await cache.get('new')).paused).toBe(true); // served while the retry runs
    await settle();
    expect(s.reads).toBe(2);
    expect(await cache.get('new')).toEqual(DEFAULT_CONTROLS);
    expect(cache.takeReadFailures()).toBe(0);
  });

  it('fresh() reads whatever is cached, and answers UNKNOWN_CONTROLS (not the copy) when that read fails', async () => {
    const now = 0;
    const s = store();
    const cache = new ControlsCache(s, { ttlMs: 5_000, clock: { now: () => now } });
    await cache.get('a');
    s.stored.set('a', { ...DEFAULT_CONTROLS, paused: true });
    expect((await cache.get('a')).paused).toBe(false); // the cached copy
    expect((await cache.fresh('a')).paused).toBe(true);
    expect((await cache.get('a')).paused).toBe(true); // the fresh read refreshed the cache
    s.fail = true;
    expect(await cache.fresh('a')).toBe(UNKNOWN_CONTROLS);
    expect(cache.takeReadFailures()).toBe(1);
    expect(s.reads).toBe(3);
  });

  it("counts a copy's age from when its read began: a slow read never stretches the ttl", async () => {
    let now = 0;
    const s = store();
    const cache = new ControlsCache(s, { ttlMs: 5_000, clock: { now: () => now } });
    s.hang = true;
    const first = cache.get('a');
    now = 4_000; // the read takes 4 s
    s.release.forEach((r) => r());
    s.release = [];
    await first;
    s.hang = false;
    s.stored.set('a', { ...DEFAULT_CONTROLS, paused: true });
    now = 5_000; // 5 s after the read began: the copy has expired, this lookup reads
    expect((await cache.get('a')).paused).toBe(true);
  });
});

/** Lets reads started in the background land. */
const settle = () => new Promise((r) => setImmediate(r));
