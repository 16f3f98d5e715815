import { describe, expect, it } from 'vitest';
import { Acquirer, type AcquireItem } from '../../core/dispatch/acquirer.js';
import { AdaptiveLimit } from '../../core/dispatch/adaptiveLimit.js';
import { TokenBucket } from '../../core/dispatch/tokenBucket.js';

type Item = AcquireItem & { readonly name: string };
const item = (tenant: string, dueMs: number, name: string, priority?: number): Item => ({
  key: { shard: 0, dueMs },
  tenant,
  name,
  ...(priority !== undefined ? { priority } : {}),
});

/** An acquirer with one acquire at a time that records the order rows are taken in. */
function recorder(opts: { now?: () => number; weights?: Record<string, number>; mayStart?: (t: string) => boolean } = {}) {
  const order: Item[] = [];
  const acquirer = new Acquirer<Item>({
    concurrency: 1,
    canStart: () => true,
    now: opts.now ?? (() => 1_000),
    run: async (i) => void order.push(i),
    ...(opts.weights ? { weightOf: (t: string) => opts.weights![t] ?? 1 } : {}),
    ...(opts.mayStart ? { mayStart: opts.mayStart } : {}),
  });
  const drain = async () => {
    while (acquirer.queued > 0 || acquirer.inflight > 0) {
      acquirer.kick();
      await new Promise((r) => setImmediate(r));
    }
  };
  return { acquirer, order, drain };
}

describe('Acquirer: weighted fair share between tenants', () => {
  it('a flooding tenant does not delay another tenant by its flood: the other is served every other acquire', async () => {
    const { acquirer, order, drain } = recorder();
    for (let i = 0; i < 1_000; i++) acquirer.pushFresh(item('flood', 100 + i, `f${i}`));
    for (let i = 0; i < 5; i++) acquirer.pushFresh(item('quiet', 900 + i, `q${i}`)); // due later than the whole flood
    await drain();
    const positions = order.flatMap((it, n) => (it.tenant === 'quiet' ? [n] : []));
    expect(positions).toEqual([1, 3, 5, 7, 9]);
    // Each tenant's own rows stay in due order.
    expect(order.filter((i) => i.tenant === 'flood').map((i) => i.key.dueMs)).toEqual(Array.from({ length: 1_000 }, (_, i) => 100 + i));
  });

  it('shares acquires in proportion to weights while both have rows queued', async () => {
    const { acquirer, order, drain } = recorder({ weights: { a: 3, b: 1 } });
    for (let i = 0; i < 400; i++) {
      acquirer.pushFresh(item('a', 100, `a${i}`));
      acquirer.pushFresh(item('b', 100, `b${i}`));
    }
    await drain();
    const first = order.slice(0, 400);
    expect(first.filter((i) => i.tenant === 'a').length).toBe(300);
    expect(first.filter((i) => i.tenant === 'b').length).toBe(100);
  });

  it('a tenant back from idle earns no credit for the time it had nothing queued', async () => {
    const { acquirer, order, drain } = recorder();
    for (let i = 0; i < 50; i++) acquirer.pushFresh(item('a', 100 + i, `a${i}`));
    await drain();
    for (let i = 0; i < 10; i++) acquirer.pushFresh(item('a', 200 + i, `a2-${i}`));
    for (let i = 0; i < 10; i++) acquirer.pushFresh(item('b', 200 + i, `b${i}`));
    const before = order.length;
    await drain();
    // Alternates from the start instead of serving 'b' alone for 50 acquires.
    const next = order.slice(before, before + 6).map((i) => i.tenant);
    expect(next.filter((t) => t === 'a')).toHaveLength(3);
    expect(next.join('')).not.toMatch(/bbb/);
  });

  it('skips a tenant that may not start (its delivery limit) and serves the others', async () => {
    let allowLimited = false;
    const { acquirer, order, drain } = recorder({ mayStart: (t) => t !== 'limited' || allowLimited });
    for (let i = 0; i < 3; i++) acquirer.pushFresh(item('limited', 100 + i, `l${i}`));
    for (let i = 0; i < 3; i++) acquirer.pushFresh(item('free', 500 + i, `f${i}`));
    acquirer.kick();
    await new Promise((r) => setTimeout(r, 10));
    expect(order.map((i) => i.name)).toEqual(['f0', 'f1', 'f2']);
    expect(acquirer.queuedOf('limited')).toBe(3);
    allowLimited = true;
    await drain();
    expect(order.map((i) => i.name)).toEqual(['f0', 'f1', 'f2', 'l0', 'l1', 'l2']);
  });
});

