import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { cutText, isJson } from '../core/util/index.js';
import {
  DyneinClient,
  scheduleNameProblem,
  type DeadLetterMoveTask,
  type JobRequest,
  type ListedJob,
  type Schedule,
  type ScheduleDefinition,
  type TenantControls,
  type TenantSettingsUpdate,
} from './client.js';
import { startLocal } from './cliLocal.js';
import { progressLine } from './cliProgress.js';
import { describeStackOutputs, stackTarget } from './cliStack.js';
import { SHELLS, completionScript, type CompletionCommand, type CompletionFlag, type Shell } from './cliCompletion.js';
import {
  UsageError,
  awsCredentials,
  packageJson,
  readLocalJson,
  redrive,
  resolveAdminTarget,
  resolveTarget,
  type Target,
} from './cliTarget.js';
import { startUiServer } from './ui/server.js';
import { DyneinApiError } from './errors.js';
import { Worker } from './worker.js';

/** One command-line flag: its parseArgs type and the line `--help` prints for it. */
interface Flag {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  /** The value's placeholder, e.g. `<name>` (string flags). */
  readonly arg?: string;
  readonly help: string;
}

/** A command: its usage line, what it does, its flags, and its run function. */
interface Command {
  readonly usage: string;
  /** One line in `dynein --help`. */
  readonly brief: string;
  /** The paragraph of `dynein <command> --help` (default: the brief). */
  readonly summary?: string;
  readonly flags: Readonly<Record<string, Flag>>;
  /** Needs `--tenant` and talks to a scheduler (the local stack or `--endpoint`). */
  readonly targeted: boolean;
  readonly run: (c: Ctx) => Promise<number>;
}

/** A command with subcommands (`dynein schedules put ...`): the second word picks one. */
interface Group {
  readonly brief: string;
  readonly summary: string;
  readonly subcommands: Readonly<Record<string, Command>>;
}

const HELP: Record<string, Flag> = { help: { type: 'boolean', short: 'h', help: "print this command's usage" } };
const JSON_OUT: Record<string, Flag> = { json: { type: 'boolean', help: 'print the reply as one JSON line' } };
const TENANT: Record<string, Flag> = {
  tenant: { type: 'string', short: 't', arg: '<name>', help: 'the tenant (required; default $DYNEIN_TENANT)' },
};
/** Where the scheduler is: the local stack (default) or the API on AWS. */
const WHERE: Record<string, Flag> = {
  'data-dir': { type: 'string', arg: '<dir>', help: "the local stack's data directory (default $DYNEIN_DATA_DIR, else .dynein)" },
  endpoint: {
    type: 'string',
    arg: '<url>',
    help: 'the API on AWS instead of the local stack (default $DYNEIN_ENDPOINT); credentials from the AWS default chain',
  },
  stack: {
    type: 'string',
    arg: '<name>',
    help: "or the scheduler's CloudFormation stack: the endpoint and the tenant's queues from its outputs",
  },
  profile: { type: 'string', arg: '<name>', help: 'with --endpoint: the AWS profile for credentials (default $DYNEIN_PROFILE)' },
  region: {
    type: 'string',
    arg: '<region>',
    help: 'with --endpoint: the region (default $DYNEIN_REGION, else $AWS_REGION, else from the URL)',
  },
};
/** The environment variables that stand in for flags not given: the same for every command. */
export const FLAG_ENV: Readonly<Record<string, string>> = {
  tenant: 'DYNEIN_TENANT',
  endpoint: 'DYNEIN_ENDPOINT',
  region: 'DYNEIN_REGION',
  profile: 'DYNEIN_PROFILE',
};

/**
 * With `--stack`: the endpoint and the tenant's queue URLs from the stack's outputs, by flag name
 * (a `--queue-url` or `--dlq-url` given still wins); without it, undefined.
 */
async function stackOf(
  given: (flag: string) => string | undefined,
  values: Values,
  env: NodeJS.ProcessEnv,
): Promise<Record<string, string | undefined> | undefined> {
  const stack = given('stack');
  if (stack === undefined) return undefined;
  if (typeof values.endpoint === 'string') throw new UsageError('give --stack or --endpoint, not both');
  const region = given('region') ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  if (!region) throw new UsageError('--stack needs the region of the stack: --region, DYNEIN_REGION or AWS_REGION');
  const outputs = await describeStackOutputs(stack, region, awsCredentials(given('profile')), env);
  const target = stackTarget(stack, outputs, given('tenant'));
  return { endpoint: target.endpoint, 'queue-url': target.queueUrl, 'dlq-url': target.dlqUrl };
}

/** A string flag's value: the command line's, else (for a flag the command takes) its environment variable's, else undefined. */
function flagValue(values: Values, flag: string, flags: Readonly<Record<string, Flag>>, env: NodeJS.ProcessEnv): string | undefined {
  const given = values[flag];
  if (typeof given === 'string') return given;
  const variable = FLAG_ENV[flag];
  if (variable === undefined || !(flag in flags)) return undefined;
  const value = env[variable]?.trim();
  return value ? value : undefined;
}
const QUEUES: Record<string, Flag> = {
  'queue-url': {
    type: 'string',
    arg: '<url>',
    help: "the tenant's queue (default from the local stack or --stack; required with --endpoint)",
  },
  'dlq-url': { type: 'string', arg: '<url>', help: "the tenant's dead-letter queue (default from the local stack or --stack)" },
};

const VERSION: Record<string, Flag> = { version: { type: 'boolean', help: 'print the version of dynein-serverless' } };

