/**
 * Phases 11–13: tenant controls (issue #15, docs/tenant-controls.md) on the local stack exactly as
 * `npm start` runs it: signed submits through the API, submit, the inbound queue, ingest, the
 * table, the tick's dispatch rounds reading each tenant's controls through the wiring's
 * `ControlsCache` (5 s TTL: nothing here shortens it; the phases wait it out after each change),
 * the tenant queues on fauxqs and a consumer per queue as a tenant's worker would. Controls are
 * changed through the operator API (`/v1/admin/tenants/...`, local.json's operator key).
 *
 * - `noisyNeighbour`: tenant B's lateness p95 under a steady load alone, then again while tenant A's
 *   due rows arrive faster than dispatch can send them: first the phase measures what dispatch
 *   sends on the machine at hand (A alone, a burst due at once), then A's flood falls due at 1.5
 *   times that rate over B's window. Fair share in dispatch must keep B's lateness within 2× of
 *   its quiet lateness (docs/tenant-controls.md, "Fair share under saturation"). A's jobs are
 *   submitted (batches of 100) before B's window opens, so that they are in the table by then:
 *   submitted at the same time as B's, they back up the inbound queue and ingest, which B's jobs
 *   share first come first served (the bound is documented there). A's consumer runs in a process
 *   of its own (bench/consumerProcess.ts), as another team's workers would: sharing the
 *   benchmark's event loop, its hundreds of receives and deletes a second delayed the callbacks
 *   that time B's receives.
 * - `pause`: a paused tenant's jobs fall due and are held (nothing delivered); after resume all
 *   are delivered, each once, never early, and how long that takes.
 * - `rateLimit`: a tenant limited to `maxDeliveriesPerSecond` offered far more due at once; the
 *   delivery rate observed at its queue (SQS SentTimestamp: the dispatcher's send accepted).
 *
 * Lateness is measured as phase 1 does: the consumer's receive time minus the job's runAt (the
 * runAt this generator asked for); SQS's ApproximateFirstReceiveTimestamp and SentTimestamp are
 * reported beside it. A job is early when either the receive time or the first-receive timestamp
 * is before its runAt.
 */
import { type SQSClient } from '@aws-sdk/client-sqs';
import { CONTROLS_TTL_MS } from '../core/tenants/controls.js';
import { consumeQueueInProcess } from './consumerProcess.js';
import { signedFetch, startLocalStack, type LocalJson, localSqs } from '../test/support/localStack.js';
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
  type Received,
  type Summary,
} from './support.js';

export interface TenantControlsShape {
  readonly noisyNeighbour: {
    /** Tenant B's steady load: single signed POSTs, each due minAhead–maxAhead after it is sent (table path). */
    readonly quiet: LoadShape;
    /** A's jobs due at the same moment, alone, to measure what dispatch sends on this machine. */
    readonly rateProbeJobs: number;
    /** A's flood falls due at this many times the measured rate (over 1: dispatch is saturated). */
    readonly floodOverRate: number;
    /**
     * A's jobs are submitted this long before B's window opens (B's first job falls due), so that
     * ingest has written them to the table by then: fair share is a property of dispatch, and the
     * inbound queue and ingest (shared, first come first served) would otherwise be what delays B.
     */
    readonly floodLeadMs: number;
    /** Payload size of A's jobs (B's are 1 KB, as phase 1's). */
    readonly floodPayloadBytes: number;
    /** How long A's flood may take to be delivered after its last submit before the phase gives up counting. */
    readonly drainTimeoutMs: number;
  };
  readonly pause: { readonly jobs: number };
  readonly rateLimit: { readonly limitPerSec: number; readonly jobs: number };
}

/** One tenant's deliveries in one run. */
export interface TenantFigures {
  accepted: number;
  /** Distinct accepted jobs received. */
  delivered: number;
  lost: number;
  early: number;
  duplicates: number;
  /** Accepted jobs that went straight to the queue (due within the lookahead by the time submit ran). */
  direct: number;
  /** Receive time − runAt (the headline measure, as phase 1). */
  lateness: Summary;
  /** SQS ApproximateFirstReceiveTimestamp − runAt. */
  firstReceive: Summary;
  /** SQS SentTimestamp − runAt: the dispatcher's send accepted. */
  sent: Summary;
}