describe('Acquirer: order inside a tenant', () => {
  it('due rows by priority (then due time), then rows not yet due in due order, then the backlog by priority and age', async () => {
    let now = 1_000;
    const { acquirer, order, drain } = recorder({ now: () => now });
    acquirer.pushBacklog(item('t', 10, 'backlog-old'));
    acquirer.pushBacklog(item('t', 20, 'backlog-urgent', 9));
    acquirer.pushFresh(item('t', 2_000, 'future-late', 9)); // priority never makes a row early
    acquirer.pushFresh(item('t', 1_500, 'future-soon'));
    acquirer.pushFresh(item('t', 900, 'due-old'));
    acquirer.pushFresh(item('t', 950, 'due-high', 8));
    acquirer.pushFresh(item('t', 990, 'due-low', 1));
    now = 1_600; // future-soon fell due while queued: it joins the due rows by its priority
    await drain();
    expect(order.map((i) => i.name)).toEqual([
      'due-high',
      'due-old',
      'future-soon',
      'due-low',
      'future-late',
      'backlog-urgent',
      'backlog-old',
    ]);
  });
});

describe('TokenBucket', () => {
  for (const rate of [0.5, 3, 20, 250, 2_000]) {
    it(`at ${rate}/s never grants more than the rate plus its burst in any second, and keeps up with the rate`, () => {
      const start = 1_000_000;
      const bucket = new TokenBucket(rate, start);
      const grants: number[] = [];
      // A taker that always wants more, asking whenever the bucket says a token is there.
      let t = start;
      const end = start + 20_000;
      while (t < end) {
        const n = bucket.take(t, 1_000);
        for (let k = 0; k < n; k++) grants.push(t);
        t = Math.max(t + 1, bucket.readyAt(t));
      }
      const burst = Math.max(1, rate / 20);
      let lo = 0;
      for (let hi = 0; hi < grants.length; hi++) {
        while (grants[hi]! - grants[lo]! >= 1_000) lo++;
        expect(hi - lo + 1).toBeLessThanOrEqual(Math.floor(rate + burst));
      }
      expect(grants.length).toBeGreaterThanOrEqual(Math.floor(rate * 20 * 0.97));
      expect(grants.length).toBeLessThanOrEqual(Math.ceil(rate * 20 + burst));
    });
  }
});

describe('Acquirer.spill', () => {
  it('takes out the rows the tenant would reach last, keeps the rest in order, and counts right', async () => {
    const { acquirer, order, drain } = recorder();
    acquirer.pushBacklog(item('a', 5, 'a-backlog'));
    for (let i = 0; i < 6; i++) acquirer.pushFresh(item('a', 100 + i, `a${i}`, i === 4 ? 9 : undefined));
    acquirer.pushFresh(item('b', 100, 'b0'));
    expect(acquirer.largestFresh()).toEqual({ tenant: 'a', queued: 6 });
    expect(acquirer.spill('a', 6, true)).toEqual([]);
    const out = acquirer.spill('a', 3);
    expect(out.map((i) => i.name)).toEqual(['a2', 'a3', 'a5', 'a-backlog']);
    expect(acquirer.queued).toBe(4);
    expect(acquirer.backlogQueued).toBe(0);
    expect(acquirer.spill('b', 3)).toEqual([]);
    await drain();
    expect(order.filter((i) => i.tenant === 'a').map((i) => i.name)).toEqual(['a4', 'a0', 'a1']);
  });
});

describe('Acquirer: a limit shared by the rounds of a process', () => {
  it("holds back a tenant with acquires in flight, never another tenant's first", async () => {
    const limit = new AdaptiveLimit({ min: 2, max: 2, now: () => 1_000 });
    const running: Item[] = [];
    const ends: (() => void)[] = [];
    const acquirer = new Acquirer<Item>({
      concurrency: 32,
      limit,
      canStart: () => true,
      now: () => 1_000,
      run: (i) => {
        running.push(i);
        return new Promise<number>((r) => ends.push(() => r(1)));
      },
    });
    for (let i = 0; i < 100; i++) acquirer.pushFresh(item('flood', 100 + i, `f${i}`));
    acquirer.kick();
    expect(running.map((i) => i.name)).toEqual(['f0', 'f1']); // the limit: 2 in flight
    acquirer.pushFresh(item('quiet', 500, 'q0'));
    acquirer.kick();
    // The quiet tenant has nothing in flight: its acquire starts at once, beyond the limit.
    expect(running.map((i) => i.name)).toEqual(['f0', 'f1', 'q0']);
    expect(limit.inflight).toBe(3);
    acquirer.pushFresh(item('quiet', 501, 'q1'));
    acquirer.kick();
    expect(running).toHaveLength(3); // its second waits for a slot, as the flood's do
    // As the flood's calls end, the freed slots go by fair share: the quiet tenant's next row
    // within the next two, not after the flood's 98 rows waiting.
    for (let k = 0; k < 3 && !running.some((i) => i.name === 'q1'); k++) {
      ends.shift()!();
      await new Promise((r) => setImmediate(r));
    }
    expect(running.slice(3).map((i) => i.name)).toContain('q1');
    expect(running.length).toBeLessThanOrEqual(5);
    while (ends.length > 0) ends.shift()!();
    await acquirer.stop();
  });
});
