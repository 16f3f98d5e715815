import { createHash, randomBytes } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  GetQueueAttributesCommand,
  PurgeQueueCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SendMessageCommand,
  type SendMessageBatchCommandInput,
} from '@aws-sdk/client-sqs';
import { DynamoDeadLetterEdits } from '../../adapters/dynamoDeadLetterEdits.js';
import { SqsDeadLetters } from '../../adapters/sqsDeadLetters.js';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { main } from '../../client/cli/index.js';
import { redrive } from '../../client/cli/target.js';
import { DyneinClient } from '../../client/client.js';
import { ValidationError } from '../../client/errors.js';
import { DeadLetterService, type MoveTask } from '../../core/deadLetters/deadLetterService.js';
import { deliveryMessage } from '../../core/model/messages.js';
import { systemClock } from '../../core/model/ports.js';
import { dlqHandler } from '../../lambdas/runtime/handlers.js';
import { startApiServer } from '../../local/apiServer.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, type TestSystem } from '../support/system.js';

/**
 * `dynein dlq peek|redrive|delete|edit|audit` in process (bin/dynein.js's main()), against the dlq handler
 * behind the local API server on fauxqs, through a local.json pointing at it; and the older
 * `dynein redrive` (straight to SQS) still moving everything back. The SDK's edit and audit calls
 * against the same handler.
 */
let em: Emulators;
let sys: TestSystem;
let server: Server;
const dataDir = mkdtempSync(join(tmpdir(), 'dynein-dlq-cli-'));
const keys = { demo: { accessKeyId: 'AKIDDEMO', secretAccessKey: 'demo-secret' } };
/** When set, the dlq function's deletes from the DLQ fail (injected: the local SQS cannot fail one on demand). */
let failDeletes = false;
/**
 * A message move task as SQS reports it on AWS, one report per `ListMessageMoveTasks` (the last
 * repeats); undefined: the local SQS, which has none. Injected: fauxqs has no move tasks.
 */
let moveReports: MoveTask[] | undefined;

beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['demo'] });
  const unused = () => Promise.reject(new Error('not in this test'));
  server = await startApiServer({
    port: 0,
    region: 'us-east-1',
    keys,
    handlers: {
      submit: unused,
      status: unused,
      cancel: unused,
      dlq: (event) => {
        if (!failDeletes && !moveReports) return dlqHandler(sys.w)(event);
        const real = new SqsDeadLetters(em.sqs);
        const reports = moveReports;
        const queues = {
          receive: real.receive.bind(real),
          release: real.release.bind(real),
          send: real.send.bind(real),
          startMove: reports ? () => Promise.resolve({ taskHandle: 'task-1' }) : real.startMove.bind(real),
          moveTasks: reports ? () => Promise.resolve([reports.length > 1 ? reports.shift()! : reports[0]!]) : real.moveTasks.bind(real),
          depth: real.depth.bind(real),
          delete: failDeletes ? (_url: string, handles: readonly string[]) => Promise.resolve([...handles]) : real.delete.bind(real),
        };
        const edits = { edits: new DynamoDeadLetterEdits(sys.tableName, em.dynamo), settings: sys.w.config.settings };
        return dlqHandler({ ...sys.w, deadLetters: new DeadLetterService({ ...sys.w, ...edits, queues, clock: systemClock }) })(event);
      },
    },
    metrics: () => ({}),
  });
  const { url, dlqUrl } = sys.tenants.demo!;
  writeFileSync(
    join(dataDir, 'local.json'),
    JSON.stringify({
      endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      region: 'us-east-1',
      sqsEndpoint: em.sqsEndpoint,
      tenants: { demo: { ...keys.demo, queueUrl: url, dlqUrl } },
    }),
  );
});
afterAll(async () => {
  server?.close();
  await em?.stop();
});

async function run(...args: string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...args, '--data-dir', dataDir], { out: (l) => out.push(...l.split('\n')), err: (l) => err.push(l) });
  return { code, out, err };
}

