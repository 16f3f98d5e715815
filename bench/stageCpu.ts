/**
 * CPU per job per stage, for the capacity model (docs/capacity.md): each stage's handler calls run
 * alone in this process, one stage after the other, over dynalite and fauxqs (each in a process of
 * its own, so the storage's CPU is not counted), and `process.cpuUsage()` is read around them.
 *
 * - submit: the submit handler (API Gateway's event in, the inbound SendMessageBatch out), batch
 *   requests of 100 jobs and single POSTs, each job due an hour ahead (the table path);
 * - ingest: the ingest handler on the inbound messages those submits sent, 10 messages per
 *   invocation (as the event source mapping delivers them), receiving them from the queue not counted;
 * - plan: the tick handler (one execution's plan) over a table holding a minute of rows coming due;
 * - acquire: the conditional acquire alone (the store call a round makes per row), 256 in flight;
 * - dispatch: a whole dispatch round per job (due-range reads, acquire, send, delivered marker),
 *   a burst of rows already due over every group; `release` is the round less the acquire.
 *
 * Memory is not per job: submit and ingest hold one request's jobs, and a dispatch round holds
 * the rows it tracks, which its cap bounds whatever the backlog (phase 7 measures the RSS).
 *
 * Figures are this machine's (Node 20 on a shared EPYC core): a Lambda's vCPU share at its memory
 * setting scales them (docs/capacity.md).
 */
import { ReceiveMessageCommand, type Message } from '@aws-sdk/client-sqs';
import type { SQSEvent } from 'aws-lambda';
import { forEachLimit } from '../core/util/backoff.js';
import { ingestHandler, submitHandler, tickHandler } from '../lambdas/runtime/handlers.js';
import { toRecord } from '../local/sqsEventSource.js';
import type { Emulators } from '../test/support/emulators.js';
import { createSystem, httpEvent } from '../test/support/system.js';
import { burst, writeRows } from './dispatch.js';
import { progress, realisticPayload } from './support.js';

export interface StageCpu {
  /** CPU µs per job (plan: per execution, and per job at 1,000 jobs/s with an execution a minute). */
  cpuUsPerJob: {
    submitBatch: number;
    submitSingle: number;
    ingest: number;
    planPerExecution: number;
    planAt1kPerSec: number;
    acquire: number;
    dispatch: number;
    release: number;
  };
  jobs: number;
}

const cpuUs = (c: NodeJS.CpuUsage) => c.user + c.system;

async function timed<T>(fn: () => Promise<T>): Promise<{ out: T; us: number }> {
  const c0 = process.cpuUsage();
  const out = await fn();
  return { out, us: cpuUs(process.cpuUsage(c0)) };
}

