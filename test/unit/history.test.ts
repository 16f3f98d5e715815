import { afterEach, describe, expect, it, vi } from 'vitest';
import { OutcomeReporter, type OutcomeReport } from '../../client/outcomes.js';
import {
  MAX_ERROR_CHARS,
  OutcomesService,
  historyStatus,
  timelineOf,
  type HistoryStore,
  type OutcomeRecord,
} from '../../core/jobs/history.js';
import { JobIdCodec } from '../../core/model/jobId.js';
import type { StoredRow } from '../../core/model/ports.js';
import type { SpanRecord } from '../../core/model/spans.js';
import { TenantRegistry } from '../../core/tenants/registry.js';
import { deliveryMessage } from '../../core/model/messages.js';
import { localSettings } from '../../local/settings.js';

const record = (o: Partial<OutcomeRecord> = {}): OutcomeRecord => ({
  shard: 3,
  dueMs: 1_000_000,
  jobId: 'j1.t.3.1000000.t.aaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbb',
  tenant: 't',
  outcome: 'SUCCEEDED',
  attempt: 1,
  receivedAtMs: 1_000_500,
  durationMs: 100,
  reportedAtMs: 1_000_700,
  expiresAtMs: 9_000_000,
  ...o,
});
const iso = (ms: number) => new Date(ms).toISOString();

describe('timeline', () => {
  it('scheduled, delivered (marker), earlier failures, then the latest outcome', () => {
    const row = { state: 'QUEUED' as const, tenant: 't', leaseUntil: 0, deliveredAtMs: 1_000_010 };
    const failed = record({ outcome: 'FAILED', attempt: 1, error: 'boom', receivedAtMs: 1_000_020 });
    const done = record({ attempt: 2, receivedAtMs: 1_011_000, result: '{"n":1}' });
    expect(timelineOf(1_000_000, row, done, [failed, record({ outcome: 'FAILED', attempt: 2 })])).toEqual([
      { at: iso(1_000_000), event: 'SCHEDULED' },
      { at: iso(1_000_010), event: 'DELIVERED' },
      { at: iso(1_000_120), event: 'FAILED', attempt: 1, durationMs: 100, error: 'boom' },
      { at: iso(1_011_100), event: 'SUCCEEDED', attempt: 2, durationMs: 100, result: { n: 1 } },
    ]);
  });

  it('without a marker (sent straight from submit) the first receive is the delivery; nothing reported: scheduled only', () => {
    expect(timelineOf(1_000_000, undefined, record()).map((e) => [e.event, e.at])).toEqual([
      ['SCHEDULED', iso(1_000_000)],
      ['DELIVERED', iso(1_000_500)],
      ['SUCCEEDED', iso(1_000_600)],
    ]);
    expect(timelineOf(1_000_000, undefined, undefined)).toEqual([{ at: iso(1_000_000), event: 'SCHEDULED' }]);
  });

  it('a listing shows a record as a status object', () => {
    expect(historyStatus(record({ outcome: 'DEAD', attempt: 5, error: 'x' }))).toEqual({
      jobId: record().jobId,
      tenant: 't',
      runAt: iso(1_000_000),
      state: 'DEAD',
      attempt: 5,
      finishedAt: iso(1_000_600),
      durationMs: 100,
      error: 'x',
    });
  });
});

describe('delivery attribute', () => {
  it('dynein-history = 1 only when asked', () => {
    const job = { jobId: 'j', tenant: 't', dueMs: 0, payload: '1' };
    const traceparent = expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
    expect(deliveryMessage('0', job, undefined, { history: true }).attributes).toEqual({
      runAt: iso(0),
      'dynein-history': '1',
      traceparent,
    });
    expect(deliveryMessage('0', job).attributes).toEqual({ runAt: iso(0), traceparent });
  });
});

