/**
 * Phase 8: recurring schedules on the local stack exactly as `npm start` runs it, with the local
 * EventBridge Scheduler stand-in as the clock: schedules created through the signed API
 * (`PUT /v1/tenants/{tenant}/schedules/{name}`) in several time zones, cron and rate; each
 * firing goes into the inbound queue, ingest materialises the occurrences ahead as table-path
 * jobs, the dispatcher sends each at its runAt, and a consumer per tenant queue receives them as
 * a tenant's worker would.
 *
 * What should arrive is computed here, apart from the materialiser and from core/recurring/expression's
 * evaluator: cron occurrences by test/support/cronOracle.ts's minute-by-minute enumeration (Intl
 * says what the zone's clocks show), rate occurrences by arithmetic from startAt. Counted: the
 * occurrences due in [window start, window end), received up to a grace period after the end.
 * Lateness is receive time − runAt; early: received before runAt (by either clock, as phase 1);
 * duplicates: a job id received twice, or two job ids for one schedule and runAt.
 *
 * The requests the path costs per occurrence come from compute's own request counter
 * (`GET /local/metrics`) over the window, less what the same stack did idle before the schedules
 * existed (polling) — see {@link perOccurrenceUsage}.
 */
import { signedFetch, startLocalStack, type LocalJson, localSqs } from '../test/support/localStack.js';
import { clocks, cronMatches, expectedRuns, type OracleCron } from '../test/support/cronOracle.js';
import { costPerMillion, type PerJobUsage } from './cost.js';
import { consumeQueue, load, progress, sleep, summarize, type Received, type Summary } from './support.js';

export interface RecurringShape {
  /** Schedules created (spread over the tenants, zones and expressions below). */
  readonly schedules: number;
  /** Occurrences due in [window start, window start + windowMs) are counted. */
  readonly windowMs: number;
  /** The window starts on a minute boundary (full mode), or as soon as the schedules exist (quick). */
  readonly alignToMinute: boolean;
  /** rate() schedules start at window start + an offset spread over this much. */
  readonly startSpreadMs: number;
  /** How long after the window's end deliveries are still awaited. */
  readonly graceMs: number;
  /** Idle polling of the stack, measured before the schedules exist. */
  readonly baselineMs: number;
}

export const TENANTS = ['demo', 'acme'] as const;
export const ZONES = ['UTC', 'Asia/Kolkata', 'Asia/Kathmandu', 'America/New_York', 'Australia/Lord_Howe'] as const;

interface Kind {
  readonly expression: string;
  /** cron: the same expression as the oracle's structure (not parsed from the text). */
  readonly cron?: OracleCron;
  /** rate: the period. */
  readonly periodMs?: number;
}

const ALL = [{ kind: 'all' }] as const;
const everyMinute: OracleCron = { minutes: ALL, hours: ALL, days: { field: 'dom', items: ALL }, months: ALL, years: ALL };
export const KINDS: readonly Kind[] = [
  { expression: 'cron(* * * * ? *)', cron: everyMinute },
  { expression: 'cron(0/2 * * * ? *)', cron: { ...everyMinute, minutes: [{ kind: 'from', value: 0, step: 2 }] } },
  { expression: 'rate(1 minute)', periodMs: 60_000 },
  { expression: 'rate(2 minutes)', periodMs: 120_000 },
];

export interface RecurringResult {
  schedules: number;
  /** Occurrences due in the window, computed independently of the server. */
  expected: number;
  /** Distinct expected occurrences received. */
  delivered: number;
  missing: number;
  early: number;
  duplicates: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  maxMs: number;
  meanMs: number;
  /** Occurrences received with a runAt in the window that were not expected (wrong time, or a schedule's extra run). */
  unexpected: number;
  /** Most occurrences due at the same millisecond (the cron ones fall on whole minutes, together). */
  maxDueAtOnce: number;
  /** Deliveries whose `schedule` attribute and body field disagree, or name no schedule of that tenant. */
  scheduleMismatches: number;
  /** The same lateness by SQS's ApproximateFirstReceiveTimestamp. */
  firstReceive: Summary;
  /**
   * The dispatcher's own figure (due time → tenant SendMessageBatch acknowledged), from /local/metrics (le -1: the open
   * bucket): the jobs of every dispatch step that had ended by the end of the grace period (a step reports when it ends; it
   * runs a tick execution, 90 s), since compute started (a few occurrences before the window).
   */
  dispatcher: { count: number; meanMs: number; maxMs: number; buckets: { le: number; count: number }[] };
  byExpression: Record<string, { schedules: number; expected: number; delivered: number; p95Ms: number }>;
  zones: string[];
  tenants: string[];
  window: { from: string; to: string; graceMs: number };
  /** Signed PUT of a schedule, acknowledged (created, clock set, first occurrences written). */
  createMs: Summary;
  perOccurrence: PerOccurrence;
  shape: RecurringShape;
  loadAvg: { before: [number, number, number]; after: [number, number, number] };
}