/** Every flag any command takes, for the first pass that finds the command. */
const ALL_FLAGS = (): Record<string, Flag> =>
  Object.assign(
    {},
    VERSION,
    HELP,
    ...Object.values(COMMANDS).flatMap((c) => ('subcommands' in c ? Object.values(c.subcommands) : [c]).map((x) => x.flags)),
  );

/** The command of that name (own properties only: `dynein constructor` is an unknown command). */
const commandOf = (name: string): Command | Group | undefined => (Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined);

/** A group's subcommand of that name, or a usage error listing them. */
function subcommandOf(group: string, spec: Group, name: string | undefined): Command {
  if (name !== undefined && Object.hasOwn(spec.subcommands, name)) return spec.subcommands[name]!;
  const choices = Object.keys(spec.subcommands).join(', ');
  throw new UsageError(
    name === undefined
      ? `${group} needs a command: one of ${choices} (see \`dynein ${group} --help\`)`
      : `unknown ${group} command '${name}': one of ${choices} (see \`dynein ${group} --help\`)`,
  );
}

function groupUsage(name: string, g: Group): string {
  const width = Math.max(...Object.keys(g.subcommands).map((n) => n.length));
  return [
    `Usage: dynein ${name} <command> [options]`,
    '',
    g.summary,
    '',
    'Commands:',
    ...Object.entries(g.subcommands).map(([n, c]) => `  ${n.padEnd(width)}  ${c.brief}`),
    '',
    `  dynein ${name} <command> --help   that command's usage and options`,
    '',
  ].join('\n');
}

const parseOptions = (flags: Readonly<Record<string, Flag>>) =>
  Object.fromEntries(Object.entries(flags).map(([name, f]) => [name, f.short ? { type: f.type, short: f.short } : { type: f.type }]));

function usageOf(name: string, c: Command): string {
  const rows = Object.entries(c.flags).map(
    ([flag, f]) => [`${f.short ? `-${f.short}, ` : '    '}--${flag}${f.arg ? ` ${f.arg}` : ''}`, f.help] as const,
  );
  const width = Math.max(...rows.map(([l]) => l.length));
  return [
    `Usage: dynein ${name} ${c.usage}`,
    '',
    c.summary ?? c.brief,
    '',
    'Options:',
    ...rows.map(([l, h]) => `  ${l.padEnd(width)}  ${h}`),
    '',
  ].join('\n');
}

function generalUsage(): string {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  return [
    'Usage: dynein <command> [options]',
    '',
    'Commands:',
    ...Object.entries(COMMANDS).map(([n, c]) => `  ${n.padEnd(width)}  ${c.brief}`),
    '',
    'Every command but local talks to the local stack by default ($DYNEIN_DATA_DIR/local.json, or',
    '--data-dir); --endpoint <url> talks to the API on AWS instead (--profile, --region).',
    'DYNEIN_ENDPOINT, DYNEIN_REGION, DYNEIN_PROFILE and DYNEIN_TENANT stand in for the flags not given.',
    '',
    "  dynein <command> --help   that command's usage and options",
    '  dynein --version          the version of dynein-serverless',
    '',
  ].join('\n');
}

type Values = Record<string, string | boolean | undefined>;

export interface Io {
  out(line: string): void;
  err(line: string): void;
  /** Redraws the progress line (stderr, a terminal only). */
  progress?(line: string): void;
}

const stdio: Io = {
  out: (l) => process.stdout.write(`${l}\n`),
  err: (l) => process.stderr.write(`${l}\n`),
  ...(process.stderr.isTTY ? { progress: (l: string) => process.stderr.write(`\r\x1b[2K${l}`) } : {}),
};

/** parseArgs, with its errors as one-line usage errors that say where the options are listed. */
function parse(args: readonly string[], flags: Readonly<Record<string, Flag>>, strict: boolean, command?: string) {
  try {
    const { values, positionals } = parseArgs({ args: [...args], options: parseOptions(flags), allowPositionals: true, strict });
    return { values: values as Values, positionals };
  } catch (err) {
    const first = (err as Error).message.split(/\.\s/)[0]!.replace(/\.$/, '');
    throw new UsageError(`${first} (see \`dynein ${command ? `${command} ` : ''}--help\`)`);
  }
}