export interface NoisyRun {
  b: TenantFigures;
  a?: TenantFigures & {
    /** A's jobs delivered per second, over the span from its first to its last delivery. */
    deliveredPerSec: number;
    /** From A's first submit to its last delivery. */
    spanMs: number;
  };
  bLoad: LoadReport;
  /** A's submission (batches of 100, 4 requests at once): how long it took, and each request. */
  aSubmit?: { tookMs: number; submitMs: Summary; ingestBacklogWhenBStarted: number };
  /** Jobs accepted but not yet ingested (both tenants) while B submitted, sampled every second from /local/metrics. */
  ingestBacklogMax: number;
  loadAvg: { before: [number, number, number]; after: [number, number, number] };
}

export interface NoisyNeighbourResult {
  /** B's lateness p95 alone, then under A's flood (ms, receive − runAt), and flooded ÷ quiet. */
  quietP95Ms: number;
  floodedP95Ms: number;
  ratio: number;
  /** The same at the dispatcher: SQS SentTimestamp − runAt. */
  sent: { quietP95Ms: number; floodedP95Ms: number; ratio: number };
  /** ratio ≤ 2.0, with dispatch saturated (`saturation` over 1). */
  targetMet: boolean;
  /** Over both runs and both tenants (and the rate probe): must be 0. */
  early: number;
  lost: number;
  duplicates: number;
  /** What dispatch sent of A's burst due at once, alone: jobs per second by SentTimestamp. */
  dispatchRate: {
    jobs: number;
    sentPerSec: number;
    spanMs: number;
    loadAvg: { before: [number, number, number]; after: [number, number, number] };
  };
  /** A's flood due per second over what dispatch sent of it meanwhile (above 1: saturated; by construction about 1.5 × the probe's rate over the flood's). */
  saturation: number;
  quiet: NoisyRun;
  flooded: NoisyRun;
  shape: TenantControlsShape['noisyNeighbour'] & {
    /** A's jobs due per second over B's window. */
    floodPerSec: number;
    floodJobs: number;
    windowMs: number;
    bPayloadBytes: number;
  };
}

export interface PauseResult {
  /** Jobs accepted while paused, due and not delivered when resume was called. */
  held: number;
  /** Distinct held jobs delivered after resume. */
  delivered: number;
  lost: number;
  /** Delivered before their runAt: must be 0. */
  early: number;
  duplicates: number;
  /** Accepted jobs received before resume was called: must be 0. */
  deliveredWhilePaused: number;
  accepted: number;
  direct: number;
  /** From the resume call to the last held job received (includes up to 5 s of controls cache staleness and the 5 s hold-lane look). */
  drainMs: number;
  /** From the resume call to the first held job received. */
  firstDeliveryMs: number;
  /** held ÷ (last − first delivery). */
  drainPerSec: number;
  /** How long the jobs were overdue while paused: resume − last runAt, and resume − first runAt (ms). */
  overdueAtResumeMs: { min: number; max: number };
  pausedForMs: number;
  submitMs: Summary;
  loadAvg: { before: [number, number, number]; after: [number, number, number] };
}

export interface RateLimitResult {
  limitPerSec: number;
  /** delivered ÷ (last − first delivery), in jobs per second (SQS SentTimestamp). */
  observedPerSec: number;
  /** (delivered − 1) ÷ span: the rate between deliveries, without counting the first one. */
  intervalPerSec: number;
  /** Most deliveries in any 1-s window [t, t + 1 s). */
  maxIn1s: number;
  /** |observed − limit| ≤ 10 % of the limit. */
  targetMet: boolean;
  offered: number;
  delivered: number;
  lost: number;
  early: number;
  duplicates: number;
  spanMs: number;
  /** Which clock the span is on. */
  clock: 'SentTimestamp' | 'receive';
  /** Deliveries per whole second from the first one. */
  perSecond: number[];
  /** Lateness of the last job (it waits its turn: late, never dropped). */
  lateness: Summary;
  loadAvg: { before: [number, number, number]; after: [number, number, number] };
}

