/** `dynein dlq ...`: the tenant's dead-letter queue through the API (peek, redrive, delete, edit, the edits' audit). */
import { cutText, isJson } from '../../../core/util/index.js';
import type { DeadLetterAuditEntry, DeadLetterMoveTask } from '../../apiTypes.js';
import type { DyneinClient } from '../../client.js';
import { noPositionals, readText } from '../args.js';
import { client, type Ctx, type Group } from '../command.js';
import { UsageError } from '../errors.js';
import { HELP, JSON_OUT, TENANT, WHERE } from '../flags.js';
import type { Io } from '../output.js';
import { progressLine } from '../progress.js';

export const dlqCommand: Group = {
  brief: "the tenant's dead-letter queue through the API: peek, redrive, delete, edit, audit",
  summary:
    "The tenant's dead-letter queue through the API (the dlq routes; IAM: DyneinTenant.grantDeadLetters): peek at its\n" +
    'messages, move all or some back to the queue, delete some, put one back with a new payload, list those edits.\n' +
    'Messages are named by the handles peek prints.',
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
    edit: {
      brief: 'put a message back on the queue with a new payload (audited)',
      usage: '<handle> --tenant <name> (--payload <JSON> | --payload-file <file>) [options]',
      summary:
        'Put the message named by a handle `dynein dlq peek` printed back on the tenant queue with a new payload, sent\n' +
        'byte for byte as given (checked to be one JSON value first: nothing is sent otherwise); the rest of the message\n' +
        "is kept, and it leaves the DLQ. The edit is audited (the caller, the payloads' SHA-256: `dynein dlq audit`) and\n" +
        "shows in the job's timeline as EDITED. Only a Dynein delivery of the tenant can be edited.",
      targeted: true,
      flags: {
        ...TENANT,
        payload: { type: 'string', arg: '<JSON>', help: 'the new payload, JSON text sent as given; @file.json reads a file' },
        'payload-file': { type: 'string', arg: '<file>', help: 'or the new payload from a file, its text sent as it is' },
        json: { type: 'boolean', help: 'print the reply {"jobId", "editedAt", "oldPayloadSha256", "newPayloadSha256"} as one JSON line' },
        ...WHERE,
        ...HELP,
      },
      run: runEdit,
    },
    audit: {
      brief: 'list the edits of dead letters, newest first',
      usage: '--tenant <name> [--limit <n>] [--cursor <c> | --all] [options]',
      summary:
        "List the tenant's dead-letter edits, newest first, one line each: when, the job, who, and the payload's SHA-256\n" +
        'before and after (shortened; --json prints them whole). One page of --limit (default 50) by default, with the\n' +
        'command for the next one on stderr; --all: every page. Edits are kept a year.',
      targeted: true,
      flags: {
        ...TENANT,
        limit: { type: 'string', arg: '<n>', help: 'edits per page, 1 to 100 (default 50; with --all, 100)' },
        cursor: { type: 'string', arg: '<c>', help: 'the page after the one that printed this cursor' },
        all: { type: 'boolean', help: 'every edit, not one page' },
        json: { type: 'boolean', help: 'print {"edits": [...], "cursor"?} as one JSON line' },
        ...WHERE,
        ...HELP,
      },
      run: runAudit,
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
    `${page.messages.length} shown of about ${page.approximateDepth} in the DLQ${page.messages.length > 0 ? `: dynein dlq redrive --tenant ${tenant} <handle>... (or --all), dynein dlq delete --tenant ${tenant} <handle>..., dynein dlq edit --tenant ${tenant} <handle> --payload '<JSON>'` : ''}`,
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

async function runEdit({ values, str, rest, target, tenant, io }: Ctx): Promise<number> {
  if (rest.length !== 1)
    throw new UsageError(
      `dlq edit needs one handle (from dynein dlq peek)${rest.length > 1 ? `, got ${rest.length}` : ''}: dynein dlq edit <handle> --tenant ${tenant} --payload '<JSON>'`,
    );
  const handle = rest[0]!;
  const payloadJson = editPayload(str('payload'), str('payload-file'));
  const reply = await client(target()).editDeadLetter(tenant, handle, { payloadJson });
  if (values.json) io.out(JSON.stringify(reply));
  else
    io.out(
      `edited ${reply.jobId} at ${reply.editedAt}: back on the queue with the new payload (sha256 ${short(reply.oldPayloadSha256)} -> ${short(reply.newPayloadSha256)})`,
    );
  if (!reply.sentNotDeleted) return 0;
  if (!values.json)
    io.err(
      `sent to the queue but still in the DLQ (the delete failed): do not edit or redrive it again (it would be delivered twice); delete it: dynein dlq delete --tenant ${tenant} ${handle}`,
    );
  return 1;
}

/**
 * The new payload's JSON text of `--payload <JSON>` / `--payload @file` / `--payload-file <file>`:
 * exactly one, checked to be one JSON value, kept as given.
 */
function editPayload(inline: string | undefined, file: string | undefined): string {
  if ((inline === undefined) === (file === undefined))
    throw new UsageError(
      `dlq edit needs the new payload: --payload '<JSON>' or --payload-file <file>${inline !== undefined ? ', not both' : ''}; nothing was sent`,
    );
  const fromFile = file ?? (inline!.startsWith('@') ? inline!.slice(1) : undefined);
  const text = fromFile !== undefined ? readText(fromFile) : inline!;
  if (!isJson(text))
    throw new UsageError(
      fromFile !== undefined
        ? `${fromFile} does not hold one JSON value: nothing was sent`
        : `--payload is not JSON: quote it, e.g. --payload '{"a":1}' (a string is '"text"'), or give a file as --payload-file payload.json; nothing was sent`,
    );
  return text;
}

async function runAudit({ values, str, rest, target, tenant, io }: Ctx): Promise<number> {
  noPositionals('dlq audit', rest);
  const [limitText, cursor] = [str('limit'), str('cursor')];
  if (limitText !== undefined && (!/^\d+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 100))
    throw new UsageError(`--limit must be a whole number from 1 to 100, got '${limitText}'`);
  if (values.all && cursor !== undefined) throw new UsageError('dlq audit takes --all or --cursor, not both');
  const api = client(target());
  const limit = limitText !== undefined ? { limit: Number(limitText) } : {};
  let edits: readonly DeadLetterAuditEntry[];
  let next: string | undefined;
  if (values.all) {
    const all: DeadLetterAuditEntry[] = [];
    for await (const e of api.deadLetterEdits(tenant, limitText !== undefined ? limit : { limit: 100 })) all.push(e);
    edits = all;
  } else {
    ({ edits, cursor: next } = await api.deadLetterAudit(tenant, { ...limit, ...(cursor !== undefined ? { cursor } : {}) }));
  }
  if (values.json) io.out(JSON.stringify({ edits, ...(next !== undefined ? { cursor: next } : {}) }));
  else {
    const rows = edits.map((e) => [e.at, e.jobId, e.by, `${short(e.oldPayloadSha256)} -> ${short(e.newPayloadSha256)}`]);
    const widths = [0, 1, 2].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
    for (const r of rows) io.out(r.map((c, i) => (i < 3 ? c.padEnd(widths[i]!) : c)).join('  '));
    if (rows.length === 0) io.err(`tenant ${tenant} has no dead-letter edits${cursor !== undefined ? ' after this cursor' : ''}`);
  }
  if (next !== undefined)
    io.err(
      `more: dynein dlq audit --tenant ${tenant} --cursor '${next}'${limitText !== undefined ? ` --limit ${limitText}` : ''} (or --all)`,
    );
  return 0;
}

/** A SHA-256 (hex) shortened for a human line: its first 12 digits. */
const short = (sha256: string): string => sha256.slice(0, 12);

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
