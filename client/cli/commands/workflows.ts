/** `dynein workflows ...`: jobs that wait for other jobs (submit a file, get, cancel; docs/workflows.md). */
import { createHash } from 'node:crypto';
import { duplicateKeysOf, JsonSyntaxError, JsonTooDeepError, parseJson, RawJson } from '../../../core/util/index.js';
import type { Workflow, WorkflowJobRequest, WorkflowRequest } from '../../apiTypes.js';
import { readBytes } from '../args.js';
import { client, type Ctx, type Group } from '../command.js';
import { UsageError } from '../errors.js';
import { HELP, JSON_OUT, TENANT, WHERE } from '../flags.js';

export const workflowsCommand: Group = {
  brief: 'workflows (jobs that wait for other jobs): submit, get, cancel',
  summary:
    'Workflows: jobs that wait for other jobs (after), each due once its parents succeeded (docs/workflows.md).\n' +
    "Human output prints each job's key, state and id; --json prints the API reply.",
  subcommands: {
    submit: {
      brief: 'submit a workflow from a JSON file, print its id and its jobs',
      usage: '<file.json> --tenant <name> [--idempotency-key <key>] [options]',
      summary:
        'Submit the workflow a JSON file holds, as the API takes it: {"idempotencyKey"?, "jobs": [{"key", "payload",\n' +
        '"runAt" | "delaySeconds", "after", "onParentFailure", "priority", "tags", "cancellable"}, ...]}. Each payload is sent\n' +
        'as written in the file, byte for byte. Without a key in the file or --idempotency-key, the key is the\n' +
        "file's SHA-256: submitting the same file again answers the workflow it created (nothing new is created).",
      targeted: true,
      flags: {
        ...TENANT,
        'idempotency-key': {
          type: 'string',
          arg: '<key>',
          help: 'names the workflow (default: the file\'s "idempotencyKey", else one from the file\'s SHA-256)',
        },
        ...JSON_OUT,
        ...WHERE,
        ...HELP,
      },
      run: runSubmit,
    },

    get: {
      brief: "print a workflow's state and each job's state and due time",
      usage: '<workflowId> --tenant <name> [options]',
      targeted: true,
      flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
      run: runGet,
    },

    cancel: {
      brief: 'cancel every job of a workflow not yet handed to its queue',
      usage: '<workflowId> --tenant <name> [options]',
      summary:
        'Cancel every job of a workflow not yet handed to its queue, and print how many were cancelled and how many\nwere already queued (those run). Repeatable.',
      targeted: true,
      flags: { ...TENANT, ...JSON_OUT, ...WHERE, ...HELP },
      run: runCancel,
    },
  },
};

async function runSubmit({ values, str, rest, target, tenant, io }: Ctx): Promise<number> {
  if (rest.length !== 1) throw new UsageError('workflows submit needs one file: dynein workflows submit <file.json> --tenant T');
  const file = rest[0]!;
  const { workflow, derivedKey } = readWorkflowFile(file, str('idempotency-key'));
  const reply = await client(target()).submitWorkflow(tenant, workflow);
  if (values.json) {
    const { created: _created, ...body } = reply;
    io.out(JSON.stringify(body));
    return 0;
  }
  io.out(`${reply.created ? 'created' : 'existing'} ${reply.workflowId}  ${reply.state}`);
  const width = Math.max(...Object.keys(reply.jobs).map((k) => k.length));
  for (const [key, jobId] of Object.entries(reply.jobs)) io.out(`  ${key.padEnd(width)}  ${jobId}`);
  if (!reply.created) {
    const how = derivedKey ? 'add an "idempotencyKey" to the file or give --idempotency-key' : 'use another idempotency key';
    io.err(
      `note: idempotency key '${workflow.idempotencyKey}' already named this workflow: the reply is the existing one (created: false), nothing new was created; to submit it again, ${how}`,
    );
  }
  return 0;
}

