/**
 * Phase 19: debounce (docs/flow-control.md#debounce, issue #26). `keys` debounce keys each take
 * `submits` submits, in rounds: round r submits `{key, n: r}` for every key, through
 * `POST .../jobs/batch` in process (8 requests in flight, up to 100 jobs each), each job
 * `{"payload", "debounce": {"key", "periodSeconds"}}`; a round starts when the one before it has
 * been answered, so a key's submits arrive in order, about a round apart. With the dispatchers
 * running on the emulators (the whole time: a key whose job falls due between two of its submits
 * is delivered, and its next submit starts a new job, as the contract allows), a consumer drains
 * the tenant queue until every job a reply named is delivered (or a timeout), then a little longer
 * for stray duplicates.
 *
 * Measured: the deliveries (every message, duplicates included; target: one per key), how many
 * carry their key's last payload (target: all), the jobs the replies named (more than the keys
 * when a key's job fell due between two of its submits: `splitKeys`), deliveries before their
 * job's last runAt (early, target 0), lateness after it, the largest gap between two submits of a
 * key (against the period), and the submits' pace and DynamoDB requests per submit.
 */
import { RequestCounter } from '../adapters/requestCounter.js';
import { submitHandler } from '../lambdas/runtime/handlers.js';
import type { Emulators } from '../test/support/emulators.js';
import { consume, createSystem, httpEvent, runAllGroups, type Delivery } from '../test/support/system.js';
import { progress, sleep, summarize } from './support.js';

export interface DebounceShape {
  readonly keys: number;
  /** Submits per key (one a round). */
  readonly submits: number;
  /** Every submit's debounce.periodSeconds: longer than a round takes, so that a key's job stays pending between its submits. */
  readonly periodSeconds: number;
}

export interface DebounceResult {
  keys: number;
  /** Submits per key. */
  submitsPerKey: number;
  /** Submits accepted (keys × submitsPerKey when none failed). */
  submits: number;
  /** Submits answered with an error (the first one's message in `firstError`). */
  failed: number;
  firstError?: string;
  periodSeconds: number;
  /** Replies that started a job (201, `debounced: false`); the others replaced the key's pending one. */
  started: number;
  /** Distinct jobs the replies named (target: keys). */
  jobs: number;
  /** Keys whose submits named more than one job: a job delivered before the key's last submit (target 0). */
  splitKeys: number;
  /** Every message received, duplicates included (target: keys). */
  deliveries: number;
  /** Deliveries whose payload is the last payload accepted for their key (target: deliveries). */
  lastPayload: number;
  /** Deliveries of a job after its first. */
  duplicates: number;
  /** Jobs named by a reply and not delivered within the timeout. */
  undelivered: number;
  /** Deliveries received before their job's last runAt (target 0). */
  early: number;
  /** Receive − the job's last runAt, ms. */
  latenessMs: { p50Ms: number; p95Ms: number; maxMs: number };
  /** The largest span between the runAts of two consecutive submits of a key (their server times): a job falls due between them when it exceeds the period. */
  maxGapSeconds: number;
  /** From the first submit until the last reply. */
  seconds: number;
  submitsPerSecond: number;
  /** DynamoDB requests the submits made, per submit, by operation and in all. */
  dynamodbRequestsPerSubmit: { total: number; byOperation: Record<string, number> };
  /** How long after the last job's runAt the consumer waited for a job not yet delivered. */
  timeoutSeconds: number;
}

/** Batches in flight at once during a round. */
const CONCURRENCY = 8;
/** The most jobs a batch request holds (the route's limit). */
const MAX_BATCH = 100;

interface KeyState {
  readonly key: string;
  /** Job ids the replies named, in order. */
  readonly jobIds: string[];
  /** The last accepted submit's n. */
  lastN: number;
  /** The runAt of the key's last accepted submit, ms. */
  lastRunAtMs: number;
  maxGapMs: number;
}

type BatchResult = { jobId: string; runAt: string; debounced?: boolean } | { error: { code: string; message: string } };

