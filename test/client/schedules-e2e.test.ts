import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { type SQSClient } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DyneinClient,
  ForbiddenError,
  ScheduleNotFoundError,
  ValidationError,
  Worker,
  type DeliveredJob,
  type JobContext,
} from '../../client/index.js';
import { startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';
import { receiveAll, waitUntil, runCli } from './support.js';

/**
 * Recurring schedules through the client end to end, against the local stack (the real routes, the
 * local EventBridge Scheduler stand-in, the materialiser, the dispatcher): the SDK's calls and
 * typed errors, list paging, dry runs, pause/resume/delete, an occurrence delivered to a Worker
 * with its `schedule` field, and the `dynein schedules` commands as a user runs them.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let alpha: DyneinClient;
let beta: DyneinClient;
let sqs: SQSClient;

beforeAll(async () => {
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta', DYNEIN_LOOKAHEAD_MS: '2000' });
  local = await stack.waitForLocalJson();
  alpha = new DyneinClient({ endpoint: local.endpoint, region: local.region, credentials: local.tenants.alpha! });
  beta = new DyneinClient({ endpoint: local.endpoint, region: local.region, credentials: local.tenants.beta! });
  sqs = localSqs(local);
}, 60_000);
afterAll(async () => {
  sqs?.destroy();
  await stack?.stop();
});

const HOUR = 3_600_000;
/** A whole hour at least a day ahead: a rate(1 hour) from it has predictable runs. */
const futureHour = () => Math.ceil((Date.now() + 24 * HOUR) / HOUR) * HOUR;
const iso = (ms: number) => new Date(ms).toISOString();

const dynein = (args: string[]) => runCli(args, { DYNEIN_DATA_DIR: stack.dataDir });

describe('recurring schedules through DyneinClient, on the local stack', () => {
  it('creates (201), replaces (200), reads, pauses, resumes and deletes a schedule', async () => {
    const start = futureHour();
    const created = await alpha.putSchedule('alpha', 'hourly', {
      expression: 'rate(1 hour)',
      startAt: new Date(start),
      payloadJson: '{"id": 9007199254740993}',
    });
    expect(created).toMatchObject({
      tenant: 'alpha',
      name: 'hourly',
      expression: 'rate(1 hour)',
      timezone: 'UTC',
      startAt: iso(start),
      payload: { id: 9007199254740992 },
      state: 'ENABLED',
      created: true,
    });
    expect(created.nextRuns).toEqual([0, 1, 2, 3, 4].map((k) => iso(start + k * HOUR)));
    expect(Date.parse(created.createdAt)).toBeLessThanOrEqual(Date.now());

    const replaced = await alpha.putSchedule('alpha', 'hourly', {
      expression: 'cron(30 9 ? * MON-FRI *)',
      timezone: 'Europe/Paris',
      payload: { v: 2 },
    });
    expect(replaced).toMatchObject({ created: false, expression: 'cron(30 9 ? * MON-FRI *)', timezone: 'Europe/Paris', payload: { v: 2 } });
    expect(replaced).not.toHaveProperty('startAt');
    expect(replaced.createdAt).toBe(created.createdAt);
    expect(replaced.nextRuns).toHaveLength(5);
    for (const run of replaced.nextRuns) {
      const local = new Intl.DateTimeFormat('en-GB', {
        timeZone: 'Europe/Paris',
        weekday: 'short',
        hour: '2-digit',
        minute: '2-digit',
        hourCycle: 'h23',
      }).format(new Date(run));
      expect(local).toMatch(/^(Mon|Tue|Wed|Thu|Fri) 09:30$/);
    }

    expect(await alpha.getSchedule('alpha', 'hourly')).toMatchObject({ name: 'hourly', payload: { v: 2 }, nextRuns: replaced.nextRuns });

    const paused = await alpha.pauseSchedule('alpha', 'hourly');
    expect(paused).toMatchObject({ state: 'DISABLED', nextRuns: [] });
    expect(await alpha.pauseSchedule('alpha', 'hourly')).toMatchObject({ state: 'DISABLED', nextRuns: [] });
    expect((await alpha.getSchedule('alpha', 'hourly')).state).toBe('DISABLED');
    const resumed = await alpha.resumeSchedule('alpha', 'hourly');
    expect(resumed.state).toBe('ENABLED');
    expect(resumed.nextRuns).toEqual(replaced.nextRuns);

    expect(await alpha.deleteSchedule('alpha', 'hourly')).toMatchObject({ tenant: 'alpha', name: 'hourly', deleted: true });
    for (const call of [
      () => alpha.getSchedule('alpha', 'hourly'),
      () => alpha.deleteSchedule('alpha', 'hourly'),
      () => alpha.pauseSchedule('alpha', 'hourly'),
      () => alpha.resumeSchedule('alpha', 'hourly'),
    ]) {
      const err: any = await call().catch((e) => e);
      expect(err).toBeInstanceOf(ScheduleNotFoundError);
      expect(err).toMatchObject({ status: 404, code: 'ScheduleNotFound', source: 'api', attempts: 1 });
      expect(err.message).toContain('hourly');
      expect(err.requestId).toEqual(expect.any(String));
    }
  });

  it('a dry run answers up to count runs and stores nothing', async () => {
    const start = futureHour();
    const preview = await alpha.putSchedule(
      'alpha',
      'preview',
      { expression: 'rate(1 hour)', startAt: iso(start) },
      { dryRun: true, count: 24 },
    );
    expect(preview).toMatchObject({ dryRun: true, created: false, name: 'preview' });
    expect(preview.nextRuns).toEqual(Array.from({ length: 24 }, (_, k) => iso(start + k * HOUR)));
    const all = await alpha.putSchedule('alpha', 'preview', { expression: 'cron(0 12 ? * SUN *)' }, { dryRun: true });
    expect(all.nextRuns).toHaveLength(100);
    await expect(alpha.getSchedule('alpha', 'preview')).rejects.toBeInstanceOf(ScheduleNotFoundError);
    expect((await alpha.listSchedules('alpha')).schedules.map((s) => s.name)).not.toContain('preview');
  });

  it('lists in name order, a page at a time, and schedules() walks every page', async () => {
    const names = Array.from({ length: 7 }, (_, i) => `job-${7 - i}`);
    await Promise.all(names.map((n) => beta.putSchedule('beta', n, { expression: 'rate(1 day)', state: 'DISABLED', payload: n })));
    const first = await beta.listSchedules('beta', { limit: 3 });
    expect(first.schedules.map((s) => s.name)).toEqual(['job-1', 'job-2', 'job-3']);
    expect(first.schedules[0]).toMatchObject({ tenant: 'beta', state: 'DISABLED', payload: 'job-1', nextRuns: [] });
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await beta.listSchedules('beta', { limit: 3, cursor: first.nextCursor });
    expect(second.schedules.map((s) => s.name)).toEqual(['job-4', 'job-5', 'job-6']);
    const third = await beta.listSchedules('beta', { limit: 3, cursor: second.nextCursor });
    expect(third.schedules.map((s) => s.name)).toEqual(['job-7']);
    expect(third).not.toHaveProperty('nextCursor');

    const walked: string[] = [];
    for await (const s of beta.schedules('beta', { limit: 2 })) walked.push(s.name);
    expect(walked).toEqual([...names].sort());
    expect((await beta.listSchedules('beta')).schedules).toHaveLength(7);

    // A cursor is the tenant's own: alpha's list refuses beta's cursor, and a forged one.
    for (const cursor of [first.nextCursor!, 'forged']) {
      const err: any = await alpha.listSchedules('alpha', { cursor }).catch((e) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect(err.message).toMatch(/cursor/);
    }
    await Promise.all(names.map((n) => beta.deleteSchedule('beta', n)));
    expect(await beta.listSchedules('beta')).toEqual({ schedules: [] });
  });

  it('maps refusals to typed errors that name the field, and stores nothing', async () => {
    const bad: [Parameters<DyneinClient['putSchedule']>[2], RegExp][] = [
      [{ expression: 'cron(0 9 * * * *)' }, /\bday/i],
      [{ expression: 'cron(0 9 * *)' }, /expression|field/i],
      [{ expression: 'cron(60 9 ? * * *)' }, /minute/i],
      [{ expression: 'rate(0 minutes)' }, /rate/],
      [{ expression: 'rate(5 weeks)' }, /rate|unit/],
      [{ expression: 'at(2030-02-30T09:00:00)' }, /at\(/],
      [{ expression: 'every day at noon' }, /expression/],
      [{ expression: 'rate(1 hour)', timezone: 'Mars/Olympus' }, /timezone|zone/i],
      [{ expression: 'rate(1 hour)', startAt: 'yesterday' }, /startAt/],
      [{ expression: 'rate(1 hour)', startAt: '2030-01-02T00:00:00Z', endAt: '2030-01-01T00:00:00Z' }, /endAt/],
      [{ expression: 'rate(1 hour)', state: 'PAUSED' as 'DISABLED' }, /state/],
    ];
    for (const [definition, pattern] of bad) {
      const err: any = await alpha.putSchedule('alpha', 'refused', definition).catch((e) => e);
      expect(err, JSON.stringify(definition)).toBeInstanceOf(ValidationError);
      expect(err).toMatchObject({ status: 400, code: 'ValidationError', source: 'api' });
      expect(err.message).toMatch(pattern);
    }
    await expect(alpha.getSchedule('alpha', 'refused')).rejects.toBeInstanceOf(ScheduleNotFoundError);
    // Names the client refuses before sending, and one only the API refuses.
    await expect(alpha.putSchedule('alpha', 'x'.repeat(65), { expression: 'rate(1 hour)' })).rejects.toMatchObject({ source: 'client' });
    await expect(alpha.getSchedule('alpha', '..')).rejects.toMatchObject({ name: 'ValidationError', source: 'client' });
    // Another tenant's schedules: the gateway's 403, as the IAM grant answers.
    await expect(alpha.listSchedules('beta')).rejects.toBeInstanceOf(ForbiddenError);
    await expect(alpha.putSchedule('beta', 'mine', { expression: 'rate(1 hour)' })).rejects.toBeInstanceOf(ForbiddenError);
  });

  it('delivers an occurrence to a Worker with its schedule name, runAt on time and the payload as defined', async () => {
    const startAt = Math.ceil((Date.now() + 4_000) / 1000) * 1000;
    const payloadJson = '{"tick": 9007199254740993, "ratio": 1.0}';
    await alpha.putSchedule('alpha', 'every-minute', { expression: 'rate(1 minute)', startAt: new Date(startAt), payloadJson });
    const got: { job: DeliveredJob; ctx: JobContext }[] = [];
    const worker = new Worker({
      queueUrl: local.tenants.alpha!.queueUrl,
      sqs,
      waitTimeSeconds: 1,
      handleSignals: false,
      handler: (job, ctx) => void got.push({ job, ctx }),
    });
    const running = worker.run();
    try {
      await waitUntil(() => got.length > 0, 20_000, 'the first occurrence');
    } finally {
      await alpha.deleteSchedule('alpha', 'every-minute');
      await worker.stop();
      await running;
    }
    expect(got).toHaveLength(1);
    const { job, ctx } = got[0]!;
    expect(job).toMatchObject({ tenant: 'alpha', schedule: 'every-minute', runAt: iso(startAt), payloadText: payloadJson });
    expect(ctx.latenessMs).toBeGreaterThanOrEqual(0);
    expect(ctx.receivedAt).toBeGreaterThanOrEqual(startAt);
    // Nothing else came (the next occurrence, a minute later, was cancelled by the delete).
    expect(await receiveAll(sqs, local.tenants.alpha!.queueUrl, { waitMs: 1_000 })).toEqual([]);
  }, 40_000);
});

describe('dynein schedules on the local stack', () => {
  it('put, dry run, get, list, pause, resume, delete, as a user runs them', async () => {
    const put = await dynein([
      'schedules',
      'put',
      'digest',
      '--tenant',
      'beta',
      '--expression',
      'cron(0 9 ? * MON-FRI *)',
      '--timezone',
      'Europe/Paris',
      '--payload',
      '{"report": "digest"}',
    ]);
    expect(put.stderr).toBe('');
    expect(put.code).toBe(0);
    const lines = put.stdout.trimEnd().split('\n');
    expect(lines[0]).toBe('created digest  ENABLED  cron(0 9 ? * MON-FRI *)  Europe/Paris');
    expect(lines[1]).toBe('  next 5 runs:');
    expect(lines.slice(2)).toHaveLength(5);
    for (const l of lines.slice(2)) expect(l).toMatch(/^ {4}\d{4}-\d\d-\d\dT0[78]:00:00\.000Z$/);

    const dry = await dynein([
      'schedules',
      'put',
      'preview',
      '--tenant',
      'beta',
      '--expression',
      'rate(15 minutes)',
      '--dry-run',
      '--count',
      '3',
    ]);
    expect(dry.code).toBe(0);
    expect(dry.stdout.split('\n').slice(0, 2)).toEqual([
      'dry run (nothing stored): preview  ENABLED  rate(15 minutes)  UTC',
      '  next 3 runs:',
    ]);

    const json = await dynein(['schedules', 'get', 'digest', '--tenant', 'beta', '--json']);
    expect(JSON.parse(json.stdout)).toMatchObject({ name: 'digest', payload: { report: 'digest' }, state: 'ENABLED' });
    const list = await dynein(['schedules', 'list', '--tenant', 'beta']);
    expect(list.stdout).toMatch(/^digest {2}ENABLED {2}cron\(0 9 \? \* MON-FRI \*\) {2}Europe\/Paris {2}\S+Z\n$/);

    const paused = await dynein(['schedules', 'pause', 'digest', '--tenant', 'beta']);
    expect(paused.stdout).toMatch(/^paused digest {2}DISABLED/);
    const resumed = await dynein(['schedules', 'resume', 'digest', '--tenant', 'beta']);
    expect(resumed.stdout).toMatch(/^resumed digest {2}ENABLED .*\n {2}next 5 runs:\n/);
    const deleted = await dynein(['schedules', 'delete', 'digest', '--tenant', 'beta']);
    expect([deleted.code, deleted.stdout]).toEqual([0, 'deleted digest: its occurrences due more than 5 s from now are cancelled\n']);

    const errors: [string[], number, RegExp][] = [
      [['schedules', 'get', 'digest', '--tenant', 'beta'], 1, /^dynein: ScheduleNotFound \(HTTP 404\): .*digest.*\[request \S+\]\n$/],
      [['schedules', 'put', 'bad', '--tenant', 'beta', '--expression', 'cron(0 9 * * * *)'], 1, /^dynein: ValidationError \(HTTP 400\): /],
      [['schedules', 'put', 'bad', '--tenant', 'beta', '--expression', 'rate(1 hour)', '--timezone', 'Nowhere/Town'], 1, /timezone|zone/i],
      [['schedules', 'list', '--tenant', 'beta', '--cursor', 'forged'], 1, /ValidationError \(HTTP 400\): cursor/],
      [['schedules', 'put', 'bad', '--tenant', 'beta'], 2, /^dynein: schedules put needs --expression/],
    ];
    for (const [args, code, pattern] of errors) {
      const run = await dynein(args);
      expect([args, run.code, run.stdout]).toEqual([args, code, '']);
      expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
      expect(run.stderr).toMatch(pattern);
    }
  }, 60_000);

  it('dynein worker --json prints the schedule of an occurrence', async () => {
    const child = spawn(process.execPath, ['bin/dynein.js', 'worker', '--tenant', 'beta', '--json', '--wait-time', '1'], {
      env: { ...process.env, DYNEIN_DATA_DIR: stack.dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: Record<string, any>[] = [];
    createInterface({ input: child.stdout }).on('line', (l) => lines.push(JSON.parse(l)));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    const startAt = iso(Math.ceil((Date.now() + 4_000) / 1000) * 1000);
    const put = await dynein([
      'schedules',
      'put',
      'tick',
      '--tenant',
      'beta',
      '--expression',
      'rate(1 minute)',
      '--start-at',
      startAt,
      '--payload',
      '7',
    ]);
    expect(put.code).toBe(0);
    try {
      await waitUntil(() => lines.length > 0, 20_000, 'an occurrence line');
    } finally {
      await dynein(['schedules', 'delete', 'tick', '--tenant', 'beta']);
      child.kill('SIGTERM');
    }
    expect(await exited).toBe(0);
    expect(lines[0]).toMatchObject({ tenant: 'beta', runAt: startAt, schedule: 'tick', payload: 7 });
    expect(Object.keys(lines[0]!).slice(0, 4)).toEqual(['jobId', 'tenant', 'runAt', 'schedule']);
  }, 45_000);
});
