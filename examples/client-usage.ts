/**
 * The examples of docs/client.md, type-checked by `npm run typecheck` (tsconfig includes
 * `examples/`; its `paths` map `dynein-serverless` to client/index.ts) and, in CI, by a consumer
 * project that installs the packed tarball (.ci/consumer-check.sh). Consumer code: it imports only
 * `dynein-serverless` and npm packages. Each section is a function, so importing this file runs
 * nothing.
 */
import { SQSClient } from '@aws-sdk/client-sqs';
import { fromIni } from '@aws-sdk/credential-providers';
import {
  AlreadyQueuedError,
  ConcurrentModificationError,
  DyneinClient,
  ForbiddenError,
  JobCancelledError,
  NotCancellableError,
  ScheduleNotFoundError,
  ThrottledError,
  UnrecoverableError,
  ValidationError,
  Worker,
} from 'dynein-serverless';
import { dyneinLambdaHandler } from 'dynein-serverless/lambda';

declare function sendReminder(invoiceId: string, signal?: AbortSignal): Promise<void>;
declare function invoiceExists(invoiceId: string): Promise<boolean>;

// --- SDK: schedule, read, cancel -------------------------------------------------------------

export async function sdk(): Promise<void> {
  const client = new DyneinClient({
    endpoint: 'https://abc123.execute-api.eu-west-1.amazonaws.com',
    region: 'eu-west-1',
    // credentials: omitted = the AWS default provider chain (env, SSO, profile, ECS, EC2...)
  });

  // In an hour. The client turns the delay into an absolute runAt and adds an idempotency key,
  // so a retried request (503, timeout, reset) names the same job: it is scheduled once.
  const job = await client.schedule('billing', { payload: { invoiceId: 'inv-42' }, delaySeconds: 3600 });
  console.log(job.jobId, job.state); // 'j1.billing....', 'SCHEDULED'

  // At a given time, with your own key (a retry of *your* request, e.g. after a crash, is deduplicated too).
  await client.schedule('billing', {
    payload: { invoiceId: 'inv-42' },
    runAt: new Date('2030-01-31T09:00:00Z'),
    idempotencyKey: 'reminder-inv-42',
  });

  const status = await client.get('billing', job.jobId);
  console.log(status.state); // SCHEDULED | ACQUIRED | QUEUED | CANCELLED

  try {
    await client.cancel('billing', job.jobId);
  } catch (err) {
    if (err instanceof AlreadyQueuedError || err instanceof NotCancellableError) {
      console.log('too late to cancel: the job is on its way to the queue');
    } else {
      throw err;
    }
  }
}

// --- SDK: batches, credentials, retries, errors ----------------------------------------------

export async function batchesAndErrors(): Promise<void> {
  const client = new DyneinClient({
    endpoint: 'https://abc123.execute-api.eu-west-1.amazonaws.com',
    region: 'eu-west-1',
    credentials: fromIni({ profile: 'billing' }),
    retry: { maxAttempts: 5, baseMs: 100, capMs: 5_000, maxElapsedMs: 30_000 },
  });

  const jobs = Array.from({ length: 1_000 }, (_, i) => ({ payload: { n: i }, delaySeconds: 60 + i }));
  const results = await client.scheduleBatch('billing', jobs, {
    onProgress: (done, total) => console.log(`${done}/${total}`),
  });
  for (const [i, r] of results.entries()) {
    if (!r.ok) console.error(`job ${i}: ${r.error.code}: ${r.error.message}`);
  }

  try {
    await client.schedule('billing', { payload: {}, runAt: 'next tuesday' });
  } catch (err) {
    if (err instanceof ValidationError) console.error(err.code, err.message, err.requestId);
    else if (err instanceof ForbiddenError) console.error('not allowed: check the role has grantSchedule for this tenant');
    else throw err;
  }

  // A tenant limited by maxSubmitsPerSecond: 429 Throttled is retried after Retry-After plus jitter.
  try {
    await client.schedule('billing', { payload: { invoice: 42 }, delaySeconds: 60, priority: 8 });
  } catch (err) {
    if (err instanceof ThrottledError && err.code === 'Throttled') console.error(`still throttled after ${err.attempts} attempts`);
    else throw err;
  }
}

// --- SDK: recurring schedules ---------------------------------------------------------------