export interface PerOccurrence {
  /** Occurrences due in the counting window (the denominator). */
  occurrences: number;
  windowMs: number;
  /** compute's requests in the window by `Service.Operation`, all of them. */
  measured: Record<string, number>;
  /** compute's requests per second while idle, before the schedules (polling). */
  idlePerSecond: Record<string, number>;
  /** UpdateItems measured in the window beyond the path's (the dispatcher's group leases), per second. */
  leaseWritesPerSecond: number;
  /** (measured − idle rate × window) / occurrences, by operation; queries left out, UpdateItem the path's only (see basis). */
  requestsPerOccurrence: Record<string, number>;
  /** Billing units per occurrence on AWS, what the cost is computed from. */
  usage: PerJobUsage;
  /** How the usage is derived where the local counters cannot say it. */
  basis: string[];
}

/** Lambda memory of ingest (lib/dyneinScheduler.ts's default). */
const INGEST_MEMORY_GB = 256 / 1024;
/** Assumed AWS wall time of an ingest invocation carrying firings (a consistent read, conditional puts, a watermark update). */
export const FIRING_INGEST_SECONDS = 0.03;

interface Planned {
  tenant: string;
  name: string;
  zone: string;
  kind: Kind;
  startAtMs?: number;
}

/** Due times of `p` in [from, to), computed without the server's evaluator. */
export function expectedOf(p: Planned, from: number, to: number, history: Map<string, ReturnType<typeof clocks>>): number[] {
  if (p.kind.periodMs !== undefined) {
    const start = p.startAtMs!;
    const period = p.kind.periodMs;
    const first = start >= from ? start : start + Math.ceil((from - start) / period) * period;
    const out: number[] = [];
    for (let t = first; t < to; t += period) out.push(t);
    return out;
  }
  const h = history.get(p.zone)!;
  return expectedRuns(h, from, to, (c) => cronMatches(p.kind.cron!, c));
}

interface LocalMetricsSnapshot {
  requests: Record<string, number>;
  lateness: { count: number; meanMs: number; maxMs: number; buckets: { le: number | null; count: number }[] };
}

async function localMetrics(endpoint: string): Promise<LocalMetricsSnapshot> {
  return (await (await fetch(new URL('/local/metrics', endpoint))).json()) as LocalMetricsSnapshot;
}

const metricsRequests = async (endpoint: string) => (await localMetrics(endpoint)).requests;

const delta = (after: Record<string, number>, before: Record<string, number>) =>
  Object.fromEntries(
    Object.entries(after)
      .map(([k, v]) => [k, v - (before[k] ?? 0)] as const)
      .filter(([, v]) => v > 0),
  );

/**
 * Billing units per occurrence from compute's request counts in the window, less the idle
 * polling rate. DynamoDB queries are left out altogether (the dispatcher's due-range and
 * late-lane reads are polling, priced in the fixed monthly cost as for one-off jobs). UpdateItem
 * mixes the path's writes with the dispatcher's group-lease writes (polling too, and more or less
 * frequent while busy than idle, so the idle rate cannot be subtracted): the path's are counted
 * as one acquire per occurrence plus one watermark advance per firing, firings being the
 * schedule reads (GetItem, one per firing, net of idle). Each DynamoDB write is 1 WRU (occurrence
 * rows, the schedule's watermark and the delivered markers are under 1 KB), and the delivered
 * marker is one item of a BatchWriteItem per occurrence; each GetItem (the schedule item, strongly
 * consistent, < 4 KB) 1 RRU. SQS: every request compute made (inbound receive and delete, tenant
 * send) plus EventBridge Scheduler's own SendMessage into the inbound queue, one per firing; one
 * EventBridge Scheduler invocation per firing (a schedule running more often than every 5
 * minutes is fired by a rate(5 minutes) clock, others at their own occurrences); one ingest
 * invocation per inbound DeleteMessageBatch (the event source deletes once per invocation) of
 * {@link FIRING_INGEST_SECONDS} at 256 MB.
 */