/** Runs the CLI; resolves with the process exit code (0 ok, 1 failed, 2 usage). */
export async function main(args: readonly string[], io: Io = stdio, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  try {
    // First pass: find the command (flags may come before it). Second: that command's own flags, strictly.
    const first = parse(args, ALL_FLAGS(), false);
    const [command, topic] = first.positionals;
    if (command === undefined || command === 'help') {
      if (topic !== undefined && command === 'help') {
        const spec = commandOf(topic);
        if (!spec) throw unknownCommand(topic);
        const sub = first.positionals[2];
        if (!('subcommands' in spec)) io.out(usageOf(topic, spec));
        else if (sub === undefined) io.out(groupUsage(topic, spec));
        else io.out(usageOf(`${topic} ${sub}`, subcommandOf(topic, spec, sub)));
        return 0;
      }
      const { values } = parse(args, { ...HELP, ...VERSION }, true);
      if (values.version) {
        io.out(packageJson().version);
        return 0;
      }
      if (values.help || command === 'help') {
        io.out(generalUsage());
        return 0;
      }
      io.err(generalUsage());
      return 2;
    }
    const found = commandOf(command);
    if (!found) throw unknownCommand(command);
    let name = command;
    let spec: Command;
    if ('subcommands' in found) {
      if (topic === undefined && first.values.help) {
        io.out(groupUsage(command, found));
        return 0;
      }
      spec = subcommandOf(command, found, topic);
      name = `${command} ${topic}`;
    } else {
      spec = found;
    }
    const { values, positionals } = parse(args, spec.flags, true, name);
    if (values.help) {
      io.out(usageOf(name, spec));
      return 0;
    }
    const rest = positionals.slice(name.split(' ').length);
    const given = (flag: string) => flagValue(values, flag, spec.flags, env);
    const fromStack = await stackOf(given, values, env);
    // The stack's endpoint beats DYNEIN_ENDPOINT (a flag beats the environment); a queue URL given beats the stack's.
    const str = (flag: string) =>
      fromStack && flag in fromStack ? (flag === 'endpoint' ? fromStack[flag] : (given(flag) ?? fromStack[flag])) : given(flag);
    const tenant = str('tenant');
    if (spec.targeted && !tenant) throw new UsageError(`${name} needs --tenant <name> (or DYNEIN_TENANT)`);
    let resolved: Target | undefined;
    const target = () =>
      (resolved ??= resolveTarget({
        tenant: tenant ?? '',
        endpoint: str('endpoint'),
        region: str('region'),
        profile: str('profile'),
        dataDir: str('data-dir'),
        queueUrl: str('queue-url'),
        dlqUrl: str('dlq-url'),
      }));
    try {
      return await spec.run({ values, str, rest, target, tenant: tenant ?? '', io });
    } finally {
      resolved?.close();
    }
  } catch (err) {
    io.err(`dynein: ${oneLine(err)}`);
    return err instanceof UsageError ? 2 : 1;
  }
}

const unknownCommand = (name: string) =>
  new UsageError(`unknown command '${name}': one of ${Object.keys(COMMANDS).join(', ')} (see \`dynein --help\`)`);

interface Ctx {
  readonly values: Values;
  /** A string flag's value (undefined when absent). */
  readonly str: (name: string) => string | undefined;
  readonly rest: readonly string[];
  /** Where to talk to, resolved on first use (after the command line was checked). */
  readonly target: () => Target;
  readonly tenant: string;
  readonly io: Io;
}

const client = (t: Target) => new DyneinClient({ endpoint: t.endpoint, region: t.region, credentials: t.credentials });

