/** `dynein schedules ...`: the tenant's recurring schedules (put, get, list, delete, pause, resume). */
import { isJson } from '../../../core/util/index.js';
import type { Schedule, ScheduleDefinition } from '../../apiTypes.js';
import { scheduleNameProblem } from '../../resources/schedules.js';
import { noPositionals, optional, readText } from '../args.js';
import { client, type Ctx, type Group } from '../command.js';
import { UsageError } from '../errors.js';
import { HELP, JSON_OUT, TENANT, WHERE } from '../flags.js';
import type { Io } from '../output.js';

export const schedulesCommand: Group = {
  brief: 'recurring schedules: put, get, list, delete, pause, resume',
  summary:
    "Recurring schedules (cron(), rate() or at() in a time zone): each occurrence is delivered to the tenant's queue\n" +
    'as a job with "schedule": "<name>". Human output prints the next runs; --json prints the API reply.',
  subcommands: {
    put: {
      brief: 'create or replace a schedule, print its next runs',
      usage: '<name> --tenant <name> --expression <expr> [--timezone <zone>] [--payload <JSON> | --payload-file <file>] [options]',
      summary:
        'Create or replace a schedule and print its next runs. With --dry-run, check it and print up to --count next\n' +
        'runs (default 100), storing nothing. Expressions: cron(min hour day-of-month month day-of-week year),\n' +
        'rate(n minute|minutes|hour|hours|day|days), at(yyyy-mm-ddThh:mm:ss) (docs/schedules.md).',
      targeted: true,
      flags: {
        ...TENANT,
        expression: {
          type: 'string',
          short: 'e',
          arg: '<expr>',
          help: "when: 'cron(0 9 ? * MON-FRI *)', 'rate(5 minutes)', 'at(2030-01-31T09:00:00)'",
        },
        timezone: { type: 'string', arg: '<zone>', help: 'the IANA time zone the expression reads in (default UTC)' },
        'start-at': { type: 'string', arg: '<time>', help: 'no occurrence before this RFC 3339 time (rate() counts from it)' },
        'end-at': { type: 'string', arg: '<time>', help: 'no occurrence at or after this RFC 3339 time' },
        payload: { type: 'string', arg: '<JSON>', help: 'delivered with every occurrence (default null); @file.json reads a file' },
        'payload-file': { type: 'string', arg: '<file>', help: 'or the payload from a file' },
        disabled: { type: 'boolean', help: 'store it paused (state DISABLED): nothing runs until resume' },
        'dry-run': { type: 'boolean', help: 'check the definition and print its next runs; store nothing' },
        count: { type: 'string', arg: '<n>', help: 'with --dry-run: how many next runs, 1 to 100 (default 100)' },
        ...JSON_OUT,
        ...WHERE,
        ...HELP,
      },
      run: runPut,
    },

    get: {
      brief: "print a schedule's definition and next runs",
      usage: '<name> --tenant <name> [options]',
      targeted: true,
      flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
      run: runGet,
    },

    list: {
      brief: "list the tenant's schedules, one line each",
      usage: '--tenant <name> [--limit <n>] [--cursor <c>] [options]',
      summary:
        "List the tenant's schedules in name order, one line each (name, state, expression, zone, next run): every\n" +
        'page by default; with --limit or --cursor, one page, and the command for the next one on stderr.',
      targeted: true,
      flags: {
        ...TENANT,
        limit: { type: 'string', arg: '<n>', help: 'one page of at most n schedules, 1 to 100' },
        cursor: { type: 'string', arg: '<c>', help: 'the page after the one that printed this cursor' },
        json: { type: 'boolean', help: 'print {"schedules": [...], "nextCursor"?} as one JSON line' },
        ...WHERE,
        ...HELP,
      },
      run: runList,
    },

    delete: {
      brief: 'delete a schedule (occurrences due more than 5 s later are cancelled)',
      usage: '<name> --tenant <name> [options]',
      targeted: true,
      flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
      run: runDelete,
    },

    pause: {
      brief: 'pause a schedule (occurrences due more than 5 s later are cancelled)',
      usage: '<name> --tenant <name> [options]',
      targeted: true,
      flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
      run: runPause,
    },

    resume: {
      brief: 'resume a paused schedule from now on (what fell while paused is not delivered)',
      usage: '<name> --tenant <name> [options]',
      targeted: true,
      flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
      run: runResume,
    },
  },
};

async function runPut({ values, str, rest, target, tenant, io }: Ctx): Promise<number> {
  const name = scheduleNameOf('put', rest);
  const expression = str('expression');
  if (expression === undefined) throw new UsageError("schedules put needs --expression, e.g. --expression 'rate(5 minutes)'");
  const count = str('count');
  if (count !== undefined && !values['dry-run']) throw new UsageError('--count goes with --dry-run');
  if (count !== undefined && !/^\d+$/.test(count)) throw new UsageError(`--count must be a whole number from 1 to 100, got '${count}'`);
  if (count !== undefined && (Number(count) < 1 || Number(count) > 100))
    throw new UsageError(`--count must be a whole number from 1 to 100, got '${count}'`);
  const definition: ScheduleDefinition = {
    expression,
    ...optional('timezone', str('timezone')),
    ...optional('startAt', str('start-at')),
    ...optional('endAt', str('end-at')),
    ...optional('payloadJson', payloadOption(str('payload'), str('payload-file'))),
    ...(values.disabled ? { state: 'DISABLED' as const } : {}),
  };
  const reply = await client(target()).putSchedule(tenant, name, definition, {
    ...(values['dry-run'] ? { dryRun: true } : {}),
    ...(count !== undefined ? { count: Number(count) } : {}),
  });
  if (values.json) {
    const { created: _created, ...body } = reply;
    io.out(JSON.stringify(body));
    return 0;
  }
  const verb = reply.dryRun ? 'dry run (nothing stored):' : reply.created ? 'created' : 'replaced';
  io.out(`${verb} ${describeSchedule(reply)}`);
  printRuns(io, reply);
  return 0;
}

