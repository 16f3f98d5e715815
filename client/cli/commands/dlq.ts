/** `dynein dlq ...`: the tenant's dead-letter queue through the API (peek, redrive, delete). */
import { cutText } from '../../../core/util/index.js';
import type { DeadLetterMoveTask } from '../../apiTypes.js';
import type { DyneinClient } from '../../client.js';
import { noPositionals } from '../args.js';
import { client, type Ctx, type Group } from '../command.js';
import { UsageError } from '../errors.js';
import { HELP, JSON_OUT, TENANT, WHERE } from '../flags.js';
import type { Io } from '../output.js';
import { progressLine } from '../progress.js';

export const dlqCommand: Group = {
  brief: "the tenant's dead-letter queue through the API: peek, redrive, delete",
  summary:
    "The tenant's dead-letter queue through the API (the dlq routes; IAM: DyneinTenant.grantDeadLetters): peek at its\n" +
    'messages, move all or some back to the queue, delete some. Messages are named by the handles peek prints.',
  subcommands: {
    peek: {
      brief: 'print up to --max messages of the DLQ, leaving them there',
      usage: '--tenant <name> [--max <n>] [options]',
      summary:
        'Print up to --max (1 to 10, default 10) messages of the DLQ, leaving them there: handle, job id and runAt (Dynein\n' +
        'deliveries), receive count, first sent, first failed attempt, the worker error, and the body. Each peek counts\n' +
        "in the messages' receive counts.",
      targeted: true,
      flags: {
        ...TENANT,
        max: { type: 'string', arg: '<n>', help: 'at most n messages, 1 to 10 (default 10)' },
        json: { type: 'boolean', help: 'print the reply {"messages": [...], "approximateDepth"} as one JSON line' },
        ...WHERE,
        ...HELP,
      },
      run: runPeek,
    },
    redrive: {
      brief: 'move messages back to the queue: --all, or those named by handles',
      usage: '--tenant <name> (--all | <handle>...) [options]',
      summary:
        'Move messages of the DLQ back to the tenant queue: --all moves every message (on AWS a message move task:\n' +
        'the command waits for it, with its progress on a terminal, unless --no-wait), or name messages by the handles\n' +
        '`dynein dlq peek` printed (at most 100).',
      targeted: true,
      flags: {
        ...TENANT,
        all: { type: 'boolean', help: 'every message of the DLQ' },
        'no-wait': { type: 'boolean', help: 'with --all on AWS: return once the move task started, without waiting for it' },
        ...JSON_OUT,
        ...WHERE,
        ...HELP,
      },
      run: runRedrive,
    },
    delete: {
      brief: 'delete messages named by handles',
      usage: '--tenant <name> <handle>... [options]',
      summary: 'Delete messages of the DLQ named by the handles `dynein dlq peek` printed (at most 100).',
      targeted: true,
      flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
      run: runDelete,
    },
  },
};

async function runPeek({ values, str, rest, target, tenant, io }: Ctx): Promise<number> {
  noPositionals('dlq peek', rest);
  const max = str('max');
  if (max !== undefined && (!/^\d+$/.test(max) || Number(max) < 1 || Number(max) > 10))
    throw new UsageError(`--max must be a whole number from 1 to 10, got '${max}'`);
  const page = await client(target()).peekDeadLetters(tenant, max !== undefined ? { max: Number(max) } : {});
  if (values.json) {
    io.out(JSON.stringify(page));
    return 0;
  }
  for (const m of page.messages) {
    const job =
      m.jobId !== undefined ? `${m.jobId}  runAt ${m.runAt}${m.schedule ? `  schedule ${m.schedule}` : ''}` : 'not a Dynein delivery';
    io.out(`${m.handle}  ${job}`);
    io.out(
      `  receives ${m.receiveCount}  sent ${m.sentAt ?? '-'}  first attempt ${m.firstReceivedAt ?? '-'}${m.attributes.dyneinError !== undefined ? `  error ${m.attributes.dyneinError}` : ''}`,
    );
    io.out(`  ${m.body.length > 500 ? `${cutText(m.body, 500)}… (${m.body.length} characters; --json prints it whole)` : m.body}`);
  }
  io.err(
    `${page.messages.length} shown of about ${page.approximateDepth} in the DLQ${page.messages.length > 0 ? `: dynein dlq redrive --tenant ${tenant} <handle>... (or --all), dynein dlq delete --tenant ${tenant} <handle>...` : ''}`,
  );
  return 0;
}

