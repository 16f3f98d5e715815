import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createInterface } from 'node:readline';
import { GetQueueAttributesCommand, PurgeQueueCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../client/cli/index.js';
import { startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';
import { cliEntry, sendDeliveries, waitUntil, runCli } from './support.js';

/**
 * The `dynein` CLI end to end, as a user runs it (its own process: the CLI's sources bundled for the
 * run, runCli in ./support.ts; test/package runs `bin/dynein.js` itself), against the local stack:
 * every command, its output, and its errors (one line on stderr, a non-zero exit code).
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let sqs: SQSClient;
const tmp = mkdtempSync(join(tmpdir(), 'dynein-cli-'));

beforeAll(async () => {
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta,gamma', DYNEIN_LOOKAHEAD_MS: '2000' });
  local = await stack.waitForLocalJson();
  sqs = localSqs(local);
}, 60_000);
afterAll(async () => {
  sqs?.destroy();
  await stack?.stop();
});

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

const dynein = (args: string[], env: Record<string, string | undefined> = {}): Promise<Run> =>
  runCli(args, { DYNEIN_DATA_DIR: stack.dataDir, ...env });

/** An error: exit code, and exactly one line on stderr. */
function expectError(run: Run, code: number, pattern: RegExp): void {
  expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
  expect(run.stderr).toMatch(/^dynein: /);
  expect(run.stderr).toMatch(pattern);
  expect(run.stdout).toBe('');
  expect(run.code).toBe(code);
}

const depth = async (url: string) => {
  const a = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['All'] }))).Attributes ?? {};
  return (
    Number(a.ApproximateNumberOfMessages) + Number(a.ApproximateNumberOfMessagesNotVisible) + Number(a.ApproximateNumberOfMessagesDelayed)
  );
};

/**
 * Gamma's queue and DLQ: the --stack test and the redrive test send to them and count them, so one
 * at a time (the tests of this file run at once; no other test uses gamma's queues).
 */
let gammaQueues: Promise<void> = Promise.resolve();
function withGammaQueues<T>(f: () => Promise<T>): Promise<T> {
  const run = gammaQueues.then(f);
  gammaQueues = run.then(
    () => {},
    () => {},
  );
  return run;
}

/**
 * The tests run at once (most of their time is waiting: on the CLI's processes, on jobs falling due,
 * on ingest): they share no state but the local stack, each on its own tenant's queue, its own files,
 * its own ports, or jobs no other test counts. The longest start first.
 */