const COMMANDS: Record<string, Command | Group> = {
  schedule: {
    brief: 'schedule a job, print its id',
    usage: '--tenant <name> (--at <time> | --in <duration>) [--payload <JSON> | @file] [options]',
    summary: 'Schedule a job; print its id.',
    targeted: true,
    flags: {
      ...TENANT,
      at: { type: 'string', arg: '<time>', help: 'when, as an RFC 3339 time: 2030-01-31T09:00:00Z' },
      in: { type: 'string', arg: '<duration>', help: 'or in how long: 30s, 5m, 2h, 3d, 1h30m' },
      payload: { type: 'string', arg: '<JSON>', help: 'the payload (default null); @file.json reads it from a file' },
      'idempotency-key': { type: 'string', arg: '<key>', help: 'a retry with the same key and time stores one job' },
      'not-cancellable': { type: 'boolean', help: 'may go straight to the queue when due within 900 s' },
      ...JSON_OUT,
      ...WHERE,
      ...HELP,
    },
    async run({ values, str, rest, target, tenant, io }) {
      noPositionals('schedule', rest);
      const [at, inText, payloadText, key] = [str('at'), str('in'), str('payload'), str('idempotency-key')];
      if ((at === undefined) === (inText === undefined))
        throw new UsageError('schedule needs exactly one of --at <RFC 3339 time> or --in <duration>');
      // The payload travels as the text given (payloadJson), byte for byte.
      let payloadJson = 'null';
      if (payloadText !== undefined) {
        payloadJson = payloadText.startsWith('@') ? readText(payloadText.slice(1)) : payloadText;
        if (!isJson(payloadJson))
          throw new UsageError(`--payload is not JSON: quote it, e.g. --payload '{"a":1}', or give a file as --payload @file.json`);
      }
      const job: JobRequest = {
        payloadJson,
        ...(at !== undefined ? { runAt: at } : { delaySeconds: parseDuration(inText ?? '') }),
        ...(key !== undefined ? { idempotencyKey: key } : {}),
        ...(values['not-cancellable'] ? { cancellable: false } : {}),
      };
      const reply = await client(target()).schedule(tenant, job);
      io.out(values.json ? JSON.stringify(reply) : reply.jobId);
      return 0;
    },
  },

  batch: {
    brief: 'schedule one job per line of a JSON Lines file',
    usage: '--tenant <name> <file.jsonl> [options]',
    summary:
      'Schedule one job per line of a JSON Lines file ({"payload": ..., "runAt" | "delaySeconds": ...});\nprint a summary (a progress bar on a terminal). Exit 1 if any job failed.',
    targeted: true,
    flags: { ...TENANT, json: { type: 'boolean', help: 'print one JSON line per job (its reply or its error)' }, ...WHERE, ...HELP },
    async run({ values, rest, target, tenant, io }) {
      if (rest.length !== 1) throw new UsageError('batch needs one file: dynein batch --tenant T <file.jsonl>');
      const jobs = readJsonl(rest[0]!);
      const draw = (done: number) => {
        const width = 30;
        const filled = Math.round((done / jobs.length) * width);
        io.progress?.(`[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${jobs.length} jobs`);
      };
      draw(0);
      const results = await client(target()).scheduleBatch(
        tenant,
        jobs.map((j) => j.job),
        { onProgress: draw },
      );
      if (io.progress) io.err('');
      const failed = results.flatMap((r, i) => (r.ok ? [] : [{ line: jobs[i]!.line, error: r.error }]));
      if (values.json)
        for (const r of results) io.out(JSON.stringify(r.ok ? r.job : { error: { code: r.error.code, message: r.error.message } }));
      for (const f of failed) io.err(`line ${f.line}: ${f.error.code}: ${f.error.message}`);
      const summary = `scheduled ${results.length - failed.length} of ${results.length} jobs${failed.length ? `, ${failed.length} failed` : ''}`;
      (values.json ? io.err : io.out)(summary);
      return failed.length > 0 ? 1 : 0;
    },
  },

  get: {
    brief: "print a job's state",
    usage: '--tenant <name> <jobId> [options]',
    summary: "Print a job's state and due time.",
    targeted: true,
    flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
    async run({ values, rest, target, tenant, io }) {
      const jobId = jobIdOf('get', rest);
      const reply = await client(target()).get(tenant, jobId);
      io.out(values.json ? JSON.stringify(reply) : `${reply.state}  runAt ${reply.runAt}  ${reply.jobId}`);
      return 0;
    },
  },

  show: {
    brief: "print a job's state and timeline",
    usage: '--tenant <name> <jobId> [options]',
    summary:
      "Print a job's state and, for a tenant with history on (docs/history.md), its timeline: scheduled, delivered,\n" +
      'and the outcome the worker reported (attempt, duration, error, result).',
    targeted: true,
    flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
    async run({ values, rest, target, tenant, io }) {
      const jobId = jobIdOf('show', rest);
      const reply = await client(target()).get(tenant, jobId);
      if (values.json) {
        io.out(JSON.stringify(reply));
        return 0;
      }
      io.out(`${reply.jobId}\n  state  ${reply.state}\n  runAt  ${reply.runAt}`);
      if (reply.message) io.out(`  ${reply.message}`);
      if (!reply.timeline) {
        if (reply.deliveredAt) io.out(`  deliveredAt  ${reply.deliveredAt}`);
        io.out('  (no timeline: the tenant does not keep job history; see docs/history.md)');
        return 0;
      }
      for (const e of reply.timeline) {
        const details = [
          e.attempt !== undefined ? `attempt ${e.attempt}` : '',
          e.durationMs !== undefined ? `${e.durationMs} ms` : '',
          e.error !== undefined ? `error: ${e.error}` : '',
          e.result !== undefined ? `result: ${JSON.stringify(e.result)}` : '',
        ].filter(Boolean);
        io.out(`  ${e.at}  ${e.event.padEnd(9)}${details.length ? `  ${details.join('  ')}` : ''}`);
      }
      return 0;
    },
  },

  cancel: {
    brief: 'cancel a job',
    usage: '--tenant <name> <jobId> [options]',
    summary: 'Cancel a job (exit 1 with AlreadyQueued or NotCancellable when it is too late).',
    targeted: true,
    flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
    async run({ values, rest, target, tenant, io }) {
      const jobId = jobIdOf('cancel', rest);
      const reply = await client(target()).cancel(tenant, jobId);
      io.out(values.json ? JSON.stringify(reply) : `${reply.state}  ${reply.jobId}`);
      return 0;
    },
  },

  jobs: {
    brief: "list the tenant's jobs by state and time, one line each",
    usage:
      '--tenant <name> [--state <S>] [--from <time>] [--to <time>] [--schedule <name>] [--order asc|desc] [--limit <n> | --all] [options]',
    summary:
      "List the tenant's jobs in runAt order, one line each (runAt, state, job id, schedule, delivered at): one page\n" +
      'of --limit (default 100) and the command for the next one on stderr, or every page with --all.',
    targeted: true,
    flags: {
      ...TENANT,
      state: {
        type: 'string',
        arg: '<S>',
        help: 'SCHEDULED (with ACQUIRED), QUEUED, CANCELLED or DEAD_LETTERED (default all); with history: DELIVERED, SUCCEEDED, FAILED, DEAD',
      },
      from: { type: 'string', arg: '<time>', help: 'runAt at or after this RFC 3339 time' },
      to: { type: 'string', arg: '<time>', help: 'runAt at or before this RFC 3339 time' },
      schedule: { type: 'string', arg: '<name>', help: 'occurrences of this recurring schedule only' },
      order: { type: 'string', arg: '<asc|desc>', help: 'soonest first (asc, the default) or latest first' },
      limit: { type: 'string', arg: '<n>', help: 'jobs per page, 1 to 1000 (default 100)' },
      cursor: { type: 'string', arg: '<c>', help: 'the page after the one that printed this cursor (same filters)' },
      all: { type: 'boolean', help: 'every page, not just the first' },
      json: { type: 'boolean', help: 'print {"jobs": [...], "nextCursor"?} as one JSON line' },
      ...WHERE,
      ...HELP,
    },
    async run({ values, str, rest, target, tenant, io }) {
      noPositionals('jobs', rest);
      const [limitText, cursor, order] = [str('limit'), str('cursor'), str('order')];
      if (limitText !== undefined && (!/^\d+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 1000))
        throw new UsageError(`--limit must be a whole number from 1 to 1000, got '${limitText}'`);
      if (order !== undefined && order !== 'asc' && order !== 'desc') throw new UsageError(`--order must be asc or desc, got '${order}'`);
      if (values.all && cursor !== undefined) throw new UsageError('--all starts at the first page: give --all or --cursor, not both');
      const filter = {
        ...optional('state', str('state')),
        ...optional('from', str('from')),
        ...optional('to', str('to')),
        ...optional('schedule', str('schedule')),
        ...(order !== undefined ? { order: order as 'asc' | 'desc' } : {}),
        ...(limitText !== undefined ? { limit: Number(limitText) } : {}),
      };
      const api = client(target());
      let jobs: readonly ListedJob[];
      let nextCursor: string | undefined;
      if (values.all) {
        const all: ListedJob[] = [];
        const line = progressLine(io.progress, () => io.err(''), 'read', 'jobs');
        try {
          for await (const j of api.jobs(tenant, { limit: 1000, ...filter })) {
            all.push(j);
            if (all.length % 1000 === 0) line.update(all.length);
          }
        } finally {
          line.end();
        }
        jobs = all;
      } else {
        ({ jobs, nextCursor } = await api.listJobs(tenant, { ...filter, ...(cursor !== undefined ? { cursor } : {}) }));
      }
      if (values.json) {
        io.out(JSON.stringify({ jobs, ...(nextCursor !== undefined ? { nextCursor } : {}) }));
      } else {
        const rows = jobs.map((j) => [j.runAt, j.state, j.jobId, j.schedule ?? '', j.deliveredAt ? `delivered ${j.deliveredAt}` : '']);
        const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
        for (const r of rows)
          io.out(
            r
              .map((c, i) => (i < 4 ? c.padEnd(widths[i]!) : c))
              .join('  ')
              .trimEnd(),
          );
        if (rows.length === 0) io.err(`no jobs of tenant ${tenant} match${cursor !== undefined ? ' after this cursor' : ''}`);
      }
      if (nextCursor !== undefined) io.err(`more: ${jobsCommandLine(tenant, filter)} --cursor '${nextCursor}'`);
      return 0;
    },
  },

  schedules: {
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
        async run({ values, str, rest, target, tenant, io }) {
          const name = scheduleNameOf('put', rest);
          const expression = str('expression');
          if (expression === undefined) throw new UsageError("schedules put needs --expression, e.g. --expression 'rate(5 minutes)'");
          const count = str('count');
          if (count !== undefined && !values['dry-run']) throw new UsageError('--count goes with --dry-run');
          if (count !== undefined && !/^\d+$/.test(count))
            throw new UsageError(`--count must be a whole number from 1 to 100, got '${count}'`);
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
        },
      },

      get: {
        brief: "print a schedule's definition and next runs",
        usage: '<name> --tenant <name> [options]',
        targeted: true,
        flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
        async run({ values, rest, target, tenant, io }) {
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
        },
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
        async run({ values, str, rest, target, tenant, io }) {
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
        },
      },

      delete: {
        brief: 'delete a schedule (occurrences due more than 5 s later are cancelled)',
        usage: '<name> --tenant <name> [options]',
        targeted: true,
        flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
        async run({ values, rest, target, tenant, io }) {
          const name = scheduleNameOf('delete', rest);
          const reply = await client(target()).deleteSchedule(tenant, name);
          io.out(values.json ? JSON.stringify(reply) : `deleted ${reply.name}: its occurrences due more than 5 s from now are cancelled`);
          return 0;
        },
      },

      pause: {
        brief: 'pause a schedule (occurrences due more than 5 s later are cancelled)',
        usage: '<name> --tenant <name> [options]',
        targeted: true,
        flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
        async run({ values, rest, target, tenant, io }) {
          const name = scheduleNameOf('pause', rest);
          const reply = await client(target()).pauseSchedule(tenant, name);
          if (values.json) io.out(JSON.stringify(reply));
          else io.out(`paused ${describeSchedule(reply)}`);
          return 0;
        },
      },

      resume: {
        brief: 'resume a paused schedule from now on (what fell while paused is not delivered)',
        usage: '<name> --tenant <name> [options]',
        targeted: true,
        flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
        async run({ values, rest, target, tenant, io }) {
          const name = scheduleNameOf('resume', rest);
          const reply = await client(target()).resumeSchedule(tenant, name);
          if (values.json) {
            io.out(JSON.stringify(reply));
            return 0;
          }
          io.out(`resumed ${describeSchedule(reply)}`);
          printRuns(io, reply);
          return 0;
        },
      },
    },
  },

  worker: {
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
    async run({ values, str, rest, target: resolve, io }) {
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
          if (e.type === 'dead')
            io.err(`dynein worker: message ${e.messageId} is not a Dynein job (${oneLine(e.error)}): moved to the DLQ`);
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
    },
  },

  redrive: {
    brief: "move the tenant's DLQ messages back to its queue",
    usage: '--tenant <name> [options]',
    summary: "Move the tenant's dead-letter queue messages back to its queue (StartMessageMoveTask where SQS has it).",
    targeted: true,
    flags: { ...TENANT, ...QUEUES, ...WHERE, ...HELP },
    async run({ rest, target: resolve, io }) {
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
    },
  },

  ui: {
    brief: 'open the job browser: a web page on localhost (jobs, schedules, dead letters)',
    usage: '[--port <n>] [--tenant <name>] [--endpoint <url> --region <r> --profile <p>]',
    summary:
      'Serve the job browser on http://127.0.0.1:<port>/<token>/ until Ctrl-C (a new random token each run: open the URL\n' +
      'it prints; anything without the token is refused): list jobs by state and time, a job and its\n' +
      'timeline, cancel, recurring schedules and their next runs, the dead-letter queue and redrive, refreshed live.\n' +
      "The server signs every API call itself (the local stack's tenant keys, or your AWS credentials with --endpoint):\n" +
      'the page holds no secret. See docs/ui.md.',
    targeted: false,
    flags: {
      port: { type: 'string', arg: '<n>', help: 'the port on 127.0.0.1 (default 8090; 0 picks a free one)' },
      tenant: { type: 'string', short: 't', arg: '<name>', help: 'the tenant shown first (default: the first of the local stack)' },
      ...WHERE,
      ...HELP,
    },
    async run({ str, rest, io }) {
      noPositionals('ui', rest);
      const portText = str('port') ?? '8090';
      if (!/^\d+$/.test(portText) || Number(portText) > 65_535)
        throw new UsageError(`--port must be a port number from 0 to 65535, got '${portText}'`);
      const tenant = str('tenant');
      const endpoint = str('endpoint');
      const listen = (opts: Parameters<typeof startUiServer>[0]) =>
        startUiServer(opts).catch((err: NodeJS.ErrnoException) => {
          if (err.code === 'EADDRINUSE') throw new Error(`port ${portText} is in use: pass another with --port (0 picks a free one)`);
          throw err;
        });
      let server: Awaited<ReturnType<typeof startUiServer>>;
      if (endpoint) {
        const target = resolveTarget({ tenant: tenant ?? '', endpoint, region: str('region'), profile: str('profile') });
        server = await listen({
          endpoint: target.endpoint,
          region: target.region,
          credentialsFor: () => target.credentials,
          tenants: tenant ? [tenant] : [],
          ...(tenant ? { tenant } : {}),
          local: false,
          port: Number(portText),
        });
      } else {
        if (str('region') || str('profile')) throw new UsageError('--region and --profile go with --endpoint');
        const local = readLocalJson(str('data-dir'));
        const tenants = Object.keys(local.tenants ?? {});
        if (tenant !== undefined && !tenants.includes(tenant))
          throw new Error(`tenant '${tenant}' is not in the local stack (it has ${tenants.join(', ') || 'none'})`);
        server = await listen({
          endpoint: local.endpoint,
          region: local.region,
          credentialsFor: (t) => {
            const k = Object.hasOwn(local.tenants, t) ? local.tenants[t] : undefined;
            return k ? { accessKeyId: k.accessKeyId, secretAccessKey: k.secretAccessKey } : undefined;
          },
          tenants,
          ...(tenant ? { tenant } : {}),
          local: true,
          port: Number(portText),
        });
      }
      io.out(`dynein ui: the job browser is at ${server.url} (Ctrl-C stops; the URL holds this run's token: do not share it)`);
      await new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      });
      await server.close();
      return 0;
    },
  },

  dlq: {
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
        async run({ values, str, rest, target, tenant, io }) {
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
              m.jobId !== undefined
                ? `${m.jobId}  runAt ${m.runAt}${m.schedule ? `  schedule ${m.schedule}` : ''}`
                : 'not a Dynein delivery';
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
        },
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
        async run({ values, rest, target, tenant, io }) {
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
        },
      },
      delete: {
        brief: 'delete messages named by handles',
        usage: '--tenant <name> <handle>... [options]',
        summary: 'Delete messages of the DLQ named by the handles `dynein dlq peek` printed (at most 100).',
        targeted: true,
        flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
        async run({ values, rest, target, tenant, io }) {
          if (rest.length === 0) throw new UsageError('dlq delete needs the handles of messages (from dynein dlq peek)');
          const reply = await client(target()).deleteDeadLetters(tenant, rest);
          if (values.json) io.out(JSON.stringify(reply));
          else io.out(handlesSummary('deleted', reply.deleted, reply.notFound, reply.failed));
          return reply.failed?.length ? 1 : 0;
        },
      },
    },
  },

  tenant: {
    brief: "operators: pause, resume, show or set a tenant's limits and weight",
    summary:
      'Tenant controls through the operator API (docs/tenant-controls.md; IAM: DyneinScheduler.grantAdmin). Locally it\n' +
      'uses local.json\'s operator key ("admin"); with --endpoint, your AWS credentials. Every change is recorded with who made it.',
    subcommands: {
      show: adminCommand('show', "print the tenant's controls: paused or not, limits, weight, last changes", (c, t) =>
        c.getTenantControls(t),
      ),
      pause: adminCommand('pause', 'pause the tenant: its jobs are accepted and held, none delivered until resume', (c, t) =>
        c.pauseTenant(t),
      ),
      resume: adminCommand('resume', 'resume the tenant: its held jobs are delivered in due order', (c, t) => c.resumeTenant(t)),
      set: adminCommand(
        'set',
        "set the tenant's rate limits and weight (only the options given change)",
        (c, t, values) => c.setTenantSettings(t, settingsOptions(values)),
        {
          'max-deliveries-per-second': { type: 'string', arg: '<n|none>', help: 'deliveries per second, 1 to 100000, or none (no limit)' },
          'max-submits-per-second': { type: 'string', arg: '<n|none>', help: 'submitted jobs per second, 1 to 100000, or none (no limit)' },
          weight: { type: 'string', arg: '<n>', help: 'share of dispatch relative to other tenants, 1 to 1000 (default 1)' },
        },
      ),
    },
  },

  local: {
    brief: 'start the local stack (API, DynamoDB, SQS, Scheduler, tick, dashboard)',
    usage: '[--port <n>] [--tenants <a,b>] [--data-dir <dir>]',
    summary:
      'Start the local stack (API, DynamoDB, SQS, Scheduler, tick, dashboard) until Ctrl-C; the same as `npm start` in a\n' +
      'clone. It writes <data dir>/local.json, which the other commands read. From an installed package it needs dynalite,\n' +
      'fauxqs, aws-local-stepfunctions, @aws-sdk/client-dynamodb, @aws-sdk/client-scheduler and @aws-sdk/client-secrets-manager\n' +
      '(`npm install -D ...`: it prints the exact command when one is missing). Other settings come from the\n' +
      'environment: DYNEIN_LOOKAHEAD_MS, DYNEIN_LEASE_MS, DYNEIN_TICK_RUN_MS, DYNEIN_TICK_EVERY_MS, AWS_REGION.',
    targeted: false,
    flags: {
      port: { type: 'string', arg: '<n>', help: 'the API port (default $DYNEIN_PORT, else 8080)' },
      tenants: { type: 'string', arg: '<a,b>', help: 'the tenants, comma-separated (default $DYNEIN_TENANTS, else demo)' },
      'data-dir': {
        type: 'string',
        arg: '<dir>',
        help: 'where local.json, keys and DynamoDB data live (default $DYNEIN_DATA_DIR, else .dynein)',
      },
      ...HELP,
    },
    async run({ str, rest }) {
      noPositionals('local', rest);
      await startLocal({ port: str('port'), tenants: str('tenants'), dataDir: str('data-dir') });
      return 0;
    },
  },

  completion: {
    brief: 'print the shell completion script (bash, zsh or fish)',
    usage: '<bash|zsh|fish>',
    summary:
      'Print the completion script of a shell, for its commands, subcommands and options:\n' +
      '  bash: source <(dynein completion bash)   (in ~/.bashrc)\n' +
      '  zsh:  source <(dynein completion zsh)    (in ~/.zshrc)\n' +
      '  fish: dynein completion fish > ~/.config/fish/completions/dynein.fish',
    targeted: false,
    flags: { ...HELP },
    async run({ rest, io }) {
      const shell = rest[0];
      if (rest.length !== 1 || !SHELLS.includes(shell as Shell))
        throw new UsageError(`completion needs one shell: dynein completion ${SHELLS.join('|')}`);
      io.out(completionScript(shell as Shell, completionTable()).trimEnd());
      return 0;
    },
  },
};

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

