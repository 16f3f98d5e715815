import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';
import { runCli } from './support.js';

/**
 * `dynein workflows submit | get | cancel` end to end on the local stack, as a user runs the CLI
 * (its own process): a file's payload reaches the tenant's queue byte for byte, the same file
 * submitted twice is one workflow, get and cancel print each job and the counts, and a bad file
 * or an unknown id exits non-zero with one line.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let sqs: SQSClient;
const dir = mkdtempSync(join(tmpdir(), 'dynein-workflows-cli-'));

beforeAll(async () => {
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha', DYNEIN_LOOKAHEAD_MS: '2000' });
  local = await stack.waitForLocalJson();
  sqs = localSqs(local);
}, 60_000);
afterAll(async () => {
  sqs?.destroy();
  await stack?.stop();
});

const dynein = (...args: string[]) => runCli([...args, '--tenant', 'alpha'], { DYNEIN_DATA_DIR: stack.dataDir });

/** The payload as written: 1.0 and 2^53 + 1 would not survive JSON.parse and JSON.stringify. */
const PAYLOAD = '{"n": 1.0, "big": 9007199254740993}';
const WORKFLOW = `{"jobs": [
  {"key": "first", "payload": ${PAYLOAD}, "delaySeconds": 0},
  {"key": "second", "payload": [1.0], "after": ["first"]}
]}
`;

/** The body of the first message on alpha's queue whose text holds `needle` (left in flight). */
async function delivered(needle: string, timeoutMs: number): Promise<string> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const res = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: local.tenants.alpha!.queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: 60,
      }),
    );
    const body = res.Messages?.map((m) => m.Body ?? '').find((b) => b.includes(needle));
    if (body !== undefined) return body;
  }
  throw new Error(`no message holding ${needle} within ${timeoutMs} ms`);
}