describe('local settings', () => {
  it('DYNEIN_HISTORY names tenants of DYNEIN_TENANTS, retention DYNEIN_HISTORY_DAYS (default 7)', () => {
    expect(localSettings({ DYNEIN_TENANTS: 'a,b', DYNEIN_HISTORY: 'b' }).history).toEqual({ b: 7 * 86_400_000 });
    expect(localSettings({ DYNEIN_TENANTS: 'a,b', DYNEIN_HISTORY: 'a, b', DYNEIN_HISTORY_DAYS: '2' }).history).toEqual({
      a: 2 * 86_400_000,
      b: 2 * 86_400_000,
    });
    expect(localSettings({ DYNEIN_TENANTS: 'a' }).history).toBeUndefined();
    expect(() => localSettings({ DYNEIN_TENANTS: 'a', DYNEIN_HISTORY: 'c' })).toThrow(/DYNEIN_HISTORY: 'c'/);
    expect(() => localSettings({ DYNEIN_TENANTS: 'a', DYNEIN_HISTORY: 'a', DYNEIN_HISTORY_DAYS: '0' })).toThrow(/DYNEIN_HISTORY_DAYS/);
  });
});

describe('OutcomeReporter', () => {
  afterEach(() => vi.useRealTimers());
  const report = (jobId: string): OutcomeReport => ({ jobId, outcome: 'SUCCEEDED', attempts: 1, receivedAt: iso(0), durationMs: 1 });

  it('sends at 100 outcomes or after 1 s, per tenant, and everything on flush', async () => {
    vi.useFakeTimers();
    const sent: { tenant: string; n: number }[] = [];
    const reporter = new OutcomeReporter({
      reportOutcomes: async (tenant, outcomes) => {
        sent.push({ tenant, n: outcomes.length });
        return { results: outcomes.map((o) => ({ jobId: o.jobId, state: o.outcome })) };
      },
    });
    for (let i = 0; i < 250; i++) void reporter.report('a', report(`a${i}`));
    void reporter.report('b', report('b0'));
    await vi.advanceTimersByTimeAsync(0);
    expect(sent).toEqual([
      { tenant: 'a', n: 100 },
      { tenant: 'a', n: 100 },
    ]);
    await vi.advanceTimersByTimeAsync(999);
    expect(sent).toHaveLength(2);
    await vi.advanceTimersByTimeAsync(1);
    expect(sent.slice(2).sort((x, y) => x.tenant.localeCompare(y.tenant))).toEqual([
      { tenant: 'a', n: 50 },
      { tenant: 'b', n: 1 },
    ]);
    const last = reporter.report('a', report('late'));
    await reporter.flush();
    await last;
    expect(sent.at(-1)).toEqual({ tenant: 'a', n: 1 });
  });

  it('treats NotDelivered as final: handed to onError once, never sent again', async () => {
    vi.useFakeTimers();
    const sent: string[][] = [];
    const refused: string[] = [];
    const reporter = new OutcomeReporter(
      {
        reportOutcomes: async (_tenant, outcomes) => {
          sent.push(outcomes.map((o) => o.jobId));
          return {
            results: outcomes.map((o) =>
              o.jobId === 'early'
                ? { jobId: o.jobId, error: { code: 'NotDelivered', message: 'not delivered' } }
                : { jobId: o.jobId, state: o.outcome },
            ),
          };
        },
      },
      { onError: (_e, outcomes) => void refused.push(...outcomes.map((o) => o.jobId)) },
    );
    const done = Promise.all([reporter.report('t', report('early')), reporter.report('t', report('ok'))]);
    await vi.advanceTimersByTimeAsync(10_000);
    await done;
    expect(sent).toEqual([['early', 'ok']]);
    expect(refused).toEqual(['early']);
  });

  it('sends throttled entries again with backoff, resolves their reports after the last try, and gives up after the retries', async () => {
    vi.useFakeTimers();
    const sent: string[][] = [];
    // The route answers Throttled for x twice and for y always; z is refused for good at once.
    const throttles = new Map([
      ['x', 2],
      ['y', Infinity],
    ]);
    const errors: { message: string; ids: string[] }[] = [];
    const reporter = new OutcomeReporter(
      {
        reportOutcomes: async (_tenant, outcomes) => {
          sent.push(outcomes.map((o) => o.jobId));
          return {
            results: outcomes.map((o) => {
              const left = throttles.get(o.jobId) ?? 0;
              if (left > 0) {
                throttles.set(o.jobId, left - 1);
                return { jobId: o.jobId, error: { code: 'Throttled', message: 'again' } };
              }
              if (o.jobId === 'z') return { jobId: o.jobId, error: { code: 'InvalidJobId', message: 'no' } };
              return { jobId: o.jobId, state: o.outcome };
            }),
          };
        },
      },
      { onError: (e, outcomes) => void errors.push({ message: (e as Error).message, ids: outcomes.map((o) => o.jobId) }) },
    );
    let xDone = false;
    const x = reporter.report('a', report('x')).then(() => (xDone = true));
    void reporter.report('a', report('y'));
    void reporter.report('a', report('z'));
    void reporter.report('a', report('w'));
    await vi.advanceTimersByTimeAsync(1_000);
    expect(sent).toEqual([['x', 'y', 'z', 'w']]);
    expect(errors).toEqual([{ message: '1 outcome(s) were refused', ids: ['z'] }]);
    expect(xDone).toBe(false);
    await vi.advanceTimersByTimeAsync(200);
    await vi.advanceTimersByTimeAsync(400);
    expect(sent.slice(1)).toEqual([
      ['x', 'y'],
      ['x', 'y'],
    ]);
    expect(xDone).toBe(false); // y is still being retried in the same batch
    await vi.advanceTimersByTimeAsync(800);
    expect(sent.slice(3)).toEqual([['y']]);
    await x;
    expect(errors[1]).toEqual({ message: '1 outcome(s) were not stored (throttled 4 times)', ids: ['y'] });
  });

  it('a failed request is given to onError and never rejects the report', async () => {
    const errors: number[] = [];
    const reporter = new OutcomeReporter(
      { reportOutcomes: () => Promise.reject(new Error('down')) },
      { onError: (_e, outcomes) => void errors.push(outcomes.length) },
    );
    const p = reporter.report('a', report('x'));
    await reporter.flush();
    await expect(p).resolves.toBeUndefined();
    expect(errors).toEqual([1]);
  });
});