/**
 * A's workers run at this niceness: they stand for another team's hosts, which would take none of
 * the CPU that B's worker and the scheduler share here. At normal priority, A's worker (about
 * half a core at 300 messages a second through the SDK) made B's receives wait for the CPU: B's
 * jobs left the dispatcher on time (SentTimestamp p95 37 ms flooded, 36 ms alone) and were
 * received p95 87 ms after runAt. It changes nothing of the scheduler's processes.
 */
const A_WORKER_NICE = 10;

const TABLE_AHEAD_MS = 6_000; // beyond the local lookahead (5 s), with room for the API's latency

interface Ctx {
  local: LocalJson;
  sqs: SQSClient;
}

async function withStack<T>(tenants: readonly string[], label: string, fn: (ctx: Ctx) => Promise<T>): Promise<T> {
  progress(`${label}: starting the local stack (npm start, tenants ${tenants.join(', ')})`);
  const stack = await startLocalStack({ DYNEIN_TENANTS: tenants.join(',') });
  try {
    const local = await stack.waitForLocalJson((l) => l.admin !== undefined && tenants.every((t) => l.tenants[t]), 90_000);
    const sqs = localSqs(local);
    try {
      await sleep(2_000); // the first tick execution has started with compute
      return await fn({ local, sqs });
    } finally {
      sqs.destroy();
    }
  } catch (err) {
    console.error(stack.output().slice(-4_000));
    throw err;
  } finally {
    await stack.stop();
  }
}

/** An operator API call with local.json's operator key; throws unless 200. */
async function admin(local: LocalJson, method: 'GET' | 'POST' | 'PUT', tenant: string, suffix = '', body?: unknown) {
  const r = await signedFetch(
    local.endpoint,
    local.admin!,
    method,
    `/v1/admin/tenants/${tenant}${suffix}`,
    body === undefined ? undefined : JSON.stringify(body),
  );
  if (r.status !== 200) throw new Error(`${method} /v1/admin/tenants/${tenant}${suffix} answered ${r.status}: ${JSON.stringify(r.json)}`);
  return r.json as { paused: boolean; settings: Record<string, number> };
}

type Accepted = Map<string, number>;

/** A signed batch submit; records each accepted job's runAt. Returns how many went straight to the queue. */
async function submitBatch(
  local: LocalJson,
  tenant: string,
  jobs: { payload: unknown; dueMs: number }[],
  accepted: Accepted,
): Promise<number> {
  const body = JSON.stringify({ jobs: jobs.map((j) => ({ payload: j.payload, runAt: new Date(j.dueMs).toISOString() })) });
  const r = await signedFetch(local.endpoint, local.tenants[tenant]!, 'POST', `/v1/tenants/${tenant}/jobs/batch`, body);
  if (r.status !== 200) throw new Error(`batch POST answered ${r.status}: ${JSON.stringify(r.json).slice(0, 200)}`);
  const results = r.json.results as ({ jobId: string; state: string } | { error: { code: string; message: string } })[];
  let direct = 0;
  let refused: string | undefined;
  results.forEach((res, i) => {
    if ('jobId' in res) {
      accepted.set(res.jobId, jobs[i]!.dueMs);
      if (res.state !== 'SCHEDULED') direct++;
    } else refused ??= `${res.error.code}: ${res.error.message}`;
  });
  if (refused) throw new Error(`batch job refused: ${refused}`);
  return direct;
}

/** A signed single POST (phase 1's path). */
async function submitOne(local: LocalJson, tenant: string, payload: unknown, dueMs: number, accepted: Accepted): Promise<boolean> {
  const body = JSON.stringify({ payload, runAt: new Date(dueMs).toISOString() });
  const r = await signedFetch(local.endpoint, local.tenants[tenant]!, 'POST', `/v1/tenants/${tenant}/jobs`, body);
  if (r.status !== 201) throw new Error(`POST answered ${r.status}: ${JSON.stringify(r.json).slice(0, 200)}`);
  accepted.set(r.json.jobId as string, dueMs);
  return r.json.state !== 'SCHEDULED';
}

