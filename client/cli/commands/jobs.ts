/**
 * The commands on one-off jobs: `schedule`, `batch`, `get`, `show`, `cancel`, `jobs` (the
 * tenant's jobs listed by state and time) with `jobs cancel` (bulk cancel), and `operation`.
 */
import { MAX_DEBOUNCE_PERIOD_SECONDS, MAX_DEBOUNCE_WAIT_SECONDS } from '../../../core/model/index.js';
import { isJson } from '../../../core/util/index.js';
import type { JobDebounce, JobRequest, ListedJob, ScheduledJob } from '../../apiTypes.js';
import { noPositionals, optional, parseDuration, readJsonl, readText } from '../args.js';
import { client, type Command, type Ctx, type Group } from '../command.js';
import { UsageError } from '../errors.js';
import { HELP, JSON_OUT, TENANT, WHERE } from '../flags.js';
import { progressLine } from '../progress.js';
import { cancelJobsCommand, operationCommand } from './operations.js';
import { jobSpans } from '../../traceSpans.js';

export const jobCommands: Readonly<Record<string, Command | Group>> = {
  schedule: {
    brief: 'schedule a job, print its id',
    usage:
      '--tenant <name> (--at <time> | --in <duration> | --debounce-key <key> --debounce-period <seconds>) [--payload <JSON> | @file] [options]',
    summary:
      'Schedule a job; print its id. With --debounce-key: the pending job of that key, if any, takes this payload and is\n' +
      "due --debounce-period after this submit (stderr says whether it replaced one); the id is that job's.",
    targeted: true,
    flags: {
      ...TENANT,
      at: { type: 'string', arg: '<time>', help: 'when, as an RFC 3339 time: 2030-01-31T09:00:00Z' },
      in: { type: 'string', arg: '<duration>', help: 'or in how long: 30s, 5m, 2h, 3d, 1h30m' },
      payload: { type: 'string', arg: '<JSON>', help: 'the payload (default null); @file.json reads it from a file' },
      'idempotency-key': { type: 'string', arg: '<key>', help: 'a retry with the same key and time stores one job' },
      'not-cancellable': { type: 'boolean', help: 'may go straight to the queue when due within 900 s' },
      tag: { type: 'string', multiple: true, arg: '<tag>', help: 'a tag, to find the job by (repeat for more, up to 10)' },
      key: { type: 'string', arg: '<concurrencyKey>', help: 'a concurrency key: jobs with the same key run at most --limit at a time' },
      limit: { type: 'string', arg: '<n>', help: 'with --key: how many of its jobs may run at once, 1 to 1000 (default 1)' },
      'debounce-key': {
        type: 'string',
        arg: '<key>',
        help: "replace the key's pending job (or start one), due --debounce-period after this submit; no --at or --in",
      },
      'debounce-period': {
        type: 'string',
        arg: '<seconds>',
        help: `with --debounce-key: seconds (or 30s, 5m, 2h) from the latest submit, 1 to ${MAX_DEBOUNCE_PERIOD_SECONDS}`,
      },
      'debounce-max-wait': {
        type: 'string',
        arg: '<seconds>',
        help: `with --debounce-key: never due later than this after its pending job's first submit (the period to ${MAX_DEBOUNCE_WAIT_SECONDS})`,
      },
      ...JSON_OUT,
      ...WHERE,
      ...HELP,
    },
    run: runSchedule,
  },

  batch: {
    brief: 'schedule one job per line of a JSON Lines file',
    usage: '--tenant <name> <file.jsonl> [options]',
    summary:
      'Schedule one job per line of a JSON Lines file ({"payload": ..., "runAt" | "delaySeconds": ...});\nprint a summary (a progress bar on a terminal). Exit 1 if any job failed.',
    targeted: true,
    flags: { ...TENANT, json: { type: 'boolean', help: 'print one JSON line per job (its reply or its error)' }, ...WHERE, ...HELP },
    run: runBatch,
  },

  get: {
    brief: "print a job's state",
    usage: '--tenant <name> <jobId> [options]',
    summary: "Print a job's state and due time.",
    targeted: true,
    flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
    run: runGet,
  },

  show: {
    brief: "print a job's state and timeline",
    usage: '--tenant <name> <jobId> [options]',
    summary:
      "Print a job's state and, for a tenant with history on (docs/history.md), its timeline: scheduled, delivered,\n" +
      'and the outcome the worker reported (attempt, duration, error, result). With --trace, the scheduler spans of its\n' +
      'trace the local stack kept (submit, ingest, dispatch; docs/tracing.md) as a waterfall.',
    targeted: true,
    flags: {
      ...TENANT,
      trace: { type: 'boolean', help: "print the job's trace: the local stack's spans of it, with durations and lateness" },
      ...JSON_OUT,
      ...WHERE,
      ...HELP,
    },
    run: runShow,
  },

  cancel: {
    brief: 'cancel a job',
    usage: '--tenant <name> <jobId> [options]',
    summary:
      'Cancel a job (exit 1 with AlreadyQueued or NotCancellable when it is too late). A running job whose outcomes are\n' +
      'reported (history on, or a workflow job) prints CANCEL_REQUESTED: its worker stops it at its next heartbeat\n' +
      'and reports CANCELLED (docs/flow-control.md).',
    targeted: true,
    flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
    run: runCancel,
  },

  jobs: {
    brief: "list the tenant's jobs by state and time, one line each; jobs cancel: cancel many at once",
    summary: "The tenant's jobs: listed by state and time (no subcommand), or cancelled many at once (jobs cancel).",
    subcommands: { cancel: cancelJobsCommand },
    default: {
      brief: "list the tenant's jobs by state and time, one line each",
      usage:
        '--tenant <name> [--state <S>] [--from <time>] [--to <time>] [--schedule <name>] [--tag <tag>] [--key <concurrencyKey>] [--debounce-key <key>] [--order asc|desc] [--limit <n> | --all] [options]',
      summary:
        "List the tenant's jobs in runAt order, one line each (runAt, state, job id, schedule, delivered at, tags, key): one page\n" +
        'of --limit (default 100) and the command for the next one on stderr, or every page with --all.\n' +
        'dynein jobs cancel --help: cancel every job with a tag, a key, or pending in a due-time range.',
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
        tag: { type: 'string', arg: '<tag>', help: 'jobs with this tag only (kept while a job waits or once cancelled)' },
        key: {
          type: 'string',
          arg: '<concurrencyKey>',
          help: 'jobs submitted with this concurrency key only (combines with the other filters)',
        },
        'debounce-key': {
          type: 'string',
          arg: '<key>',
          help: 'jobs submitted with this debounce key only (combines with the other filters)',
        },
        order: { type: 'string', arg: '<asc|desc>', help: 'soonest first (asc, the default) or latest first' },
        limit: { type: 'string', arg: '<n>', help: 'jobs per page, 1 to 1000 (default 100)' },
        cursor: { type: 'string', arg: '<c>', help: 'the page after the one that printed this cursor (same filters)' },
        all: { type: 'boolean', help: 'every page, not just the first' },
        json: { type: 'boolean', help: 'print {"jobs": [...], "nextCursor"?} as one JSON line' },
        ...WHERE,
        ...HELP,
      },
      run: runJobs,
    },
  },

  operation: operationCommand,
};