/** The command table as completion sees it: the same commands and flags `--help` prints. */
function completionTable(): CompletionCommand[] {
  const flagsOf = (flags: Readonly<Record<string, Flag>>): CompletionFlag[] =>
    Object.entries(flags).map(([name, f]) => ({
      name,
      short: f.short,
      takesValue: f.type === 'string',
      path: f.arg === '<dir>' ? 'dir' : f.arg?.includes('file') ? 'file' : undefined,
      help: f.help,
    }));
  return Object.entries(COMMANDS).map(([name, c]) =>
    'subcommands' in c
      ? {
          name,
          brief: c.brief,
          flags: flagsOf(HELP),
          subcommands: Object.entries(c.subcommands).map(([sub, s]) => ({ name: sub, brief: s.brief, flags: flagsOf(s.flags) })),
        }
      : { name, brief: c.brief, flags: flagsOf(c.flags), ...(name === 'completion' ? { args: SHELLS } : {}) },
  );
}

/** A `dynein tenant <name> <tenant>` command: one tenant, the operator's target, the controls printed. */
function adminCommand(
  name: string,
  brief: string,
  call: (c: DyneinClient, tenant: string, values: Values) => Promise<TenantControls>,
  flags: Readonly<Record<string, Flag>> = {},
): Command {
  return {
    brief,
    usage: `<tenant>${Object.keys(flags).length > 0 ? ' [--max-deliveries-per-second <n|none>] [--max-submits-per-second <n|none>] [--weight <n>]' : ''} [options]`,
    summary: `${brief.charAt(0).toUpperCase()}${brief.slice(1)}.`,
    targeted: false,
    flags: { ...flags, ...JSON_OUT, ...WHERE, ...HELP },
    async run({ values, str, rest, io }) {
      if (rest.length !== 1) throw new UsageError(`tenant ${name} needs one tenant name: dynein tenant ${name} <tenant>`);
      if (name === 'set') settingsOptions(values); // checked before anything is read
      const where = resolveAdminTarget({
        endpoint: str('endpoint'),
        region: str('region'),
        profile: str('profile'),
        dataDir: str('data-dir'),
      });
      const controls = await call(new DyneinClient(where), rest[0]!, values);
      if (values.json) io.out(JSON.stringify(controls));
      else for (const line of describeControls(controls)) io.out(line);
      return 0;
    },
  };
}