/** Each accepted job's first receipt, and the counts. */
function tally(accepted: Accepted, received: readonly Received[], direct: number): TenantFigures & { first: Map<string, Received> } {
  const first = new Map<string, Received>();
  let duplicates = 0;
  for (const r of received) {
    if (!accepted.has(r.jobId)) continue;
    if (first.has(r.jobId)) duplicates++;
    else first.set(r.jobId, r);
  }
  const late: number[] = [];
  const fr: number[] = [];
  const sent: number[] = [];
  let early = 0;
  for (const [id, r] of first) {
    const due = accepted.get(id)!;
    late.push(r.receivedAt - due);
    fr.push(r.firstReceiveAt - due);
    if (r.sentAt > 0) sent.push(r.sentAt - due);
    if (r.receivedAt < due || r.firstReceiveAt < due) early++;
  }
  return {
    accepted: accepted.size,
    delivered: first.size,
    lost: accepted.size - first.size,
    early,
    duplicates,
    direct,
    lateness: summarize(late),
    firstReceive: summarize(fr),
    sent: summarize(sent),
    first,
  };
}

const strip = <T extends { first: unknown }>(t: T): Omit<T, 'first'> => {
  const { first: _first, ...rest } = t;
  return rest;
};

/** Jobs accepted but not yet ingested (nor queued directly), from /local/metrics. */
async function ingestBacklog(local: LocalJson): Promise<number> {
  const m = (await (await fetch(new URL('/local/metrics', local.endpoint))).json()) as {
    jobs: { submitted: number; queuedDirectly: number; ingested: number };
  };
  return m.jobs.submitted - m.jobs.queuedDirectly - m.jobs.ingested;
}

/** Samples the inbound backlog (accepted, not yet ingested) every second until stopped. */
function ingestSampler(local: LocalJson) {
  let max = 0;
  let on = true;
  const loop = (async () => {
    while (on) {
      try {
        max = Math.max(max, await ingestBacklog(local));
      } catch {
        // the API is busy: next second
      }
      await sleep(1_000);
    }
  })();
  return {
    async stop() {
      on = false;
      await loop;
      return max;
    },
  };
}

/**
 * Phase 11: B alone; then what dispatch sends of A's burst due at once (the machine's rate); then
 * B beside A's flood due at `floodOverRate` times that rate over B's window.
 */