async function depth(url: string): Promise<number> {
  const a = await em.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['ApproximateNumberOfMessages'] }));
  return Number(a.Attributes!.ApproximateNumberOfMessages);
}

async function empty(url: string): Promise<void> {
  await em.sqs.send(new PurgeQueueCommand({ QueueUrl: url }));
}

const sha256 = (text: string): string => createHash('sha256').update(text, 'utf8').digest('hex');

/** A dead letter that is a Dynein delivery of demo (a job id this deployment signed), as a worker that gave up leaves it. */
async function deadLetter(payload: string): Promise<{ jobId: string; body: string }> {
  const dueMs = Date.now() - 60_000;
  const jobId = sys.w.codec.encode({ tenant: 'demo', shard: 1, dueMs, path: 't', random: randomBytes(12).toString('base64url') });
  const m = deliveryMessage('0', { jobId, tenant: 'demo', dueMs, payload });
  await em.sqs.send(
    new SendMessageCommand({
      QueueUrl: sys.tenants.demo!.dlqUrl,
      MessageBody: m.body,
      MessageAttributes: {
        runAt: { DataType: 'String', StringValue: m.attributes!.runAt! },
        dyneinError: { DataType: 'String', StringValue: 'handler threw: boom' },
      },
    }),
  );
  return { jobId, body: m.body };
}

/** The caller the local API names for demo's key. */
const demoArn = 'arn:aws:iam::000000000000:user/dynein-demo';

/** The handle `dlq peek` prints for the dead letter of `jobId`. */
async function handleOf(jobId: string): Promise<string> {
  const page = JSON.parse((await run('dlq', 'peek', '--tenant', 'demo', '--json')).out[0]!) as {
    messages: { handle: string; jobId?: string }[];
  };
  const m = page.messages.find((x) => x.jobId === jobId);
  if (!m) throw new Error(`${jobId} is not in the DLQ`);
  return m.handle;
}

/** The bodies of the tenant queue's messages (at most 10), received. */
async function queued(): Promise<string[]> {
  const r = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: sys.tenants.demo!.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
  return (r.Messages ?? []).map((m) => m.Body!);
}

/** The body of a delivery with its payload (the last member) replaced by `payload`'s text. */
const withPayloadText = (body: string, old: string, payload: string): string => `${body.slice(0, body.length - old.length - 1)}${payload}}`;

const audited = async () =>
  (JSON.parse((await run('dlq', 'audit', '--tenant', 'demo', '--all', '--json')).out[0]!) as { edits: unknown[] }).edits;

beforeEach(async () => {
  failDeletes = false;
  moveReports = undefined;
  await empty(sys.tenants.demo!.url);
  await empty(sys.tenants.demo!.dlqUrl);
  const entries = [0, 1, 2].map((i) => ({
    Id: String(i),
    MessageBody: JSON.stringify({ jobId: `job-${i}`, tenant: 'demo', runAt: '2030-01-01T00:00:00.000Z', payload: i }),
    MessageAttributes: { dyneinError: { DataType: 'String', StringValue: `failed ${i}` } },
  }));
  await em.sqs.send(new SendMessageBatchCommand({ QueueUrl: sys.tenants.demo!.dlqUrl, Entries: entries }));
});

