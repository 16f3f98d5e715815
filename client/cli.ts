import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { isJson } from '../core/jsonText.js';
import { DyneinClient, type JobRequest } from './client.js';
import { UsageError, redrive, resolveTarget, type Target } from './cliTarget.js';
import { DyneinApiError } from './errors.js';
import { Worker } from './worker.js';

const USAGE = `Usage: dynein <command> --tenant <name> [options]

Commands:
  schedule --tenant T (--at <RFC 3339> | --in <30s|5m|2h|3d>) [--payload <JSON> | @file]
           [--idempotency-key K] [--not-cancellable] [--json]    schedule a job, print its id
  batch    --tenant T <file.jsonl>            schedule one job per line ({"payload", "runAt" | "delaySeconds"})
  get      --tenant T <jobId> [--json]        print a job's state
  cancel   --tenant T <jobId> [--json]        cancel a job
  worker   --tenant T [--json] [--concurrency N] [--wait-time S]
                                              print one line per delivery (and delete it) until SIGTERM
  redrive  --tenant T                         move the tenant's DLQ messages back to its queue

Where:
  (default)          the local stack: $DYNEIN_DATA_DIR/local.json (--data-dir, default .dynein)
  --endpoint <url>   the API on AWS; credentials from the default chain (--profile), --region;
                     worker and redrive also need --queue-url (and redrive --dlq-url)
`;