/** The settings `dynein tenant set` changes, from its options; a usage error naming the option otherwise. */
function settingsOptions(values: Values): TenantSettingsUpdate {
  const limit = (flag: string): number | null | undefined => {
    const v = values[flag];
    if (typeof v !== 'string') return undefined;
    if (v === 'none') return null;
    if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 100_000)
      throw new UsageError(`--${flag} must be a whole number from 1 to 100000, or none, got '${v}'`);
    return Number(v);
  };
  const update: { -readonly [K in keyof TenantSettingsUpdate]: TenantSettingsUpdate[K] } = {};
  const deliveries = limit('max-deliveries-per-second');
  const submits = limit('max-submits-per-second');
  if (deliveries !== undefined) update.maxDeliveriesPerSecond = deliveries;
  if (submits !== undefined) update.maxSubmitsPerSecond = submits;
  const weight = values.weight;
  if (typeof weight === 'string') {
    if (!/^\d+$/.test(weight) || Number(weight) < 1 || Number(weight) > 1000)
      throw new UsageError(`--weight must be a whole number from 1 to 1000, got '${weight}'`);
    update.weight = Number(weight);
  }
  if (Object.keys(update).length === 0)
    throw new UsageError('tenant set needs at least one of --max-deliveries-per-second, --max-submits-per-second, --weight');
  return update;
}

