import { describe, expect, it } from 'vitest';
import { RequestCounter } from '../../adapters/requestCounter.js';
import { resolveSettings } from '../../core/model/config.js';
import type { AcquiredRow, QueueSender } from '../../core/model/ports.js';
import { Releaser, type ReleaserDeps } from '../../core/dispatch/releaser.js';
import type { ReleaseStats } from '../../core/dispatch/releaseStats.js';
import { emptyRoundReport } from '../../core/dispatch/roundReport.js';
import { TenantRegistry } from '../../core/tenants/registry.js';
import { LocalMetrics, REQUESTS_PER_JOB_COUNTS } from '../../local/metrics.js';

describe('the local dashboard counters', () => {
  it('counts a job cancelled twice once, keeps cancels out of the jobs delivered, and says what requests per job count', () => {
    const requests = new RequestCounter();
    const metrics = new LocalMetrics(requests);
    const t = metrics.telemetry();
    t.count('JobsSubmitted', 10);
    t.count('JobsQueuedDirectly', 2);
    t.count('JobsDispatched', 3);
    // Two jobs cancelled, one of them twice (a retried DELETE answers 200 again).
    for (const id of ['j1', 'j2', 'j1']) {
      t.count('JobsCancelled', 1);
      metrics.cancelled(id);
    }
    requests.add('DynamoDB', 'Query', 50);
    requests.add('SQS', 'SendMessageBatch', 5);
    const m = metrics.snapshot();
    expect(m.jobs).toMatchObject({ submitted: 10, queuedDirectly: 2, dispatched: 3, delivered: 5, cancelled: 2, cancelRequests: 3 });
    expect(m.jobs.backlog).toBe(10 - 2 - 3 - 2);
    // Divided by the 5 jobs delivered, not by jobs + cancels.
    expect(m.requestsPerJob).toEqual({ 'DynamoDB.Query': 10, 'SQS.SendMessageBatch': 1 });
    expect(m.requestsPerJobCounts).toBe(REQUESTS_PER_JOB_COUNTS);
    expect(REQUESTS_PER_JOB_COUNTS).toMatch(/divided by the jobs delivered/);
  });

  it('gets dispatch counts as rows are sent, not when a long dispatch round ends', async () => {
    const sender: QueueSender = { sendBatch: async () => [] };
    const store: ReleaserDeps['store'] = { renew: async () => true, unacquire: async () => true, markDelivered: async () => [] };
    const tenants = new TenantRegistry({
      getTenant: async (name) => ({ name, queueUrl: `q/${name}`, dlqUrl: `q/${name}-dlq` }),
      putTenant: async () => {},
    });
    const deps: ReleaserDeps = {
      store,
      sender,
      tenants,
      clock: { now: () => Date.now() },
      settings: resolveSettings({ releaseWindowMs: 0 }),
    };
    const stats: ReleaseStats = emptyRoundReport(); // a round's report is what a releaser counts into
    const metrics = new LocalMetrics(new RequestCounter());
    const t = metrics.telemetry();
    // What the dispatch handler does with the hook (lambdas/runtime/handlers.ts).
    const releaser = new Releaser(deps, stats, undefined, {
      onSent: (l) => {
        t.count('JobsDispatched', l.length);
        t.values('LatenessMs', 'Milliseconds', l);
      },
    });
    const row = (jobId: string, dueMs: number): AcquiredRow => ({
      shard: 0,
      dueMs,
      jobId,
      tenant: 'demo',
      payload: '{}',
      leaseUntil: dueMs + 60_000,
    });
    const now = Date.now();
    releaser.add(row('a', now + 20));
    releaser.add(row('b', now + 20));
    releaser.add(row('later', now + 1_500));
    await new Promise((r) => setTimeout(r, 300));
    // The round still holds a row (it would run on for its whole execution): the counters are current already.
    expect(releaser.size).toBe(1);
    expect(metrics.snapshot().jobs.dispatched).toBe(2);
    expect(metrics.snapshot().lateness.count).toBe(2);
    await releaser.drain(Date.now() + 3_000);
    expect(metrics.snapshot().jobs.dispatched).toBe(3);
  });
});