describe('outcome error', () => {
  it('cut to its limit never splits a surrogate pair (an emoji across the boundary is left out whole)', async () => {
    const now = 2_000_000_000_000;
    const codec = new JobIdCodec(Buffer.alloc(32, 7));
    const jobId = codec.encode({ tenant: 't', shard: 0, dueMs: now - 1_000, path: 't', random: 'AAAAAAAAAAAAAAAA' });
    const stored: OutcomeRecord[] = [];
    const history: HistoryStore = {
      putOutcomes: async (records) => (stored.push(...records), []),
      getOutcome: async () => undefined,
      getFailedAttempts: async () => [],
    };
    const delivered: StoredRow = { state: 'QUEUED', tenant: 't', leaseUntil: 0, deliveredAtMs: now - 900 };
    const tenants = new TenantRegistry({
      getTenant: async (name: string) => (name === 't' ? { name, queueUrl: 'q', dlqUrl: 'd', historyTtlMs: 86_400_000 } : undefined),
    } as never);
    const service = new OutcomesService({ history, rows: { getRow: async () => delivered }, codec, tenants, clock: { now: () => now } });
    // The emoji's two code units are the 1,024th and 1,025th: a plain slice keeps the first alone.
    const error = `${'e'.repeat(MAX_ERROR_CHARS - 1)}😀 and more`;
    const body = JSON.stringify({
      outcomes: [{ jobId, outcome: 'FAILED', attempts: 1, receivedAt: new Date(now - 500).toISOString(), durationMs: 5, error }],
    });
    expect((await service.report('t', body)).results).toEqual([{ jobId, state: 'FAILED' }]);
    const kept = stored[0]!.error!;
    expect(kept).toBe('e'.repeat(MAX_ERROR_CHARS - 1));
    expect(/\p{Surrogate}/u.test(kept)).toBe(false);
    expect(Buffer.from(kept, 'utf8').toString('utf8')).toBe(kept);
  });
});

