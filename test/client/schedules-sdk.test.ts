import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  ConcurrentModificationError,
  DyneinApiError,
  DyneinClient,
  ScheduleNotFoundError,
  ServerError,
  TenantNotFoundError,
  ValidationError,
  errorFromCode,
  parseDelivery,
  type Schedule,
} from '../../client/index.js';
import { STUB_CREDENTIALS, STUB_REGION, startScheduleStub, type StubApi } from './scheduleStub.js';

/**
 * The schedule methods of DyneinClient against an in-memory stand-in of the schedules routes
 * (test/client/scheduleStub.ts, which verifies SigV4 as the local gateway does): paths, query
 * strings, bodies, replies, paging, retries and the error classes; and the `schedule` field of
 * a delivered occurrence. The same calls against the real routes: schedules-e2e.test.ts.
 */
let api: StubApi;
let client: DyneinClient;

beforeAll(async () => {
  api = await startScheduleStub(['alpha', 'beta']);
  client = new DyneinClient({
    endpoint: api.endpoint,
    region: STUB_REGION,
    credentials: STUB_CREDENTIALS,
    retry: { baseMs: 5, capMs: 20 },
  });
});
afterAll(() => api?.close());
beforeEach(() => {
  api.requests.length = 0;
});

const last = () => api.requests.at(-1)!;

