/**
 * Per-tenant metrics without a metrics call per job: a dispatch invocation reports each tenant
 * once (jobs sent, failed sends, a lateness sample of at most 100), and the Powertools telemetry
 * writes that as one EMF line per tenant with the `service` and `Tenant` dimensions; submit adds
 * a `{service, Tenant}` dimension set to its own line.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { LATENESS_SAMPLE, TenantTally } from '../../core/dispatch/tenantTally.js';
import { TenantRegistry } from '../../core/tenants/registry.js';
import { dispatchHandler, submitHandler, type Telemetry } from '../../lambdas/runtime/handlers.js';
import { powertools } from '../../lambdas/runtime/powertools.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, httpEvent, submitJobs } from '../support/system.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const SETTINGS = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 2, groupCount: 1 };

/** The EMF lines Powertools writes (stdout) while `fn` runs. */
async function emfLines(fn: () => unknown): Promise<Record<string, any>[]> {
  const lines: string[] = [];
  const spy = vi.spyOn(console, 'log').mockImplementation((l: unknown) => void lines.push(String(l)));
  const write = vi.spyOn(process.stdout, 'write').mockImplementation((chunk: unknown) => (lines.push(String(chunk)), true));
  try {
    await fn();
  } finally {
    spy.mockRestore();
    write.mockRestore();
  }
  return lines
    .flatMap((l) => l.split('\n'))
    .filter((l) => l.includes('"_aws"'))
    .map((l) => JSON.parse(l) as Record<string, any>);
}