export function perOccurrenceUsage(
  measured: Record<string, number>,
  idle: Record<string, number>,
  idleMs: number,
  windowMs: number,
  occurrences: number,
): Pick<PerOccurrence, 'requestsPerOccurrence' | 'usage' | 'idlePerSecond' | 'leaseWritesPerSecond' | 'basis'> {
  const n = Math.max(1, occurrences);
  const idlePerSecond = Object.fromEntries(Object.entries(idle).map(([k, v]) => [k, +((v / idleMs) * 1000).toFixed(3)]));
  const net = (k: string) => Math.max(0, (measured[k] ?? 0) - ((idle[k] ?? 0) / idleMs) * windowMs);
  const keys = [...new Set([...Object.keys(measured), ...Object.keys(idle)])].sort();
  const per = (x: number) => +(x / n).toFixed(4);
  const sqsCompute = keys.filter((k) => k.startsWith('SQS.')).reduce((a, k) => a + net(k), 0);
  const markers = net('DynamoDB.BatchWriteItem') > 0 ? n : 0;
  const firings = net('DynamoDB.GetItem');
  // Acquires and watermark advances; never more than the UpdateItems measured.
  const pathUpdates = Math.min(measured['DynamoDB.UpdateItem'] ?? 0, n + firings);
  const invocations = net('SQS.DeleteMessageBatch');
  const requestsPerOccurrence = Object.fromEntries(
    keys
      .filter((k) => k !== 'DynamoDB.Query')
      .map((k) => [k, +((k === 'DynamoDB.UpdateItem' ? pathUpdates : net(k)) / n).toFixed(3)] as const)
      .filter(([, v]) => v > 0),
  );
  const usage: PerJobUsage = {
    // Each occurrence is written once (its put), whenever that was: occurrences due early in the
    // window were materialised before it (at creation, up to 8 minutes ahead), so the window's own
    // puts undercount them.
    dynamodbWru: per(Math.max(net('DynamoDB.PutItem'), n) + pathUpdates + net('DynamoDB.DeleteItem') + markers),
    dynamodbRru: per(net('DynamoDB.GetItem')),
    sqsRequests: per(sqsCompute + firings),
    lambdaInvocations: per(invocations),
    lambdaGbSeconds: +((invocations * FIRING_INGEST_SECONDS * INGEST_MEMORY_GB) / n).toFixed(7),
    apiRequests: 0,
    schedulerInvocations: per(firings),
  };
  return {
    requestsPerOccurrence,
    usage,
    idlePerSecond,
    leaseWritesPerSecond: +((((measured['DynamoDB.UpdateItem'] ?? 0) - pathUpdates) / windowMs) * 1000).toFixed(2),
    basis: [
      'requests counted by compute (ingest, dispatch, tick) in the window, less the idle rate measured before the schedules existed',
      'DynamoDB.Query left out (polling: priced in the fixed monthly cost, as for one-off jobs)',
      'UpdateItem on the path: 1 acquire per occurrence + 1 watermark advance per firing (firings = schedule GetItems); the rest of the UpdateItems measured are group-lease writes (polling)',
      'each DynamoDB write 1 WRU (items under 1 KB); one occurrence put per occurrence at least (some were written before the window); one delivered-marker item per occurrence in the BatchWriteItems',
      'GetItem 1 RRU each (the schedule item, strongly consistent)',
      "SQS: compute's requests plus EventBridge Scheduler's SendMessage into the inbound queue (1 per firing)",
      'EventBridge Scheduler: 1 invocation per firing (firings = schedule GetItems; a schedule running more often than every 5 minutes has a rate(5 minutes) clock)',
      `Lambda: one ingest invocation per inbound DeleteMessageBatch, ${FIRING_INGEST_SECONDS * 1000} ms at 256 MB each (assumed AWS figure)`,
    ],
  };
}