/** `billing  PAUSED since <time>` / `billing  running`, the settings, then the changes (latest last). */
function describeControls(c: TenantControls): string[] {
  const s = c.settings;
  return [
    `${c.tenant}  ${c.paused ? `PAUSED since ${c.pausedAt ?? '?'}` : 'running'}`,
    `  maxDeliveriesPerSecond ${s.maxDeliveriesPerSecond ?? 'none'}  maxSubmitsPerSecond ${s.maxSubmitsPerSecond ?? 'none'}  weight ${s.weight}`,
    ...(c.changes.length > 0 ? ['  changes (latest last):'] : []),
    ...c.changes.map((ch) => `    ${ch.at}  ${ch.action}${ch.settings ? ` ${JSON.stringify(ch.settings)}` : ''}  by ${ch.by}`),
  ];
}

/** The `dynein jobs` command line of these filters (for the next page's hint). */
function jobsCommandLine(tenant: string, f: Readonly<Record<string, string | number>>): string {
  const quote = (v: string | number) => (/^[\w.:+-]+$/.test(String(v)) ? String(v) : `'${String(v)}'`);
  return [`dynein jobs --tenant ${tenant}`, ...Object.entries(f).map(([k, v]) => `--${k} ${quote(v)}`)].join(' ');
}

/** `moved back to the queue 2; not in the DLQ (any more) 1: <handle>` */
function handlesSummary(done: string, ok: readonly string[], notFound: readonly string[], failed: readonly string[] = []): string {
  return [
    `${done} ${ok.length}`,
    ...(notFound.length > 0 ? [`not in the DLQ (any more) ${notFound.length}: ${notFound.join(' ')}`] : []),
    ...(failed.length > 0 ? [`failed (left in the DLQ) ${failed.length}: ${failed.join(' ')}`] : []),
  ].join('; ');
}