describe('dynein workflows', () => {
  it('is listed by dynein --help and dynein workflows --help', async () => {
    const general = await runCli(['--help']);
    expect(general.stdout).toMatch(/^ {2}workflows +workflows \(jobs that wait for other jobs\): submit, get, cancel$/m);
    const group = await runCli(['workflows', '--help']);
    expect(group.code).toBe(0);
    for (const c of ['submit', 'get', 'cancel']) expect(group.stdout).toMatch(new RegExp(`^  ${c} `, 'm'));
  });

  it('every flag a subcommand lists is documented in docs/install.md', async () => {
    const section = readFileSync('docs/install.md', 'utf8')
      .split(/^### /m)
      .find((s) => s.startsWith('`dynein workflows`'));
    expect(section, 'docs/install.md has a "### `dynein workflows`" section').toBeDefined();
    for (const sub of ['submit', 'get', 'cancel']) {
      const usage = (await runCli(['workflows', sub, '--help'])).stdout;
      const flags = [...new Set([...usage.matchAll(/^\s+(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1]!))];
      expect(flags).toEqual(expect.arrayContaining(['--tenant', '--json', '--endpoint', '--help']));
      for (const flag of flags) expect(section, `dynein workflows ${sub} ${flag}`).toContain(flag);
      expect(section).toContain(`dynein workflows ${sub}`);
    }
  });

  it('submits a file (payloads byte for byte), answers a repeat with the same workflow, gets it and cancels it', async () => {
    const file = join(dir, 'nightly.json');
    writeFileSync(file, WORKFLOW);

    const submitted = await dynein('workflows', 'submit', file, '--json');
    expect([submitted.code, submitted.stderr]).toEqual([0, '']);
    expect(submitted.stdout.trimEnd().split('\n')).toHaveLength(1);
    const reply = JSON.parse(submitted.stdout);
    expect(reply).toMatchObject({ tenant: 'alpha', state: 'RUNNING' });
    expect(reply).not.toHaveProperty('created');
    expect(reply.workflowId).toMatch(/^wf1\.alpha\./);
    expect(Object.keys(reply.jobs)).toEqual(['first', 'second']);
    const { first, second } = reply.jobs as Record<string, string>;

    // The root job is due at once: its message carries the payload as the file wrote it.
    const body = await delivered(first!, 15_000);
    expect(body).toContain(`"payload":${PAYLOAD}`);

    // The same file again: the same workflow, nothing new (the key is the file's SHA-256).
    const again = await dynein('workflows', 'submit', file);
    expect(again.code).toBe(0);
    expect(again.stdout.trimEnd().split('\n')).toEqual([
      `existing ${reply.workflowId}  RUNNING`,
      `  first   ${first}`,
      `  second  ${second}`,
    ]);
    expect(again.stderr).toMatch(/^note: idempotency key 'dynein-cli-sha256-[0-9a-f]{64}' already named this workflow: .*created: false/);

    // Sent, the row is marked delivered a moment later (until then the job shows SCHEDULED).
    const stateOf = async (key: string) =>
      JSON.parse((await dynein('workflows', 'get', reply.workflowId, '--json')).stdout).jobs.find((j: { key: string }) => j.key === key)
        .state;
    for (let tries = 0; (await stateOf('first')) !== 'QUEUED'; tries++) expect(tries, 'first marked QUEUED').toBeLessThan(20);

    const got = await dynein('workflows', 'get', reply.workflowId);
    expect(got.code).toBe(0);
    const lines = got.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(new RegExp(`^${reply.workflowId.replace(/\./g, '\\.')}  RUNNING  created \\S+Z$`));
    expect(lines.slice(1)).toHaveLength(2);
    expect(lines[1]).toMatch(new RegExp(`^ {2}first  +QUEUED +\\S+Z +${first!.replace(/\./g, '\\.')}$`));
    expect(lines[2]).toMatch(new RegExp(`^ {2}second +WAITING +waiting for parents +${second!.replace(/\./g, '\\.')}$`));

    const cancelled = await dynein('workflows', 'cancel', reply.workflowId);
    expect([cancelled.code, cancelled.stdout, cancelled.stderr]).toEqual([0, 'cancelled 1, already queued 1\n', '']);
    const repeated = await dynein('workflows', 'cancel', reply.workflowId, '--json');
    expect(JSON.parse(repeated.stdout)).toEqual({ workflowId: reply.workflowId, state: 'CANCELLED', cancelled: 1, alreadyQueued: 1 });

    const after = JSON.parse((await dynein('workflows', 'get', reply.workflowId, '--json')).stdout);
    expect(after.jobs.map((j: { key: string; state: string }) => [j.key, j.state])).toEqual([
      ['first', 'QUEUED'],
      ['second', 'CANCELLED'],
    ]);
  }, 30_000);

  it('refuses a file that is not a workflow with one line naming it, exit 2', async () => {
    const files = {
      'not-json.json': '{"jobs": [',
      'array.json': '[{"key": "a", "delaySeconds": 0}]',
      'no-jobs.json': '{"idempotencyKey": "k"}',
      'unknown-field.json': '{"jobs": [{"key": "a", "delaySeconds": 0, "afterr": ["b"]}]}',
    };
    for (const [name, text] of Object.entries(files)) {
      const file = join(dir, name);
      writeFileSync(file, text);
      const run = await dynein('workflows', 'submit', file);
      expect([run.code, run.stdout], name).toEqual([2, '']);
      expect(run.stderr.trimEnd().split('\n'), name).toEqual([expect.stringMatching(`^dynein: ${file}.*: nothing was sent$`)]);
    }
  });

  it('an unknown workflow id: exit 1 and the API error in one line', async () => {
    const unknown = 'wf1.alpha.1767225600000.AAAAAAAAAAAAAAAA.AAAAAAAAAAAAAAAAAAAAAA';
    for (const command of ['get', 'cancel']) {
      const run = await dynein('workflows', command, unknown);
      expect([run.code, run.stdout], command).toEqual([1, '']);
      expect(run.stderr, command).toMatch(/^dynein: WorkflowNotFound \(HTTP 404\): [^\n]+\n$/);
    }
  });
});
