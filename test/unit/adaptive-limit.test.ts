import { describe, expect, it, vi } from 'vitest';
import { AdaptiveLimit } from '../../core/dispatch/adaptiveLimit.js';

/**
 * A client keeping `limit.limit` calls in flight against one serial server (each call takes
 * `serviceMs` of the server, plus `networkMs` there and back), in simulated time: what the
 * dispatcher's calls meet at dynalite, or at a CPU they share. Returns the latencies seen in the
 * last `measureMs`, and the calls served per second then.
 */
function serve(
  limit: AdaptiveLimit,
  clock: { t: number },
  opts: { serviceMs: number; networkMs: () => number; forMs: number; measureMs: number; tenants?: readonly string[] },
) {
  const tenants = opts.tenants ?? ['a', 'b'];
  const end = clock.t + opts.forMs;
  let serverFreeAt = clock.t;
  /** Calls in flight: when each comes back, and its latency. */
  const inflight: { back: number; latency: number }[] = [];
  const latencies: number[] = [];
  let served = 0;
  let calls = 0;
  while (clock.t < end) {
    while (limit.free) {
      limit.start(tenants[calls++ % tenants.length]); // two tenants' calls by default: the limit applies
      const arrive = clock.t + opts.networkMs() / 2;
      serverFreeAt = Math.max(serverFreeAt, arrive) + opts.serviceMs;
      const back = serverFreeAt + opts.networkMs() / 2;
      inflight.push({ back, latency: back - clock.t });
    }
    inflight.sort((a, b) => a.back - b.back);
    const next = inflight.shift()!;
    clock.t = next.back;
    limit.done(next.latency);
    if (clock.t >= end - opts.measureMs) {
      latencies.push(next.latency);
      served++;
    }
  }
  for (const _ of inflight) limit.done(); // the test's clock stops: these calls never come back
  latencies.sort((a, b) => a - b);
  return { p95: latencies[Math.floor(latencies.length * 0.95)]!, perSec: (served * 1000) / opts.measureMs };
}

describe('AdaptiveLimit', () => {
  it('stays at its maximum while calls do not queue (latency at the base, whatever the load)', () => {
    const clock = { t: 0 };
    const limit = new AdaptiveLimit({ min: 2, max: 32, now: () => clock.t });
    // A parallel service (DynamoDB): 6-9 ms whatever the number of calls in flight.
    let i = 0;
    for (let k = 0; k < 10_000; k++) {
      limit.start(k % 2 === 0 ? 'a' : 'b');
      clock.t += 0.3;
      limit.done(6 + ((i++ * 7) % 4));
    }
    expect(limit.limit).toBe(32);
  });

  it('keeps the queue at a serial server within its target, at the server’s full rate', () => {
    const clock = { t: 0 };
    const limit = new AdaptiveLimit({ min: 2, max: 256, targetMs: 10, now: () => clock.t });
    // 0.6 ms a call (dynalite's conditional writes): with 256 in flight a call would wait 150 ms.
    const r = serve(limit, clock, { serviceMs: 0.6, networkMs: () => 0.5, forMs: 20_000, measureMs: 10_000 });
    expect(r.p95).toBeLessThanOrEqual(0.5 + 0.6 + 10 + 2);
    expect(r.perSec).toBeGreaterThan(0.95 * (1000 / 0.6)); // the server never idles
    expect(limit.limit).toBeLessThan(32);
  });

  it('grows back to its maximum once the queue is gone', () => {
    const clock = { t: 0 };
    const limit = new AdaptiveLimit({ min: 2, max: 64, targetMs: 10, now: () => clock.t });
    serve(limit, clock, { serviceMs: 1, networkMs: () => 1, forMs: 10_000, measureMs: 1_000 });
    expect(limit.limit).toBeLessThan(30);
    // The server is now as fast as the network: nothing queues.
    serve(limit, clock, { serviceMs: 0.01, networkMs: () => 1, forMs: 10_000, measureMs: 1_000 });
    expect(limit.limit).toBe(64);
  });

  it('follows a lasting rise of the network latency within two windows (it is not queueing)', () => {
    const clock = { t: 0 };
    const limit = new AdaptiveLimit({ min: 2, max: 32, targetMs: 10, probeEveryMs: 5_000, now: () => clock.t });
    serve(limit, clock, { serviceMs: 0.01, networkMs: () => 2, forMs: 5_000, measureMs: 1_000 });
    expect(limit.limit).toBe(32);
    serve(limit, clock, { serviceMs: 0.01, networkMs: () => 40, forMs: 20_000, measureMs: 1_000 });
    expect(limit.baseMs).toBeGreaterThanOrEqual(40);
    expect(limit.limit).toBe(32);
  });

  it('does not hold back a tenant calling alone, and applies what it learnt once a second one calls', () => {
    const clock = { t: 0 };
    const limit = new AdaptiveLimit({ min: 2, max: 64, targetMs: 10, now: () => clock.t });
    // One tenant's burst against a serial server: its calls queue, and go on at the maximum.
    const r = serve(limit, clock, { serviceMs: 1, networkMs: () => 1, forMs: 5_000, measureMs: 1_000, tenants: ['a'] });
    expect(r.p95).toBeGreaterThan(50);
    expect(limit.limit).toBe(64);
    limit.start('b'); // another tenant calls: the learnt limit applies at once
    expect(limit.limit).toBeLessThan(16);
    clock.t += 5_001; // 5 s without b: a alone again
    limit.start('a');
    expect(limit.limit).toBe(64);
  });

  it('hands freed slots to the callers that waited, in turn, one each', () => {
    const limit = new AdaptiveLimit({ min: 2, max: 2, now: () => 0 });
    const started: string[] = [];
    // Two rounds sharing the limit: each takes slots while it may, and is woken when one is its turn.
    const round = (name: string) => {
      const kick = (): void => {
        while (limit.tryStart(kick, name)) started.push(name);
      };
      return kick;
    };
    const a = round('a');
    const b = round('b');
    a(); // takes both slots, then asks for a third: it waits first
    b(); // waits behind it
    expect(started).toEqual(['a', 'a']);
    limit.done(1); // a slot frees: a's turn (it asked first); a asks again and queues behind b
    expect(started).toEqual(['a', 'a', 'a']);
    limit.done(1); // b's turn, whoever asks now
    a();
    expect(started).toEqual(['a', 'a', 'a', 'b']);
    limit.done(1);
    expect(started).toEqual(['a', 'a', 'a', 'b', 'a']);
  });

  it('a waiter that no longer wants a slot when woken does not keep it from the others', () => {
    const limit = new AdaptiveLimit({ min: 1, max: 1, now: () => 0 });
    expect(limit.tryStart(() => {})).toBe(true);
    const gone = vi.fn(); // a round that stopped: woken, it asks for nothing
    expect(limit.tryStart(gone)).toBe(false);
    let took = 0;
    const live = (): void => void (limit.tryStart(live) && took++);
    live();
    limit.done(1);
    expect(gone).toHaveBeenCalledTimes(1);
    expect(took).toBe(1);
    expect(limit.inflight).toBe(1);
    // And with nothing in flight and nobody waiting, a slot is free at once.
    limit.done(1);
    expect(limit.tryStart(() => {})).toBe(true);
  });

  it('rejects a minimum above its maximum', () => {
    expect(() => new AdaptiveLimit({ min: 8, max: 4, now: () => 0 })).toThrow(RangeError);
  });
});
