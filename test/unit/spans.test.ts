import { describe, expect, it } from 'vitest';
import { fanOut, MemorySpanSink } from '../../adapters/memorySpans.js';
import { OtlpHttpSpanSink, otlpRequest } from '../../adapters/otlpSpans.js';
import {
  jobLogFields,
  jobSpan,
  jobTrace,
  SPAN_KIND,
  type SpanRecord,
  spanIdOfTraceparent,
  submitSpans,
  workflowTrace,
} from '../../core/model/index.js';
import { waterfall } from '../../client/cli/commands/jobs.js';
import { jobSpans } from '../../client/traceSpans.js';

/**
 * The scheduler's spans (docs/tracing.md): which are built for a request and a job (sampled
 * traces only), their OTLP/HTTP JSON encoding, the exporter's batching, bounds and failures, the
 * local stack's memory of them and the CLI's waterfall.
 */
const TRACE = '0af7651916cd43dd8448eb211c80319c';
const CALLER = { traceId: TRACE, spanId: 'b7ad6b7169203331', flags: 1 };
const SUBMIT = { ...CALLER, spanId: '00f067aa0ba902b7' };
const span = (over: Partial<SpanRecord> = {}): SpanRecord => ({
  traceId: TRACE,
  spanId: '1111111111111111',
  parentSpanId: SUBMIT.spanId,
  name: 'dynein.dispatch',
  kind: SPAN_KIND.producer,
  startMs: 1_800_000_000_000.25,
  endMs: 1_800_000_000_012.5,
  attributes: { 'dynein.job_id': 'j1', 'dynein.lateness_ms': 12, ratio: 0.5, ok: true },
  ...over,
});

