import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dispatchLoop } from '../../core/dispatch/loop.js';
import { submitHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, httpEvent, percentile } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

describe('never early and precise', () => {
  it('delivers 500 jobs due at random milliseconds over ~10 s, none before runAt', async () => {
    const sys = await createSystem(em, { settings: { lookaheadMs: 2_000, leaseMs: 10_000 } });
    const submit = submitHandler(sys.w);
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const start = Date.now();
    const stop = new AbortController();
    const loops = Array.from({ length: sys.w.config.settings.groupCount }, (_, group) =>
      dispatchLoop(sys.w.dispatch, {
        groups: [group],
        owner: 'test-exec',
        ownerStartMs: start,
        untilMs: start + 40_000,
        signal: stop.signal,
      }),
    );

    const expected = new Map<string, number>();
    for (let b = 0; b < 5; b++) {
      const jobs = Array.from({ length: 100 }, (_, i) => ({
        payload: { n: b * 100 + i },
        runAt: new Date(Date.now() + 1_000 + Math.floor(Math.random() * 10_000)).toISOString(),
      }));
      const res = await submit(
        httpEvent('POST', '/v1/tenants/demo/jobs/batch', { pathParameters: { tenant: 'demo' }, body: JSON.stringify({ jobs }) }),
      );
      expect(res.statusCode).toBe(200);
      const { results } = JSON.parse(res.body) as { results: { jobId: string; runAt: string; state: string }[] };
      for (const r of results) expected.set(r.jobId, Date.parse(r.runAt));
    }
    expect(expected.size).toBe(500);

    await consumer.waitFor((d) => new Set(d.map((x) => x.jobId)).size >= 500, 30_000);
    await consumer.stop();
    await ingest.stop();

    const received = new Map(consumer.deliveries.map((d) => [d.jobId, d]));
    const missing = [...expected.keys()].filter((id) => !received.has(id));
    expect(missing).toEqual([]);
    const early = consumer.deliveries.filter((d) => d.receivedAt < Date.parse(d.runAt) || d.firstReceiveAt < Date.parse(d.runAt));
    expect(early).toEqual([]);
    for (const d of consumer.deliveries) {
      expect(Date.parse(d.runAt)).toBe(expected.get(d.jobId));
      expect(d.attributeRunAt).toBe(d.runAt);
    }
    const lateness = consumer.deliveries.map((d) => d.firstReceiveAt - Date.parse(d.runAt));
    console.log(
      `lateness over ${lateness.length} deliveries (${consumer.deliveries.length - received.size} duplicates): ` +
        `p50 ${percentile(lateness, 50)} ms, p95 ${percentile(lateness, 95)} ms, max ${percentile(lateness, 100)} ms`,
    );
    stop.abort();
    await Promise.all(loops);
  });
});
