/**
 * A tenant removed from the registry (its stack deleted the registration) parks its pending jobs:
 * dispatch leaves their rows in the table as they are (not acquired, not delivered anywhere, not
 * deleted), reports them (the ParkedJobs metric), does not spin on them, and delivers them once
 * the tenant is registered again. Real dispatch handler, dynalite and fauxqs.
 */
import { DeleteItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { tenantItemKey } from '../../core/model/schema.js';
import { ParkedTenants } from '../../core/dispatch/parked.js';
import type { DispatchStepResult } from '../../core/dispatch/loop.js';
import { TenantRegistry, type TenantLookup } from '../../core/tenants/registry.js';
import { dispatchHandler, type Telemetry } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, submitJobs, type TestSystem } from '../support/system.js';

const SETTINGS = { lookaheadMs: 2_000, leaseMs: 4_000, shardCount: 4, groupCount: 1 };

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

/** Every row of the table that belongs to `tenant` (job rows: pk is the shard number). */
async function rowsOf(sys: TestSystem, tenant: string): Promise<{ sk: string; state: string; leaseUntil: string }[]> {
  const out: { sk: string; state: string; leaseUntil: string }[] = [];
  for (let shard = 0; shard < SETTINGS.shardCount; shard++) {
    const res = await em.dynamo.send(
      new QueryCommand({
        TableName: sys.tableName,
        KeyConditionExpression: 'pk = :pk',
        ExpressionAttributeValues: { ':pk': { S: String(shard) } },
        ConsistentRead: true,
      }),
    );
    for (const item of res.Items ?? []) {
      if (item.tenant?.S === tenant) out.push({ sk: item.sk!.S!, state: item.state!.S!, leaseUntil: item.leaseUntil?.N ?? '' });
    }
  }
  return out.sort((a, b) => a.sk.localeCompare(b.sk));
}