describe('spans built', () => {
  it('one submit span per request for a caller’s trace, one root per job without, none unsampled', () => {
    const at = { startMs: 1, endMs: 2 };
    const one = submitSpans(['a', 'b'], SUBMIT, CALLER, at, { 'dynein.tenant': 't' });
    expect(one).toEqual([
      expect.objectContaining({
        traceId: TRACE,
        spanId: SUBMIT.spanId,
        parentSpanId: CALLER.spanId,
        attributes: { 'dynein.tenant': 't', 'dynein.jobs': 2 },
      }),
    ]);
    const roots = submitSpans(['a', 'b'], undefined, undefined, at, {});
    expect(roots.map((s) => [s.traceId, s.spanId, s.parentSpanId])).toEqual(
      ['a', 'b'].map((id) => [jobTrace(id).traceId, jobTrace(id).spanId, undefined]),
    );
    expect(submitSpans(['a'], { ...SUBMIT, flags: 0 }, { ...CALLER, flags: 0 }, at, {})).toEqual([]);
    expect(submitSpans([], SUBMIT, CALLER, at, {})).toEqual([]);
  });

  it('a job’s span goes under its submit span, in its trace; none for an unsampled one', () => {
    const s = jobSpan('dynein.ingest', SPAN_KIND.consumer, { jobId: 'j', tenant: 't', trace: SUBMIT }, { startMs: 1, endMs: 3 });
    expect(s).toMatchObject({ traceId: TRACE, parentSpanId: SUBMIT.spanId, attributes: { 'dynein.job_id': 'j', 'dynein.tenant': 't' } });
    expect(s!.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(
      jobSpan('dynein.ingest', SPAN_KIND.consumer, { jobId: 'j', tenant: 't', trace: { ...SUBMIT, flags: 0 } }, { startMs: 1, endMs: 3 }),
    ).toBeUndefined();
    const derived = jobSpan(
      'dynein.dispatch',
      SPAN_KIND.producer,
      { jobId: 'j', tenant: 't' },
      { startMs: 1, endMs: 3 },
      {},
      'abcdefabcdefabcd',
    );
    expect(derived).toMatchObject({ traceId: jobTrace('j').traceId, parentSpanId: jobTrace('j').spanId, spanId: 'abcdefabcdefabcd' });
    expect(spanIdOfTraceparent(`00-${TRACE}-abcdefabcdefabcd-01`)).toBe('abcdefabcdefabcd');
  });

  it('a workflow’s derived trace is its own (not a job’s of the same id), stable, sampled; log lines name a job’s trace', () => {
    const wf = workflowTrace('wf1.t.1.abc.def');
    expect(wf).toEqual(workflowTrace('wf1.t.1.abc.def'));
    expect(wf.flags).toBe(1);
    expect(wf.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(wf.traceId).not.toBe(jobTrace('wf1.t.1.abc.def').traceId);
    expect(wf.traceId).not.toBe(workflowTrace('wf1.t.1.abc.deg').traceId);
    expect(jobLogFields({ jobId: 'j', trace: SUBMIT })).toEqual({ jobId: 'j', traceId: TRACE });
    expect(jobLogFields({ jobId: 'j' })).toEqual({ jobId: 'j', traceId: jobTrace('j').traceId });
  });
});

describe('OTLP/HTTP JSON', () => {
  it('encodes ids in hex, times in nanoseconds as strings, typed attributes, links and error status', () => {
    const req = otlpRequest([
      span(),
      span({ spanId: '2222222222222222', error: 'queue gone', links: [{ traceId: TRACE, spanId: '3333333333333333' }] }),
    ]) as any;
    const [ok, failed] = req.resourceSpans[0].scopeSpans[0].spans;
    expect(req.resourceSpans[0].scopeSpans[0].scope.name).toBe('dynein-serverless');
    expect(ok).toMatchObject({
      traceId: TRACE,
      spanId: '1111111111111111',
      parentSpanId: SUBMIT.spanId,
      name: 'dynein.dispatch',
      kind: 4,
      startTimeUnixNano: '1800000000000250000',
      endTimeUnixNano: '1800000000012500000',
      status: { code: 0 },
    });
    expect(ok.attributes).toEqual([
      { key: 'dynein.job_id', value: { stringValue: 'j1' } },
      { key: 'dynein.lateness_ms', value: { intValue: '12' } },
      { key: 'ratio', value: { doubleValue: 0.5 } },
      { key: 'ok', value: { boolValue: true } },
    ]);
    expect(ok.links).toBeUndefined();
    expect(failed.status).toEqual({ code: 2, message: 'queue gone' });
    expect(failed.links).toEqual([{ traceId: TRACE, spanId: '3333333333333333' }]);
  });

  it('batches spans into POSTs to /v1/traces, sends what waits on flush, and bounds what waits', async () => {
    const posts: { url: string; spans: number; contentType: string }[] = [];
    const fetch = async (url: string, init: RequestInit) => {
      const body = JSON.parse(String(init.body));
      posts.push({
        url,
        spans: body.resourceSpans[0].scopeSpans[0].spans.length,
        contentType: (init.headers as Record<string, string>)['content-type']!,
      });
      return new Response('{}', { status: 200 });
    };
    const sink = new OtlpHttpSpanSink({ endpoint: 'http://collector:4318/', maxBatch: 3, maxQueued: 5, intervalMs: 60_000, fetch });
    for (let i = 0; i < 2; i++) sink.record(span());
    expect(posts).toEqual([]); // under a batch: waits for the interval or a flush
    sink.record(span()); // a full batch goes at once
    await sink.flush();
    expect(posts).toEqual([{ url: 'http://collector:4318/v1/traces', spans: 3, contentType: 'application/json' }]);
    for (let i = 0; i < 2; i++) sink.record(span());
    await sink.flush();
    expect(posts.map((p) => p.spans)).toEqual([3, 2]);
    expect(sink.exported).toBe(5);
  });

  it('never throws nor grows past its bound when the collector is down; says so at most once a minute', async () => {
    const logged: string[] = [];
    const fetch = async (): Promise<Response> => {
      throw new Error('connect ECONNREFUSED');
    };
    const sink = new OtlpHttpSpanSink({
      endpoint: 'http://127.0.0.1:1',
      maxBatch: 2,
      maxQueued: 4,
      intervalMs: 60_000,
      fetch,
      log: (m) => logged.push(m),
    });
    for (let i = 0; i < 10; i++) sink.record(span());
    await sink.flush();
    expect(sink.exported).toBe(0);
    expect(sink.dropped).toBe(10);
    expect(logged).toEqual(['span export failed; spans dropped']);
  });

  it('an answer other than 2xx counts as a failed export', async () => {
    const fetch = async () => new Response('no', { status: 503 });
    const sink = new OtlpHttpSpanSink({ endpoint: 'http://c:4318', fetch });
    sink.record(span());
    await sink.flush();
    expect([sink.exported, sink.dropped]).toEqual([0, 1]);
  });
});

describe('the local stack’s spans', () => {
  it('keeps the last `capacity` spans, a trace’s by start time, and fans out to every sink', async () => {
    const memory = new MemorySpanSink(3);
    const other = new MemorySpanSink(10);
    const both = fanOut([memory, other]);
    for (let i = 0; i < 5; i++) both.record(span({ spanId: `${i}`.repeat(16), startMs: 100 - i, traceId: i % 2 ? TRACE : 'f'.repeat(32) }));
    await both.flush();
    expect(memory.size).toBe(3);
    expect(other.size).toBe(5);
    expect(memory.trace(TRACE).map((s) => s.spanId)).toEqual(['3'.repeat(16)]);
    expect(other.trace(TRACE).map((s) => s.startMs)).toEqual([97, 99]);
  });

  it('keeps a job’s own spans of a shared trace, and those about no one job', () => {
    const shared = [
      span({ name: 'dynein.submit', attributes: { 'dynein.workflow_id': 'wf1.t.1.a.b' } }),
      span({ name: 'dynein.ingest', attributes: { 'dynein.job_id': 'j1' } }),
      span({ name: 'dynein.ingest', attributes: { 'dynein.job_id': 'j2' } }),
      span({ name: 'dynein.dispatch', attributes: { 'dynein.job_id': 'j1' } }),
    ];
    expect(jobSpans(shared, 'j1').map((s) => [s.name, s.attributes['dynein.job_id']])).toEqual([
      ['dynein.submit', undefined],
      ['dynein.ingest', 'j1'],
      ['dynein.dispatch', 'j1'],
    ]);
    expect(jobSpans(shared, 'j9')).toHaveLength(1);
  });

  it('draws a waterfall: offset, bar, name, duration and what says most about each span', () => {
    const lines = waterfall(
      [
        span({
          name: 'dynein.dispatch',
          startMs: 10_000,
          endMs: 10_020,
          attributes: { 'dynein.lateness_ms': 7, 'messaging.destination.name': 'q-alpha' },
        }),
        span({ name: 'dynein.submit', startMs: 0, endMs: 30, attributes: {} }),
        span({ name: 'dynein.ingest', startMs: 500, endMs: 540, attributes: { 'dynein.outcome': 'created' } }),
      ],
      20,
    );
    expect(lines).toHaveLength(3);
    expect(lines[0]).toMatch(/^ +\+0 ms {2}\|#.{19}\| {2}dynein\.submit +30 ms$/);
    expect(lines[1]).toContain('dynein.ingest');
    expect(lines[1]).toContain('created');
    expect(lines[2]).toMatch(/\+10\.0 s {2}\|.{19}#\| {2}dynein\.dispatch +20 ms {2}lateness 7 ms {2}to q-alpha$/);
  });
});