/** Runs the local stack, creates the schedules, consumes the tenant queues and measures. */
export async function runRecurring(shape: RecurringShape): Promise<RecurringResult> {
  const loadBefore = load();
  progress('recurring: starting the local stack (npm start) with the EventBridge Scheduler stand-in');
  const stack = await startLocalStack({ DYNEIN_TENANTS: TENANTS.join(',') });
  try {
    const local: LocalJson = await stack.waitForLocalJson((l) => TENANTS.every((t) => l.tenants[t]), 90_000);
    const sqs = localSqs(local);
    // A worker per tenant queue with enough pollers for a minute's burst (up to ~40 occurrences of a tenant due at once): the consumer must not be what is measured.
    const consumers = Object.fromEntries(TENANTS.map((t) => [t, consumeQueue(sqs, local.tenants[t]!.queueUrl, { pollers: 5 })]));

    // Idle polling, before any schedule exists (the tick's first execution has started).
    await sleep(1_000);
    const idleFrom = await metricsRequests(local.endpoint);
    const idleT0 = Date.now();
    await sleep(shape.baselineMs);
    const idle = delta(await metricsRequests(local.endpoint), idleFrom);
    const idleMs = Date.now() - idleT0;

    // The window's start: a minute boundary far enough ahead for the PUTs (full), or soon (quick).
    const createBudgetMs = Math.max(8_000, shape.schedules * 60);
    const createStart = Date.now();
    const soon = createStart + createBudgetMs;
    const from = shape.alignToMinute ? Math.ceil(soon / 60_000) * 60_000 : soon;
    const planned: Planned[] = Array.from({ length: shape.schedules }, (_, i) => {
      const kind = KINDS[i % KINDS.length]!;
      return {
        tenant: TENANTS[i % TENANTS.length]!,
        name: `bench-${String(i).padStart(4, '0')}`,
        zone: ZONES[i % ZONES.length]!,
        kind,
        // Spread over the minute at odd milliseconds (i × 7,919 ms modulo the spread).
        ...(kind.periodMs !== undefined ? { startAtMs: from + ((i * 7_919) % shape.startSpreadMs) } : {}),
      };
    });
    progress(
      `recurring: creating ${planned.length} schedules (${TENANTS.length} tenants, zones ${ZONES.join(', ')}; ${KINDS.map((k) => k.expression).join(', ')}); counting occurrences due from ${new Date(from).toISOString()} for ${shape.windowMs / 1000} s`,
    );
    const createMs: number[] = [];
    let failed = 0;
    let firstError: string | undefined;
    let next = 0;
    const worker = async () => {
      while (next < planned.length) {
        const p = planned[next++]!;
        const body = JSON.stringify({
          expression: p.kind.expression,
          timezone: p.zone,
          ...(p.startAtMs !== undefined ? { startAt: new Date(p.startAtMs).toISOString() } : {}),
          payload: { bench: 'recurring', schedule: p.name, zone: p.zone },
        });
        const t0 = Date.now();
        const res = await signedFetch(
          local.endpoint,
          local.tenants[p.tenant]!,
          'PUT',
          `/v1/tenants/${p.tenant}/schedules/${p.name}`,
          body,
          {
            region: local.region,
          },
        ).catch((err: Error) => ({ status: 0, json: err.message }));
        if (res.status === 201) createMs.push(Date.now() - t0);
        else {
          failed++;
          firstError ??= `${res.status} ${JSON.stringify(res.json).slice(0, 200)}`;
        }
      }
    };
    await Promise.all(Array.from({ length: 8 }, worker));
    const created = Date.now();
    if (failed > 0) throw new Error(`${failed} of ${planned.length} schedule PUTs failed, first: ${firstError}`);
    // Occurrences due before the schedules all existed are not counted (a schedule runs from its creation).
    const windowFrom = Math.max(from, created + 1_000);
    const windowTo = from + shape.windowMs;
    const cm = summarize(createMs);
    progress(
      `recurring: ${planned.length} schedules created in ${((created - createStart) / 1000).toFixed(1)} s (PUT p50 ${cm.p50Ms} ms, p99 ${cm.p99Ms} ms)${windowFrom > from ? `; window starts late, at ${new Date(windowFrom).toISOString()}` : ''}`,
    );

    await sleep(windowFrom - Date.now());
    const atFrom = await metricsRequests(local.endpoint);
    const measuredFrom = Date.now();
    for (let t = windowFrom + 60_000; t < windowTo; t += 60_000) {
      await sleep(t - Date.now());
      const got = Object.values(consumers).reduce((n, c) => n + c.received.length, 0);
      progress(`recurring: ${got} occurrences received so far, load ${load().join(' ')}`);
    }
    await sleep(windowTo - Date.now());
    const measured = delta(await metricsRequests(local.endpoint), atFrom);
    const measuredMs = Date.now() - measuredFrom;
    await sleep(windowTo + shape.graceMs - Date.now());
    for (const c of Object.values(consumers)) await c.stop();
    const { lateness: dispatcher } = await localMetrics(local.endpoint);
    sqs.destroy();

    // What should have arrived, computed apart from the server.
    // The oracle walks whole UTC minutes from its start: start it on one, 26 hours back (a wall time shown before a fall back).
    const historyFrom = Math.floor((windowFrom - 26 * 3_600_000) / 60_000) * 60_000;
    const history = new Map(ZONES.map((z) => [z, clocks(z, historyFrom, windowTo)] as const));
    const expected = new Map<string, { kind: string }>();
    const keyOf = (tenant: string, schedule: string, runAtMs: number) => `${tenant}/${schedule}@${runAtMs}`;
    const byExpression: RecurringResult['byExpression'] = {};
    for (const k of KINDS) byExpression[k.expression] = { schedules: 0, expected: 0, delivered: 0, p95Ms: 0 };
    for (const p of planned) {
      byExpression[p.kind.expression]!.schedules++;
      for (const t of expectedOf(p, windowFrom, windowTo, history)) {
        expected.set(keyOf(p.tenant, p.name, t), { kind: p.kind.expression });
        byExpression[p.kind.expression]!.expected++;
      }
    }
    const names = new Map(planned.map((p) => [`${p.tenant}/${p.name}`, p]));

    const first = new Map<string, Received & { tenant: string }>();
    const jobIds = new Set<string>();
    let duplicates = 0;
    let unexpected = 0;
    let scheduleMismatches = 0;
    for (const [tenant, c] of Object.entries(consumers)) {
      for (const r of c.received) {
        if (r.schedule !== r.bodySchedule || !names.has(`${tenant}/${r.schedule}`)) scheduleMismatches++;
        if (r.runAtMs < windowFrom || r.runAtMs >= windowTo) continue;
        const key = keyOf(tenant, r.schedule ?? '', r.runAtMs);
        if (jobIds.has(r.jobId) || first.has(key)) {
          duplicates++;
          continue;
        }
        jobIds.add(r.jobId);
        if (!expected.has(key)) {
          unexpected++;
          continue;
        }
        first.set(key, { ...r, tenant });
      }
    }
    const got = [...first.values()];
    const late = got.map((r) => r.receivedAt - r.runAtMs);
    const early = got.filter((r) => r.receivedAt < r.runAtMs || r.firstReceiveAt < r.runAtMs).length;
    for (const k of KINDS) {
      const mine = got.filter((r) => names.get(`${r.tenant}/${r.schedule}`)?.kind === k);
      byExpression[k.expression]!.delivered = mine.length;
      byExpression[k.expression]!.p95Ms = summarize(mine.map((r) => r.receivedAt - r.runAtMs)).p95Ms;
    }
    const s = summarize(late);
    const occurrences = expected.size;
    const dueAt = new Map<number, number>();
    for (const k of expected.keys()) {
      const t = Number(k.slice(k.lastIndexOf('@') + 1));
      dueAt.set(t, (dueAt.get(t) ?? 0) + 1);
    }
    const result: RecurringResult = {
      schedules: planned.length,
      expected: expected.size,
      delivered: first.size,
      missing: expected.size - first.size,
      early,
      duplicates,
      p50Ms: s.p50Ms,
      p95Ms: s.p95Ms,
      p99Ms: s.p99Ms,
      maxMs: s.maxMs,
      meanMs: s.meanMs,
      unexpected,
      scheduleMismatches,
      maxDueAtOnce: Math.max(0, ...dueAt.values()),
      firstReceive: summarize(got.map((r) => r.firstReceiveAt - r.runAtMs)),
      dispatcher: {
        count: dispatcher.count,
        meanMs: dispatcher.meanMs,
        maxMs: dispatcher.maxMs,
        // JSON has no Infinity: the open bucket comes back as null.
        buckets: dispatcher.buckets.filter((b) => b.count > 0).map((b) => ({ le: b.le ?? -1, count: b.count })),
      },
      byExpression,
      zones: [...ZONES],
      tenants: [...TENANTS],
      window: { from: new Date(windowFrom).toISOString(), to: new Date(windowTo).toISOString(), graceMs: shape.graceMs },
      createMs: cm,
      perOccurrence: {
        occurrences,
        windowMs: measuredMs,
        measured,
        ...perOccurrenceUsage(measured, idle, idleMs, measuredMs, occurrences),
      },
      shape,
      loadAvg: { before: loadBefore, after: load() },
    };
    const missingExamples = [...expected.keys()].filter((k) => !first.has(k)).slice(0, 5);
    progress(
      `recurring: ${result.delivered}/${result.expected} delivered (missing ${result.missing}${missingExamples.length ? `, e.g. ${missingExamples.join(', ')}` : ''}), early ${early}, duplicates ${duplicates}, unexpected ${unexpected}; lateness p50 ${s.p50Ms} ms, p95 ${s.p95Ms} ms, p99 ${s.p99Ms} ms, max ${s.maxMs} ms; $${costPerMillion(result.perOccurrence.usage).totalUsd} per million occurrences`,
    );
    return result;
  } catch (err) {
    console.error(stack.output().slice(-4_000));
    throw err;
  } finally {
    await stack.stop();
  }
}