async function runSchedule({ values, str, rest, target, tenant, io }: Ctx): Promise<number> {
  noPositionals('schedule', rest);
  const [at, inText, payloadText, key] = [str('at'), str('in'), str('payload'), str('idempotency-key')];
  const debounce = debounceOf(values, str);
  if (debounce === undefined && (at === undefined) === (inText === undefined))
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
    ...(debounce !== undefined ? { debounce } : at !== undefined ? { runAt: at } : { delaySeconds: parseDuration(inText ?? '') }),
    ...(key !== undefined ? { idempotencyKey: key } : {}),
    ...(values['not-cancellable'] ? { cancellable: false } : {}),
    ...(Array.isArray(values.tag) ? { tags: values.tag } : {}),
    ...concurrencyOf(str('key'), str('limit')),
  };
  const reply = await client(target()).schedule(tenant, job);
  io.out(values.json ? JSON.stringify(reply) : reply.jobId);
  // The id alone on stdout (for `id=$(dynein schedule ...)`); what the debounce did on stderr.
  if (debounce !== undefined && !values.json) io.err(debouncedText(debounce.key, reply));
  return 0;
}

/**
 * `--debounce-key`, `--debounce-period` and `--debounce-max-wait` as the job's `debounce`, or
 * undefined without them. The combinations the API refuses are refused here, before anything is
 * sent (core/model/validate.ts debouncedJob); the key itself is the API's to check.
 */