/** What the replies said: each key's submits, each job's last runAt. */
class Replies {
  readonly keys: KeyState[];
  /** A job's key and last runAt (ms). */
  readonly jobs = new Map<string, { key: KeyState; lastRunAtMs: number }>();
  accepted = 0;
  failed = 0;
  started = 0;
  firstError: string | undefined;

  constructor(keys: number) {
    this.keys = Array.from({ length: keys }, (_, i) => ({ key: `key-${i}`, jobIds: [], lastN: -1, lastRunAtMs: 0, maxGapMs: 0 }));
  }

  record(k: KeyState, round: number, reply: BatchResult): void {
    if ('error' in reply) {
      this.failed++;
      this.firstError ??= `${reply.error.code}: ${reply.error.message}`;
      return;
    }
    this.accepted++;
    if (reply.debounced === false) this.started++;
    const runAtMs = Date.parse(reply.runAt);
    if (k.lastN >= 0) k.maxGapMs = Math.max(k.maxGapMs, runAtMs - k.lastRunAtMs);
    if (k.jobIds.at(-1) !== reply.jobId) k.jobIds.push(reply.jobId);
    k.lastN = round;
    k.lastRunAtMs = runAtMs;
    this.jobs.set(reply.jobId, { key: k, lastRunAtMs: runAtMs });
  }
}

export async function runDebounce(em: Emulators, shape: DebounceShape): Promise<DebounceResult> {
  const sys = await createSystem(em, { tenants: ['demo'] });
  // The submits' DynamoDB requests, apart from the dispatchers'.
  const counter = new RequestCounter();
  const submit = submitHandler(await sys.another({ dynamo: em.newClients(counter).dynamo }));
  const consumer = consume(em.sqs, sys.tenants.demo!.url);
  const dispatch = runAllGroups(sys.w.dispatch);
  try {
    const replies = new Replies(shape.keys);
    progress(
      `debounce: ${shape.keys.toLocaleString('en-US')} keys × ${shape.submits} submits (period ${shape.periodSeconds} s), in rounds through the batch route`,
    );
    const submitStart = Date.now();
    for (let round = 0; round < shape.submits; round++) {
      const roundStart = Date.now();
      await submitRound(submit, replies, round, shape.periodSeconds);
      if (round === 0 || round === shape.submits - 1 || Date.now() - roundStart > 2_000 || round % 5 === 4)
        progress(
          `debounce: round ${round + 1}/${shape.submits} answered in ${((Date.now() - roundStart) / 1000).toFixed(1)} s (${replies.accepted.toLocaleString('en-US')} accepted, ${replies.failed} failed, ${replies.jobs.size.toLocaleString('en-US')} jobs so far)`,
        );
    }
    const submitMs = Math.max(1, Date.now() - submitStart);
    const requests = counter.snapshot();

    // Every job delivered, or the timeout after the last one's due time; then a little longer for strays.
    const { jobs } = replies;
    const lastDueMs = Math.max(0, ...[...jobs.values()].map((j) => j.lastRunAtMs));
    const timeoutMs = Math.max(30_000, shape.keys * 20);
    progress(
      `debounce: submitted in ${(submitMs / 1000).toFixed(1)} s; waiting for ${jobs.size.toLocaleString('en-US')} jobs (the last due in ${((lastDueMs - Date.now()) / 1000).toFixed(1)} s)`,
    );
    for (let last = Date.now(); ; await sleep(200)) {
      const got = new Set(consumer.deliveries.map((d) => d.jobId));
      if ([...jobs.keys()].every((id) => got.has(id)) || Date.now() > lastDueMs + timeoutMs) break;
      if (Date.now() - last > 5_000) {
        progress(`debounce: ${got.size.toLocaleString('en-US')} of ${jobs.size.toLocaleString('en-US')} jobs delivered`);
        last = Date.now();
      }
    }
    await sleep(2_000);

    const dynamodb = Object.entries(requests).filter(([op]) => op.startsWith('DynamoDB.'));
    const submits = replies.accepted + replies.failed;
    const perSubmit = (n: number) => (submits > 0 ? +(n / submits).toFixed(2) : 0);
    return {
      keys: shape.keys,
      submitsPerKey: shape.submits,
      submits: replies.accepted,
      failed: replies.failed,
      ...(replies.firstError !== undefined ? { firstError: replies.firstError } : {}),
      periodSeconds: shape.periodSeconds,
      started: replies.started,
      jobs: jobs.size,
      splitKeys: replies.keys.filter((k) => k.jobIds.length > 1).length,
      ...countDeliveries(consumer.deliveries, replies),
      maxGapSeconds: Math.round(Math.max(0, ...replies.keys.map((k) => k.maxGapMs)) / 100) / 10,
      seconds: Math.round(submitMs / 100) / 10,
      submitsPerSecond: Math.round((submits / submitMs) * 1000),
      dynamodbRequestsPerSubmit: {
        total: perSubmit(dynamodb.reduce((n, [, v]) => n + v, 0)),
        byOperation: Object.fromEntries(dynamodb.map(([op, v]) => [op.slice('DynamoDB.'.length), perSubmit(v)])),
      },
      timeoutSeconds: Math.round(timeoutMs / 1000),
    };
  } finally {
    await consumer.stop();
    await dispatch.stop();
  }
}