describe('per-tenant dispatch metrics', () => {
  it('a dispatch invocation reports each tenant once: jobs sent and their lateness', async () => {
    const sys = await createSystem(em, { tenants: ['alpha', 'beta'], settings: SETTINGS });
    const ingest = sys.startIngest();
    const consumers = ['alpha', 'beta'].map((n) => consume(em.sqs, sys.tenants[n]!.url));
    try {
      const due = Date.now() + 2_500;
      const jobs = (n: number) => Array.from({ length: n }, (_, i) => ({ payload: { i }, runAt: new Date(due + i).toISOString() }));
      await submitJobs(sys, 'alpha', jobs(6));
      await submitJobs(sys, 'beta', jobs(3));
      await new Promise((r) => setTimeout(r, Math.max(0, due + 200 - Date.now())));
      await ingest.stop();
      const reports: { tenant: string; counts: Record<string, number>; ms: Record<string, readonly number[]> }[] = [];
      const telemetry: Telemetry = {
        count() {},
        values() {},
        error() {},
        tenantMetrics: (tenant, counts, ms) => void reports.push({ tenant, counts: { ...counts }, ms: { ...ms } }),
      };
      const now = Date.now();
      const result = await dispatchHandler(sys.w, telemetry)(
        { groups: [0], owner: `exec-${now}`, ownerStartMs: now, untilMs: now + 4_000 },
        { getRemainingTimeInMillis: () => 14_000 },
      );
      expect(result.sent).toBe(9);
      // Nothing per tenant in the step's result (it goes back to Step Functions).
      expect('byTenant' in result).toBe(false);
      expect(reports.map((r) => r.tenant).sort()).toEqual(['alpha', 'beta']);
      const of = (t: string) => reports.find((r) => r.tenant === t)!;
      expect(of('alpha').counts).toEqual({ JobsDispatched: 6, DeliveryFailures: 0, JobsHeld: 0, DeliveriesDeferred: 0 });
      expect(of('beta').counts).toEqual({ JobsDispatched: 3, DeliveryFailures: 0, JobsHeld: 0, DeliveriesDeferred: 0 });
      expect(of('alpha').ms.LatenessMs).toHaveLength(6);
      for (const v of of('alpha').ms.LatenessMs!) expect(v).toBeGreaterThanOrEqual(0);
    } finally {
      await Promise.all(consumers.map((c) => c.stop()));
    }
  });

  it('counts failed sends per tenant when its queue refuses the dispatcher (the jobs stay, retried)', async () => {
    const sys = await createSystem(em, { tenants: ['alpha', 'broken'], settings: SETTINGS });
    const ingest = sys.startIngest();
    try {
      const due = Date.now() + 2_500;
      await submitJobs(sys, 'broken', [{ payload: 1, runAt: new Date(due).toISOString() }]);
      await new Promise((r) => setTimeout(r, Math.max(0, due + 200 - Date.now())));
    } finally {
      await ingest.stop();
    }
    // Its queue is gone (registered, but deleted): every send fails.
    await sys.w.store.putTenant({ name: 'broken', queueUrl: `${sys.tenants.broken!.url}-gone`, dlqUrl: sys.tenants.broken!.dlqUrl });
    const w = { ...sys.w, dispatch: { ...sys.w.dispatch, tenants: new TenantRegistry(sys.w.store) } };
    const reports: { tenant: string; counts: Record<string, number> }[] = [];
    const telemetry: Telemetry = {
      count() {},
      values() {},
      error() {},
      tenantMetrics: (tenant, counts) => void reports.push({ tenant, counts: { ...counts } }),
    };
    const now = Date.now();
    const result = await dispatchHandler(w, telemetry)(
      { groups: [0], owner: `exec-${now}`, ownerStartMs: now, untilMs: now + 3_000 },
      { getRemainingTimeInMillis: () => 13_000 },
    );
    expect(result.sent).toBe(0);
    expect(reports).toHaveLength(1);
    expect(reports[0]!.tenant).toBe('broken');
    expect(reports[0]!.counts.JobsDispatched).toBe(0);
    expect(reports[0]!.counts.DeliveryFailures).toBeGreaterThanOrEqual(1);
  });

  it('keeps a uniform lateness sample of at most 100 per tenant, and counts every job and failed send', () => {
    let seed = 1;
    const tally = new TenantTally(() => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646);
    for (let i = 0; i < 10_000; i++) tally.sent('alpha', i);
    tally.failed('alpha', 2);
    const a = tally.tenants.get('alpha')!;
    expect(a.sent).toBe(10_000);
    expect(a.failedSends).toBe(2);
    expect(a.latenessSampleMs).toHaveLength(LATENESS_SAMPLE);
    // Drawn from the whole range, not the first 100.
    const mean = a.latenessSampleMs.reduce((s, v) => s + v, 0) / LATENESS_SAMPLE;
    expect(mean).toBeGreaterThan(3_500);
    expect(mean).toBeLessThan(6_500);
  });

  it('Powertools writes one EMF line per tenant report, dimensions service and Tenant; none when nothing happened', async () => {
    const { telemetry } = powertools('dispatch');
    const lines = await emfLines(() => {
      telemetry.tenantMetrics!('alpha', { JobsDispatched: 4, DeliveryFailures: 0 }, { LatenessMs: [12, 40] });
      telemetry.tenantMetrics!('beta', { JobsDispatched: 0, DeliveryFailures: 0 }, { LatenessMs: [] });
    });
    expect(lines).toHaveLength(1);
    const [line] = lines;
    expect(line!._aws.CloudWatchMetrics[0].Dimensions).toEqual([['service', 'Tenant']]);
    expect(line!._aws.CloudWatchMetrics[0].Metrics.map((m: { Name: string }) => m.Name).sort()).toEqual(['JobsDispatched', 'LatenessMs']);
    expect(line).toMatchObject({ service: 'dynein-dispatch', Tenant: 'alpha', JobsDispatched: 4, LatenessMs: [12, 40] });
  });

  it('submit: its one metrics line carries the {service} and the {service, Tenant} dimension sets', async () => {
    const sys = await createSystem(em, { tenants: ['alpha'], settings: SETTINGS });
    const { metrics, telemetry } = powertools('submit');
    const lines = await emfLines(async () => {
      const res = await submitHandler(
        sys.w,
        telemetry,
      )(
        httpEvent('POST', '/v1/tenants/alpha/jobs', {
          pathParameters: { tenant: 'alpha' },
          body: JSON.stringify({ payload: 1, runAt: new Date(Date.now() + 60_000).toISOString(), idempotencyKey: 'k1' }),
        }),
      );
      expect(res.statusCode).toBe(201);
      metrics.publishStoredMetrics();
    });
    expect(lines).toHaveLength(1);
    expect(lines[0]!._aws.CloudWatchMetrics[0].Dimensions).toEqual([['service'], ['service', 'Tenant']]);
    expect(lines[0]).toMatchObject({ service: 'dynein-submit', Tenant: 'alpha', JobsSubmitted: 1 });
  });
});