export async function recurring(client: DyneinClient): Promise<void> {
  // Every weekday at 09:00 in Paris, from March on. 201 creates it, 200 replaces it (same call).
  const s = await client.putSchedule('billing', 'weekday-digest', {
    expression: 'cron(0 9 ? * MON-FRI *)',
    timezone: 'Europe/Paris',
    startAt: new Date('2030-03-01T00:00:00Z'),
    payload: { report: 'digest' },
  });
  console.log(s.created, s.state, s.nextRuns); // true 'ENABLED' ['2030-03-01T08:00:00.000Z', ...] (5 runs, UTC)

  // Check an expression without storing anything: up to 100 next runs.
  const preview = await client.putSchedule('billing', 'month-end', { expression: 'cron(0 18 L * ? *)' }, { dryRun: true, count: 12 });
  console.log(preview.nextRuns.length); // 12

  await client.pauseSchedule('billing', 'weekday-digest'); // occurrences due > 5 s from now are cancelled
  await client.resumeSchedule('billing', 'weekday-digest'); // from now on: what fell while paused never runs

  for await (const schedule of client.schedules('billing')) {
    console.log(schedule.name, schedule.expression, schedule.nextRuns[0] ?? '(none)');
  }
  const page = await client.listSchedules('billing', { limit: 20 }); // or one page at a time
  if (page.nextCursor) await client.listSchedules('billing', { limit: 20, cursor: page.nextCursor });

  try {
    await client.deleteSchedule('billing', 'weekday-digest');
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) console.log('already gone');
    else if (err instanceof ConcurrentModificationError) console.log('changed meanwhile: read it again and decide');
    else throw err;
  }
}

// --- Worker: occurrences of a schedule --------------------------------------------------------

export async function recurringWorker(): Promise<void> {
  const w = new Worker({
    queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/billing-queue',
    handler: async (job) => {
      if (job.schedule === 'weekday-digest') {
        console.log(`digest occurrence due ${job.runAt}`); // runAt = the occurrence's time
      }
    },
  });
  await w.run();
}

// --- Worker ---------------------------------------------------------------------------------

export async function worker(): Promise<void> {
  const w = new Worker<{ invoiceId: string }>({
    queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/billing-queue',
    deadLetterQueueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/billing-dlq',
    concurrency: 10,
    visibilityTimeoutSeconds: 30, // renewed by the heartbeat while a handler runs
    backoff: { baseMs: 10_000, capMs: 900_000 }, // visibility after a failure, by receive count
    shutdownGraceMs: 25_000, // SIGTERM: finish within this, then release the rest
    handler: async (job, { signal, receiveCount, latenessMs }) => {
      console.log(`${job.jobId} due ${job.runAt}, ${latenessMs} ms late, attempt ${receiveCount}`);
      if (!(await invoiceExists(job.payload.invoiceId))) {
        throw new UnrecoverableError(`invoice ${job.payload.invoiceId} is gone`); // straight to the DLQ
      }
      await sendReminder(job.payload.invoiceId, signal); // throw = retry later
    },
    onEvent: (e) => {
      if (e.type === 'failed') console.warn(`${e.job.jobId} failed, retry in ${e.retryInSeconds} s`);
    },
  });
  await w.run(); // until SIGTERM / SIGINT (or w.stop())
}

// --- Worker: cancel a running job -------------------------------------------------------------

declare function copyAll(files: string[], signal: AbortSignal): Promise<void>;
declare function removePartialCopy(files: string[]): Promise<void>;

export async function cancellableWorker(client: DyneinClient): Promise<void> {
  const w = new Worker<{ files: string[] }>({
    queueUrl: 'https://sqs.eu-west-1.amazonaws.com/123456789012/billing-queue',
    client, // reports outcomes (history on, workflow jobs) and sends the heartbeats
    handler: async (job, { signal }) => {
      try {
        await copyAll(job.payload.files, signal); // gives up once the signal aborts
      } finally {
        if (signal.reason instanceof JobCancelledError) await removePartialCopy(job.payload.files); // asked to stop
      }
    },
    onEvent: (e) => {
      if (e.type === 'cancelled') console.log(`${e.job.jobId} stopped on request after ${e.durationMs} ms`);
    },
  });
  await w.run();
}

// --- Lambda consuming a tenant queue ----------------------------------------------------------

const sqs = new SQSClient({});

/** The function's handler; its event source mapping has `reportBatchItemFailures: true`. */
export const handler = dyneinLambdaHandler<{ invoiceId: string }>(
  async (job, { signal }) => {
    await sendReminder(job.payload.invoiceId, signal);
  },
  {
    sqs, // optional: failed records get a backoff visibility, unrecoverable ones go to the DLQ
    deadLetterQueueUrl: process.env.DLQ_URL,
  },
);
