/**
 * The local EventBridge Scheduler stand-in (local/scheduler/) driven by the real
 * @aws-sdk/client-scheduler SchedulerClient, firing into fauxqs queues.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ConflictException,
  CreateScheduleCommand,
  CreateScheduleGroupCommand,
  DeleteScheduleCommand,
  DeleteScheduleGroupCommand,
  GetScheduleCommand,
  GetScheduleGroupCommand,
  ListSchedulesCommand,
  ResourceNotFoundException,
  SchedulerClient,
  UpdateScheduleCommand,
  ValidationException,
  type CreateScheduleCommandInput,
} from '@aws-sdk/client-scheduler';
import { GetQueueAttributesCommand, ReceiveMessageCommand, type Message } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  sqsQueueUrlResolver,
  startLocalScheduler,
  type Firing,
  type LocalScheduler,
  type LocalSchedulerOptions,
} from '../../local/scheduler/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';

const region = 'us-east-1';
const accountId = '000000000000';
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };

let emu: Emulators;
let queueArn: string;
const running: { scheduler: LocalScheduler; client: SchedulerClient }[] = [];
const dirs: string[] = [];

beforeAll(async () => {
  emu = await startEmulators();
});
// The tests run at once (each waits seconds on its schedules' times): the schedulers stop when all are done.
afterAll(async () => {
  for (const r of running.splice(0)) {
    r.client.destroy();
    await r.scheduler.stop();
  }
  await emu.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function newQueue(): Promise<{ url: string; arn: string }> {
  const { url } = await emu.createQueue('sched-target');
  const attrs = await emu.sqs.send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }));
  const arn = attrs.Attributes?.QueueArn;
  if (arn === undefined) throw new Error('no QueueArn');
  return { url, arn };
}

function newDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'dynein-scheduler-'));
  dirs.push(d);
  return d;
}

async function start(dataDir: string, extra: Partial<LocalSchedulerOptions> = {}) {
  const scheduler = await startLocalScheduler({
    port: 0,
    dataDir,
    region,
    accountId,
    sqs: emu.sqs,
    resolveQueueUrl: sqsQueueUrlResolver(emu.sqs),
    ...extra,
  });
  const client = new SchedulerClient({ endpoint: scheduler.endpoint, region, credentials, maxAttempts: 1 });
  const firings: Firing[] = [];
  scheduler.onFiring((f) => firings.push(f));
  running.push({ scheduler, client });
  return { scheduler, client, firings };
}

async function stopOne(r: { scheduler: LocalScheduler; client: SchedulerClient }) {
  const i = running.findIndex((x) => x.scheduler === r.scheduler);
  if (i >= 0) running.splice(i, 1);
  r.client.destroy();
  await r.scheduler.stop();
}

const definition = (name: string, over: Partial<CreateScheduleCommandInput> = {}): CreateScheduleCommandInput => ({
  Name: name,
  ScheduleExpression: 'rate(5 minutes)',
  FlexibleTimeWindow: { Mode: 'OFF' },
  Target: { Arn: queueArn, RoleArn: `arn:aws:iam::${accountId}:role/scheduler`, Input: '{"x":1}' },
  State: 'DISABLED',
  ...over,
});

async function receiveAll(url: string, waitSeconds: number): Promise<Message[]> {
  const out: Message[] = [];
  const until = Date.now() + waitSeconds * 1000;
  while (Date.now() < until) {
    const r = await emu.sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: url,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        MessageSystemAttributeNames: ['SentTimestamp'],
      }),
    );
    out.push(...(r.Messages ?? []));
  }
  return out;
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  throw new Error('expected the call to fail');
}

describe.concurrent('local EventBridge Scheduler stand-in', () => {
  beforeAll(async () => {
    ({ arn: queueArn } = await newQueue());
  });

  it('creates, gets, updates, lists and deletes schedules through the real SDK', async () => {
    const { client } = await start(newDir());
    const before = Date.now();
    const created = await client.send(
      new CreateScheduleCommand(
        definition('nightly', {
          ScheduleExpression: 'cron(30 2 * * ? *)',
          ScheduleExpressionTimezone: 'Europe/Paris',
          Description: 'night run',
          ActionAfterCompletion: 'NONE',
        }),
      ),
    );
    expect(created.ScheduleArn).toBe(`arn:aws:scheduler:${region}:${accountId}:schedule/default/nightly`);

    const got = await client.send(new GetScheduleCommand({ Name: 'nightly' }));
    expect(got).toMatchObject({
      Arn: created.ScheduleArn,
      Name: 'nightly',
      GroupName: 'default',
      ScheduleExpression: 'cron(30 2 * * ? *)',
      ScheduleExpressionTimezone: 'Europe/Paris',
      Description: 'night run',
      State: 'DISABLED',
      FlexibleTimeWindow: { Mode: 'OFF' },
      ActionAfterCompletion: 'NONE',
      Target: { Arn: queueArn, Input: '{"x":1}', RetryPolicy: { MaximumEventAgeInSeconds: 86400, MaximumRetryAttempts: 185 } },
    });
    expect(got.CreationDate).toBeInstanceOf(Date);
    expect(got.CreationDate?.getTime()).toBeGreaterThanOrEqual(before);
    expect(got.CreationDate?.getTime()).toBeLessThanOrEqual(Date.now());

    const endDate = new Date(Date.now() + 86_400_000);
    const updated = await client.send(
      new UpdateScheduleCommand(
        definition('nightly', {
          ScheduleExpression: 'rate(2 hours)',
          EndDate: endDate,
          FlexibleTimeWindow: { Mode: 'FLEXIBLE', MaximumWindowInMinutes: 15 },
        }),
      ),
    );
    expect(updated.ScheduleArn).toBe(created.ScheduleArn);
    const after = await client.send(new GetScheduleCommand({ Name: 'nightly', GroupName: 'default' }));
    expect(after.ScheduleExpression).toBe('rate(2 hours)');
    expect(after.ScheduleExpressionTimezone).toBeUndefined(); // an update replaces the whole definition
    expect(after.Description).toBeUndefined();
    expect(after.EndDate?.getTime()).toBe(endDate.getTime());
    expect(after.FlexibleTimeWindow).toEqual({ Mode: 'FLEXIBLE', MaximumWindowInMinutes: 15 });
    expect(after.CreationDate?.getTime()).toBe(got.CreationDate?.getTime());
    expect(after.LastModificationDate?.getTime()).toBeGreaterThanOrEqual(got.LastModificationDate?.getTime() ?? Infinity);

    await client.send(new CreateScheduleGroupCommand({ Name: 'tenant-a' }));
    expect((await client.send(new GetScheduleGroupCommand({ Name: 'tenant-a' }))).State).toBe('ACTIVE');
    for (const n of ['a1', 'a2', 'a3'])
      await client.send(
        new CreateScheduleCommand(
          definition(n, { GroupName: 'tenant-a', State: n === 'a2' ? 'ENABLED' : 'DISABLED', ScheduleExpression: 'cron(0 0 1 1 ? 2190)' }),
        ),
      );
    const inGroup = await client.send(new ListSchedulesCommand({ GroupName: 'tenant-a' }));
    expect(inGroup.Schedules?.map((s) => s.Name)).toEqual(['a1', 'a2', 'a3']);
    expect(inGroup.Schedules?.[0]).toMatchObject({ GroupName: 'tenant-a', State: 'DISABLED', Target: { Arn: queueArn } });
    expect(inGroup.Schedules?.[0]?.CreationDate).toBeInstanceOf(Date);
    const enabled = await client.send(new ListSchedulesCommand({ State: 'ENABLED' }));
    expect(enabled.Schedules?.map((s) => s.Name)).toEqual(['a2']);
    const prefixed = await client.send(new ListSchedulesCommand({ NamePrefix: 'nig' }));
    expect(prefixed.Schedules?.map((s) => s.Name)).toEqual(['nightly']);
    // Paging: two pages of two, then nothing left.
    const page1 = await client.send(new ListSchedulesCommand({ MaxResults: 2 }));
    expect(page1.Schedules).toHaveLength(2);
    expect(page1.NextToken).toBeDefined();
    const page2 = await client.send(new ListSchedulesCommand({ MaxResults: 2, NextToken: page1.NextToken }));
    expect([...(page1.Schedules ?? []), ...(page2.Schedules ?? [])].map((s) => `${s.GroupName}/${s.Name}`)).toEqual([
      'default/nightly',
      'tenant-a/a1',
      'tenant-a/a2',
      'tenant-a/a3',
    ]);

    await client.send(new DeleteScheduleCommand({ Name: 'nightly' }));
    expect(await rejection(client.send(new GetScheduleCommand({ Name: 'nightly' })))).toBeInstanceOf(ResourceNotFoundException);
    // Deleting a group deletes its schedules.
    await client.send(new DeleteScheduleGroupCommand({ Name: 'tenant-a' }));
    expect((await client.send(new ListSchedulesCommand({}))).Schedules).toEqual([]);
  });

  it('answers the service errors as the SDK surfaces them, and stores nothing on a refusal', async () => {
    const dir = newDir();
    const { client } = await start(dir);
    await client.send(new CreateScheduleCommand(definition('once')));

    const dup = await rejection(client.send(new CreateScheduleCommand(definition('once'))));
    expect(dup).toBeInstanceOf(ConflictException);
    expect((dup as ConflictException).message).toContain('once');
    // The same ClientToken (an SDK retry of a create that succeeded) answers as the first did.
    await client.send(new CreateScheduleCommand(definition('tok', { ClientToken: 'token-1' })));
    expect((await client.send(new CreateScheduleCommand(definition('tok', { ClientToken: 'token-1' })))).ScheduleArn).toContain(
      'schedule/default/tok',
    );

    for (const call of [
      () => client.send(new GetScheduleCommand({ Name: 'missing' })),
      () => client.send(new DeleteScheduleCommand({ Name: 'missing' })),
      () => client.send(new UpdateScheduleCommand(definition('missing'))),
      () => client.send(new GetScheduleCommand({ Name: 'once', GroupName: 'other' })),
      () => client.send(new CreateScheduleCommand(definition('x', { GroupName: 'no-such-group' }))),
      () => client.send(new GetScheduleGroupCommand({ Name: 'no-such-group' })),
    ]) {
      expect(await rejection(call())).toBeInstanceOf(ResourceNotFoundException);
    }

    const invalid: [Partial<CreateScheduleCommandInput>, string][] = [
      [{ ScheduleExpression: 'cron(0 9 * * *)' }, 'cron'],
      [{ ScheduleExpression: 'cron(0 9 * * MON *)' }, '?'],
      [{ ScheduleExpression: 'rate(0 minutes)' }, 'rate'],
      [{ ScheduleExpression: 'rate(1 minutes)' }, 'singular'],
      [{ ScheduleExpression: 'at(2027-02-30T00:00:00)' }, 'calendar'],
      [{ ScheduleExpression: 'every day' }, 'expression'],
      [{ ScheduleExpressionTimezone: 'Mars/Olympus' }, 'Mars/Olympus'],
      [{ FlexibleTimeWindow: { Mode: 'FLEXIBLE' } }, 'MaximumWindowInMinutes'],
      [{ State: 'PAUSED' as 'ENABLED' }, 'state'],
      [{ Target: { Arn: 'arn:aws:lambda:us-east-1:000000000000:function:f', RoleArn: 'arn:aws:iam::000000000000:role/r' } }, 'SQS'],
      [{ StartDate: new Date(Date.now() - 3_600_000) }, 'StartDate'],
      [{ EndDate: new Date(Date.now() - 1000) }, 'EndDate'],
      [{ Target: { Arn: queueArn, RoleArn: 'r', RetryPolicy: { MaximumRetryAttempts: 500 } } }, 'maximumRetryAttempts'],
    ];
    for (const [over, words] of invalid) {
      const err = await rejection(client.send(new CreateScheduleCommand(definition('bad', over))));
      expect(err, JSON.stringify(over)).toBeInstanceOf(ValidationException);
      expect((err as ValidationException).message).toContain(words);
    }
    const longName = await rejection(client.send(new CreateScheduleCommand(definition('n'.repeat(65)))));
    expect(longName).toBeInstanceOf(ValidationException);
    expect(await rejection(client.send(new DeleteScheduleGroupCommand({ Name: 'default' })))).toBeInstanceOf(ValidationException);

    // Nothing of the refused requests was stored, in memory or on disk.
    expect((await client.send(new ListSchedulesCommand({}))).Schedules?.map((s) => s.Name)).toEqual(['once', 'tok']);
    const onDisk = JSON.parse(readFileSync(join(dir, 'scheduler.json'), 'utf8')) as { schedules: { Name: string }[] };
    expect(onDisk.schedules.map((s) => s.Name).sort()).toEqual(['once', 'tok']);
  });

  it('keeps schedules and groups across a stop and a start on the same data directory', async () => {
    const dir = newDir();
    const first = await start(dir);
    await first.client.send(new CreateScheduleGroupCommand({ Name: 'kept' }));
    await first.client.send(
      new CreateScheduleCommand(
        definition('survivor', { GroupName: 'kept', ScheduleExpression: 'cron(0 12 ? * MON-FRI *)', Description: 'd' }),
      ),
    );
    const before = await first.client.send(new GetScheduleCommand({ Name: 'survivor', GroupName: 'kept' }));
    await stopOne(first);

    const second = await start(dir);
    const after = await second.client.send(new GetScheduleCommand({ Name: 'survivor', GroupName: 'kept' }));
    expect(after).toEqual({ ...before, $metadata: after.$metadata });
    expect((await second.client.send(new GetScheduleGroupCommand({ Name: 'kept' }))).Name).toBe('kept');
  });

  it('fires an at() schedule once, never early, with the Input byte for byte, then deletes it', async () => {
    const { url, arn } = await newQueue();
    const { client, firings } = await start(newDir());
    const occurrence = Math.ceil(Date.now() / 1000) * 1000 + 3000;
    const at = new Date(occurrence).toISOString().slice(0, 19);
    const input = '{"payload": "é ✓ \\u0000 spaces  kept",\n "n": 1.50, "bmp": "日本語 ±½"}';
    await client.send(
      new CreateScheduleCommand(
        definition('one-shot', {
          ScheduleExpression: `at(${at})`,
          State: 'ENABLED',
          ActionAfterCompletion: 'DELETE',
          Target: { Arn: arn, RoleArn: 'arn:aws:iam::000000000000:role/r', Input: input },
        }),
      ),
    );

    const messages = await receiveAll(url, 7);
    expect(messages).toHaveLength(1);
    expect(messages[0]?.Body).toBe(input);
    expect(Number(messages[0]?.Attributes?.SentTimestamp)).toBeGreaterThanOrEqual(occurrence);
    expect(firings).toHaveLength(1);
    expect(firings[0]).toMatchObject({ occurrence, delivered: true });
    expect(firings[0]?.firedAt).toBeGreaterThanOrEqual(occurrence);
    expect(await rejection(client.send(new GetScheduleCommand({ Name: 'one-shot' })))).toBeInstanceOf(ResourceNotFoundException);
  });

  it('fires rate(1 minute) from its StartDate, filling the context attributes; a disabled schedule never fires', async () => {
    const { url, arn } = await newQueue();
    const { client, firings } = await start(newDir());
    const startDate = Math.floor(Date.now() / 1000) * 1000 - 57_000; // next occurrence about 3 s from now
    const occurrence = startDate + 60_000;
    const target = {
      Arn: arn,
      RoleArn: 'arn:aws:iam::000000000000:role/r',
      Input: '{"at":"<aws.scheduler.scheduled-time>","arn":"<aws.scheduler.schedule-arn>","try":<aws.scheduler.attempt-number>}',
    };
    await client.send(
      new CreateScheduleCommand(
        definition('minutely', { ScheduleExpression: 'rate(1 minute)', StartDate: new Date(startDate), State: 'ENABLED', Target: target }),
      ),
    );
    await client.send(
      new CreateScheduleCommand(definition('paused', { ScheduleExpression: 'rate(1 minute)', State: 'DISABLED', Target: target })),
    );

    const messages = await receiveAll(url, 7);
    expect(messages).toHaveLength(1);
    expect(JSON.parse(messages[0]?.Body ?? '')).toEqual({
      at: new Date(occurrence).toISOString().replace('.000Z', 'Z'),
      arn: `arn:aws:scheduler:${region}:${accountId}:schedule/default/minutely`,
      try: 1,
    });
    expect(Number(messages[0]?.Attributes?.SentTimestamp)).toBeGreaterThanOrEqual(occurrence);
    expect(firings.map((f) => f.occurrence)).toEqual([occurrence]);
    // A recurring schedule stays after firing.
    expect((await client.send(new GetScheduleCommand({ Name: 'minutely' }))).State).toBe('ENABLED');
  });

  it('skips occurrences that fell while it was stopped, then fires the next one on time (injected clock)', async () => {
    const { url, arn } = await newQueue();
    let now = Date.parse('2030-01-01T00:00:30Z');
    const clock = { now: () => now };
    const dir = newDir();
    const first = await start(dir, { clock, maxSleepMs: 20 });
    await first.client.send(
      new CreateScheduleCommand(
        definition('tick', {
          ScheduleExpression: 'cron(* * * * ? *)',
          State: 'ENABLED',
          Target: { Arn: arn, RoleArn: 'r', Input: 'tick' },
        }),
      ),
    );
    now = Date.parse('2030-01-01T00:01:00Z'); // 00:01 is due
    await expect.poll(() => first.firings.length, { timeout: 5000 }).toBe(1);
    expect(first.firings[0]?.occurrence).toBe(Date.parse('2030-01-01T00:01:00Z'));
    await stopOne(first);

    now = Date.parse('2030-01-01T00:05:30Z'); // 00:02 to 00:05 fell while stopped
    const second = await start(dir, { clock, maxSleepMs: 20 });
    await new Promise((r) => setTimeout(r, 300));
    expect(second.firings).toEqual([]);
    now = Date.parse('2030-01-01T00:05:59.999Z');
    await new Promise((r) => setTimeout(r, 200));
    expect(second.firings).toEqual([]); // never early
    now = Date.parse('2030-01-01T00:06:00Z');
    await expect.poll(() => second.firings.length, { timeout: 5000 }).toBe(1);
    expect(second.firings[0]?.occurrence).toBe(Date.parse('2030-01-01T00:06:00Z'));
    expect((await receiveAll(url, 2)).map((m) => m.Body)).toEqual(['tick', 'tick']);
  });

  it('with missedOccurrences "fire", fires each missed occurrence once at start', async () => {
    const { url, arn } = await newQueue();
    let now = Date.parse('2030-01-01T00:00:30Z');
    const clock = { now: () => now };
    const dir = newDir();
    const first = await start(dir, { clock, maxSleepMs: 20, missedOccurrences: 'fire' });
    await first.client.send(
      new CreateScheduleCommand(
        definition('tick', {
          ScheduleExpression: 'cron(* * * * ? *)',
          State: 'ENABLED',
          Target: { Arn: arn, RoleArn: 'r', Input: 'tick' },
        }),
      ),
    );
    await stopOne(first);
    now = Date.parse('2030-01-01T00:03:30Z');
    const second = await start(dir, { clock, maxSleepMs: 20, missedOccurrences: 'fire' });
    await expect.poll(() => second.firings.length, { timeout: 5000 }).toBe(3);
    expect(second.firings.map((f) => new Date(f.occurrence).toISOString()).sort()).toEqual([
      '2030-01-01T00:01:00.000Z',
      '2030-01-01T00:02:00.000Z',
      '2030-01-01T00:03:00.000Z',
    ]);
    expect(await receiveAll(url, 2)).toHaveLength(3);
  });

  it('sends to the dead-letter queue when the target cannot be reached', async () => {
    const dlq = await newQueue();
    let now = Date.parse('2030-01-01T00:00:30Z');
    const clock = { now: () => now };
    const logs: string[] = [];
    const { client, firings } = await start(newDir(), { clock, maxSleepMs: 20, retryBaseMs: 10, log: (m) => logs.push(m) });
    const missing = `arn:aws:sqs:${region}:${accountId}:no-such-queue`;
    await client.send(
      new CreateScheduleCommand(
        definition('lost', {
          ScheduleExpression: 'cron(* * * * ? *)',
          State: 'ENABLED',
          Target: {
            Arn: missing,
            RoleArn: 'r',
            Input: 'lost',
            RetryPolicy: { MaximumRetryAttempts: 2 },
            DeadLetterConfig: { Arn: dlq.arn },
          },
        }),
      ),
    );
    now = Date.parse('2030-01-01T00:01:00Z');
    await expect.poll(() => firings.length, { timeout: 5000 }).toBe(1);
    expect(firings[0]?.delivered).toBe(false);
    expect(logs.join('\n')).toContain('1 attempt(s)'); // a missing queue is not retried
    const dead = await emu.sqs.send(new ReceiveMessageCommand({ QueueUrl: dlq.url, WaitTimeSeconds: 1, MessageAttributeNames: ['All'] }));
    expect(dead.Messages?.[0]?.Body).toBe('lost');
    expect(dead.Messages?.[0]?.MessageAttributes?.TARGET_ARN?.StringValue).toBe(missing);
    expect(dead.Messages?.[0]?.MessageAttributes?.RETRY_ATTEMPTS?.StringValue).toBe('0');
    expect(dead.Messages?.[0]?.MessageAttributes?.EXHAUSTED_RETRY_CONDITION?.StringValue).toBe('NonRetryableError');
  });

  it('retries a failed send with backoff within the RetryPolicy, filling attempt-number', async () => {
    const { url, arn } = await newQueue();
    let now = Date.parse('2030-01-01T00:00:30Z');
    const clock = { now: () => now };
    const real = sqsQueueUrlResolver(emu.sqs);
    let failures = 0;
    // Not a mock of the SDK: the resolver is the stand-in's injected dependency; two transient
    // failures (no $fault, like a network error) stand for an unreachable endpoint.
    const flaky = async (queueArn: string) => {
      if (queueArn === arn && failures < 2) {
        failures++;
        throw new Error('connect ECONNREFUSED');
      }
      return real(queueArn);
    };
    const { client, firings } = await start(newDir(), { clock, maxSleepMs: 20, retryBaseMs: 10, resolveQueueUrl: flaky, log: () => {} });
    await client.send(
      new CreateScheduleCommand(
        definition('flaky', {
          ScheduleExpression: 'cron(* * * * ? *)',
          State: 'ENABLED',
          Target: { Arn: arn, RoleArn: 'r', Input: 'attempt <aws.scheduler.attempt-number>' },
        }),
      ),
    );
    now = Date.parse('2030-01-01T00:01:00Z');
    await expect.poll(() => firings.length, { timeout: 5000 }).toBe(1);
    expect(firings[0]?.delivered).toBe(true);
    expect((await receiveAll(url, 1)).map((m) => m.Body)).toEqual(['attempt 3']);
  });
});