describe.concurrent('dynein CLI', () => {
  it('worker prints one JSON line per delivery, never early, and exits cleanly on SIGTERM', async () => {
    const ids = await Promise.all(
      ['1s', '1s', '3s'].map(async (d, i) =>
        (await dynein(['schedule', '--tenant', 'beta', '--in', d, '--payload', String(i)])).stdout.trim(),
      ),
    );
    const child = spawn(process.execPath, [cliEntry(['worker']), 'worker', '--tenant', 'beta', '--json', '--wait-time', '1'], {
      env: { ...process.env, DYNEIN_DATA_DIR: stack.dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: Record<string, any>[] = [];
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    createInterface({ input: child.stdout }).on('line', (l) => lines.push(JSON.parse(l)));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    await waitUntil(() => ids.every((id) => lines.some((l) => l.jobId === id)), 20_000, 'three deliveries');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(stderr).toBe('');
    for (const id of ids) {
      const line = lines.find((l) => l.jobId === id)!;
      expect(Object.keys(line)).toEqual(expect.arrayContaining(['jobId', 'runAt', 'receivedAt', 'latenessMs']));
      expect(line.latenessMs).toBe(Date.parse(line.receivedAt) - Date.parse(line.runAt));
      expect(line.latenessMs).toBeGreaterThanOrEqual(0);
    }
    expect(lines.map((l) => l.payload).sort()).toEqual([0, 1, 2]);
    // It deleted what it printed.
    expect(await depth(local.tenants.beta!.queueUrl)).toBe(0);

    const human = spawn(process.execPath, [cliEntry(['worker']), 'worker', '--tenant', 'beta', '--wait-time', '1'], {
      env: { ...process.env, DYNEIN_DATA_DIR: stack.dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const humanLines: string[] = [];
    createInterface({ input: human.stdout }).on('line', (l) => humanLines.push(l));
    const id = (await dynein(['schedule', '--tenant', 'beta', '--in', '1s', '--payload', '{"x":1}'])).stdout.trim();
    await waitUntil(() => humanLines.length > 0, 15_000, 'a delivery line');
    human.kill('SIGTERM');
    expect(await new Promise((r) => human.once('exit', r))).toBe(0);
    expect(humanLines[0]).toMatch(new RegExp(`^\\S+Z  ${id.replace(/\./g, '\\.')}  runAt \\S+Z  late \\d+ ms  receive #1  \\{"x":1\\}$`));
  }, 45_000);

  it(
    'redrive moves the DLQ messages back to the queue',
    async () =>
      withGammaQueues(async () => {
        const { queueUrl, dlqUrl } = local.tenants.gamma!;
        await sendDeliveries(sqs, dlqUrl, [{ jobId: 'dead-1' }, { jobId: 'dead-2' }, { jobId: 'dead-3' }]);
        const run = await dynein(['redrive', '--tenant', 'gamma']);
        expect(run.code).toBe(0);
        expect(run.stdout).toMatch(/^moved 3 messages from the DLQ back to the queue/);
        expect(await depth(dlqUrl)).toBe(0);
        expect(await depth(queueUrl)).toBe(3);
        const empty = await dynein(['redrive', '--tenant', 'gamma']);
        expect(empty.stdout).toMatch(/^moved 0 messages/);

        // On a terminal, a progress line counts what moved of the DLQ's depth (in process, main()'s Io).
        await sendDeliveries(
          sqs,
          dlqUrl,
          Array.from({ length: 12 }, (_, i) => ({ jobId: `dead-p${i}` })),
        );
        const drawn: string[] = [];
        const out: string[] = [];
        const err: string[] = [];
        const code = await main(['redrive', '--tenant', 'gamma', '--data-dir', stack.dataDir], {
          out: (l) => out.push(l),
          err: (l) => err.push(l),
          progress: (l) => drawn.push(l),
        });
        expect(code).toBe(0);
        expect(out[0]).toMatch(/^moved 12 messages from the DLQ back to the queue/);
        expect(drawn.length).toBeGreaterThan(0);
        for (const line of drawn) expect(line).toMatch(/^moved \d+\/12 messages/);
        expect(drawn.at(-1)).toMatch(/^moved 12\/12 messages/);
        expect(err.at(-1)).toBe(''); // the progress line ended before the summary
      }),
    30_000,
  );

  it('jobs --all reads every page with a progress line on a terminal', async () => {
    const file = join(tmp, 'many.jsonl');
    writeFileSync(file, Array.from({ length: 1_050 }, (_, i) => JSON.stringify({ payload: i, delaySeconds: 3_600 + i })).join('\n'));
    expect((await dynein(['batch', '--tenant', 'beta', file])).code).toBe(0);
    const drawn: string[] = [];
    const out: string[] = [];
    const listAll = async () => {
      drawn.length = 0;
      out.length = 0;
      return main(['jobs', '--tenant', 'beta', '--state', 'SCHEDULED', '--all', '--data-dir', stack.dataDir], {
        out: (l) => out.push(l),
        err: () => {},
        progress: (l) => drawn.push(l),
      });
    };
    // Ingest stores the batch within a few seconds: list until every job is there.
    const until = Date.now() + 30_000;
    while ((await listAll()) === 0 && out.length < 1_050 && Date.now() < until) await new Promise((r) => setTimeout(r, 500));
    expect(out.length).toBeGreaterThanOrEqual(1_050);
    expect(drawn[0]).toMatch(/^read 1,000 jobs/);
  }, 60_000);

  it('takes DYNEIN_ENDPOINT, DYNEIN_REGION, DYNEIN_TENANT and DYNEIN_PROFILE for the flags not given; a flag wins', async () => {
    const keys = local.tenants.alpha!;
    const env = {
      AWS_ACCESS_KEY_ID: keys.accessKeyId,
      AWS_SECRET_ACCESS_KEY: keys.secretAccessKey,
      AWS_PROFILE: undefined,
      AWS_REGION: undefined,
      AWS_DEFAULT_REGION: undefined,
      DYNEIN_DATA_DIR: tmp, // no local stack there: only the environment's endpoint can answer
      DYNEIN_ENDPOINT: local.endpoint,
      DYNEIN_REGION: local.region,
      DYNEIN_TENANT: 'alpha',
    };
    const scheduled = await dynein(['schedule', '--in', '10m'], env);
    expect(scheduled.stderr).toBe('');
    expect(scheduled.stdout).toMatch(/^j1\.alpha\./);
    const got = await dynein(['get', scheduled.stdout.trim()], env);
    expect(got.stdout).toMatch(/^(SCHEDULED|UNKNOWN) /);
    // --tenant beats DYNEIN_TENANT: alpha's keys sign for beta, which the API refuses.
    expectError(await dynein(['schedule', '--in', '10m', '--tenant', 'beta'], env), 1, /Forbidden \(HTTP 403\)/);
    // --endpoint beats DYNEIN_ENDPOINT; --region beats DYNEIN_REGION (a signature for another region fails).
    expectError(await dynein(['get', 'x', '--endpoint', 'http://127.0.0.1:9'], env), 1, /127\.0\.0\.1:9|ECONNREFUSED|network/i);
    expectError(await dynein(['get', scheduled.stdout.trim(), '--region', 'eu-north-1'], env), 1, /Forbidden \(HTTP 403\)/);
    // DYNEIN_PROFILE picks the profile the default chain reads.
    expectError(
      await dynein(['get', 'x'], {
        ...env,
        AWS_ACCESS_KEY_ID: undefined,
        AWS_SECRET_ACCESS_KEY: undefined,
        AWS_CONFIG_FILE: join(tmp, 'no-config'),
        AWS_SHARED_CREDENTIALS_FILE: join(tmp, 'no-credentials'),
        DYNEIN_PROFILE: 'dynein-no-such-profile',
      }),
      1,
      /dynein-no-such-profile/,
    );
    // Blank variables count as unset.
    expectError(
      await dynein(['schedule', '--in', '10m'], { ...env, DYNEIN_TENANT: ' ' }),
      2,
      /schedule needs --tenant <name> \(or DYNEIN_TENANT\)/,
    );
  }, 60_000);

  it('batch schedules a JSON Lines file with a summary, and refuses a malformed file before sending anything', async () => {
    const lines = Array.from({ length: 150 }, (_, i) =>
      JSON.stringify(i === 41 ? { payload: i, runAt: 'yesterday' } : { payload: { i }, delaySeconds: 3_600 + i }),
    );
    const file = join(tmp, 'jobs.jsonl');
    writeFileSync(file, `${lines.join('\n')}\n\n`);
    const run = await dynein(['batch', '--tenant', 'alpha', file]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('scheduled 149 of 150 jobs, 1 failed\n');
    expect(run.stderr).toMatch(/^line 42: ValidationError: jobs\[41\]: runAt "yesterday" is not an RFC 3339 time/m);

    const good = join(tmp, 'good.jsonl');
    writeFileSync(
      good,
      lines
        .filter((_, i) => i !== 41)
        .slice(0, 10)
        .join('\n'),
    );
    const ok = await dynein(['batch', '--tenant', 'alpha', good, '--json']);
    expect(ok.code).toBe(0);
    const replies = ok.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(replies).toHaveLength(10);
    expect(replies.every((r) => r.state === 'SCHEDULED')).toBe(true);

    // On a terminal, a progress bar redraws on stderr (here through main()'s Io, in process).
    const drawn: string[] = [];
    const out: string[] = [];
    const code = await main(['batch', '--tenant', 'alpha', good, '--data-dir', stack.dataDir], {
      out: (l) => out.push(l),
      err: () => {},
      progress: (l) => drawn.push(l),
    });
    expect([code, out]).toEqual([0, ['scheduled 10 of 10 jobs']]);
    expect(drawn[0]).toBe(`[${'.'.repeat(30)}] 0/10 jobs`);
    expect(drawn.at(-1)).toBe(`[${'#'.repeat(30)}] 10/10 jobs`);

    const bad = join(tmp, 'bad.jsonl');
    writeFileSync(bad, '{"payload":1,"delaySeconds":60}\n{"payload":\n');
    expectError(await dynein(['batch', '--tenant', 'alpha', bad]), 2, /line 2 is not JSON.*nothing was sent/);
    expectError(await dynein(['batch', '--tenant', 'alpha', join(tmp, 'missing.jsonl')]), 1, /cannot read .*missing\.jsonl: ENOENT/);
  }, 30_000);

  it('--stack reads the endpoint and the tenant queues from the stack outputs (a stub of CloudFormation)', async () => {
    const alpha = local.tenants.alpha!;
    const gamma = local.tenants.gamma!;
    const calls: { auth: string; body: string }[] = [];
    // DescribeStacks as CloudFormation's query API answers it: outputs as lib/stack.ts names them.
    const stub = createServer((req, res) => {
      let body = '';
      req.on('data', (d: Buffer) => (body += d.toString()));
      req.on('end', () => {
        calls.push({ auth: String(req.headers.authorization), body });
        const name = new URLSearchParams(body).get('StackName');
        if (name !== 'Dynein' && name !== 'Other') {
          res.writeHead(400, { 'content-type': 'text/xml' });
          res.end(
            `<ErrorResponse><Error><Type>Sender</Type><Code>ValidationError</Code><Message>Stack with id ${name} does not exist</Message></Error></ErrorResponse>`,
          );
          return;
        }
        const outputs: Record<string, string> =
          name === 'Dynein'
            ? { ApiUrl: local.endpoint, TenantgammaQueueUrl: gamma.queueUrl, TenantgammaDlqUrl: gamma.dlqUrl, TableName: 't' }
            : { TableName: 't' };
        const members = Object.entries(outputs)
          .map(([k, v]) => `<member><OutputKey>${k}</OutputKey><OutputValue>${v.replace(/&/g, '&amp;')}</OutputValue></member>`)
          .join('');
        res.writeHead(200, { 'content-type': 'text/xml' });
        res.end(
          `<DescribeStacksResponse><DescribeStacksResult><Stacks><member><StackName>${name}</StackName><Outputs>${members}</Outputs></member></Stacks></DescribeStacksResult></DescribeStacksResponse>`,
        );
      });
    });
    await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
    try {
      const env = {
        AWS_ACCESS_KEY_ID: alpha.accessKeyId,
        AWS_SECRET_ACCESS_KEY: alpha.secretAccessKey,
        AWS_PROFILE: undefined,
        AWS_REGION: local.region,
        AWS_ENDPOINT_URL_CLOUDFORMATION: `http://127.0.0.1:${(stub.address() as AddressInfo).port}`,
        DYNEIN_DATA_DIR: tmp, // no local stack there: only the stack's outputs can say where the API is
      };
      const scheduled = await dynein(['schedule', '--tenant', 'alpha', '--in', '10m', '--stack', 'Dynein'], env);
      expect(scheduled.stderr).toBe('');
      expect(scheduled.stdout).toMatch(/^j1\.alpha\./);
      // Signed for CloudFormation in the region, with the caller's key.
      expect(calls[0]!.body).toBe('Action=DescribeStacks&StackName=Dynein&Version=2010-05-15');
      expect(calls[0]!.auth).toMatch(new RegExp(`Credential=${alpha.accessKeyId}/\\d{8}/${local.region}/cloudformation/aws4_request`));
      // The tenant's queues too: redrive needs no --queue-url or --dlq-url (gamma's keys for gamma's queues).
      await withGammaQueues(async () => {
        await sendDeliveries(sqs, gamma.dlqUrl, [{ jobId: 'dead-stack' }]);
        const moved = await dynein(['redrive', '--tenant', 'gamma', '--stack', 'Dynein'], {
          ...env,
          AWS_ACCESS_KEY_ID: gamma.accessKeyId,
          AWS_SECRET_ACCESS_KEY: gamma.secretAccessKey,
          AWS_ENDPOINT_URL_SQS: local.sqsEndpoint,
        });
        expect(moved.stdout).toMatch(/^moved 1 message /);
        await sqs.send(new PurgeQueueCommand({ QueueUrl: gamma.queueUrl })); // the redrive test counts gamma's queue
      });
      expectError(
        await dynein(['get', '--tenant', 'alpha', 'x', '--stack', 'Nope'], env),
        1,
        /--stack Nope: CloudFormation \(.+\) answered 400 ValidationError: Stack with id Nope does not exist/,
      );
      expectError(
        await dynein(['get', '--tenant', 'alpha', 'x', '--stack', 'Other'], env),
        1,
        /--stack Other has no ApiUrl output \(it has TableName\): name the stack of DyneinStack, or pass --endpoint/,
      );
      expectError(
        await dynein(['get', '--tenant', 'alpha', 'x', '--stack', 'Dynein', '--endpoint', local.endpoint], env),
        2,
        /give --stack or --endpoint, not both/,
      );
      expectError(
        await dynein(['get', '--tenant', 'alpha', 'x', '--stack', 'Dynein'], {
          ...env,
          AWS_REGION: undefined,
          AWS_DEFAULT_REGION: undefined,
        }),
        2,
        /--stack needs the region of the stack/,
      );
    } finally {
      stub.close();
    }
  }, 60_000);

  it('schedule, get and cancel', async () => {
    const scheduled = await dynein(['schedule', '--tenant', 'alpha', '--in', '5m', '--payload', '{"invoice":42}']);
    expect(scheduled.code).toBe(0);
    const jobId = scheduled.stdout.trim();
    expect(jobId).toMatch(/^j1\.alpha\.\S+$/);

    const at = new Date(Date.now() + 3_600_000).toISOString();
    const json = await dynein(['schedule', '--tenant', 'alpha', '--at', at, '--json', '--idempotency-key', 'k-1']);
    expect(JSON.parse(json.stdout)).toMatchObject({ tenant: 'alpha', runAt: at, state: 'SCHEDULED' });
    const again = await dynein(['schedule', '--tenant', 'alpha', '--at', at, '--json', '--idempotency-key', 'k-1']);
    expect(JSON.parse(again.stdout).jobId).toBe(JSON.parse(json.stdout).jobId);

    // Right after submit, status answers UNKNOWN until ingest stored the job: wait for it.
    let got = await dynein(['get', '--tenant', 'alpha', jobId]);
    for (let i = 0; i < 150 && got.stdout.startsWith('UNKNOWN'); i++) {
      await new Promise((r) => setTimeout(r, 100));
      got = await dynein(['get', '--tenant', 'alpha', jobId]);
    }
    expect(got.code).toBe(0);
    expect(got.stdout).toMatch(new RegExp(`^SCHEDULED  runAt \\S+Z  ${jobId.replace(/\./g, '\\.')}\\n$`));
    const gotJson = JSON.parse((await dynein(['get', '--tenant', 'alpha', jobId, '--json'])).stdout);
    expect(gotJson).toMatchObject({ jobId, tenant: 'alpha', state: 'SCHEDULED' });

    const cancelled = await dynein(['cancel', '--tenant', 'alpha', jobId]);
    expect([cancelled.code, cancelled.stdout]).toEqual([0, `CANCELLED  ${jobId}\n`]);
    expect(JSON.parse((await dynein(['cancel', '--tenant', 'alpha', jobId, '--json'])).stdout)).toEqual({ jobId, state: 'CANCELLED' });
    expect(JSON.parse((await dynein(['get', '--tenant', 'alpha', jobId, '--json'])).stdout).state).toBe('CANCELLED');
  }, 30_000);

  it('schedule --tag (repeated) stores the tags; jobs --tag lists the jobs that carry one, with their tags; a bad tag is one line, exit 1', async () => {
    // Beta: the other tests list alpha's and gamma's jobs.
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const tagged = await dynein(['schedule', '--tenant', 'beta', '--at', at, '--tag', 'order-42', '--tag', 'reminders']);
    expect(tagged.code).toBe(0);
    const other = await dynein(['schedule', '--tenant', 'beta', '--at', at, '--tag', 'order-7']);
    expect(other.code).toBe(0);
    const jobId = tagged.stdout.trim();
    let listed = await dynein(['jobs', '--tenant', 'beta', '--tag', 'order-42']);
    for (let i = 0; i < 150 && !listed.stdout.includes(jobId); i++) {
      await new Promise((r) => setTimeout(r, 100));
      listed = await dynein(['jobs', '--tenant', 'beta', '--tag', 'order-42']);
    }
    expect(listed.code).toBe(0);
    expect(listed.stdout.trimEnd().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`SCHEDULED  ${jobId.replace(/\./g, '\\.')}\\s+tags order-42, reminders$`)),
    ]);
    const json = JSON.parse((await dynein(['get', '--tenant', 'beta', jobId, '--json'])).stdout);
    expect(json.tags).toEqual(['order-42', 'reminders']);
    expectError(await dynein(['schedule', '--tenant', 'beta', '--at', at, '--tag', 'a', '--tag', 'a']), 1, /tags\[1\] repeats "a"/);
  }, 30_000);

  it('reports each error on one line with a non-zero exit code', async () => {
    const queued = (await dynein(['schedule', '--tenant', 'alpha', '--in', '1s', '--json'])).stdout;
    expect(JSON.parse(queued).state).toBe('QUEUED');
    const big = join(tmp, 'big.json');
    writeFileSync(big, JSON.stringify('x'.repeat(250_000)));
    const runs: [string[], Record<string, string>?][] = [
      [['schedule', '--tenant', 'alpha', '--at', '2030-02-30T00:00:00Z']],
      [['get', '--tenant', 'alpha', 'j1.forged']],
      [['cancel', '--tenant', 'alpha', JSON.parse(queued).jobId]],
      [['get', '--tenant', 'beta', JSON.parse(queued).jobId]],
      [['schedule', '--tenant', 'delta', '--in', '5s']],
      [['schedule', '--tenant', 'alpha', '--in', '5s'], { DYNEIN_DATA_DIR: tmp }],
      [['schedule', '--tenant', 'alpha', '--in', '5s', '--payload', `@${big}`]],
    ];
    const results: Run[] = [];
    for (let i = 0; i < runs.length; i += 2)
      results.push(...(await Promise.all(runs.slice(i, i + 2).map(([args, env]) => dynein(args, env)))));
    const expected: [number, RegExp][] = [
      [1, /ValidationError \(HTTP 400\): runAt "2030-02-30T00:00:00Z" is not an RFC 3339 time.*\[request [0-9a-f-]+\]$/m],
      [1, /InvalidJobId \(HTTP 400\)/],
      [1, /NotCancellable \(HTTP 409\)/],
      [1, /JobNotFound \(HTTP 404\)/],
      [1, /tenant 'delta' is not in the local stack \(it has alpha, beta, gamma\)/],
      [1, /no local stack running .*local\.json not found.*npm start/],
      [1, /PayloadTooLarge \(HTTP 413\)/],
    ];
    results.forEach((run, i) => expectError(run, expected[i]![0], expected[i]![1]));
  }, 30_000);

  it('talks to an --endpoint with credentials from the AWS default chain', async () => {
    const keys = local.tenants.alpha!;
    const env = {
      AWS_ACCESS_KEY_ID: keys.accessKeyId,
      AWS_SECRET_ACCESS_KEY: keys.secretAccessKey,
      AWS_PROFILE: undefined,
      DYNEIN_DATA_DIR: tmp,
    };
    const ok = await dynein(['schedule', '--tenant', 'alpha', '--in', '10m', '--endpoint', local.endpoint, '--region', local.region], env);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toMatch(/^j1\.alpha\./);
    const wrongKey = await dynein(['get', '--tenant', 'alpha', ok.stdout.trim(), '--endpoint', local.endpoint, '--region', local.region], {
      ...env,
      AWS_SECRET_ACCESS_KEY: 'wrong',
    });
    expectError(wrongKey, 1, /Forbidden \(HTTP 403\): The request signature we calculated does not match/);
    expectError(
      await dynein(['worker', '--tenant', 'alpha', '--endpoint', local.endpoint, '--region', local.region], env),
      2,
      /worker needs --queue-url/,
    );
    expectError(
      await dynein(['get', '--tenant', 'alpha', 'x', '--endpoint', 'http://127.0.0.1:9'], {
        ...env,
        AWS_REGION: undefined,
        AWS_DEFAULT_REGION: undefined,
      }),
      2,
      /no region/,
    );
  }, 30_000);

  it('prints its usage', async () => {
    const help = await dynein(['--help']);
    expect(help.code).toBe(0);
    for (const c of ['schedule', 'batch', 'get', 'cancel', 'worker', 'redrive', '--endpoint']) expect(help.stdout).toContain(c);
    const none = await dynein([]);
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('Usage: dynein');
    expectError(await dynein(['reschedule', '--tenant', 'alpha']), 2, /unknown command 'reschedule'/);
  });

  it('refuses a bad command line with exit code 2 before calling anything', async () => {
    // The same main() as bin/dynein.js, in process: these never reach the network.
    const usage: [string[], RegExp][] = [
      [['schedule', '--tenant', 'alpha', '--in', '5s', '--at', '2030-01-01T00:00:00Z'], /exactly one of --at .* or --in/],
      [['schedule', '--tenant', 'alpha'], /exactly one of --at .* or --in/],
      [['schedule', '--tenant', 'alpha', '--in', 'soon'], /--in 'soon' is not a duration/],
      [['schedule', '--tenant', 'alpha', '--in', '5s', '--payload', '{nope'], /--payload is not JSON/],
      [['schedule', '--in', '5s'], /schedule needs --tenant/],
      [['schedule', '--tenant', 'alpha', '--in', '5s', '--colour', 'blue'], /Unknown option '--colour'/],
      [['get', '--tenant', 'alpha'], /get needs one job id/],
      [['cancel', '--tenant', 'alpha', 'a', 'b'], /cancel needs one job id/],
      [['worker', '--tenant', 'alpha', '--concurrency', '0'], /--concurrency must be a whole number/],
      [['worker', '--tenant', 'alpha', '--wait-time', '30'], /--wait-time must be a whole number of seconds from 0 to 20/],
    ];
    for (const [args, pattern] of usage) {
      const out: string[] = [];
      const err: string[] = [];
      // An empty data directory: the command line is checked before the local stack is looked for.
      const code = await main([...args, '--data-dir', tmp], { out: (l) => out.push(l), err: (l) => err.push(l) });
      expect([code, out, err.length]).toEqual([2, [], 1]);
      expect(err[0]).toMatch(/^dynein: /);
      expect(err[0]).toMatch(pattern);
    }
  });
});