describe('the local dashboard per tenant', () => {
  it('adds up what dispatch reports per tenant (delivered, held, deferred), keeps lateness p50/p95/p99, and shows a pause seen lately', () => {
    const metrics = new LocalMetrics(new RequestCounter());
    const t = metrics.telemetry();
    t.tenantMetrics!('alpha', { JobsDispatched: 3, DeliveryFailures: 0, JobsHeld: 0, DeliveriesDeferred: 4 }, { LatenessMs: [5, 9, 100] });
    t.tenantMetrics!('alpha', { JobsDispatched: 2, DeliveryFailures: 1, JobsHeld: 0, DeliveriesDeferred: 1 }, { LatenessMs: [7, 8] });
    t.tenantMetrics!('beta', { JobsDispatched: 0, DeliveryFailures: 0, JobsHeld: 7, DeliveriesDeferred: 0 }, {});
    t.tenantMetrics!('beta', { TenantPaused: 1 }, {});
    t.count('SubmitsThrottled', 2);
    const snap = metrics.snapshot();
    expect(snap.submitsThrottled).toBe(2);
    expect(snap.tenants).toEqual({
      alpha: {
        delivered: 5,
        held: 0,
        deferred: 5,
        failedSends: 1,
        latenessP50Ms: 8,
        latenessP95Ms: 100,
        latenessP99Ms: 100,
        paused: false,
      },
      beta: {
        delivered: 0,
        held: 7,
        deferred: 0,
        failedSends: 0,
        latenessP50Ms: null,
        latenessP95Ms: null,
        latenessP99Ms: null,
        paused: true,
      },
    });
  });

  it('keeps the never-fired checks: runs, missed in all, the latest missed newest first (20 at most)', () => {
    const metrics = new LocalMetrics(new RequestCounter());
    expect(metrics.snapshot().missedOccurrences).toMatchObject({ runs: 0, missed: 0, recent: [] });
    const missed = (i: number) => ({
      tenant: 'alpha',
      schedule: `s${i}`,
      dueMs: Date.UTC(2030, 0, 1, 0, i),
      jobId: `j${i}`,
      traceId: 'a'.repeat(32),
      reason: 'not-materialised' as const,
    });
    const report = (from: number, n: number) => ({
      fromMs: 0,
      throughMs: 1,
      schedules: n,
      occurrences: n,
      missed: Array.from({ length: n }, (_, i) => missed(from + i)),
    });
    metrics.occurrencesAudited(report(0, 15));
    metrics.occurrencesAudited(report(15, 0));
    metrics.occurrencesAudited(report(15, 10));
    const snap = metrics.snapshot().missedOccurrences;
    expect([snap.runs, snap.missed, snap.recent.length]).toEqual([3, 25, 20]);
    expect(snap.recent[0]).toEqual({
      tenant: 'alpha',
      schedule: 's24',
      occurrenceAt: '2030-01-01T00:24:00.000Z',
      reason: 'not-materialised',
      jobId: 'j24',
      traceId: 'a'.repeat(32),
    });
    expect(snap.recent.at(-1)!.schedule).toBe('s5');
    expect(snap.lastRunAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
  });

  it("shows the latest dispatch step's HeldAfterResumeMs, apart from the lateness", () => {
    const metrics = new LocalMetrics(new RequestCounter());
    const t = metrics.telemetry();
    expect(metrics.snapshot().heldAfterResumeMs).toBe(0);
    t.values('HeldAfterResumeMs', 'Milliseconds', [42_000]);
    expect(metrics.snapshot().heldAfterResumeMs).toBe(42_000);
    expect(metrics.snapshot().lateness.count).toBe(0);
    t.values('HeldAfterResumeMs', 'Milliseconds', [0]);
    expect(metrics.snapshot().heldAfterResumeMs).toBe(0);
  });
});

describe('the local dashboard per concurrency key', () => {
  it('adds up what dispatch steps report per key and shows the busiest first, the latest waiting and a wait p95', () => {
    const metrics = new LocalMetrics(new RequestCounter());
    const t = metrics.telemetry();
    t.keyMetrics!('alpha', 'quiet', { KeyJobsStarted: 9, KeySlotAsksRefused: 0, KeyJobsWaiting: 0 }, { KeyWaitMs: [] });
    t.keyMetrics!('alpha', 'busy <b>', { KeyJobsStarted: 2, KeySlotAsksRefused: 7, KeyJobsWaiting: 5 }, { KeyWaitMs: [40, 900] });
    t.keyMetrics!('alpha', 'busy <b>', { KeyJobsStarted: 1, KeySlotAsksRefused: 3, KeyJobsWaiting: 4 }, { KeyWaitMs: [60] });
    expect(metrics.snapshot().keys).toEqual([
      { tenant: 'alpha', key: 'busy <b>', started: 3, refused: 10, waiting: 4, waitP95Ms: 900 },
      { tenant: 'alpha', key: 'quiet', started: 9, refused: 0, waiting: 0, waitP95Ms: null },
    ]);
  });
});
