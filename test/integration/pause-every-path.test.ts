/**
 * A pause holds every path (docs/tenant-controls.md#pause): a paused tenant's jobs that would
 * take the direct path (due within the lookahead, or `cancellable: false` and due within 900 s)
 * go through the table and are held, even when the pause lands while this process still has a
 * copy of the controls saying "running"; and controls that cannot be read fail closed, in submit
 * and in dispatch. Real handlers, ingest and dispatch loops over dynalite and fauxqs; the pause is
 * the operator API's (another instance's) write.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ControlsCache, type ControlsReader } from '../../core/tenants/controls.js';
import { Submitter } from '../../core/submit/submitter.js';
import { adminHandler, submitHandler, type Telemetry } from '../../lambdas/runtime/handlers.js';
import type { Wiring } from '../../lambdas/runtime/wiring.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, httpEvent, runAllGroups, type Delivery } from '../support/system.js';

const SETTINGS = { lookaheadMs: 2_000, leaseMs: 4_000, shardCount: 4, groupCount: 1 };

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `POST /v1/admin/tenants/{tenant}/{action}` through the admin handler of `w` (another instance than submit's). */
async function operator(w: Wiring, tenant: string, action: 'pause' | 'resume'): Promise<void> {
  const path = `/v1/admin/tenants/${tenant}/${action}`;
  const res = await adminHandler(w)(
    httpEvent('POST', path, { routeKey: `POST /v1/admin/tenants/{tenant}/${action}`, pathParameters: { tenant } }),
  );
  expect(res.statusCode).toBe(200);
}

/** One job through the submit handler: its reply. */
async function submit(w: Wiring, tenant: string, job: object, t?: Telemetry): Promise<{ jobId: string; state: string; runAt: string }> {
  const res = await submitHandler(
    w,
    t,
  )(
    httpEvent('POST', `/v1/tenants/${tenant}/jobs`, {
      routeKey: 'POST /v1/tenants/{tenant}/jobs',
      pathParameters: { tenant },
      body: JSON.stringify(job),
    }),
  );
  expect(res.statusCode).toBe(201);
  return JSON.parse(res.body);
}

/** Each job delivered exactly once, never before its runAt, and none before `notBefore`. */
function expectOnceNeverEarly(deliveries: readonly Delivery[], jobIds: readonly string[], notBefore: number): void {
  expect(deliveries.map((d) => d.jobId).sort()).toEqual([...jobIds].sort());
  for (const d of deliveries) {
    expect(d.receivedAt).toBeGreaterThanOrEqual(Date.parse(d.runAt));
    expect(d.receivedAt).toBeGreaterThanOrEqual(notBefore);
  }
}

describe.concurrent('a pause holds every path', () => {
  it('jobs that would go straight to the queue (due in 1 s; cancellable: false due in 5 s) are held while paused, SCHEDULED, and delivered once after resume', async () => {
    const sys = await createSystem(em, { tenants: ['paused', 'other'], settings: SETTINGS });
    const adminInstance = await sys.another();
    const ingest = sys.startIngest();
    const held = consume(em.sqs, sys.tenants.paused!.url);
    const other = consume(em.sqs, sys.tenants.other!.url);
    const rounds = runAllGroups(sys.w.dispatch);
    try {
      // This process (submit and dispatch) has a copy saying "running" when the pause lands.
      expect((await sys.w.dispatch.controls!.get('paused')).paused).toBe(false);
      await operator(adminInstance, 'paused', 'pause');
      expect((await sys.w.dispatch.controls!.get('paused')).paused).toBe(false); // the stale copy, still served

      const soon = await submit(sys.w, 'paused', { payload: { n: 'soon' }, delaySeconds: 1 });
      const pinned = await submit(sys.w, 'paused', { payload: { n: 'pinned' }, delaySeconds: 5, cancellable: false });
      const control = await submit(sys.w, 'other', { payload: { n: 'other' }, delaySeconds: 1 });
      // Accepted on the table path: never QUEUED while the pause lasts.
      expect(soon.state).toBe('SCHEDULED');
      expect(pinned.state).toBe('SCHEDULED');
      expect(control.state).toBe('QUEUED'); // another tenant's job still goes straight to its queue
      expect(soon.jobId).toMatch(/\.t\./);
      expect(pinned.jobId).toMatch(/\.u\./);

      // Until the 5 s job (past the 2 s lookahead: direct only for being `cancellable: false`) is
      // overdue too: nothing delivered, both SCHEDULED (never QUEUED).
      const pinnedDue = Date.parse(pinned.runAt);
      await other.waitFor((d) => d.length === 1, 15_000);
      expect(other.deliveries).toHaveLength(1);
      for (;;) {
        for (const job of [soon, pinned]) expect((await sys.w.jobs.status('paused', job.jobId)).state).not.toBe('QUEUED');
        if (Date.now() > pinnedDue + 3_000) break;
        await sleep(1_000);
      }
      expect(held.deliveries).toHaveLength(0);
      for (const job of [soon, pinned]) expect((await sys.w.jobs.status('paused', job.jobId)).state).toBe('SCHEDULED');

      await operator(adminInstance, 'paused', 'resume');
      const resumedAt = Date.now();
      await held.waitFor((d) => d.length >= 2, 20_000);
      await sleep(1_000);
      expectOnceNeverEarly(held.deliveries, [soon.jobId, pinned.jobId], resumedAt);
      for (const job of [soon, pinned]) expect((await sys.w.jobs.status('paused', job.jobId)).state).toBe('QUEUED');
    } finally {
      await rounds.stop();
      await ingest.stop();
      await held.stop();
      await other.stop();
    }
  }, 120_000);
});