async function runRedrive({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  if (Boolean(values.all) === rest.length > 0)
    throw new UsageError('dlq redrive needs --all or the handles of messages (from dynein dlq peek), not both');
  const api = client(target());
  const requestedAt = Date.now();
  const reply = await api.redriveDeadLetters(tenant, values.all ? { all: true } : { handles: rest });
  const sentNotDeleted = 'sentNotDeleted' in reply ? (reply.sentNotDeleted ?? []) : [];
  if ('taskHandle' in reply && !values['no-wait']) {
    const task = await waitForMove(api, tenant, reply.taskHandle, requestedAt, io);
    if (values.json) io.out(JSON.stringify({ ...reply, task }));
    else io.out(`moved ${task.moved} message${task.moved === 1 ? '' : 's'} back to the queue (message move task ${task.status})`);
    return task.status === 'COMPLETED' ? 0 : 1;
  }
  if (values.json) io.out(JSON.stringify(reply));
  else if ('taskHandle' in reply) io.out(`started a message move task: ${reply.taskHandle}`);
  else if ('moved' in reply)
    io.out(
      `moved ${reply.moved} message${reply.moved === 1 ? '' : 's'} back to the queue${reply.complete ? '' : sentNotDeleted.length > 0 ? ' (stopped: see below)' : ' (not all: run it again)'}`,
    );
  else io.out(handlesSummary('moved back to the queue', reply.redriven, reply.notFound, reply.failed));
  if (sentNotDeleted.length > 0 && !values.json)
    io.err(
      `sent to the queue but still in the DLQ (the delete failed) ${sentNotDeleted.length}: do not redrive them again (they would be delivered twice); delete them: dynein dlq delete --tenant ${tenant} ${sentNotDeleted.join(' ')}`,
    );
  return ('failed' in reply && reply.failed?.length) || sentNotDeleted.length > 0 ? 1 : 0;
}

async function runDelete({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  if (rest.length === 0) throw new UsageError('dlq delete needs the handles of messages (from dynein dlq peek)');
  const reply = await client(target()).deleteDeadLetters(tenant, rest);
  if (values.json) io.out(JSON.stringify(reply));
  else io.out(handlesSummary('deleted', reply.deleted, reply.notFound, reply.failed));
  return reply.failed?.length ? 1 : 0;
}

/** How often `dlq redrive --all` asks for its move task's progress. */
export const MOVE_POLL_MS = 2_000;

/** How long a listed move task may have started before the request that started it (clock skew). */
const MOVE_SKEW_MS = 60_000;
/** How long to wait for the task just started to be listed before giving up. */
const MOVE_LISTED_MS = 60_000;

/**
 * Waits for the move task `taskHandle`, started at about `requestedAt`, to end, drawing its
 * progress; answers its last report (a failed or cancelled one is an error line too). While it
 * runs SQS lists it with its handle; once ended, without one: it is then the newest task, started
 * no earlier than the request (less clock skew). An older task listed first (the list can lag
 * the start) is not taken for it.
 */
async function waitForMove(
  api: DyneinClient,
  tenant: string,
  taskHandle: string,
  requestedAt: number,
  io: Io,
): Promise<DeadLetterMoveTask> {
  const line = progressLine(io.progress, () => io.err(''), 'moved', 'messages');
  try {
    for (;;) {
      const { tasks } = await api.deadLetterMoves(tenant);
      const running = tasks.find((t) => t.taskHandle === taskHandle);
      const ended = running ? undefined : tasks.find((t) => !t.taskHandle && Date.parse(t.startedAt) >= requestedAt - MOVE_SKEW_MS);
      if (ended) {
        line.end();
        if (ended.status !== 'COMPLETED')
          io.err(`message move task ${ended.status}${ended.failureReason ? `: ${ended.failureReason}` : ''} after ${ended.moved} messages`);
        return ended;
      }
      if (running) line.update(running.moved, running.toMove);
      else if (Date.now() - requestedAt > MOVE_LISTED_MS)
        throw new Error(
          `message move task ${taskHandle} is not listed after ${MOVE_LISTED_MS / 1000} s: see \`dynein dlq peek --tenant ${tenant}\``,
        );
      await new Promise((r) => setTimeout(r, MOVE_POLL_MS));
    }
  } finally {
    line.end();
  }
}

/** `moved back to the queue 2; not in the DLQ (any more) 1: <handle>` */
function handlesSummary(done: string, ok: readonly string[], notFound: readonly string[], failed: readonly string[] = []): string {
  return [
    `${done} ${ok.length}`,
    ...(notFound.length > 0 ? [`not in the DLQ (any more) ${notFound.length}: ${notFound.join(' ')}`] : []),
    ...(failed.length > 0 ? [`failed (left in the DLQ) ${failed.length}: ${failed.join(' ')}`] : []),
  ].join('; ');
}
