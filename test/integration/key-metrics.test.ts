/**
 * Per-key metrics (docs/flow-control.md, "Metrics"): a dispatch invocation reports its busiest
 * concurrency keys once each (jobs started, asks refused, the most waiting, a sample of waits),
 * and the Powertools telemetry writes each as one EMF line with the dimensions service, Tenant
 * and ConcurrencyKey.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { BUSIEST_KEYS, KeyTally } from '../../core/dispatch/keyTally.js';
import { dispatchHandler, type Telemetry } from '../../lambdas/runtime/handlers.js';
import { powertools } from '../../lambdas/runtime/powertools.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, submitJobs } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const SETTINGS = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 2, groupCount: 1 };

describe('per-key dispatch metrics', () => {
  it('a dispatch invocation reports a full key: jobs started, asks refused, jobs waiting', async () => {
    const sys = await createSystem(em, { tenants: ['alpha'], settings: SETTINGS });
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.alpha!.url);
    try {
      const runAt = new Date(Date.now() + 2_000).toISOString();
      // Five jobs of one key with limit 2 and no worker reporting: two start, three wait (refused) until the step ends.
      await submitJobs(
        sys,
        'alpha',
        Array.from({ length: 5 }, (_, i) => ({ payload: i, runAt, concurrencyKey: 'customer-1', concurrencyLimit: 2 })),
      );
      await new Promise((r) => setTimeout(r, Math.max(0, Date.parse(runAt) - 800 - Date.now())));
      await ingest.stop();
      const reports: { tenant: string; key: string; counts: Record<string, number>; ms: Record<string, readonly number[]> }[] = [];
      const telemetry: Telemetry = {
        count() {},
        values() {},
        error() {},
        keyMetrics: (tenant, key, counts, ms) => void reports.push({ tenant, key, counts: { ...counts }, ms: { ...ms } }),
      };
      const now = Date.now();
      const result = await dispatchHandler(sys.w, telemetry)(
        { groups: [0], owner: `exec-${now}`, ownerStartMs: now, untilMs: now + 4_000 },
        { getRemainingTimeInMillis: () => 6_000 },
      );
      expect(result.sent).toBe(2);
      expect('byKey' in result).toBe(false);
      expect(reports).toHaveLength(1);
      const [r] = reports;
      expect(r).toMatchObject({ tenant: 'alpha', key: 'customer-1' });
      expect(r!.counts.KeyJobsStarted).toBe(2);
      expect(r!.counts.KeyJobsWaiting).toBe(3);
      expect(r!.counts.KeySlotAsksRefused).toBeGreaterThanOrEqual(3);
      expect(r!.ms.KeyWaitMs).toEqual([]); // nobody got a slot after waiting
    } finally {
      await consumer.stop();
    }
  });

  it('ranks keys by jobs waiting, then refusals, then jobs started, and keeps the ten busiest', () => {
    const tally = new KeyTally();
    for (let i = 0; i < 15; i++) tally.started('t', `k${i}`);
    tally.refused('t', 'k3', 1);
    tally.refused('t', 'k7', 4);
    tally.refused('t', 'k7', 2);
    tally.started('u', 'k3', 250);
    const busiest = tally.busiest();
    expect(busiest).toHaveLength(BUSIEST_KEYS);
    expect(busiest.slice(0, 2).map((k) => `${k.tenant}/${k.key}`)).toEqual(['t/k7', 't/k3']);
    expect(busiest[0]).toMatchObject({ refused: 2, waitingMax: 4, started: 1 });
    expect(tally.busiest(20).find((k) => k.tenant === 'u')).toMatchObject({ started: 1, waited: 1, waitSampleMs: [250] });
  });

  it('Powertools writes one EMF line per key, dimensions service, Tenant and ConcurrencyKey', async () => {
    const { telemetry } = powertools('dispatch');
    const lines: string[] = [];
    const spy = vi.spyOn(console, 'log').mockImplementation((l: unknown) => void lines.push(String(l)));
    const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => (lines.push(String(chunk)), true));
    try {
      telemetry.keyMetrics!('alpha', 'customer-1', { KeyJobsStarted: 2, KeySlotAsksRefused: 5, KeyJobsWaiting: 3 }, { KeyWaitMs: [120] });
    } finally {
      spy.mockRestore();
      write.mockRestore();
    }
    const emf = lines
      .flatMap((l) => l.split('\n'))
      .filter((l) => l.includes('"_aws"'))
      .map((l) => JSON.parse(l) as Record<string, any>);
    expect(emf).toHaveLength(1);
    expect(emf[0]!._aws.CloudWatchMetrics[0].Dimensions).toEqual([['service', 'Tenant', 'ConcurrencyKey']]);
    expect(emf[0]).toMatchObject({
      Tenant: 'alpha',
      ConcurrencyKey: 'customer-1',
      KeyJobsStarted: 2,
      KeySlotAsksRefused: 5,
      KeyWaitMs: 120,
    });
  });
});