describe('DyneinClient schedules', () => {
  it('puts a schedule (201 created, then 200 replaced) with a signed JSON body', async () => {
    const created = await client.putSchedule('alpha', 'nightly', {
      expression: 'cron(0 2 * * ? *)',
      timezone: 'Europe/Paris',
      startAt: new Date('2030-01-01T00:00:00Z'),
      endAt: '2031-01-01T00:00:00+01:00',
      payload: { report: 'daily' },
    });
    expect(last()).toMatchObject({ method: 'PUT', url: '/v1/tenants/alpha/schedules/nightly' });
    expect(JSON.parse(last().body)).toEqual({
      expression: 'cron(0 2 * * ? *)',
      timezone: 'Europe/Paris',
      startAt: '2030-01-01T00:00:00.000Z',
      endAt: '2031-01-01T00:00:00+01:00',
      payload: { report: 'daily' },
    });
    expect(created).toMatchObject({
      tenant: 'alpha',
      name: 'nightly',
      state: 'ENABLED',
      payload: { report: 'daily' },
      created: true,
      nextRuns: expect.arrayContaining([expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)]),
    });
    expect(created.nextRuns).toHaveLength(5);

    const replaced = await client.putSchedule('alpha', 'nightly', { expression: 'rate(5 minutes)', state: 'DISABLED' });
    expect(JSON.parse(last().body)).toEqual({ expression: 'rate(5 minutes)', state: 'DISABLED' });
    expect(replaced).toMatchObject({ created: false, state: 'DISABLED', payload: null, nextRuns: [] });
  });

  it('sends payloadJson byte for byte', async () => {
    const text = '{"id": 9007199254740993, "ratio": 1.0}';
    await client.putSchedule('alpha', 'bigint', { expression: 'rate(1 hour)', payloadJson: text });
    expect(last().body).toBe(`{"expression":"rate(1 hour)","payload":${text}}`);
    await expect(client.putSchedule('alpha', 'bigint', { expression: 'rate(1 hour)', payloadJson: '{nope' })).rejects.toMatchObject({
      name: 'ValidationError',
      source: 'client',
    });
  });

  it('dry run: ?dryRun=true&count=n (signed), nothing stored', async () => {
    const preview = await client.putSchedule('alpha', 'preview', { expression: 'rate(1 minute)' }, { dryRun: true, count: 12 });
    expect(last()).toMatchObject({ method: 'PUT', url: '/v1/tenants/alpha/schedules/preview?dryRun=true&count=12' });
    expect(preview).toMatchObject({ dryRun: true, created: false, name: 'preview' });
    expect(preview.nextRuns).toHaveLength(12);
    await expect(client.getSchedule('alpha', 'preview')).rejects.toBeInstanceOf(ScheduleNotFoundError);
    expect((await client.putSchedule('alpha', 'preview', { expression: 'rate(1 minute)' }, { dryRun: true })).nextRuns).toHaveLength(100);
    expect(last().url).toBe('/v1/tenants/alpha/schedules/preview?dryRun=true');
  });

  it('gets, pauses, resumes and deletes; then 404 ScheduleNotFound', async () => {
    await client.putSchedule('alpha', 'ticker', { expression: 'rate(1 minute)', payload: [1, 2] });
    const got: Schedule<number[]> = await client.getSchedule<number[]>('alpha', 'ticker');
    expect(got).toMatchObject({ name: 'ticker', payload: [1, 2], state: 'ENABLED' });
    expect(last()).toMatchObject({ method: 'GET', url: '/v1/tenants/alpha/schedules/ticker', body: '' });

    const paused = await client.pauseSchedule('alpha', 'ticker');
    expect(last()).toMatchObject({ method: 'POST', url: '/v1/tenants/alpha/schedules/ticker/pause' });
    expect(paused).toMatchObject({ state: 'DISABLED', nextRuns: [] });
    expect(await client.pauseSchedule('alpha', 'ticker')).toMatchObject({ state: 'DISABLED' });

    const resumed = await client.resumeSchedule('alpha', 'ticker');
    expect(last()).toMatchObject({ method: 'POST', url: '/v1/tenants/alpha/schedules/ticker/resume' });
    expect(resumed.state).toBe('ENABLED');
    expect(resumed.nextRuns.length).toBeGreaterThan(0);

    expect(await client.deleteSchedule('alpha', 'ticker')).toEqual({
      tenant: 'alpha',
      name: 'ticker',
      deleted: true,
    });
    expect(last()).toMatchObject({ method: 'DELETE', url: '/v1/tenants/alpha/schedules/ticker' });
    for (const call of [
      () => client.getSchedule('alpha', 'ticker'),
      () => client.deleteSchedule('alpha', 'ticker'),
      () => client.pauseSchedule('alpha', 'ticker'),
      () => client.resumeSchedule('alpha', 'ticker'),
    ]) {
      const err: any = await call().catch((e) => e);
      expect(err).toBeInstanceOf(ScheduleNotFoundError);
      expect(err).toMatchObject({ status: 404, code: 'ScheduleNotFound', source: 'api', retryable: false, attempts: 1 });
      expect(err.requestId).toMatch(/^req-/);
    }
  });

  it('lists one page at a time, and schedules() walks every page in name order', async () => {
    const names = Array.from({ length: 7 }, (_, i) => `list-${String.fromCharCode(103 - i)}`); // list-g .. list-a
    for (const n of names) await client.putSchedule('beta', n, { expression: 'rate(1 day)' });
    const first = await client.listSchedules('beta', { limit: 3 });
    expect(last().url).toBe('/v1/tenants/beta/schedules?limit=3');
    expect(first.schedules.map((s) => s.name)).toEqual(['list-a', 'list-b', 'list-c']);
    expect(first.nextCursor).toEqual(expect.any(String));
    const second = await client.listSchedules('beta', { limit: 3, cursor: first.nextCursor });
    expect(last().url).toBe(`/v1/tenants/beta/schedules?limit=3&cursor=${encodeURIComponent(first.nextCursor!)}`);
    expect(second.schedules.map((s) => s.name)).toEqual(['list-d', 'list-e', 'list-f']);

    api.requests.length = 0;
    const walked: string[] = [];
    for await (const s of client.schedules('beta', { limit: 2 })) walked.push(s.name);
    expect(walked).toEqual([...names].sort());
    expect(api.requests).toHaveLength(4); // 2 + 2 + 2 + 1
    expect(api.requests.every((r) => r.method === 'GET')).toBe(true);

    const all = await client.listSchedules('beta');
    expect(last().url).toBe('/v1/tenants/beta/schedules');
    expect(all.schedules).toHaveLength(7);
    expect(all).not.toHaveProperty('nextCursor');

    const empty: string[] = [];
    for await (const s of client.schedules('alpha', { limit: 100 })) empty.push(s.name);
    expect(empty.length).toBeGreaterThanOrEqual(0);
  });

  it('a cursor with characters that need encoding is signed and sent intact', async () => {
    const err: any = await client.listSchedules('beta', { cursor: 'a+b/c= d&e' }).catch((e) => e);
    // Signed correctly (not a 403), so the stub read the cursor and refused it as not its own.
    expect(err).toBeInstanceOf(ValidationError);
    expect(err.source).toBe('api');
    expect(last().url).toBe('/v1/tenants/beta/schedules?cursor=a%2Bb%2Fc%3D%20d%26e');
  });

  it('maps the API errors to their classes', async () => {
    const cases: [() => Promise<unknown>, unknown, string][] = [
      [() => client.putSchedule('alpha', 'bad', { expression: 'every day' }), ValidationError, 'expression'],
      [() => client.putSchedule('alpha', 'bad', { expression: 'rate(1 day)', timezone: 'Mars' }), ValidationError, 'timezone'],
      [() => client.putSchedule('alpha', 'busy', { expression: 'rate(1 day)' }), ConcurrentModificationError, 'concurrently'],
      [() => client.pauseSchedule('alpha', 'busy'), ConcurrentModificationError, 'concurrently'],
      [() => client.getSchedule('gamma', 'x'), TenantNotFoundError, 'gamma'],
    ];
    for (const [call, Type, words] of cases) {
      const err: any = await call().catch((e) => e);
      expect(err).toBeInstanceOf(Type);
      expect(err).toBeInstanceOf(DyneinApiError);
      expect(err.message).toContain(words);
    }
    const conflict = await client.deleteSchedule('alpha', 'busy').catch((e) => e);
    expect(conflict).toMatchObject({ name: 'ConcurrentModificationError', status: 409, code: 'ConcurrentModification', retryable: false });
    expect(api.requests.filter((r) => r.url.includes('/busy'))).toHaveLength(3); // never retried
    expect(errorFromCode('ScheduleNotFound', 'gone')).toBeInstanceOf(ScheduleNotFoundError);
    expect(errorFromCode('ConcurrentModification', 'raced')).toBeInstanceOf(ConcurrentModificationError);
  });

  it('refuses what cannot be valid before sending anything', async () => {
    const refused: [() => Promise<unknown>, RegExp][] = [
      [() => client.getSchedule('alpha', 'x'.repeat(65)), /is not a schedule name/],
      [() => client.getSchedule('alpha', ''), /is not a schedule name/],
      [() => client.deleteSchedule('alpha', '..'), /not \. or \.\./],
      [() => client.pauseSchedule('alpha', 'a/b'), /is not a schedule name/],
      [
        () => client.putSchedule('alpha', 'ok', { expression: 'rate(1 day)' }, { dryRun: true, count: 0 }),
        /count must be a whole number from 1 to 100/,
      ],
      [() => client.putSchedule('alpha', 'ok', { expression: 'rate(1 day)' }, { dryRun: true, count: 2.5 }), /count must be/],
      [() => client.putSchedule('alpha', 'ok', { expression: 'rate(1 day)' }, { count: 5 }), /count applies to a dry run only/],
      [() => client.putSchedule('alpha', 'ok', { expression: 'rate(1 day)', startAt: new Date(NaN) }), /startAt is an invalid Date/],
      [() => client.putSchedule('alpha', 'ok', { expression: 'rate(1 day)', payload: 1, payloadJson: '1' }), /not both/],
      [() => client.listSchedules('alpha', { limit: 101 }), /limit must be a whole number from 1 to 100/],
    ];
    for (const [call, pattern] of refused) {
      const err: any = await call().catch((e) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect(err.source).toBe('client');
      expect(err.message).toMatch(pattern);
    }
    expect(api.requests).toHaveLength(0);
  });

  it('retries a PUT on a server error with the same bytes', async () => {
    api.inject.push(
      { status: 503, body: { message: 'Service Unavailable' } },
      { status: 500, body: { error: { code: 'InternalError', message: 'boom' } } },
    );
    const reply = await client.putSchedule('alpha', 'retried', { expression: 'rate(2 hours)', payload: { n: 1 } });
    expect(reply.name).toBe('retried');
    expect(api.requests).toHaveLength(3);
    expect(new Set(api.requests.map((r) => `${r.method} ${r.url} ${r.body}`)).size).toBe(1);

    api.inject.push({ status: 500, body: { error: { code: 'InternalError', message: 'boom' } } });
    const once = new DyneinClient({
      endpoint: api.endpoint,
      region: STUB_REGION,
      credentials: STUB_CREDENTIALS,
      retry: { maxAttempts: 1 },
    });
    await expect(once.getSchedule('alpha', 'retried')).rejects.toBeInstanceOf(ServerError);
  });

  it('a request signed with the wrong key is a ForbiddenError', async () => {
    const wrong = new DyneinClient({
      endpoint: api.endpoint,
      region: STUB_REGION,
      credentials: { ...STUB_CREDENTIALS, secretAccessKey: 'nope' },
    });
    await expect(wrong.listSchedules('alpha', { limit: 5 })).rejects.toMatchObject({
      name: 'ForbiddenError',
      status: 403,
      source: 'gateway',
    });
  });
});

describe('a delivered occurrence', () => {
  it('carries the schedule name; a one-off job has none', () => {
    const body =
      '{"jobId":"j1.alpha.1","tenant":"alpha","runAt":"2030-01-01T00:01:00.000Z","schedule":"nightly","payload":{"n":9007199254740993}}';
    const job = parseDelivery<{ n: number }>(body);
    expect(job).toEqual({
      jobId: 'j1.alpha.1',
      tenant: 'alpha',
      runAt: '2030-01-01T00:01:00.000Z',
      schedule: 'nightly',
      payload: { n: 9007199254740992 },
      payloadText: '{"n":9007199254740993}',
    });
    const oneOff = parseDelivery('{"jobId":"j1.alpha.2","tenant":"alpha","runAt":"2030-01-01T00:01:00.000Z","payload":null}');
    expect(oneOff).not.toHaveProperty('schedule');
    expect(() => parseDelivery('{"jobId":"j","tenant":"a","runAt":"2030-01-01T00:01:00.000Z","schedule":7,"payload":1}')).toThrow(
      /not a Dynein job message \(schedule is not a string\)/,
    );
  });
});