/** Round `round`: `{key, n: round}` for every key, the keys split over the batch requests in flight. */
async function submitRound(
  submit: ReturnType<typeof submitHandler>,
  replies: Replies,
  round: number,
  periodSeconds: number,
): Promise<void> {
  const { keys } = replies;
  // A batch is answered one submit after another: the round's keys are spread over the requests in flight.
  const size = Math.min(MAX_BATCH, Math.ceil(keys.length / CONCURRENCY));
  const batches: KeyState[][] = [];
  for (let i = 0; i < keys.length; i += size) batches.push(keys.slice(i, i + size));
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(CONCURRENCY, batches.length) }, async () => {
      while (next < batches.length) {
        const batch = batches[next++]!;
        const body = JSON.stringify({
          jobs: batch.map((k) => ({ payload: { key: k.key, n: round }, debounce: { key: k.key, periodSeconds } })),
        });
        const res = await submit(httpEvent('POST', '/v1/tenants/demo/jobs/batch', { pathParameters: { tenant: 'demo' }, body }));
        if (res.statusCode !== 200) throw new Error(`POST .../jobs/batch answered ${res.statusCode}: ${res.body}`);
        const { results } = JSON.parse(res.body) as { results: BatchResult[] };
        results.forEach((reply, i) => replies.record(batch[i]!, round, reply));
      }
    }),
  );
}

/** The deliveries against what the replies said: every message counted, duplicates included. */
function countDeliveries(
  all: readonly Delivery[],
  replies: Replies,
): Pick<DebounceResult, 'deliveries' | 'lastPayload' | 'duplicates' | 'undelivered' | 'early' | 'latenessMs'> {
  const seen = new Set<string>();
  let duplicates = 0;
  let early = 0;
  let lastPayload = 0;
  const lateness: number[] = [];
  for (const d of all) {
    const job = replies.jobs.get(d.jobId);
    if (!job) continue; // counted in deliveries below, matched by no reply
    if (seen.has(d.jobId)) duplicates++;
    seen.add(d.jobId);
    if (d.receivedAt < job.lastRunAtMs) early++;
    lateness.push(d.receivedAt - job.lastRunAtMs);
    const p = d.payload as { key?: unknown; n?: unknown } | undefined;
    if (p?.key === job.key.key && p.n === job.key.lastN) lastPayload++;
  }
  const l = summarize(lateness);
  return {
    deliveries: all.length,
    lastPayload,
    duplicates,
    undelivered: [...replies.jobs.keys()].filter((id) => !seen.has(id)).length,
    early,
    latenessMs: { p50Ms: l.p50Ms, p95Ms: l.p95Ms, maxMs: l.maxMs },
  };
}