function noPositionals(command: string, rest: readonly string[]): void {
  if (rest.length > 0) throw new UsageError(`${command} takes no argument '${rest[0]}'`);
}

function jobIdOf(command: string, rest: readonly string[]): string {
  if (rest.length !== 1) throw new UsageError(`${command} needs one job id: dynein ${command} --tenant T <jobId>`);
  return rest[0]!;
}

/** The one schedule name a schedules subcommand takes. */
function scheduleNameOf(command: string, rest: readonly string[]): string {
  if (rest.length !== 1)
    throw new UsageError(`schedules ${command} needs one schedule name: dynein schedules ${command} <name> --tenant T`);
  const problem = scheduleNameProblem(rest[0]);
  if (problem) throw new UsageError(problem);
  return rest[0]!;
}

/** `{key: value}` when the value is given, else `{}` (for spreading into a readonly object). */
const optional = <K extends string, V>(key: K, value: V | undefined) => (value === undefined ? {} : ({ [key]: value } as Record<K, V>));

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

const UNITS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 };

/**
 * Seconds in a duration like `30s`, `5m`, `2h`, `3d`, `1h30m` or `1.5h`.
 * @example parseDuration('1h30m') // 5400
 */
export function parseDuration(text: string): number {
  const parts = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/.test(text.trim()) ? text.trim().match(/\d+(?:\.\d+)?(?:ms|s|m|h|d)/g)! : undefined;
  if (!parts)
    throw new UsageError(`--in '${text}' is not a duration: use a number and a unit (ms, s, m, h, d), e.g. 30s, 5m, 2h, 3d, 1h30m`);
  return parts.reduce((sum, p) => {
    const [, n, unit] = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(p)!;
    return sum + Number(n) * UNITS[unit!]!;
  }, 0);
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** The jobs of a JSON Lines file (blank lines skipped); refuses the whole file on a bad line, so nothing is sent. */
function readJsonl(file: string): { line: number; job: JobRequest }[] {
  const text = readText(file);
  const jobs: { line: number; job: JobRequest }[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    if (raw.trim() === '') return;
    let job: unknown;
    try {
      job = JSON.parse(raw);
    } catch (err) {
      throw new UsageError(`${file} line ${i + 1} is not JSON (${(err as Error).message}): nothing was sent`);
    }
    if (typeof job !== 'object' || job === null || Array.isArray(job))
      throw new UsageError(`${file} line ${i + 1} is not a JSON object like {"payload": ..., "delaySeconds": 30}: nothing was sent`);
    jobs.push({ line: i + 1, job: job as JobRequest });
  });
  if (jobs.length === 0) throw new UsageError(`${file} holds no jobs`);
  return jobs;
}

/** An error as one line: API errors with their code, status and request id. */
function oneLine(err: unknown): string {
  let text: string;
  if (err instanceof DyneinApiError)
    text = `${err.code} (HTTP ${err.status}): ${err.message}${err.requestId ? ` [request ${err.requestId}]` : ''}`;
  else text = (err as Error)?.message ?? String(err);
  return text.replace(/\s*\n\s*/g, '; ');
}
