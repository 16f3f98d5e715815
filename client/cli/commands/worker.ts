/** `dynein worker`: consumes the tenant's queue, one line per delivery. */
import { noPositionals } from '../args.js';
import { client, type Command, type Ctx } from '../command.js';
import { UsageError, oneLine } from '../errors.js';
import { HELP, QUEUES, TENANT, WHERE } from '../flags.js';
import { Worker } from '../../worker.js';

export const workerCommand: Command = {
  brief: "consume the tenant's queue, one line per delivery",
  usage: '--tenant <name> [options]',
  summary: "Consume the tenant's queue: print one line per delivery and delete it, until Ctrl-C or SIGTERM.",
  targeted: true,
  flags: {
    ...TENANT,
    concurrency: { type: 'string', arg: '<n>', help: 'jobs handled at once (default 10)' },
    'wait-time': { type: 'string', arg: '<seconds>', help: 'long-poll wait, 0 to 20 (default 20)' },
    json: { type: 'boolean', help: 'one JSON line per delivery, with latenessMs and receiveCount' },
    ...QUEUES,
    ...WHERE,
    ...HELP,
  },
  run: runWorker,
};

async function runWorker({ values, str, rest, target: resolve, io }: Ctx): Promise<number> {
  noPositionals('worker', rest);
  const concurrency = str('concurrency') === undefined ? 10 : Number(str('concurrency'));
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new UsageError(`--concurrency must be a whole number ≥ 1, got '${str('concurrency')}'`);
  const waitTimeSeconds = str('wait-time') === undefined ? 20 : Number(str('wait-time'));
  if (!Number.isInteger(waitTimeSeconds) || waitTimeSeconds < 0 || waitTimeSeconds > 20)
    throw new UsageError(`--wait-time must be a whole number of seconds from 0 to 20, got '${str('wait-time')}'`);
  const target = resolve();
  if (!target.queueUrl) throw new UsageError('worker needs --queue-url with --endpoint (the tenant queue)');
  const worker = new Worker({
    queueUrl: target.queueUrl,
    sqs: target.sqs(),
    concurrency,
    waitTimeSeconds,
    ...(target.dlqUrl ? { deadLetterQueueUrl: target.dlqUrl } : {}),
    client: client(target), // reports outcomes for a tenant with history on (docs/history.md)
    handler: (job, ctx) => {
      const receivedAt = new Date(ctx.receivedAt).toISOString();
      if (values.json) {
        io.out(
          JSON.stringify({
            jobId: job.jobId,
            tenant: job.tenant,
            runAt: job.runAt,
            ...(job.schedule !== undefined ? { schedule: job.schedule } : {}),
            receivedAt,
            latenessMs: ctx.latenessMs,
            receiveCount: ctx.receiveCount,
            payload: job.payload,
          }),
        );
      } else {
        io.out(
          `${receivedAt}  ${job.jobId}  runAt ${job.runAt}${job.schedule !== undefined ? `  schedule ${job.schedule}` : ''}  late ${ctx.latenessMs} ms  receive #${ctx.receiveCount}  ${JSON.stringify(job.payload)}`,
        );
      }
    },
    onEvent: (e) => {
      if (e.type === 'error') io.err(`dynein worker: ${e.operation}: ${oneLine(e.error)}`);
      if (e.type === 'dead') io.err(`dynein worker: message ${e.messageId} is not a Dynein job (${oneLine(e.error)}): moved to the DLQ`);
    },
  });
  if (!values.json) io.err(`dynein worker: consuming ${target.queueUrl} (Ctrl-C stops)`);
  const stopping = () =>
    !values.json &&
    io.err(
      `dynein worker: stopping after the receive under way (up to ${waitTimeSeconds} s) and ${worker.active} running job(s); Ctrl-C again quits at once`,
    );
  process.once('SIGINT', stopping);
  process.once('SIGTERM', stopping);
  await worker.run();
  process.off('SIGINT', stopping);
  process.off('SIGTERM', stopping);
  return 0;
}