describe('dynein dlq', () => {
  it('lists peek, redrive, delete, edit and audit in its help', async () => {
    const help = await run('dlq', '--help');
    expect(help.code).toBe(0);
    for (const c of ['peek', 'redrive', 'delete', 'edit', 'audit']) expect(help.out.join('\n')).toMatch(new RegExp(`^  ${c} `, 'm'));
    expect((await run('dlq', 'peek', '--help')).out.join('\n')).toContain('--max');
    expect((await run('dlq', 'edit', '--help')).out.join('\n')).toMatch(/--payload-file <file>/);
    expect((await run('dlq', 'audit', '--help')).out.join('\n')).toMatch(/--all/);
  });

  it('peeks (human and JSON), redrives one, deletes one, redrives the rest with --all', async () => {
    const { url, dlqUrl } = sys.tenants.demo!;
    const human = await run('dlq', 'peek', '--tenant', 'demo');
    expect(human.code).toBe(0);
    expect(human.out.join('\n')).toMatch(/job-1 {2}runAt 2030-01-01T00:00:00.000Z/);
    expect(human.out.join('\n')).toMatch(/receives \d+ {2}sent \S+ {2}first attempt \S+ {2}error failed 1/);
    expect(human.err.join('\n')).toMatch(/3 shown of about 3 in the DLQ/);

    const json = await run('dlq', 'peek', '--tenant', 'demo', '--json', '--max', '3');
    const page = JSON.parse(json.out[0]!) as { messages: { handle: string; jobId: string }[] };
    expect(page.messages.map((m) => m.jobId).sort()).toEqual(['job-0', 'job-1', 'job-2']);
    const [a, b] = page.messages;

    const redrive = await run('dlq', 'redrive', '--tenant', 'demo', a!.handle);
    expect(redrive).toMatchObject({ code: 0, out: ['moved back to the queue 1'] });
    const del = await run('dlq', 'delete', '--tenant', 'demo', b!.handle, a!.handle);
    expect(del.code).toBe(0);
    expect(del.out[0]).toBe(`deleted 1; not in the DLQ (any more) 1: ${a!.handle}`);
    expect(await depth(dlqUrl)).toBe(1);
    const all = await run('dlq', 'redrive', '--tenant', 'demo', '--all');
    expect(all).toMatchObject({ code: 0, out: ['moved 1 message back to the queue'] });
    expect(await depth(dlqUrl)).toBe(0);
    expect(await depth(url)).toBe(2);
  });

  it('refuses bad command lines before sending, and a forged handle with the API error', async () => {
    for (const args of [
      ['dlq', 'redrive', '--tenant', 'demo'],
      ['dlq', 'redrive', '--tenant', 'demo', '--all', 'h.x'],
      ['dlq', 'delete', '--tenant', 'demo'],
      ['dlq', 'peek', '--tenant', 'demo', '--max', '11'],
      ['dlq', 'peek'],
      ['dlq', 'purge', '--tenant', 'demo'],
    ]) {
      const r = await run(...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toHaveLength(1);
    }
    const forged = await run('dlq', 'delete', '--tenant', 'demo', 'Zm9v.AAAA');
    expect(forged.code).toBe(1);
    expect(forged.err[0]).toMatch(/ValidationError \(HTTP 400\): handles\[0\] is not a handle this API issued/);
    expect(await depth(sys.tenants.demo!.dlqUrl)).toBe(3);
  });

  it('redrive --all on AWS waits for the move task, drawing its progress, and says how it ended', async () => {
    const task = (status: MoveTask['status'], moved: number, extra: Partial<MoveTask> = {}): MoveTask => ({
      status,
      moved,
      toMove: 3,
      startedAt: '2030-01-01T00:00:00.000Z',
      ...(status === 'RUNNING' ? { taskHandle: 'task-1' } : {}),
      ...extra,
    });
    // The list may lag the start: an older, finished move is listed first and is not this one.
    const older = task('COMPLETED', 7, { startedAt: '2020-01-01T00:00:00.000Z' });
    moveReports = [older, task('RUNNING', 1), task('RUNNING', 2), task('COMPLETED', 3)];
    const drawn: string[] = [];
    const out: string[] = [];
    const err: string[] = [];
    const io = { out: (l: string) => out.push(l), err: (l: string) => err.push(l), progress: (l: string) => drawn.push(l) };
    expect(await main(['dlq', 'redrive', '--tenant', 'demo', '--all', '--data-dir', dataDir], io)).toBe(0);
    expect(out).toEqual(['moved 3 messages back to the queue (message move task COMPLETED)']);
    expect(drawn.map((l) => l.split(',')[0])).toEqual(['moved 1/3 messages', 'moved 2/3 messages']);
    expect(err).toEqual(['']); // the progress line ended before the summary

    // A failed task: its reason on stderr, exit 1.
    moveReports = [task('RUNNING', 1), task('FAILED', 1, { failureReason: 'AWS.SimpleQueueService.NonExistentQueue' })];
    const failed = await run('dlq', 'redrive', '--tenant', 'demo', '--all');
    expect(failed.code).toBe(1);
    expect(failed.err).toEqual(['message move task FAILED: AWS.SimpleQueueService.NonExistentQueue after 1 messages']);

    // --no-wait: the task handle at once; --json: the reply and the task's last report.
    moveReports = [task('RUNNING', 0)];
    expect((await run('dlq', 'redrive', '--tenant', 'demo', '--all', '--no-wait')).out).toEqual(['started a message move task: task-1']);
    moveReports = [task('COMPLETED', 3)];
    const json = await run('dlq', 'redrive', '--tenant', 'demo', '--all', '--json');
    expect(JSON.parse(json.out[0]!)).toEqual({ method: 'StartMessageMoveTask', taskHandle: 'task-1', task: task('COMPLETED', 3) });
  }, 30_000);

  it('reads the move tasks through the API: none on the local SQS', async () => {
    const api = new DyneinClient({
      endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      region: 'us-east-1',
      credentials: keys.demo,
    });
    expect(await api.deadLetterMoves('demo')).toEqual({ tasks: [] });
  });

  it('keeps `dynein redrive` (straight to SQS) moving everything back', async () => {
    const r = await run('redrive', '--tenant', 'demo');
    expect(r.code).toBe(0);
    expect(r.out[0]).toMatch(/^moved 3 messages from the DLQ back to the queue/);
    expect(await depth(sys.tenants.demo!.dlqUrl)).toBe(0);
  });

  it('says which messages were sent but not deleted, advises deleting them (not redriving), and exits 1', async () => {
    const { url, dlqUrl } = sys.tenants.demo!;
    const page = JSON.parse((await run('dlq', 'peek', '--tenant', 'demo', '--json')).out[0]!) as { messages: { handle: string }[] };
    const [a, b] = page.messages.map((m) => m.handle);
    failDeletes = true;
    const r = await run('dlq', 'redrive', '--tenant', 'demo', a!, b!);
    expect(r.code).toBe(1);
    expect(r.out).toEqual(['moved back to the queue 0']);
    expect(r.err).toHaveLength(1);
    expect(r.err[0]).toMatch(/still in the DLQ .* 2: do not redrive them again .*; delete them: dynein dlq delete --tenant demo /);
    expect(r.err[0]).toContain(`${a} ${b}`);
    expect(r.err[0]).not.toMatch(/run it again|repeat/);
    // The advice followed: delete them; then the rest with --all, whose delete fails too.
    failDeletes = false;
    expect((await run('dlq', 'delete', '--tenant', 'demo', a!, b!)).code).toBe(0);
    failDeletes = true;
    const all = await run('dlq', 'redrive', '--tenant', 'demo', '--all');
    expect(all.code).toBe(1);
    expect(all.out[0]).toMatch(/^moved 0 messages back to the queue \(stopped/);
    expect(all.err[0]).toMatch(/still in the DLQ .* 1: do not redrive them again/);
    failDeletes = false;
    const rest = all.err[0]!.split(' --tenant demo ')[1]!.split(' ');
    expect((await run('dlq', 'delete', '--tenant', 'demo', ...rest)).code).toBe(0);
    // Each message in the queue once, the DLQ empty.
    expect(await depth(dlqUrl)).toBe(0);
    expect(await depth(url)).toBe(3);
  });

  it('edit puts a dead letter back with the payload text byte for byte; audit lists it with the caller and both SHA-256s', async () => {
    const { dlqUrl } = sys.tenants.demo!;
    const old = '{"n":0}';
    const a = await deadLetter(old);
    const b = await deadLetter(old);
    const text = '{"b": 1.50,   "a":"é" ,"c" :[ 1.0e2 ]}';
    const inline = await run('dlq', 'edit', await handleOf(a.jobId), '--tenant', 'demo', '--payload', text);
    expect(inline.code).toBe(0);
    expect(inline.out).toHaveLength(1);
    expect(inline.out[0]).toMatch(
      new RegExp(
        `^edited ${a.jobId} at \\S+Z: back on the queue with the new payload \\(sha256 ${sha256(old).slice(0, 12)} -> ${sha256(text).slice(0, 12)}\\)$`,
      ),
    );
    expect(await queued()).toEqual([withPayloadText(a.body, old, text)]);

    // From a file (a string payload, a newline after it), --json: the reply.
    const file = join(dataDir, 'payload.json');
    writeFileSync(file, '"retry\u00e9 now"\n');
    const fromFile = await run('dlq', 'edit', await handleOf(b.jobId), '--tenant', 'demo', '--payload-file', file, '--json');
    expect(fromFile.code).toBe(0);
    expect(JSON.parse(fromFile.out[0]!)).toEqual({
      jobId: b.jobId,
      editedAt: expect.stringMatching(/Z$/),
      oldPayloadSha256: sha256(old),
      newPayloadSha256: sha256('"retry\u00e9 now"'),
    });
    expect(await queued()).toEqual([withPayloadText(b.body, old, '"retry\u00e9 now"')]);
    expect(await depth(dlqUrl)).toBe(3); // the two edited left the DLQ; the three others stay

    // The audit, newest first: the caller (its principal ARN) and both hashes; shortened in the human form.
    const entry = (jobId: string, after: string) => ({
      at: expect.stringMatching(/Z$/),
      jobId,
      by: demoArn,
      oldPayloadSha256: sha256(old),
      newPayloadSha256: sha256(after),
      messageId: expect.any(String),
    });
    const page = await run('dlq', 'audit', '--tenant', 'demo', '--limit', '1', '--json');
    const first = JSON.parse(page.out[0]!) as { edits: unknown[]; cursor: string };
    expect(first.edits).toEqual([entry(b.jobId, '"retry\u00e9 now"')]);
    const human = await run('dlq', 'audit', '--tenant', 'demo', '--limit', '1', '--cursor', first.cursor);
    expect(human.code).toBe(0);
    expect(human.out).toHaveLength(1);
    expect(human.out[0]).toMatch(
      new RegExp(`^\\S+Z  ${a.jobId}  ${demoArn}  ${sha256(old).slice(0, 12)} -> ${sha256(text).slice(0, 12)}$`),
    );
    expect(human.err).toHaveLength(1);
    expect(human.err[0]).toMatch(/^more: dynein dlq audit --tenant demo --cursor '\S+' --limit 1 \(or --all\)$/);
    expect((await audited()).slice(0, 2)).toEqual([entry(b.jobId, '"retry\u00e9 now"'), entry(a.jobId, text)]);
  });

  it('edit refuses bad input with a one-line reason, sending nothing and changing nothing', async () => {
    const { url, dlqUrl } = sys.tenants.demo!;
    const a = await deadLetter('{"n":1}');
    const handle = await handleOf(a.jobId);
    const file = join(dataDir, 'not-json.txt');
    writeFileSync(file, '{"a": 1,}');
    const before = (await audited()).length;
    for (const args of [
      [handle, '--payload', '{b: 1}'],
      [handle, '--payload', 'retry'],
      [handle, '--payload-file', file],
      [handle, '--payload', '1', '--payload-file', file],
      [handle],
      ['--payload', '1'],
      [handle, handle, '--payload', '1'],
    ]) {
      const r = await run('dlq', 'edit', '--tenant', 'demo', ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err, args.join(' ')).toHaveLength(1);
      expect(r.out).toEqual([]);
    }
    expect((await run('dlq', 'edit', '--tenant', 'demo', handle, '--payload', 'nope')).err[0]).toMatch(/--payload is not JSON/);
    // The API's refusals: a handle it never issued, a message that is not a Dynein delivery, one no longer in the DLQ.
    const forged = await run('dlq', 'edit', '--tenant', 'demo', 'Zm9v.AAAA', '--payload', '1');
    expect(forged.code).toBe(1);
    expect(forged.err).toEqual([expect.stringMatching(/^dynein: ValidationError \(HTTP 400\): handle is not a handle this API issued/)]);
    const page = JSON.parse((await run('dlq', 'peek', '--tenant', 'demo', '--json')).out[0]!) as {
      messages: { handle: string; jobId?: string }[];
    };
    const foreign = page.messages.find((m) => m.jobId === 'job-0')!.handle; // not an id this deployment signed
    const notDelivery = await run('dlq', 'edit', '--tenant', 'demo', foreign, '--payload', '1');
    expect(notDelivery.code).toBe(1);
    expect(notDelivery.err).toEqual([expect.stringMatching(/^dynein: NotADelivery \(HTTP 409\): /)]);
    expect(await depth(dlqUrl)).toBe(4);
    expect((await run('dlq', 'delete', '--tenant', 'demo', handle)).code).toBe(0);
    const gone = await run('dlq', 'edit', '--tenant', 'demo', handle, '--payload', '1');
    expect(gone.code).toBe(1);
    expect(gone.err).toEqual([expect.stringMatching(/^dynein: DeadLetterNotFound \(HTTP 404\): /)]);
    expect(await depth(dlqUrl)).toBe(3);
    expect(await depth(url)).toBe(0);
    expect(await audited()).toHaveLength(before);
  });

  it('edit whose delete from the DLQ failed: advises deleting it, never editing it again, and exits 1', async () => {
    const a = await deadLetter('null');
    const handle = await handleOf(a.jobId);
    failDeletes = true;
    const r = await run('dlq', 'edit', '--tenant', 'demo', handle, '--payload', '2');
    expect(r.code).toBe(1);
    expect(r.out[0]).toMatch(new RegExp(`^edited ${a.jobId} `));
    expect(r.err).toEqual([
      `sent to the queue but still in the DLQ (the delete failed): do not edit or redrive it again (it would be delivered twice); delete it: dynein dlq delete --tenant demo ${handle}`,
    ]);
    expect(await queued()).toEqual([withPayloadText(a.body, 'null', '2')]);
  });

  it('audit refuses a bad --limit, and --all with --cursor', async () => {
    for (const args of [['--limit', '0'], ['--limit', '101'], ['--all', '--cursor', 'x'], ['extra']]) {
      const r = await run('dlq', 'audit', '--tenant', 'demo', ...args);
      expect(r.code, args.join(' ')).toBe(2);
      expect(r.err).toHaveLength(1);
    }
  });

  it('SDK: editDeadLetter sends a value (JSON.stringify) or payloadJson as given; deadLetterAudit and deadLetterEdits page the trail', async () => {
    const api = new DyneinClient({
      endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      region: 'us-east-1',
      credentials: keys.demo,
      retry: { maxAttempts: 1 },
    });
    const [a, b] = [await deadLetter('{"v":1}'), await deadLetter('{"v":2}')];
    const edited = await api.editDeadLetter('demo', await handleOf(a.jobId), { payload: { v: 10, s: 'é' } });
    expect(edited).toEqual({
      jobId: a.jobId,
      editedAt: expect.any(String),
      oldPayloadSha256: sha256('{"v":1}'),
      newPayloadSha256: sha256('{"v":10,"s":"é"}'),
    });
    const raw = '{"v": 9007199254740993, "x": 1.0}';
    expect((await api.editDeadLetter('demo', await handleOf(b.jobId), { payloadJson: raw })).newPayloadSha256).toBe(sha256(raw));
    expect((await queued()).sort()).toEqual(
      [withPayloadText(a.body, '{"v":1}', '{"v":10,"s":"é"}'), withPayloadText(b.body, '{"v":2}', raw)].sort(),
    );
    // Refused before sending: both payload forms; a bad limit.
    await expect(api.editDeadLetter('demo', 'h.x', { payload: 1, payloadJson: '1' })).rejects.toMatchObject({ source: 'client' });
    await expect(api.deadLetterAudit('demo', { limit: 0 })).rejects.toBeInstanceOf(ValidationError);
    await expect(api.editDeadLetter('demo', await handleOf('job-1'), { payload: 1 })).rejects.toMatchObject({
      status: 409,
      code: 'NotADelivery',
    });

    const page = await api.deadLetterAudit('demo', { limit: 1 });
    expect(page.edits.map((e) => e.jobId)).toEqual([b.jobId]);
    expect(page.cursor).toEqual(expect.any(String));
    const next = await api.deadLetterAudit('demo', { limit: 1, cursor: page.cursor! });
    expect(next.edits.map((e) => [e.jobId, e.by])).toEqual([[a.jobId, demoArn]]);
    const all = [];
    for await (const e of api.deadLetterEdits('demo', { limit: 2 })) all.push(e.jobId);
    expect(all.slice(0, 2)).toEqual([b.jobId, a.jobId]);
    expect(all.length).toBe((await audited()).length);
  });
});

/** SendMessageBatch calls an SQS client makes, recorded (the local SQS checks only its own 1 MiB per batch, not 256 KiB). */
function recorded(): { sqs: ReturnType<Emulators['newClients']>['sqs']; batches: SendMessageBatchCommandInput[] } {
  const { sqs } = em.newClients();
  const batches: SendMessageBatchCommandInput[] = [];
  sqs.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName === 'SendMessageBatchCommand') batches.push(args.input as SendMessageBatchCommandInput);
      return next(args);
    },
    { step: 'initialize' },
  );
  return { sqs, batches };
}