export async function runNoisyNeighbour(shape: TenantControlsShape['noisyNeighbour']): Promise<NoisyNeighbourResult> {
  const [A, B] = ['tenant-a', 'tenant-b'] as const;
  const bPayloads = Array.from({ length: 100 }, (_, i) => realisticPayload(i));
  // B's jobs fall due from its start + minAhead to its end + maxAhead.
  const windowMs = shape.quiet.durationMs + shape.quiet.maxAheadMs - shape.quiet.minAheadMs;
  return withStack([A, B], 'noisyNeighbour', async ({ local, sqs }) => {
    const run = async (floodPerSec: number): Promise<NoisyRun> => {
      const flood = floodPerSec > 0;
      const label = flood ? 'noisyNeighbour (flooded)' : 'noisyNeighbour (quiet)';
      const loadBefore = load();
      const bConsumer = consumeQueue(sqs, local.tenants[B]!.queueUrl, { pollers: 3 });
      // A's workers in a process of their own: another team's workers, not sharing B's event loop.
      const aConsumer = flood
        ? consumeQueueInProcess(local.sqsEndpoint, local.region, local.tenants[A]!.queueUrl, { pollers: 6, nice: A_WORKER_NICE })
        : undefined;
      const acceptedB: Accepted = new Map();
      const acceptedA: Accepted = new Map();
      let directB = 0;
      let aSubmit: NoisyRun['aSubmit'];
      if (flood) {
        // A's flood: due uniformly over B's window [B start + minAhead, B end + maxAhead), submitted before it opens.
        const floodJobs = Math.round((floodPerSec * windowMs) / 1000);
        const t0 = Date.now();
        const windowStart = t0 + shape.floodLeadMs;
        progress(
          `${label}: A submits ${floodJobs} jobs (batches of 100) due over ${windowMs / 1000} s from ${new Date(windowStart).toISOString()}, B's window (${floodPerSec} jobs/s)`,
        );
        const sub = await submitMany(
          local,
          A,
          floodJobs,
          () => windowStart + Math.floor(Math.random() * windowMs),
          acceptedA,
          shape.floodPayloadBytes,
        );
        const tookMs = Date.now() - t0;
        const backlog = await waitForIngest(local, windowStart - shape.quiet.minAheadMs);
        progress(
          `${label}: A's ${acceptedA.size} jobs accepted in ${(tookMs / 1000).toFixed(1)} s, ${backlog} not yet ingested; B starts in ${((windowStart - shape.quiet.minAheadMs - Date.now()) / 1000).toFixed(1)} s`,
        );
        await sleep(windowStart - shape.quiet.minAheadMs - Date.now());
        aSubmit = { tookMs, submitMs: sub.submitMs, ingestBacklogWhenBStarted: backlog };
      }
      const sampler = ingestSampler(local);
      progress(
        `${label}: B ${shape.quiet.rate} jobs/s for ${shape.quiet.durationMs / 1000} s due ${shape.quiet.minAheadMs / 1000}–${shape.quiet.maxAheadMs / 1000} s ahead${flood ? `, A's ${floodPerSec} jobs/s falling due in the same window` : ''}`,
      );
      const bReport = await steadyLoad(
        shape.quiet,
        async (i, dueMs) => {
          if (await submitOne(local, B, bPayloads[i % bPayloads.length], dueMs, acceptedB)) directB++;
        },
        `${label} B`,
      );
      progress(
        `${label}: accepted B ${acceptedB.size} (${bReport.failed} failed${bReport.firstError ? `: ${bReport.firstError}` : ''}); waiting for deliveries`,
      );
      const lastDueB = Math.max(0, ...acceptedB.values());
      await bConsumer.waitFor(acceptedB.size, lastDueB - Date.now() + 30_000);
      if (aConsumer) {
        const ok = await aConsumer.waitFor(acceptedA.size, shape.drainTimeoutMs);
        if (!ok) progress(`${label}: A not all delivered within ${shape.drainTimeoutMs / 1000} s; counting what arrived`);
      }
      await sleep(1_000); // a straggler or duplicate still arriving
      await Promise.all([bConsumer.stop(), aConsumer?.stop()]);
      const ingestBacklogMax = await sampler.stop();
      const b = tally(acceptedB, bConsumer.received, directB);
      const a = aConsumer ? rateOf(tally(acceptedA, aConsumer.received, 0)) : undefined;
      const out: NoisyRun = {
        b: strip(b),
        ...(a ? { a } : {}),
        bLoad: bReport,
        ...(aSubmit ? { aSubmit } : {}),
        ingestBacklogMax,
        loadAvg: { before: loadBefore, after: load() },
      };
      progress(
        `${label}: B ${b.delivered}/${b.accepted} delivered, lateness p50 ${b.lateness.p50Ms} ms p95 ${b.lateness.p95Ms} ms max ${b.lateness.maxMs} ms (sent p95 ${b.sent.p95Ms} ms), early ${b.early}${a ? `; A ${a.delivered}/${a.accepted} delivered at ${a.deliveredPerSec} jobs/s, p95 ${a.lateness.p95Ms} ms, early ${a.early}` : ''}; inbound backlog at most ${ingestBacklogMax}; load ${out.loadAvg.after.join(' ')}`,
      );
      return out;
    };

    /** What dispatch sends here: A's burst due at once, alone, sent per second by SentTimestamp. */
    const probe = async (): Promise<NoisyNeighbourResult['dispatchRate'] & { figures: TenantFigures }> => {
      const label = 'noisyNeighbour (rate)';
      const loadBefore = load();
      const consumer = consumeQueueInProcess(local.sqsEndpoint, local.region, local.tenants[A]!.queueUrl, {
        pollers: 6,
        nice: A_WORKER_NICE,
      });
      const accepted: Accepted = new Map();
      const dueMs = Date.now() + shape.floodLeadMs / 2;
      progress(`${label}: A submits ${shape.rateProbeJobs} jobs due at once (${new Date(dueMs).toISOString()}), alone`);
      await submitMany(local, A, shape.rateProbeJobs, () => dueMs, accepted, shape.floodPayloadBytes);
      await waitForIngest(local, dueMs - 1_000);
      const ok = await consumer.waitFor(accepted.size, dueMs - Date.now() + shape.drainTimeoutMs);
      if (!ok) progress(`${label}: not all delivered within ${shape.drainTimeoutMs / 1000} s of their due time; counting what arrived`);
      await sleep(1_000);
      await consumer.stop();
      const t = rateOf(tally(accepted, consumer.received, 0));
      const out = {
        jobs: t.delivered,
        sentPerSec: t.deliveredPerSec,
        spanMs: t.spanMs,
        loadAvg: { before: loadBefore, after: load() },
        figures: t,
      };
      progress(
        `${label}: ${t.delivered}/${t.accepted} sent at ${t.deliveredPerSec} jobs/s over ${(t.spanMs / 1000).toFixed(1)} s; load ${out.loadAvg.after.join(' ')}`,
      );
      return out;
    };

    const quiet = await run(0);
    const { figures: probed, ...dispatchRate } = await probe();
    const floodPerSec = Math.max(1, Math.round(shape.floodOverRate * dispatchRate.sentPerSec));
    const flooded = await run(floodPerSec);
    const ratioOf = (f: number, q: number) => +(f / Math.max(1, q)).toFixed(2);
    const ratio = ratioOf(flooded.b.lateness.p95Ms, quiet.b.lateness.p95Ms);
    const all = [quiet.b, flooded.b, probed, ...(flooded.a ? [flooded.a] : [])];
    const sum = (k: 'early' | 'lost' | 'duplicates') => all.reduce((n, t) => n + t[k], 0);
    // Saturated: A's flood was due faster than dispatch sent it, during the flood.
    const saturation = +(floodPerSec / Math.max(1, flooded.a?.deliveredPerSec ?? 0)).toFixed(2);
    return {
      quietP95Ms: quiet.b.lateness.p95Ms,
      floodedP95Ms: flooded.b.lateness.p95Ms,
      ratio,
      sent: {
        quietP95Ms: quiet.b.sent.p95Ms,
        floodedP95Ms: flooded.b.sent.p95Ms,
        ratio: ratioOf(flooded.b.sent.p95Ms, quiet.b.sent.p95Ms),
      },
      targetMet: ratio <= 2 && saturation >= 1,
      early: sum('early'),
      lost: sum('lost'),
      duplicates: sum('duplicates'),
      dispatchRate,
      saturation,
      quiet,
      flooded,
      shape: {
        ...shape,
        floodPerSec,
        floodJobs: Math.round((floodPerSec * windowMs) / 1000),
        windowMs,
        bPayloadBytes: JSON.stringify(bPayloads[0]).length,
      },
    };
  });
}