async function runGet({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  const name = scheduleNameOf('get', rest);
  const reply = await client(target()).getSchedule(tenant, name);
  if (values.json) {
    io.out(JSON.stringify(reply));
    return 0;
  }
  io.out(describeSchedule(reply));
  if (reply.startAt !== undefined || reply.endAt !== undefined)
    io.out(`  from ${reply.startAt ?? '(creation)'} until ${reply.endAt ?? '(no end)'}`);
  io.out(`  payload ${JSON.stringify(reply.payload)}`);
  io.out(`  created ${reply.createdAt}, updated ${reply.updatedAt}`);
  printRuns(io, reply);
  return 0;
}

async function runList({ values, str, rest, target, tenant, io }: Ctx): Promise<number> {
  noPositionals('schedules list', rest);
  const [limitText, cursor] = [str('limit'), str('cursor')];
  if (limitText !== undefined && (!/^\d+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 100))
    throw new UsageError(`--limit must be a whole number from 1 to 100, got '${limitText}'`);
  const api = client(target());
  let schedules: readonly Schedule[];
  let nextCursor: string | undefined;
  if (limitText !== undefined || cursor !== undefined) {
    const page = await api.listSchedules(tenant, {
      ...(limitText !== undefined ? { limit: Number(limitText) } : {}),
      ...(cursor !== undefined ? { cursor } : {}),
    });
    ({ schedules, nextCursor } = page);
  } else {
    const all: Schedule[] = [];
    for await (const s of api.schedules(tenant, { limit: 100 })) all.push(s);
    schedules = all;
  }
  if (values.json) {
    io.out(JSON.stringify({ schedules, ...(nextCursor !== undefined ? { nextCursor } : {}) }));
  } else {
    const rows = schedules.map((s) => [s.name, s.state, s.expression, s.timezone, s.nextRuns[0] ?? '-']);
    const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
    for (const r of rows) io.out(r.map((c, i) => (i < 4 ? c.padEnd(widths[i]!) : c)).join('  '));
    if (rows.length === 0) io.err(`tenant ${tenant} has no schedules${cursor !== undefined ? ' after this cursor' : ''}`);
  }
  if (nextCursor !== undefined)
    io.err(`more: dynein schedules list --tenant ${tenant} --cursor '${nextCursor}'${limitText ? ` --limit ${limitText}` : ''}`);
  return 0;
}

async function runDelete({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  const name = scheduleNameOf('delete', rest);
  const reply = await client(target()).deleteSchedule(tenant, name);
  io.out(values.json ? JSON.stringify(reply) : `deleted ${reply.name}: its occurrences due more than 5 s from now are cancelled`);
  return 0;
}

async function runPause({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  const name = scheduleNameOf('pause', rest);
  const reply = await client(target()).pauseSchedule(tenant, name);
  if (values.json) io.out(JSON.stringify(reply));
  else io.out(`paused ${describeSchedule(reply)}`);
  return 0;
}

async function runResume({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  const name = scheduleNameOf('resume', rest);
  const reply = await client(target()).resumeSchedule(tenant, name);
  if (values.json) {
    io.out(JSON.stringify(reply));
    return 0;
  }
  io.out(`resumed ${describeSchedule(reply)}`);
  printRuns(io, reply);
  return 0;
}

/** The one schedule name a schedules subcommand takes. */
function scheduleNameOf(command: string, rest: readonly string[]): string {
  if (rest.length !== 1)
    throw new UsageError(`schedules ${command} needs one schedule name: dynein schedules ${command} <name> --tenant T`);
  const problem = scheduleNameProblem(rest[0]);
  if (problem) throw new UsageError(problem);
  return rest[0]!;
}

/** The payload JSON text of `--payload <JSON>` / `--payload @file` / `--payload-file <file>`, checked; undefined when none. */
function payloadOption(inline: string | undefined, file: string | undefined): string | undefined {
  if (inline !== undefined && file !== undefined) throw new UsageError('give --payload or --payload-file, not both');
  if (inline === undefined && file === undefined) return undefined;
  const text = file !== undefined ? readText(file) : inline!.startsWith('@') ? readText(inline!.slice(1)) : inline!;
  if (!isJson(text)) {
    throw new UsageError(
      file !== undefined || inline!.startsWith('@')
        ? `${file ?? inline!.slice(1)} does not hold one JSON value`
        : `--payload is not JSON: quote it, e.g. --payload '{"a":1}', or give a file as --payload-file payload.json`,
    );
  }
  return text;
}

/** `nightly  ENABLED  cron(0 2 * * ? *)  Europe/Paris` (and what the call cancelled). */
function describeSchedule(s: Schedule & { dryRun?: true }): string {
  return `${s.name}  ${s.state}  ${s.expression}  ${s.timezone}`;
}

function printRuns(io: Io, s: Schedule): void {
  if (s.nextRuns.length === 0) {
    io.out(s.state === 'DISABLED' ? '  no next runs: paused (dynein schedules resume)' : '  no next runs: the schedule has ended');
    return;
  }
  io.out(`  next ${s.nextRuns.length === 1 ? 'run' : `${s.nextRuns.length} runs`}:`);
  for (const run of s.nextRuns) io.out(`    ${run}`);
}