function debounceOf(values: Ctx['values'], str: Ctx['str']): JobDebounce | undefined {
  const [key, periodText, maxWaitText] = [str('debounce-key'), str('debounce-period'), str('debounce-max-wait')];
  if (key === undefined) {
    const orphan = periodText !== undefined ? '--debounce-period' : maxWaitText !== undefined ? '--debounce-max-wait' : undefined;
    if (orphan !== undefined)
      throw new UsageError(`${orphan} needs --debounce-key: it is the debounce of that key's job; nothing was sent`);
    return undefined;
  }
  if (periodText === undefined)
    throw new UsageError(
      "--debounce-key needs --debounce-period <seconds>: the job is due that long after the key's latest submit; nothing was sent",
    );
  const clash = [...(str('at') !== undefined ? ['--at'] : []), ...(str('in') !== undefined ? ['--in'] : [])];
  if (clash.length > 0)
    throw new UsageError(
      `--debounce-key takes no ${clash.join(' or ')}: a debounced job is due --debounce-period after the key's latest submit; nothing was sent`,
    );
  if (str('idempotency-key') !== undefined)
    throw new UsageError(
      '--debounce-key and --idempotency-key cannot be combined: a retried debounced submit replaces the pending job with the same payload; nothing was sent',
    );
  if (values['not-cancellable'])
    throw new UsageError(
      '--debounce-key and --not-cancellable cannot be combined: a debounced job is replaced (and cancelled) until it is due; nothing was sent',
    );
  if (str('key') !== undefined || str('limit') !== undefined)
    throw new UsageError(
      `--debounce-key and ${str('key') !== undefined ? '--key' : '--limit'} cannot be combined yet: leave one out; nothing was sent`,
    );
  const periodSeconds = secondsOf('--debounce-period', periodText, 1, MAX_DEBOUNCE_PERIOD_SECONDS);
  if (maxWaitText === undefined) return { key, periodSeconds };
  const maxWaitSeconds = secondsOf('--debounce-max-wait', maxWaitText, Math.ceil(periodSeconds * 1000) / 1000, MAX_DEBOUNCE_WAIT_SECONDS);
  return { key, periodSeconds, maxWaitSeconds };
}

/** A number of seconds (`30`, `1.5`) or a duration (`30s`, `5m`, `1h30m`), from `min` to `max`. */
function secondsOf(flag: string, text: string, min: number, max: number): number {
  const seconds = /^\d+(?:\.\d+)?$/.test(text.trim()) ? Number(text) : parseDuration(text, flag);
  if (seconds < min || seconds > max)
    throw new UsageError(`${flag} must be from ${min} to ${max} seconds, got '${text}'; nothing was sent`);
  return seconds;
}

/** What a debounced submit did: replaced the key's pending job, or started one. */
function debouncedText(key: string, reply: ScheduledJob): string {
  return reply.debounced
    ? `replaced the pending job of debounce key ${key}: ${reply.jobId} now due ${reply.runAt}`
    : `scheduled ${reply.jobId} for debounce key ${key}: due ${reply.runAt}`;
}