async function runGet({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  const workflowId = workflowIdOf('get', rest);
  const reply = await client(target()).getWorkflow(tenant, workflowId);
  if (values.json) {
    io.out(JSON.stringify(reply));
    return 0;
  }
  io.out(`${reply.workflowId}  ${reply.state}  created ${reply.createdAt}`);
  for (const line of jobLines(reply)) io.out(`  ${line}`);
  return 0;
}

async function runCancel({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  const workflowId = workflowIdOf('cancel', rest);
  const reply = await client(target()).cancelWorkflow(tenant, workflowId);
  io.out(values.json ? JSON.stringify(reply) : `cancelled ${reply.cancelled}, already queued ${reply.alreadyQueued}`);
  return 0;
}

/** The one workflow id a get or cancel takes. */
function workflowIdOf(command: string, rest: readonly string[]): string {
  if (rest.length !== 1)
    throw new UsageError(`workflows ${command} needs one workflow id: dynein workflows ${command} <workflowId> --tenant T`);
  return rest[0]!;
}

/** One aligned line per job: key, state, due time (or why there is none yet), job id, and the message if any. */
function jobLines(w: Workflow): string[] {
  const rows = w.jobs.map((j) => [
    j.key,
    j.state,
    j.runAt ?? (j.state === 'WAITING' ? 'waiting for parents' : '-'),
    j.jobId,
    j.message ?? '',
  ]);
  const widths = [0, 1, 2, 3].map((i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows.map((r) =>
    r
      .map((c, i) => (i < 4 ? c.padEnd(widths[i]!) : c))
      .join('  ')
      .trimEnd(),
  );
}

/** The fields a workflow file may hold: what the API takes, and what the SDK sends on (nothing is dropped unseen). */
const TOP_FIELDS = ['idempotencyKey', 'jobs'];
const JOB_FIELDS = ['key', 'payload', 'runAt', 'delaySeconds', 'after', 'onParentFailure', 'priority', 'tags', 'cancellable'];

/** `jobs[i].payload`: kept as the file's text (as the API's own WORKFLOW_PAYLOADS reads a body). */
const isPayload = (path: readonly (string | number)[]) =>
  path.length === 3 && path[0] === 'jobs' && typeof path[1] === 'number' && path[2] === 'payload';

/**
 * The workflow a file holds, each payload as its text in the file (`payloadJson`), and its
 * idempotency key: `--idempotency-key`, else the file's, else derived from the file's bytes
 * (`derivedKey`), so that the same file submitted twice is one workflow. A file that is not a
 * workflow is a usage error naming it, before anything is sent.
 *
 * @example
 * readWorkflowFile('nightly.json', undefined)
 * // { workflow: { idempotencyKey: 'dynein-cli-sha256-3f1c...', jobs: [{ key: 'extract', payloadJson: '{"n": 1.0}', ... }] }, derivedKey: true }
 */
function readWorkflowFile(file: string, keyFlag: string | undefined): { workflow: WorkflowRequest; derivedKey: boolean } {
  const bytes = readBytes(file);
  const body = parseFile(file, bytes);
  const refuse = (why: string) => new UsageError(`${file}${why}: nothing was sent`);
  const example = '{"jobs": [{"key": "extract", "payload": {...}, "delaySeconds": 0}, {"key": "load", "after": ["extract"]}]}';
  if (!isObject(body)) throw refuse(` is not a workflow: a JSON object like ${example}`);
  const topProblem = fieldsProblem(body, TOP_FIELDS, 'the workflow', 'a workflow');
  if (topProblem) throw refuse(`: ${topProblem}`);
  if (!Array.isArray(body.jobs) || body.jobs.length === 0)
    throw refuse(` has no jobs (an array of 1 to 1,000): a workflow is a JSON object like ${example}`);
  const jobs = body.jobs.map((job: unknown, i): WorkflowJobRequest => {
    if (!isObject(job)) throw refuse(`: jobs[${i}] is not a JSON object like {"key": "extract", "payload": {...}, "delaySeconds": 0}`);
    const problem = fieldsProblem(job, JOB_FIELDS, `jobs[${i}]`, 'a workflow job');
    if (problem) throw refuse(`: ${problem}`);
    const { payload, ...fields } = job;
    // A payload given is a RawJson (its text in the file); none: the API's default, null.
    return { ...(fields as unknown as WorkflowJobRequest), ...(payload instanceof RawJson ? { payloadJson: payload.text } : {}) };
  });
  const fileKey = body.idempotencyKey as string | undefined;
  if (keyFlag !== undefined && fileKey !== undefined && keyFlag !== fileKey)
    throw new UsageError(`${file} has the idempotency key '${String(fileKey)}' and --idempotency-key gives '${keyFlag}': give one`);
  const key = keyFlag ?? fileKey ?? `dynein-cli-sha256-${createHash('sha256').update(bytes).digest('hex')}`;
  return { workflow: { idempotencyKey: key, jobs }, derivedKey: keyFlag === undefined && fileKey === undefined };
}

/** The file's JSON (payloads raw; nothing else nested without bound), or a usage error naming the file. */
function parseFile(file: string, bytes: Buffer): unknown {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new UsageError(`${file} is not UTF-8 text (JSON must be): nothing was sent`);
  }
  try {
    return parseJson(text, { raw: isPayload, deeper: 'refuse' });
  } catch (err) {
    if (err instanceof JsonSyntaxError) throw new UsageError(`${file} is not JSON (${err.message}): nothing was sent`);
    if (err instanceof JsonTooDeepError) throw new UsageError(`${file}: ${err.message}: nothing was sent`);
    throw err;
  }
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A field the API does not take (the SDK would not send it on: refused here rather than dropped),
 * or a field given twice (the API refuses it; parsed, only the last would be sent); else undefined.
 */
function fieldsProblem(obj: Record<string, unknown>, allowed: readonly string[], where: string, what: string): string | undefined {
  const unknown = Object.keys(obj).filter((k) => !allowed.includes(k));
  if (unknown.length > 0) return `${where} has ${unknown.map((k) => `'${k}'`).join(', ')}: ${what} takes only ${allowed.join(', ')}`;
  const twice = duplicateKeysOf(obj);
  if (twice.length > 0) return `${where} gives ${twice.map((k) => `'${k}'`).join(', ')} more than once`;
  return undefined;
}