/** A tenant's figures with its deliveries per second, from its first send to its last (SentTimestamp; receive time without it). */
function rateOf(t: ReturnType<typeof tally>): TenantFigures & { deliveredPerSec: number; spanMs: number } {
  const times = [...t.first.values()].map((r) => (r.sentAt > 0 ? r.sentAt : r.receivedAt));
  const first = Math.min(...times);
  const last = Math.max(...times);
  return {
    ...strip(t),
    deliveredPerSec: last > first ? Math.round((t.delivered / (last - first)) * 1000) : 0,
    spanMs: times.length ? last - first : 0,
  };
}

/** Waits until every accepted job is ingested (or until `untilMs`); answers how many were not yet. */
async function waitForIngest(local: LocalJson, untilMs: number): Promise<number> {
  let backlog = await ingestBacklog(local);
  while (backlog > 0 && Date.now() < untilMs) {
    await sleep(500);
    backlog = await ingestBacklog(local);
  }
  return backlog;
}

/** Submits `jobs` in batches of 100, a few requests at once, each job due `dueOf(batch send time)`. */
async function submitMany(
  local: LocalJson,
  tenant: string,
  jobs: number,
  dueOf: (sentAt: number) => number,
  accepted: Accepted,
  payloadBytes = 256,
): Promise<{ direct: number; submitMs: Summary }> {
  const payloads = Array.from({ length: 100 }, (_, i) => realisticPayload(i, payloadBytes));
  let next = 0;
  let direct = 0;
  const took: number[] = [];
  const worker = async () => {
    while (next < jobs) {
      const from = next;
      const n = Math.min(100, jobs - from);
      next += n;
      const sentAt = Date.now();
      const batch = Array.from({ length: n }, (_, k) => ({ payload: payloads[(from + k) % 100], dueMs: dueOf(sentAt) }));
      direct += await submitBatch(local, tenant, batch, accepted);
      took.push(Date.now() - sentAt);
    }
  };
  await Promise.all(Array.from({ length: 4 }, worker));
  return { direct, submitMs: summarize(took) };
}