async function runBatch({ values, rest, target, tenant, io }: Ctx): Promise<number> {
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
}

async function runGet({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  const jobId = jobIdOf('get', rest);
  const reply = await client(target()).get(tenant, jobId);
  io.out(values.json ? JSON.stringify(reply) : `${reply.state}  runAt ${reply.runAt}  ${reply.jobId}`);
  return 0;
}

async function runShow({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  const jobId = jobIdOf('show', rest);
  const reply = await client(target()).get(tenant, jobId);
  if (values.trace) return showTrace(target().endpoint, reply, values.json === true, io);
  if (values.json) {
    io.out(JSON.stringify(reply));
    return 0;
  }
  io.out(`${reply.jobId}\n  state  ${reply.state}\n  runAt  ${reply.runAt}`);
  if (reply.message) io.out(`  ${reply.message}`);
  if (reply.concurrencyKey !== undefined)
    io.out(`  concurrencyKey  ${reply.concurrencyKey}${reply.concurrencyLimit !== undefined ? `  (limit ${reply.concurrencyLimit})` : ''}`);
  if (reply.debounceKey !== undefined) io.out(`  debounceKey  ${reply.debounceKey}`);
  if (reply.cancelRequested) io.out('  cancel requested: its worker stops it at its next heartbeat and reports CANCELLED');
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
}

/** A span as `GET /local/traces/<traceId>` answers it (adapters' SpanRecord). */
interface LocalSpan {
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly attributes: Record<string, string | number | boolean>;
}

/** `show --trace`: the job's trace id, and the spans of it the local stack kept as a waterfall. */
async function showTrace(endpoint: string, reply: { jobId: string; traceId?: string }, json: boolean, io: Ctx['io']): Promise<number> {
  if (reply.traceId === undefined)
    throw new UsageError(`${reply.jobId} has no stored trace (a job sent straight to its queue): its message's traceparent carries it`);
  let all: LocalSpan[] | undefined;
  try {
    const res = await fetch(`${endpoint.replace(/\/+$/, '')}/local/traces/${reply.traceId}`);
    if (res.ok) all = ((await res.json()) as { spans: LocalSpan[] }).spans;
  } catch {
    all = undefined;
  }
  // A batch's or a workflow's jobs share a trace: this job's spans, and those of no job (the workflow's submit).
  const spans = all && jobSpans(all, reply.jobId);
  if (json) {
    io.out(JSON.stringify({ jobId: reply.jobId, traceId: reply.traceId, ...(spans ? { spans } : {}) }));
    return 0;
  }
  io.out(`${reply.jobId}\n  traceId  ${reply.traceId}`);
  if (spans === undefined) {
    io.out('  (not the local stack: its spans are in the tracing tool the scheduler exports to, see docs/tracing.md)');
    return 0;
  }
  if (spans.length === 0) {
    io.out('  (no spans kept: the local stack keeps the last 10,000, of sampled traces, since it started)');
    return 0;
  }
  for (const line of waterfall(spans)) io.out(`  ${line}`);
  const others = all!.length - spans.length;
  if (others > 0) io.out(`  (${others} span(s) of other jobs of this trace left out: its batch's or workflow's)`);
  return 0;
}

/** One line per span, by start: offset from the first, name, duration, and what says most about it. */
export function waterfall(spans: readonly LocalSpan[], width = 30): string[] {
  const t0 = Math.min(...spans.map((s) => s.startMs));
  const t1 = Math.max(...spans.map((s) => s.endMs));
  const scale = width / Math.max(1, t1 - t0);
  return [...spans]
    .sort((a, b) => a.startMs - b.startMs)
    .map((s) => {
      const from = Math.min(width - 1, Math.floor((s.startMs - t0) * scale));
      const len = Math.max(1, Math.round((s.endMs - s.startMs) * scale));
      const bar = `${' '.repeat(from)}${'#'.repeat(Math.min(len, width - from))}`.padEnd(width);
      const a = s.attributes;
      const extra = [
        a['dynein.lateness_ms'] !== undefined ? `lateness ${a['dynein.lateness_ms']} ms` : '',
        a['dynein.outcome'] !== undefined ? String(a['dynein.outcome']) : '',
        a['messaging.destination.name'] !== undefined ? `to ${a['messaging.destination.name']}` : '',
      ].filter(Boolean);
      const at = `+${formatMs(s.startMs - t0)}`.padStart(9);
      return `${at}  |${bar}|  ${s.name.padEnd(16)} ${formatMs(s.endMs - s.startMs).padStart(8)}${extra.length ? `  ${extra.join('  ')}` : ''}`;
    });
}

const formatMs = (ms: number): string => (ms >= 10_000 ? `${(ms / 1000).toFixed(1)} s` : `${Math.round(ms)} ms`);

async function runCancel({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  const jobId = jobIdOf('cancel', rest);
  const reply = await client(target()).cancel(tenant, jobId);
  io.out(values.json ? JSON.stringify(reply) : `${reply.state}  ${reply.jobId}`);
  return 0;
}

async function runJobs({ values, str, rest, target, tenant, io }: Ctx): Promise<number> {
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
    ...optional('tag', str('tag')),
    ...optional('concurrencyKey', str('key')),
    ...optional('debounceKey', str('debounce-key')),
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
    const rows = jobs.map((j) => [
      j.runAt ?? 'waiting for parents',
      j.state,
      j.jobId,
      j.schedule ?? '',
      [j.deliveredAt ? `delivered ${j.deliveredAt}` : '', j.tags ? `tags ${j.tags.join(', ')}` : '', keyText(j)].filter(Boolean).join('  '),
    ]);
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
}

/** `--key` and `--limit` as the job's `concurrencyKey` and `concurrencyLimit` (the key itself is the API's to check). */
function concurrencyOf(key: string | undefined, limitText: string | undefined): Pick<JobRequest, 'concurrencyKey' | 'concurrencyLimit'> {
  if (limitText === undefined) return key === undefined ? {} : { concurrencyKey: key };
  if (key === undefined) throw new UsageError('--limit needs --key: it limits how many jobs of that concurrency key run at once');
  if (!/^\d+$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 1000)
    throw new UsageError(`--limit must be a whole number from 1 to 1000, got '${limitText}'`);
  return { concurrencyKey: key, concurrencyLimit: Number(limitText) };
}

function jobIdOf(command: string, rest: readonly string[]): string {
  if (rest.length !== 1) throw new UsageError(`${command} needs one job id: dynein ${command} --tenant T <jobId>`);
  return rest[0]!;
}

/** A listed keyed job's key and limit, as its line shows them: `key acct-7 (limit 2)`; '' for a job without one. */
function keyText(j: ListedJob): string {
  if (j.concurrencyKey === undefined) return '';
  return `key ${j.concurrencyKey}${j.concurrencyLimit !== undefined ? ` (limit ${j.concurrencyLimit})` : ''}`;
}

/** The flag of each filter whose SDK name is not its flag's. */
const FLAG_OF: Readonly<Record<string, string>> = { concurrencyKey: 'key', debounceKey: 'debounce-key' };

/** The `dynein jobs` command line of these filters (for the next page's hint). */
function jobsCommandLine(tenant: string, f: Readonly<Record<string, string | number>>): string {
  const quote = (v: string | number) => (/^[\w.:+-]+$/.test(String(v)) ? String(v) : `'${String(v)}'`);
  return [`dynein jobs --tenant ${tenant}`, ...Object.entries(f).map(([k, v]) => `--${FLAG_OF[k] ?? k} ${quote(v)}`)].join(' ');
}
