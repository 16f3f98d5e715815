/**
 * Phase 1: lateness through the whole path, on the local stack exactly as `npm start` runs it:
 * a SigV4-signed `POST /v1/tenants/demo/jobs`, the API, submit, the inbound queue, the event
 * source and ingest, the table, the tick's state machine and its dispatch loop, the tenant queue,
 * and a consumer long-polling that queue as a tenant's worker would.
 *
 * Lateness is measured at the consumer, two ways: when its ReceiveMessage returned, and SQS's own
 * ApproximateFirstReceiveTimestamp, each minus the job's runAt. A job is early when either is
 * negative.
 */
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { startLocalStack, localSqs } from '../test/support/localStack.js';
import {
  consumeQueue,
  load,
  progress,
  realisticPayload,
  sleep,
  steadyLoad,
  summarize,
  type LoadReport,
  type LoadShape,
  type Summary,
} from './support.js';

export interface LatenessResult {
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  /** The 99.9th percentile (#28: lateness at the top). */
  p999Ms: number;
  maxMs: number;
  meanMs: number;
  /** Jobs that arrived before their runAt (by either clock): must be 0. */
  early: number;
  /** Distinct jobs delivered, and the jobs the API accepted. */
  delivered: number;
  expected: number;
  duplicates: number;
  /** Accepted jobs that went straight to the queue instead of the table (must be 0 for this load). */
  direct: number;
  /** The same, from SQS's ApproximateFirstReceiveTimestamp. */
  firstReceive: Summary;
  /** The dispatcher's own figure (due time to SendMessageBatch acknowledged), from /local/metrics. */
  dispatcher: { count: number; meanMs: number; maxMs: number; buckets: { le: number; count: number }[] };
  /**
   * Items dispatch rounds read from the table per job they sent, over the steady window (from
   * 2 s after the first jobs fall due to the end of the load; sampled every second from
   * /local/metrics): `dispatch.itemsReadPerJobSteady` in the targets. `byRead` splits the window's
   * reads by kind (items returned, calls); the tick's plan reads apart (`planItemsPerJob`).
   */
  reads: ReadsPerJob;
  /** Jobs accepted but not yet written by ingest (inbound queue backlog), sampled every second from /local/metrics. */
  ingestBacklog: { max: number; atEndOfLoad: number; samples: { s: number; backlog: number }[] };
  load: LoadShape & { payloadBytes: number; report: LoadReport };
  loadAvg: { before: [number, number, number]; after: [number, number, number] };
}

/** What the local compute reports of its reads (local/compute.ts). */
interface LocalReads {
  jobs: { dispatched: number };
  reads?: { dispatchItems: number; planItems: number; byRead: Record<string, { calls: number; items: number }> };
}
interface ReadSample {
  at: number;
  dispatched: number;
  reads?: LocalReads['reads'];
}
export interface ReadsPerJob {
  itemsReadPerJobSteady: number;
  windowMs: number;
  jobs: number;
  itemsRead: number;
  planItemsPerJob: number;
  byRead: Record<string, { calls: number; items: number; itemsPerJob: number }>;
}
/** The steady window starts this long after the first jobs fall due (the first execution's first reads are over). */
const STEADY_AFTER_MS = 2_000;

/** Items read per job sent between the samples nearest `fromMs` and `toMs`. */
export function readsPerJob(samples: readonly ReadSample[], fromMs: number, toMs: number): ReadsPerJob {
  const withReads = samples.filter((s) => s.reads);
  const a = withReads.find((s) => s.at >= fromMs) ?? withReads[0];
  const b = [...withReads].reverse().find((s) => s.at <= toMs) ?? withReads.at(-1);
  if (!a?.reads || !b?.reads || b.at <= a.at)
    return { itemsReadPerJobSteady: 0, windowMs: 0, jobs: 0, itemsRead: 0, planItemsPerJob: 0, byRead: {} };
  const jobs = b.dispatched - a.dispatched;
  const per = (n: number) => (jobs > 0 ? +(n / jobs).toFixed(3) : 0);
  const itemsRead = b.reads.dispatchItems - a.reads.dispatchItems;
  const byRead = Object.fromEntries(
    Object.entries(b.reads.byRead).map(([k, v]) => {
      const before = a.reads!.byRead[k] ?? { calls: 0, items: 0 };
      const items = v.items - before.items;
      return [k, { calls: v.calls - before.calls, items, itemsPerJob: per(items) }];
    }),
  );
  return {
    itemsReadPerJobSteady: per(itemsRead),
    windowMs: b.at - a.at,
    jobs,
    itemsRead,
    planItemsPerJob: per(b.reads.planItems - a.reads.planItems),
    byRead,
  };
}