export async function runStageCpu(em: Emulators, opts: { jobs: number }): Promise<StageCpu> {
  const n = Math.max(100, Math.round(opts.jobs / 100) * 100);
  const sys = await createSystem(em, { tenants: ['demo'] });
  const w = sys.w;
  const payloads = Array.from({ length: 50 }, (_, i) => JSON.stringify(realisticPayload(i)));
  const submit = submitHandler(w);
  const ingest = ingestHandler(w);
  const dueAhead = () => new Date(Date.now() + 3_600_000 + Math.floor(Math.random() * 60_000)).toISOString();
  const call = async (path: string, body: string) => {
    const res = await submit(
      httpEvent('POST', path, {
        body,
        pathParameters: { tenant: 'demo' },
        routeKey: path.endsWith('/batch') ? 'POST /v1/tenants/{tenant}/jobs/batch' : 'POST /v1/tenants/{tenant}/jobs',
      }),
    );
    if (res.statusCode !== 200 && res.statusCode !== 201) throw new Error(`submit answered ${res.statusCode}: ${res.body}`);
  };
  // Warm-up: the first calls load code and open connections.
  for (let i = 0; i < 3; i++)
    await call('/v1/tenants/demo/jobs/batch', `{"jobs":[${payloads.map((p) => `{"payload":${p},"runAt":"${dueAhead()}"}`).join(',')}]}`);

  progress(`stage CPU: submit, ${n} jobs in batches of 100 and ${n / 10} single POSTs`);
  const batches = Array.from(
    { length: n / 100 },
    (_, b) =>
      `{"jobs":[${Array.from({ length: 100 }, (_, k) => `{"payload":${payloads[(b + k) % 50]},"runAt":"${dueAhead()}"}`).join(',')}]}`,
  );
  const batchCpu = await timed(() => forEachLimit(batches, 4, (body) => call('/v1/tenants/demo/jobs/batch', body)));
  const singles = Array.from({ length: n / 10 }, (_, i) => `{"payload":${payloads[i % 50]},"runAt":"${dueAhead()}"}`);
  const singleCpu = await timed(() => forEachLimit(singles, 8, (body) => call('/v1/tenants/demo/jobs', body)));

  // Every inbound message, received (not counted), then ingested 10 messages per invocation.
  const messages: Message[] = [];
  const expected = 3 + batches.length + singles.length;
  for (let empty = 0; messages.length < expected && empty < 3;) {
    const res = await em.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: sys.inboundUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageAttributeNames: ['All'],
        AttributeNames: ['All'],
      }),
    );
    if (!res.Messages?.length) empty++;
    messages.push(...(res.Messages ?? []));
  }
  const arn = 'arn:aws:sqs:us-east-1:000000000000:inbound';
  const events: SQSEvent[] = [];
  for (let i = 0; i < messages.length; i += 10) events.push({ Records: messages.slice(i, i + 10).map((m) => toRecord(m, arn)) });
  const ingestedJobs = n + 3 * payloads.length + singles.length;
  progress(`stage CPU: ingest, ${messages.length} inbound messages (${ingestedJobs} jobs) in ${events.length} invocations`);
  const ingestCpu = await timed(() =>
    forEachLimit(events, 2, async (e) => {
      const res = await ingest(e);
      if (res.batchItemFailures.length > 0) throw new Error(`ingest failed ${res.batchItemFailures.length} message(s)`);
    }),
  );

  // The plan over a minute of rows coming due (1,000 jobs/s for 60 s would be 60,000: the sample stops at its limit).
  const rows = Math.min(n, 6_000);
  await writeRows(em, sys, rows, (i) => Date.now() + 10_000 + Math.floor((i / rows) * 60_000), { prefix: 'p' });
  const tick = tickHandler({ store: w.store, settings: w.config.settings, clock: w.dispatch.clock });
  const plan = (i: number) => tick({ executionName: `cpu-${i}`, executionStartTime: new Date().toISOString() });
  await plan(-1);
  const plans = 5;
  const planCpu = await timed(async () => {
    for (let i = 0; i < plans; i++) await plan(i);
  });

  // The conditional acquire alone, on rows of its own (far ahead: no round touches them).
  const acquireRows = await writeRows(em, sys, n, () => Date.now() + 86_400_000, { prefix: 'q' });
  const acquireCpu = await timed(() =>
    forEachLimit(acquireRows, 256, async (k) => {
      const now = Date.now();
      if (!(await w.store.acquire(k, now, now + 30_000))) throw new Error('stage CPU: acquire failed');
    }),
  );

  // A whole round per job: a burst over every group on a table of its own (no rows but the burst's).
  progress(`stage CPU: a dispatch burst of ${n} rows`);
  const dsys = await createSystem(em, { tenants: ['demo'] });
  await burst(em, dsys, Math.min(200, n), 'x');
  const b = await burst(em, dsys, n, 'y');
  const acquire = Math.round(acquireCpu.us / n);
  const planPerExecution = Math.round(planCpu.us / plans);
  return {
    cpuUsPerJob: {
      submitBatch: Math.round(batchCpu.us / n),
      submitSingle: Math.round(singleCpu.us / singles.length),
      ingest: Math.round(ingestCpu.us / ingestedJobs),
      planPerExecution,
      planAt1kPerSec: +(planPerExecution / 60_000).toFixed(3),
      acquire,
      dispatch: b.cpuUsPerJob,
      release: Math.max(0, b.cpuUsPerJob - acquire),
    },
    jobs: n,
  };
}