const OPTIONS = {
  tenant: { type: 'string', short: 't' },
  endpoint: { type: 'string' },
  region: { type: 'string' },
  profile: { type: 'string' },
  'data-dir': { type: 'string' },
  'queue-url': { type: 'string' },
  'dlq-url': { type: 'string' },
  at: { type: 'string' },
  in: { type: 'string' },
  payload: { type: 'string' },
  'idempotency-key': { type: 'string' },
  'not-cancellable': { type: 'boolean' },
  concurrency: { type: 'string' },
  'wait-time': { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Values = ReturnType<typeof parse>['values'];

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

function parse(args: readonly string[]) {
  try {
    return parseArgs({ args: [...args], options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
}

/** Runs the CLI; resolves with the process exit code (0 ok, 1 failed, 2 usage). */
export async function main(args: readonly string[], io: Io = stdio): Promise<number> {
  try {
    const { values, positionals } = parse(args);
    const [command, ...rest] = positionals;
    if (values.help || command === 'help') {
      io.out(USAGE);
      return 0;
    }
    if (command === undefined) {
      io.err(USAGE);
      return 2;
    }
    const run = COMMANDS[command];
    if (!run) throw new UsageError(`unknown command '${command}': one of ${Object.keys(COMMANDS).join(', ')}`);
    if (!values.tenant) throw new UsageError(`${command} needs --tenant <name>`);
    let resolved: Target | undefined;
    const target = () =>
      (resolved ??= resolveTarget({
        tenant: values.tenant!,
        endpoint: values.endpoint,
        region: values.region,
        profile: values.profile,
        dataDir: values['data-dir'],
        queueUrl: values['queue-url'],
        dlqUrl: values['dlq-url'],
      }));
    try {
      return await run({ values, rest, target, tenant: values.tenant, io });
    } finally {
      resolved?.close();
    }
  } catch (err) {
    io.err(`dynein: ${oneLine(err)}`);
    return err instanceof UsageError ? 2 : 1;
  }
}

interface Ctx {
  readonly values: Values;
  readonly rest: readonly string[];
  /** Where to talk to, resolved on first use (after the command line was checked). */
  readonly target: () => Target;
  readonly tenant: string;
  readonly io: Io;
}

const client = (t: Target) => new DyneinClient({ endpoint: t.endpoint, region: t.region, credentials: t.credentials });

const COMMANDS: Record<string, (c: Ctx) => Promise<number>> = {
  async schedule({ values, rest, target, tenant, io }) {
    noPositionals('schedule', rest);
    if ((values.at === undefined) === (values.in === undefined)) throw new UsageError('schedule needs exactly one of --at <RFC 3339 time> or --in <duration>');
    // The payload travels as the text given (payloadJson), byte for byte.
    let payloadJson = 'null';
    if (values.payload !== undefined) {
      payloadJson = values.payload.startsWith('@') ? readText(values.payload.slice(1)) : values.payload;
      if (!isJson(payloadJson)) throw new UsageError(`--payload is not JSON: quote it, e.g. --payload '{"a":1}', or give a file as --payload @file.json`);
    }
    const job: JobRequest = {
      payloadJson,
      ...(values.at !== undefined ? { runAt: values.at } : { delaySeconds: parseDuration(values.in!) }),
      ...(values['idempotency-key'] !== undefined ? { idempotencyKey: values['idempotency-key'] } : {}),
      ...(values['not-cancellable'] ? { cancellable: false } : {}),
    };
    const reply = await client(target()).schedule(tenant, job);
    io.out(values.json ? JSON.stringify(reply) : reply.jobId);
    return 0;
  },

  async batch({ values, rest, target, tenant, io }) {
    if (rest.length !== 1) throw new UsageError('batch needs one file: dynein batch --tenant T <file.jsonl>');
    const jobs = readJsonl(rest[0]!);
    const draw = (done: number) => {
      const width = 30;
      const filled = Math.round((done / jobs.length) * width);
      io.progress?.(`[${'#'.repeat(filled)}${'.'.repeat(width - filled)}] ${done}/${jobs.length} jobs`);
    };
    draw(0);
    const results = await client(target()).scheduleBatch(tenant, jobs.map((j) => j.job), { onProgress: draw });
    if (io.progress) io.err('');
    const failed = results.flatMap((r, i) => (r.ok ? [] : [{ line: jobs[i]!.line, error: r.error }]));
    if (values.json) for (const r of results) io.out(JSON.stringify(r.ok ? r.job : { error: { code: r.error.code, message: r.error.message } }));
    for (const f of failed) io.err(`line ${f.line}: ${f.error.code}: ${f.error.message}`);
    const summary = `scheduled ${results.length - failed.length} of ${results.length} jobs${failed.length ? `, ${failed.length} failed` : ''}`;
    (values.json ? io.err : io.out)(summary);
    return failed.length > 0 ? 1 : 0;
  },

  async get({ values, rest, target, tenant, io }) {
    const jobId = jobIdOf('get', rest);
    const reply = await client(target()).get(tenant, jobId);
    io.out(values.json ? JSON.stringify(reply) : `${reply.state}  runAt ${reply.runAt}  ${reply.jobId}`);
    return 0;
  },

  async cancel({ values, rest, target, tenant, io }) {
    const jobId = jobIdOf('cancel', rest);
    const reply = await client(target()).cancel(tenant, jobId);
    io.out(values.json ? JSON.stringify(reply) : `${reply.state}  ${reply.jobId}`);
    return 0;
  },

  async worker({ values, rest, target: resolve, io }) {
    noPositionals('worker', rest);
    const concurrency = values.concurrency === undefined ? 10 : Number(values.concurrency);
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new UsageError(`--concurrency must be a whole number ≥ 1, got '${values.concurrency}'`);
    const waitTimeSeconds = values['wait-time'] === undefined ? 20 : Number(values['wait-time']);
    if (!Number.isInteger(waitTimeSeconds) || waitTimeSeconds < 0 || waitTimeSeconds > 20) throw new UsageError(`--wait-time must be a whole number of seconds from 0 to 20, got '${values['wait-time']}'`);
    const target = resolve();
    if (!target.queueUrl) throw new UsageError('worker needs --queue-url with --endpoint (the tenant queue)');
    const worker = new Worker({
      queueUrl: target.queueUrl,
      sqs: target.sqs(),
      concurrency,
      waitTimeSeconds,
      ...(target.dlqUrl ? { deadLetterQueueUrl: target.dlqUrl } : {}),
      handler: (job, ctx) => {
        const receivedAt = new Date(ctx.receivedAt).toISOString();
        if (values.json) {
          io.out(JSON.stringify({ jobId: job.jobId, tenant: job.tenant, runAt: job.runAt, receivedAt, latenessMs: ctx.latenessMs, receiveCount: ctx.receiveCount, payload: job.payload }));
        } else {
          io.out(`${receivedAt}  ${job.jobId}  runAt ${job.runAt}  late ${ctx.latenessMs} ms  receive #${ctx.receiveCount}  ${JSON.stringify(job.payload)}`);
        }
      },
      onEvent: (e) => {
        if (e.type === 'error') io.err(`dynein worker: ${e.operation}: ${oneLine(e.error)}`);
        if (e.type === 'dead') io.err(`dynein worker: message ${e.messageId} is not a Dynein job (${oneLine(e.error)}): moved to the DLQ`);
      },
    });
    if (!values.json) io.err(`dynein worker: consuming ${target.queueUrl} (Ctrl-C stops)`);
    const stopping = () => !values.json && io.err(`dynein worker: stopping after the receive under way (up to ${waitTimeSeconds} s) and ${worker.active} running job(s); Ctrl-C again quits at once`);
    process.once('SIGINT', stopping);
    process.once('SIGTERM', stopping);
    await worker.run();
    process.off('SIGINT', stopping);
    process.off('SIGTERM', stopping);
    return 0;
  },

  async redrive({ rest, target: resolve, io }) {
    noPositionals('redrive', rest);
    const target = resolve();
    if (!target.queueUrl || !target.dlqUrl) throw new UsageError('redrive needs --queue-url and --dlq-url with --endpoint');
    const { moved, method } = await redrive(target.sqs(), target.queueUrl, target.dlqUrl, io.err);
    io.out(`moved ${moved} message${moved === 1 ? '' : 's'} from the DLQ back to the queue${method === 'copy' ? ' (receive, send, delete: this SQS has no StartMessageMoveTask)' : ''}`);
    return 0;
  },
};

function noPositionals(command: string, rest: readonly string[]): void {
  if (rest.length > 0) throw new UsageError(`${command} takes no argument '${rest[0]}'`);
}

function jobIdOf(command: string, rest: readonly string[]): string {
  if (rest.length !== 1) throw new UsageError(`${command} needs one job id: dynein ${command} --tenant T <jobId>`);
  return rest[0]!;
}

const UNITS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 };

/**
 * Seconds in a duration like `30s`, `5m`, `2h`, `3d`, `1h30m` or `1.5h`.
 * @example parseDuration('1h30m') // 5400
 */
export function parseDuration(text: string): number {
  const parts = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/.test(text.trim()) ? text.trim().match(/\d+(?:\.\d+)?(?:ms|s|m|h|d)/g)! : undefined;
  if (!parts) throw new UsageError(`--in '${text}' is not a duration: use a number and a unit (ms, s, m, h, d), e.g. 30s, 5m, 2h, 3d, 1h30m`);
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
    if (typeof job !== 'object' || job === null || Array.isArray(job)) throw new UsageError(`${file} line ${i + 1} is not a JSON object like {"payload": ..., "delaySeconds": 30}: nothing was sent`);
    jobs.push({ line: i + 1, job: job as JobRequest });
  });
  if (jobs.length === 0) throw new UsageError(`${file} holds no jobs`);
  return jobs;
}

/** An error as one line: API errors with their code, status and request id. */
function oneLine(err: unknown): string {
  let text: string;
  if (err instanceof DyneinApiError) text = `${err.code} (HTTP ${err.status}): ${err.message}${err.requestId ? ` [request ${err.requestId}]` : ''}`;
  else text = (err as Error)?.message ?? String(err);
  return text.replace(/\s*\n\s*/g, '; ');
}