/** Phase 12: jobs due while their tenant is paused are held; resume delivers them all. */
export async function runPause(shape: TenantControlsShape['pause']): Promise<PauseResult> {
  const T = 'held';
  return withStack([T], 'pause', async ({ local, sqs }) => {
    const loadBefore = load();
    const paused = await admin(local, 'POST', T, '/pause');
    if (!paused.paused) throw new Error('pause answered paused: false');
    const pausedAt = Date.now();
    progress(`pause: tenant '${T}' paused; waiting ${CONTROLS_TTL_MS / 1000} s (the controls cache's staleness bound)`);
    await sleep(CONTROLS_TTL_MS + 500);
    const consumer = consumeQueue(sqs, local.tenants[T]!.queueUrl, { pollers: 6 });
    const accepted: Accepted = new Map();
    progress(`pause: submitting ${shape.jobs} jobs in batches of 100, each due 6–8 s after its batch is sent`);
    const { direct, submitMs } = await submitMany(
      local,
      T,
      shape.jobs,
      (sentAt) => sentAt + TABLE_AHEAD_MS + Math.floor(Math.random() * 2_000),
      accepted,
    );
    const dues = [...accepted.values()];
    const lastDue = Math.max(...dues);
    const firstDue = Math.min(...dues);
    // Past every due time, and everything ingested (a row not yet in the table could not be delivered anyway).
    const until = Date.now() + 60_000;
    for (;;) {
      const backlog = await ingestBacklog(local);
      if ((backlog <= 0 && Date.now() > lastDue + 5_000) || Date.now() > until) break;
      await sleep(500);
    }
    const beforeResume = new Set(consumer.received.filter((r) => accepted.has(r.jobId)).map((r) => r.jobId));
    const held = accepted.size - beforeResume.size;
    progress(
      `pause: ${accepted.size} accepted, all due (last ${((Date.now() - lastDue) / 1000).toFixed(1)} s ago), ${beforeResume.size} delivered while paused; resuming`,
    );
    const resumeAt = Date.now();
    const resumed = await admin(local, 'POST', T, '/resume');
    if (resumed.paused) throw new Error('resume answered paused: true');
    const ok = await consumer.waitFor(accepted.size, 60_000 + shape.jobs * 10);
    if (!ok) progress('pause: not all held jobs delivered in time; counting what arrived');
    await sleep(1_000);
    await consumer.stop();
    const t = tally(accepted, consumer.received, direct);
    const after = [...t.first.values()].filter((r) => !beforeResume.has(r.jobId)).map((r) => r.receivedAt);
    const firstAt = Math.min(...after);
    const lastAt = Math.max(...after);
    const result: PauseResult = {
      held,
      delivered: after.length,
      lost: t.lost,
      early: t.early,
      duplicates: t.duplicates,
      deliveredWhilePaused: beforeResume.size,
      accepted: accepted.size,
      direct,
      drainMs: after.length ? lastAt - resumeAt : -1,
      firstDeliveryMs: after.length ? firstAt - resumeAt : -1,
      drainPerSec: lastAt > firstAt ? Math.round((after.length / (lastAt - firstAt)) * 1000) : 0,
      overdueAtResumeMs: { min: resumeAt - lastDue, max: resumeAt - firstDue },
      pausedForMs: resumeAt - pausedAt,
      submitMs,
      loadAvg: { before: loadBefore, after: load() },
    };
    progress(
      `pause: held ${held}, delivered ${result.delivered} after resume (first after ${result.firstDeliveryMs} ms, all after ${result.drainMs} ms, ${result.drainPerSec} jobs/s), lost ${result.lost}, early ${result.early}, duplicates ${result.duplicates}`,
    );
    return result;
  });
}