describe('a reported delivery in its trace (docs/tracing.md#the-receive-and-the-outcome)', () => {
  const now = 2_000_000_000_000;
  const codec = new JobIdCodec(Buffer.alloc(32, 7));
  const jobId = codec.encode({ tenant: 't', shard: 0, dueMs: now - 1_000, path: 't', random: 'AAAAAAAAAAAAAAAA' });
  const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
  const DISPATCH_SPAN = '00f067aa0ba902b7';
  function service(spans: SpanRecord[]) {
    const history: HistoryStore = { putOutcomes: async () => [], getOutcome: async () => undefined, getFailedAttempts: async () => [] };
    const delivered: StoredRow = { state: 'QUEUED', tenant: 't', leaseUntil: 0, deliveredAtMs: now - 900 };
    const tenants = new TenantRegistry({
      getTenant: async (name: string) => (name === 't' ? { name, queueUrl: 'q', dlqUrl: 'd', historyTtlMs: 86_400_000 } : undefined),
    } as never);
    const sink = { record: (s: SpanRecord) => void spans.push(s), flush: async () => {} };
    return new OutcomesService({
      history,
      rows: { getRow: async () => delivered },
      codec,
      tenants,
      clock: { now: () => now },
      spans: sink,
    });
  }
  const entry = (extra: Record<string, unknown>) => ({
    jobId,
    outcome: 'DEAD',
    attempts: 3,
    receivedAt: new Date(now - 500).toISOString(),
    durationMs: 40,
    error: 'boom',
    ...extra,
  });

  it("records the worker's receive under the message's dispatch span, and the report's arrival under it", async () => {
    const spans: SpanRecord[] = [];
    const body = JSON.stringify({ outcomes: [entry({ traceparent: `00-${TRACE}-${DISPATCH_SPAN}-01` })] });
    expect((await service(spans).report('t', body)).results).toEqual([{ jobId, state: 'DEAD' }]);
    const [receive, outcome] = spans;
    expect(spans).toHaveLength(2);
    expect(receive).toMatchObject({
      traceId: TRACE,
      parentSpanId: DISPATCH_SPAN,
      name: 'dynein.receive',
      startMs: now - 500,
      endMs: now - 460,
      error: 'boom',
      attributes: {
        'dynein.job_id': jobId,
        'dynein.tenant': 't',
        'dynein.attempt': 3,
        'dynein.lateness_ms': 500,
        'dynein.outcome': 'DEAD',
      },
    });
    expect(outcome).toMatchObject({ traceId: TRACE, parentSpanId: receive!.spanId, name: 'dynein.outcome', startMs: now, endMs: now });
  });

  it('records nothing for an unsampled trace or a report without a traceparent; refuses a malformed one, naming it', async () => {
    const spans: SpanRecord[] = [];
    const unsampled = entry({ traceparent: `00-${TRACE}-${DISPATCH_SPAN}-00` });
    const bad = entry({ traceparent: 'not-a-traceparent' });
    const reply = await service(spans).report('t', JSON.stringify({ outcomes: [unsampled, entry({}), bad] }));
    expect(reply.results.slice(0, 2)).toEqual([
      { jobId, state: 'DEAD' },
      { jobId, state: 'DEAD' },
    ]);
    expect(reply.results[2]).toMatchObject({
      jobId,
      error: { code: 'ValidationError', message: expect.stringMatching(/^traceparent must be/) },
    });
    expect(spans).toEqual([]);
  });
});