describe.concurrent('cancel of a held job', () => {
  it('cancels a paused tenant job due in 1 s before it is stored; it is never stored nor delivered, also after resume', async () => {
    const sys = await createSystem(em, { tenants: ['paused'], settings: SETTINGS });
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.paused!.url);
    const rounds = runAllGroups(sys.w.dispatch);
    try {
      await operator(await sys.another(), 'paused', 'pause');
      const [cancelled, kept] = [
        await submit(sys.w, 'paused', { payload: { n: 'cancelled' }, delaySeconds: 1 }),
        await submit(sys.w, 'paused', { payload: { n: 'kept' }, delaySeconds: 1 }),
      ];
      // Past its cut-off and not stored yet (its inbound message is delayed): still cancellable.
      expect((await sys.w.jobs.status('paused', cancelled.jobId)).state).toBe('UNKNOWN');
      expect(await sys.w.jobs.cancel('paused', cancelled.jobId)).toEqual({ jobId: cancelled.jobId, state: 'CANCELLED' });
      await until(async () => (await sys.w.jobs.status('paused', kept.jobId)).state === 'SCHEDULED', 20_000);
      expect((await sys.w.jobs.status('paused', cancelled.jobId)).state).toBe('CANCELLED');
      await operator(await sys.another(), 'paused', 'resume');
      const resumedAt = Date.now();
      await consumer.waitFor((d) => d.length >= 1, 20_000);
      await sleep(2_000);
      expectOnceNeverEarly(consumer.deliveries, [kept.jobId], resumedAt);
    } finally {
      await rounds.stop();
      await ingest.stop();
      await consumer.stop();
    }
  }, 60_000);
});

async function until(pred: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await pred()) && Date.now() < end) await sleep(200);
}

describe.concurrent('controls that cannot be read fail closed', () => {
  it('a process that never read them holds the tenant in submit (table path) and dispatch, counts the failures, and delivers once they can be read', async () => {
    const sys = await createSystem(em, { tenants: ['dark'], settings: SETTINGS });
    // The controls store fails (an injected failure: every read throws, as DynamoDB's
    // ProvisionedThroughputExceededException would after the SDK's retries).
    const failing = { on: true };
    const reader: ControlsReader = {
      getControls: async (tenant) => {
        if (failing.on)
          throw Object.assign(new Error('Throughput exceeds the current capacity'), { name: 'ProvisionedThroughputExceededException' });
        return sys.w.controlsStore.getControls(tenant);
      },
    };
    const controls = new ControlsCache(reader, { retryMs: 200 });
    const w: Wiring = {
      ...sys.w,
      controls,
      submitter: new Submitter({ ...sys.w.submitter.deps, controls }),
      dispatch: { ...sys.w.dispatch, controls },
    };
    const counted: number[] = [];
    const telemetry: Telemetry = { count: (name, n) => name === 'ControlReadFailures' && counted.push(n), values() {}, error() {} };
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.dark!.url);
    const rounds = runAllGroups(w.dispatch);
    try {
      // Due in 1 s: would go straight to the queue; the read fails, so it takes the table path.
      const soon = await submit(w, 'dark', { payload: { n: 'soon' }, delaySeconds: 1 }, telemetry);
      expect(soon.state).toBe('SCHEDULED');
      expect(counted.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(1);
      // Due in 7 s (submit reads the controls for jobs due within 6 s): the table path without a
      // read at submit; dispatch has never read the tenant's controls.
      const later = await submit(w, 'dark', { payload: { n: 'later' }, delaySeconds: 7 }, telemetry);
      expect(later.state).toBe('SCHEDULED');

      await sleep(Math.max(0, Date.parse(later.runAt) - Date.now()) + 4_000);
      expect(consumer.deliveries).toHaveLength(0);
      for (const job of [soon, later]) expect((await sys.w.jobs.status('dark', job.jobId)).state).toBe('SCHEDULED');
      expect(controls.takeReadFailures()).toBeGreaterThan(0);

      failing.on = false;
      const recoveredAt = Date.now();
      await consumer.waitFor((d) => d.length >= 2, 20_000);
      await sleep(1_000);
      expectOnceNeverEarly(consumer.deliveries, [soon.jobId, later.jobId], recoveredAt);
    } finally {
      await rounds.stop();
      await ingest.stop();
      await consumer.stop();
    }
  }, 60_000);
});