/** Runs the local stack (`npm start`), drives the steady load through its API and measures. */
export async function runLateness(
  shape: LoadShape,
  opts: {
    /** More of the local stack's environment (the tracing phase's DYNEIN_OTLP_ENDPOINT, DYNEIN_SPANS). */
    readonly env?: Readonly<Record<string, string>>;
    /** Called with the ids of the jobs accepted, once delivered. */
    readonly onJobs?: (jobIds: readonly string[]) => void;
  } = {},
): Promise<LatenessResult> {
  const loadBefore = load();
  progress('lateness: starting the local stack (npm start)');
  const stack = await startLocalStack({ DYNEIN_TENANTS: 'demo', ...opts.env });
  try {
    const local = await stack.waitForLocalJson(undefined, 90_000);
    const tenant = local.tenants.demo!;
    const sqs = localSqs(local);
    const consumer = consumeQueue(sqs, tenant.queueUrl, { pollers: 3 });
    const signer = new SignatureV4({
      service: 'execute-api',
      region: local.region,
      credentials: tenant,
      sha256: Hash.bind(null, 'sha256'),
    });
    const url = new URL('/v1/tenants/demo/jobs', local.endpoint);
    // Payloads are made beforehand: the generator must not spend its time building them.
    const payloads = Array.from({ length: 100 }, (_, i) => realisticPayload(i));
    const payloadBytes = JSON.stringify(payloads[0]).length;
    const accepted = new Map<string, number>();
    let direct = 0;

    const submit = async (i: number, dueMs: number) => {
      const body = JSON.stringify({ payload: payloads[i % payloads.length], runAt: new Date(dueMs).toISOString() });
      const req = await signer.sign({
        method: 'POST',
        protocol: url.protocol,
        hostname: url.hostname,
        port: Number(url.port),
        path: url.pathname,
        query: {},
        headers: { host: url.host, 'content-type': 'application/json' },
        body,
      });
      const headers = { ...(req.headers as Record<string, string>) };
      delete headers.host;
      const res = await fetch(url, { method: 'POST', headers, body });
      const text = await res.text();
      if (res.status !== 201) throw new Error(`POST answered ${res.status}: ${text.slice(0, 200)}`);
      const reply = JSON.parse(text) as { jobId: string; state: string };
      accepted.set(reply.jobId, dueMs);
      if (reply.state !== 'SCHEDULED') direct++;
    };

    // The inbound backlog (accepted, not yet ingested), from the counters behind the dashboard.
    const samples: { s: number; backlog: number }[] = [];
    // Items dispatch rounds read and jobs they sent, sampled with the backlog (items read per job).
    const readSamples: ReadSample[] = [];
    const t0 = Date.now();
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        try {
          const m = (await (await fetch(new URL('/local/metrics', local.endpoint))).json()) as LocalReads & {
            jobs: { submitted: number; queuedDirectly: number; ingested: number };
          };
          samples.push({ s: Math.round((Date.now() - t0) / 1000), backlog: m.jobs.submitted - m.jobs.queuedDirectly - m.jobs.ingested });
          readSamples.push({ at: Date.now(), dispatched: m.jobs.dispatched, reads: m.reads });
        } catch {
          // the API is busy: next second
        }
        await sleep(1_000);
      }
    })();

    await sleep(1_000); // the first tick execution has started with compute
    progress(
      `lateness: ${shape.rate} jobs/s for ${shape.durationMs / 1000} s, each due ${shape.minAheadMs / 1000}-${shape.maxAheadMs / 1000} s ahead at a random ms, ${payloadBytes}-byte payloads`,
    );
    const loadStart = Date.now();
    const report = await steadyLoad(shape, submit, 'lateness');
    const loadEnd = Date.now();
    const atEndOfLoad = samples.at(-1)?.backlog ?? 0;
    progress(
      `lateness: ${report.submitted} accepted (${report.failed} failed${report.firstError ? `: ${report.firstError}` : ''}), submit p50 ${report.submitMs.p50Ms} ms p99 ${report.submitMs.p99Ms} ms; waiting for the last ones to come due`,
    );
    const lastDue = Math.max(0, ...accepted.values());
    await consumer.waitFor(accepted.size, lastDue - Date.now() + 20_000);
    await sleep(1_000); // a straggler or duplicate still arriving
    await consumer.stop();
    sampling = false;
    await sampler;
    sqs.destroy();
    const metrics = (await (await fetch(new URL('/local/metrics', local.endpoint))).json()) as { lateness: LatenessResult['dispatcher'] };

    const first = new Map<string, { receivedAt: number; firstReceiveAt: number; runAtMs: number }>();
    let duplicates = 0;
    for (const r of consumer.received) {
      if (!accepted.has(r.jobId)) continue;
      if (first.has(r.jobId)) duplicates++;
      else first.set(r.jobId, r);
    }
    const late = [...first.values()].map((r) => r.receivedAt - r.runAtMs);
    const sqsLate = [...first.values()].map((r) => r.firstReceiveAt - r.runAtMs);
    const early = [...first.values()].filter((r) => r.receivedAt < r.runAtMs || r.firstReceiveAt < r.runAtMs).length;
    const s = summarize(late);
    const result: LatenessResult = {
      p50Ms: s.p50Ms,
      p95Ms: s.p95Ms,
      p99Ms: s.p99Ms,
      p999Ms: s.p999Ms,
      maxMs: s.maxMs,
      meanMs: s.meanMs,
      early,
      delivered: first.size,
      expected: accepted.size,
      duplicates,
      direct,
      firstReceive: summarize(sqsLate),
      dispatcher: {
        count: metrics.lateness.count,
        meanMs: metrics.lateness.meanMs,
        maxMs: metrics.lateness.maxMs,
        buckets: metrics.lateness.buckets
          .filter((b) => b.count > 0)
          .map((b) => ({ le: Number.isFinite(b.le) ? b.le : -1, count: b.count })),
      },
      reads: readsPerJob(readSamples, loadStart + shape.minAheadMs + STEADY_AFTER_MS, loadEnd),
      ingestBacklog: { max: Math.max(0, ...samples.map((x) => x.backlog)), atEndOfLoad, samples: samples.filter((_, i) => i % 5 === 0) },
      load: { ...shape, payloadBytes, report },
      loadAvg: { before: loadBefore, after: load() },
    };
    opts.onJobs?.([...accepted.keys()]);
    const rd = result.reads;
    progress(
      `lateness: dispatch read ${rd.itemsRead} items for ${rd.jobs} jobs sent over ${(rd.windowMs / 1000).toFixed(1)} s of steady load: ${rd.itemsReadPerJobSteady} per job (${Object.entries(
        rd.byRead,
      )
        .map(([k, v]) => `${k} ${v.itemsPerJob} in ${v.calls} calls`)
        .join(', ')}; the plan ${rd.planItemsPerJob})`,
    );
    progress(
      `lateness: ${result.delivered}/${result.expected} delivered, p50 ${s.p50Ms} ms, p95 ${s.p95Ms} ms, p99 ${s.p99Ms} ms, max ${s.maxMs} ms, early ${early}, duplicates ${duplicates}; inbound backlog at most ${result.ingestBacklog.max} jobs`,
    );
    return result;
  } catch (err) {
    console.error(stack.output().slice(-4_000));
    throw err;
  } finally {
    await stack.stop();
  }
}
