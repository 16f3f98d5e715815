/**
 * Phase 17: bulk cancel (docs/flow-control.md). `jobs` tagged jobs and a hundredth as many
 * untagged ones, all due `dueInMs` after the submits end, go through the inbound queue and ingest
 * into the table (on the emulators, ingest running; the dispatchers from the operation's end, long
 * before the jobs' due time less the lookahead); once all are stored,
 * `POST .../jobs/cancel {"tag"}`. Measured: the seconds from the request until the operation is
 * DONE with every tagged job counted, its counts, and, after every job's due time with the
 * dispatchers running, how many tagged jobs were delivered anyway (target 0) and whether the
 * untagged ones all were.
 */
import { cancelHandler } from '../lambdas/runtime/handlers.js';
import type { Emulators } from '../test/support/emulators.js';
import { consume, createSystem, httpEvent, runAllGroups, submitJobs, waitForEmptyQueue } from '../test/support/system.js';
import { progress, sleep } from './support.js';

export interface BulkCancelShape {
  readonly jobs: number;
  /** Due time after the submits end; the cancel must finish within it. */
  readonly dueInMs: number;
}

export interface BulkCancelResult {
  /** Tagged jobs submitted (all accepted before the request). */
  jobs: number;
  matched: number;
  cancelled: number;
  alreadyQueued: number;
  notCancellable: number;
  /** Tagged jobs delivered after all (target 0). */
  delivered: number;
  /** From the request until DONE with every tagged job counted. */
  seconds: number;
  /** From the first submit until ingest had stored every job (the cancel starts then). */
  storedSeconds: number;
  /** Untagged jobs beside them, due at the same time: the dispatchers' control. */
  untaggedJobs: number;
  untaggedDelivered: number;
}

export async function runBulkCancel(em: Emulators, shape: BulkCancelShape): Promise<BulkCancelResult> {
  const sys = await createSystem(em);
  const ingest = sys.startIngest();
  let dispatch: { stop(): Promise<void> } | undefined;
  const consumer = consume(em.sqs, sys.tenants.demo!.url);
  try {
    const untaggedJobs = Math.max(10, Math.round(shape.jobs / 100));
    // Due a fixed time after the submits end: every job shares that due time (set once the submits are sized).
    const submitStart = Date.now();
    // Submits and their ingest take about 3 ms a job on the emulators.
    const estimateMs = Math.max(5_000, shape.jobs * 4);
    const runAt = new Date(submitStart + estimateMs + shape.dueInMs).toISOString();
    progress(`bulkCancel: submitting ${shape.jobs.toLocaleString('en-US')} tagged and ${untaggedJobs} untagged jobs due at ${runAt}`);
    const tagged = await submitJobs(
      sys,
      'demo',
      Array.from({ length: shape.jobs }, (_, i) => ({ payload: { i }, runAt, tags: ['bench-cancel'] })),
    );
    const untagged = await submitJobs(
      sys,
      'demo',
      Array.from({ length: untaggedJobs }, (_, i) => ({ payload: { i }, runAt, tags: ['bench-keep'] })),
    );
    const dueMs = Date.parse(runAt);
    // Stored first: the figure is the operation's own pace over the table, not ingest's over a
    // backlog (ingest settles jobs still in the inbound queue as it writes them: the tests cover it).
    await waitForEmptyQueue(em.sqs, sys.inboundUrl, Math.max(60_000, dueMs - Date.now()));
    const storedS = Math.round((Date.now() - submitStart) / 100) / 10;
    progress(`bulkCancel: submitted and stored in ${storedS} s`);
    if (Date.now() + 5_000 > dueMs) throw new Error(`the submits and their ingest took ${storedS} s: too long for jobs due at ${runAt}`);

    const handler = cancelHandler(sys.w);
    const started = Date.now();
    const res = await handler(
      httpEvent('POST', '/v1/tenants/demo/jobs/cancel', {
        pathParameters: { tenant: 'demo' },
        body: JSON.stringify({ tag: 'bench-cancel' }),
      }),
    );
    if (res.statusCode !== 202) throw new Error(`POST .../jobs/cancel answered ${res.statusCode}: ${res.body}`);
    const { operationId } = JSON.parse(res.body) as { operationId: string };
    let op: Record<string, number | string> = {};
    for (let last = 0; ;) {
      const got = await handler(
        httpEvent('GET', `/v1/tenants/demo/operations/${operationId}`, { pathParameters: { tenant: 'demo', operationId } }),
      );
      op = JSON.parse(got.body) as typeof op;
      if (op.state === 'DONE' && op.matched === tagged.length) break;
      if (Date.now() >= dueMs) break;
      if (Date.now() - last > 2_000) {
        progress(`bulkCancel: ${op.state}, matched ${op.matched}, cancelled ${op.cancelled}`);
        last = Date.now();
      }
      await sleep(100);
    }
    const seconds = Math.round((Date.now() - started) / 100) / 10;
    progress(`bulkCancel: ${op.state} in ${seconds} s (matched ${op.matched}, cancelled ${op.cancelled}); waiting past the due time`);
    // The dispatchers start now, well before any job's due time less the lookahead (when the
    // first of them could read one): on the emulators they would share the one dynalite process
    // with the operation's writes, which on AWS they never wait for.
    dispatch = runAllGroups(sys.w.dispatch);
    // Every job's due time, then the untagged ones delivered (the dispatchers worked), then a second more.
    await sleep(dueMs - Date.now() + 2_000);
    await consumer.waitFor((d) => untagged.every((u) => d.some((x) => x.jobId === u.jobId)), 60_000).catch(() => undefined);
    await sleep(1_000);
    const received = new Set(consumer.deliveries.map((d) => d.jobId));
    return {
      jobs: tagged.length,
      matched: Number(op.matched),
      cancelled: Number(op.cancelled),
      alreadyQueued: Number(op.alreadyQueued),
      notCancellable: Number(op.notCancellable),
      delivered: tagged.filter((t) => received.has(t.jobId)).length,
      seconds,
      storedSeconds: storedS,
      untaggedJobs,
      untaggedDelivered: untagged.filter((u) => received.has(u.jobId)).length,
    };
  } finally {
    await consumer.stop();
    await dispatch?.stop();
    await ingest.stop();
  }
}
