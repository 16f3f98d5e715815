import { describe, expect, it } from 'vitest';
import { ControlsCache, DEFAULT_CONTROLS, type TenantControls } from '../../core/controls.js';

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

  it('keeps the copy it had when a background read fails, and reads again once it expires', async () => {
    let now = 0;
    const s = store();
    s.stored.set('a', { ...DEFAULT_CONTROLS, maxDeliveriesPerSecond: 10 });
    const cache = new ControlsCache(s, { ttlMs: 5_000, clock: { now: () => now } });
    await cache.get('a');
    s.fail = true;
    now = 4_000;
    expect((await cache.get('a')).maxDeliveriesPerSecond).toBe(10);
    await new Promise((r) => setImmediate(r));
    expect(cache.peek('a').maxDeliveriesPerSecond).toBe(10);
    s.fail = false;
    s.stored.set('a', { ...DEFAULT_CONTROLS });
    now = 5_001; // expired: this lookup waits for its read
    expect((await cache.get('a')).maxDeliveriesPerSecond).toBeUndefined();
  });
});