async function until(pred: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe.concurrent('jobs of a removed tenant', () => {
  it('stay parked, untouched, while the tenant is unregistered, and are delivered once it is registered again', async () => {
    const sys = await createSystem(em, { tenants: ['demo', 'gone'], settings: SETTINGS });
    const ingest = sys.startIngest();
    const demoConsumer = consume(em.sqs, sys.tenants.demo!.url);
    const goneConsumer = consume(em.sqs, sys.tenants.gone!.url);
    try {
      const due = Date.now() + 3_000;
      const jobs = (n: number) => Array.from({ length: n }, (_, i) => ({ payload: { i }, runAt: new Date(due + i).toISOString() }));
      const demoJobs = await submitJobs(sys, 'demo', jobs(5));
      const goneJobs = await submitJobs(sys, 'gone', jobs(7));
      await until(async () => (await rowsOf(sys, 'gone')).length === 7 && (await rowsOf(sys, 'demo')).length === 5, 10_000);
      await ingest.stop();
      // The tenant's stack removed its registration.
      const key = tenantItemKey('gone');
      await em.dynamo.send(new DeleteItemCommand({ TableName: sys.tableName, Key: { pk: { S: key.pk }, sk: { S: key.sk } } }));
      const before = await rowsOf(sys, 'gone');

      // A fresh registry (no cached record of 'gone', as after the registry's TTL) and a short recheck.
      const parked = new ParkedTenants({ recheckMs: 300 });
      const w = { ...sys.w, dispatch: { ...sys.w.dispatch, tenants: new TenantRegistry(sys.w.store, { negativeTtlMs: 100 }), parked } };
      const counts: Record<string, number> = {};
      const warnings: Record<string, unknown>[] = [];
      const telemetry: Telemetry = {
        count: (n, k) => void (counts[n] = (counts[n] ?? 0) + k),
        values() {},
        error() {},
        warn: (_m, f) => void warnings.push(f),
      };
      const handler = dispatchHandler(w, telemetry);
      const step = (ms: number): Promise<DispatchStepResult> => {
        const now = Date.now();
        return handler(
          { groups: [0], owner: `exec-${now}`, ownerStartMs: now, untilMs: now + ms },
          { getRemainingTimeInMillis: () => ms + 10_000 },
        );
      };

      // Steps until the demo jobs are due and sent; then one more that finds only parked rows.
      await new Promise((r) => setTimeout(r, Math.max(0, due + 200 - Date.now())));
      const first = await step(6_000);
      expect(first.sent).toBe(5);
      await demoConsumer.waitFor((d) => d.length >= 5, 5_000);
      const second = await step(6_000);
      // Idle at once: parked rows are not work, so there is no tight loop over them.
      expect(second.idle).toBe(true);
      expect(second.durationMs).toBeLessThan(2_000);
      expect(second.acquired).toBe(0);
      expect(second.parked).toBe(7);
      expect(second.parkedTenants).toEqual(['gone']);
      expect(counts.ParkedJobs).toBeGreaterThanOrEqual(7);
      expect(warnings.at(-1)).toEqual({ tenants: ['gone'], rows: 7 });

      // Untouched: same rows, still SCHEDULED with their original lease; nothing delivered anywhere else.
      expect(await rowsOf(sys, 'gone')).toEqual(before);
      expect(before.every((r) => r.state === 'SCHEDULED')).toBe(true);
      expect(new Set(demoConsumer.deliveries.map((d) => d.jobId))).toEqual(new Set(demoJobs.map((j) => j.jobId)));
      expect(goneConsumer.deliveries).toEqual([]);

      // Registered again (the stack deployed with the tenant): delivered, each once, none early.
      await sys.w.store.putTenant({ name: 'gone', queueUrl: sys.tenants.gone!.url, dlqUrl: sys.tenants.gone!.dlqUrl });
      await new Promise((r) => setTimeout(r, 400)); // past the recheck
      const third = await step(6_000);
      expect(third.sent).toBe(7);
      expect(third.parked).toBe(0);
      await goneConsumer.waitFor((d) => d.length >= 7, 5_000);
      expect(goneConsumer.deliveries.map((d) => d.jobId).sort()).toEqual(goneJobs.map((j) => j.jobId).sort());
      for (const d of goneConsumer.deliveries) expect(d.receivedAt).toBeGreaterThanOrEqual(Date.parse(d.runAt));
      // Each sent row becomes its delivered marker (QUEUED, kept for status until its TTL).
      await until(async () => (await rowsOf(sys, 'gone')).every((r) => r.state === 'QUEUED'), 5_000);
      expect(await rowsOf(sys, 'gone')).toHaveLength(7);
    } finally {
      await Promise.all([demoConsumer.stop(), goneConsumer.stop(), ingest.stop()]);
    }
  });

  it('are recognised by the job id alone, with a bounded memory of unknown tenants', async () => {
    const registry: TenantLookup = {
      lookup: async (name) => (name === 'known' ? { name, queueUrl: 'q', dlqUrl: 'd' } : undefined),
    };
    const parked = new ParkedTenants({ maxTenants: 3, recheckMs: 60_000 });
    const key = (tenant: string, i = 0) => ({
      shard: 0,
      dueMs: 1,
      jobId: `j1.${tenant}.0.1.t.${'a'.repeat(16)}.${i}`,
      state: 'SCHEDULED' as const,
      leaseUntil: 0,
    });
    const { acquire, parked: skipped } = await parked.split(
      [key('known'), key('gone-1'), key('gone-1', 1), key('gone-2')],
      registry,
      1_000,
    );
    expect(acquire.map((k) => k.jobId)).toEqual([key('known').jobId]);
    expect(skipped).toHaveLength(3);
    for (let i = 3; i <= 6; i++) await parked.split([key(`gone-${i}`)], registry, 1_000);
    expect(parked.tenants).toEqual(['gone-4', 'gone-5', 'gone-6']);
    // A registry that cannot answer parks nothing (the row is acquired; release keeps it if still unknown).
    const failing: TenantLookup = {
      lookup: async () => {
        throw new Error('throttled');
      },
    };
    expect((await new ParkedTenants().split([key('x')], failing, 0)).acquire).toHaveLength(1);
  });
});
