/** `dynein redrive`: moves the tenant's DLQ messages back to its queue, straight through SQS. */
import { noPositionals } from '../args.js';
import type { Command, Ctx } from '../command.js';
import { UsageError } from '../errors.js';
import { HELP, QUEUES, TENANT, WHERE } from '../flags.js';
import { progressLine } from '../progress.js';
import { redrive } from '../target.js';

export const redriveCommand: Command = {
  brief: "move the tenant's DLQ messages back to its queue",
  usage: '--tenant <name> [options]',
  summary: "Move the tenant's dead-letter queue messages back to its queue (StartMessageMoveTask where SQS has it).",
  targeted: true,
  flags: { ...TENANT, ...QUEUES, ...WHERE, ...HELP },
  run: runRedrive,
};

async function runRedrive({ rest, target: resolve, io }: Ctx): Promise<number> {
  noPositionals('redrive', rest);
  const target = resolve();
  if (!target.queueUrl || !target.dlqUrl) throw new UsageError('redrive needs --queue-url and --dlq-url with --endpoint');
  const line = progressLine(io.progress, () => io.err(''), 'moved', 'messages');
  const { moved, method } = await redrive(target.sqs(), target.queueUrl, target.dlqUrl, io.err, (n, total) =>
    line.update(n, total),
  ).finally(() => line.end());
  io.out(
    `moved ${moved} message${moved === 1 ? '' : 's'} from the DLQ back to the queue${method === 'copy' ? ' (receive, send, delete: this SQS has no StartMessageMoveTask)' : ''}`,
  );
  return 0;
}