describe('dynein redrive (straight to SQS)', () => {
  it('moves ten messages of 240 KiB in SendMessageBatch calls of at most 256 KiB', async () => {
    const { url, dlqUrl } = sys.tenants.demo!;
    await empty(dlqUrl);
    for (let i = 0; i < 10; i++)
      await em.sqs.send(
        new SendMessageCommand({
          QueueUrl: dlqUrl,
          MessageBody: `${i}`.padEnd(240 * 1024, 'x'),
          MessageAttributes: { runAt: { DataType: 'String', StringValue: '2030-01-01T00:00:00.000Z' } },
        }),
      );
    const { sqs, batches } = recorded();
    expect(await redrive(sqs, url, dlqUrl, () => undefined)).toEqual({ moved: 10, method: 'copy' });
    for (const b of batches) {
      const bytes = (b.Entries ?? []).reduce(
        (n, e) =>
          n +
          Buffer.byteLength(e.MessageBody!) +
          Object.entries(e.MessageAttributes ?? {}).reduce(
            (m, [k, a]) => m + k.length + a.DataType!.length + (a.StringValue ?? '').length,
            0,
          ),
        0,
      );
      expect(bytes).toBeLessThanOrEqual(262_144);
    }
    expect(await depth(url)).toBe(10);
    expect(await depth(dlqUrl)).toBe(0);
    sqs.destroy();
  });

  it('counts only messages deleted as moved, and names those sent but not deleted', async () => {
    const { url, dlqUrl } = sys.tenants.demo!;
    const { sqs } = em.newClients();
    // Every DeleteMessageBatch entry fails (injected: the local SQS cannot fail a delete on demand).
    sqs.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName !== 'DeleteMessageBatchCommand') return next(args);
        const entries = (args.input as { Entries: { Id: string }[] }).Entries;
        return {
          response: {},
          output: { $metadata: {}, Successful: [], Failed: entries.map((e) => ({ Id: e.Id, Code: 'InternalError', SenderFault: false })) },
        } as never;
      },
      { step: 'initialize' },
    );
    await expect(redrive(sqs, url, dlqUrl, () => undefined)).rejects.toThrow(
      /moved 0 message\(s\); 3 more were sent to the queue but are still in the DLQ .*do not redrive them again/,
    );
    expect(await depth(url)).toBe(3);
    expect(await depth(dlqUrl)).toBe(3);
    sqs.destroy();
  });
});