/** Phase 13: a tenant limited to `limitPerSec` deliveries with `jobs` due at once. */
export async function runRateLimit(shape: TenantControlsShape['rateLimit']): Promise<RateLimitResult> {
  const T = 'limited';
  return withStack([T], 'rateLimit', async ({ local, sqs }) => {
    const loadBefore = load();
    const set = await admin(local, 'PUT', T, '/settings', { maxDeliveriesPerSecond: shape.limitPerSec });
    if (set.settings.maxDeliveriesPerSecond !== shape.limitPerSec) throw new Error(`settings answered ${JSON.stringify(set.settings)}`);
    progress(
      `rateLimit: '${T}' limited to ${shape.limitPerSec} deliveries/s; waiting ${CONTROLS_TTL_MS / 1000} s (the controls cache's staleness bound)`,
    );
    await sleep(CONTROLS_TTL_MS + 500);
    const consumer = consumeQueue(sqs, local.tenants[T]!.queueUrl, { pollers: 3 });
    const accepted: Accepted = new Map();
    const dueAt = Date.now() + TABLE_AHEAD_MS + 2_000 + Math.ceil(shape.jobs / 100) * 50;
    progress(`rateLimit: submitting ${shape.jobs} jobs all due at ${new Date(dueAt).toISOString()}`);
    await submitMany(local, T, shape.jobs, () => dueAt, accepted);
    const ok = await consumer.waitFor(accepted.size, dueAt - Date.now() + (shape.jobs / shape.limitPerSec) * 1_500 + 30_000);
    if (!ok) progress('rateLimit: not all delivered in time; counting what arrived');
    await sleep(1_000);
    await consumer.stop();
    const t = tally(accepted, consumer.received, 0);
    const firsts = [...t.first.values()];
    const clock: RateLimitResult['clock'] = firsts.every((r) => r.sentAt > 0) ? 'SentTimestamp' : 'receive';
    const times = firsts.map((r) => (clock === 'SentTimestamp' ? r.sentAt : r.receivedAt)).sort((a, b) => a - b);
    const spanMs = times.length > 1 ? times.at(-1)! - times[0]! : 0;
    let maxIn1s = 0;
    for (let i = 0, j = 0; j < times.length; j++) {
      while (times[j]! - times[i]! >= 1_000) i++;
      maxIn1s = Math.max(maxIn1s, j - i + 1);
    }
    const perSecond: number[] = [];
    for (const x of times) {
      const s = Math.floor((x - times[0]!) / 1_000);
      perSecond[s] = (perSecond[s] ?? 0) + 1;
    }
    const observedPerSec = spanMs > 0 ? +((times.length / spanMs) * 1_000).toFixed(1) : 0;
    const result: RateLimitResult = {
      limitPerSec: shape.limitPerSec,
      observedPerSec,
      intervalPerSec: spanMs > 0 ? +(((times.length - 1) / spanMs) * 1_000).toFixed(1) : 0,
      maxIn1s,
      targetMet: Math.abs(observedPerSec - shape.limitPerSec) <= 0.1 * shape.limitPerSec,
      offered: accepted.size,
      delivered: t.delivered,
      lost: t.lost,
      early: t.early,
      duplicates: t.duplicates,
      spanMs,
      clock,
      perSecond: Array.from(perSecond, (x) => x ?? 0),
      lateness: t.lateness,
      loadAvg: { before: loadBefore, after: load() },
    };
    progress(
      `rateLimit: ${t.delivered}/${accepted.size} delivered over ${(spanMs / 1000).toFixed(1)} s: ${observedPerSec} jobs/s (limit ${shape.limitPerSec}), at most ${maxIn1s} in any second, lost ${t.lost}, early ${t.early}, duplicates ${t.duplicates}`,
    );
    return result;
  });
}
