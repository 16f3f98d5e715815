/**
 * Recurring schedules end to end below the HTTP server: the schedules handler and the ingest
 * handler's firings over dynalite, fauxqs and the local EventBridge Scheduler stand-in (through
 * the real @aws-sdk/client-scheduler), with a clock the test moves. Covers materialising ahead,
 * repeated firings, update/pause/resume/delete cut-offs, a call that dies half way, catch-up after
 * an outage, validation (nothing stored), paging cursors and tenant isolation.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetScheduleCommand, ListSchedulesCommand, SchedulerClient } from '@aws-sdk/client-scheduler';
import { GetItemCommand, ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { clockName } from '../../adapters/eventBridgeTrigger.js';
import { keys } from '../../adapters/dynamoJobStore.js';
import { DynamoScheduleStore } from '../../adapters/dynamoScheduleStore.js';
import { resolveSettings } from '../../core/model/config.js';
import { jobTrace, type SpanRecord } from '../../core/model/index.js';
import type { JobStore } from '../../core/model/ports.js';
import { COARSE_CLOCK_MS, MATERIALISE_AHEAD_MS, materialise, materialiseFiring, occurrenceJob } from '../../core/recurring/materialise.js';
import type { ScheduleRecord } from '../../core/recurring/model.js';
import { firingBody, type ScheduleStore } from '../../core/recurring/ports.js';
import { ingestHandler, occurrenceAuditHandler, schedulesHandler, type Telemetry } from '../../lambdas/runtime/handlers.js';
import { wire, type Wiring } from '../../lambdas/runtime/wiring.js';
import { sqsQueueUrlResolver, startLocalScheduler, type LocalScheduler } from '../../local/scheduler/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { httpApiEvent } from '../support/lambdaEvents.js';

const GROUP = 'dynein-test';
const T0 = Date.parse('2027-01-04T10:00:30.000Z');
let now = T0;
const clock = { now: () => now };

let emu: Emulators;
let table: string;
let scheduler: LocalScheduler;
let client: SchedulerClient;
let dataDir: string;
let w: Wiring;
let schedules: DynamoScheduleStore;
let base: Parameters<typeof wire>[0];

beforeAll(async () => {
  emu = await startEmulators();
  dataDir = mkdtempSync(join(tmpdir(), 'dynein-recurring-'));
  // The stand-in's clock stays far in the past: it never fires by itself here (the test fires).
  scheduler = await startLocalScheduler({
    port: 0,
    dataDir,
    region: 'us-east-1',
    accountId: '000000000000',
    sqs: emu.sqs,
    resolveQueueUrl: sqsQueueUrlResolver(emu.sqs),
    clock: { now: () => Date.parse('2020-01-01T00:00:00Z') },
  });
  client = new SchedulerClient({
    endpoint: scheduler.endpoint,
    region: 'us-east-1',
    credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
  });
  const { CreateScheduleGroupCommand } = await import('@aws-sdk/client-scheduler');
  await client.send(new CreateScheduleGroupCommand({ Name: GROUP }));
}, 30_000);

afterAll(async () => {
  client?.destroy();
  await scheduler?.stop();
  await emu?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

/**
 * A system over the same table; `store` wraps its job store, `scheduleStore` replaces its schedule
 * store, `maxOccurrencesPerPass` lowers the size of a catch-up pass (default 1,000).
 */
async function newSystem(
  store?: (s: JobStore) => JobStore,
  scheduleStore: ScheduleStore = schedules,
  maxOccurrencesPerPass?: number,
): Promise<Wiring> {
  const wiring = await wire(base, { dynamo: emu.dynamo, sqs: emu.sqs, scheduler: client, clock, idKey: Buffer.alloc(32, 7) });
  if (!store && maxOccurrencesPerPass === undefined) return wiring;
  const wrapped = store ? store(wiring.store) : wiring.store;
  const { SchedulesService } = await import('../../core/recurring/service.js');
  const { TenantRegistry } = await import('../../core/tenants/registry.js');
  const { EventBridgeTrigger } = await import('../../adapters/eventBridgeTrigger.js');
  return {
    ...wiring,
    schedules: new SchedulesService({
      store: wrapped,
      schedules: scheduleStore,
      trigger: new EventBridgeTrigger(base.scheduler!, client, clock.now),
      wakes: wiring.ingest.wakes,
      tenants: new TenantRegistry(wiring.store, { clock }),
      codec: wiring.codec,
      clock,
      settings: base.settings,
      ...(maxOccurrencesPerPass !== undefined ? { maxOccurrencesPerPass } : {}),
    }),
  };
}

beforeEach(async () => {
  now = T0;
  table = await emu.createTable();
  const inbound = await emu.createQueue('inbound');
  const arn = (await emu.sqs.send(new GetQueueAttributesCommand({ QueueUrl: inbound.url, AttributeNames: ['QueueArn'] }))).Attributes!
    .QueueArn!;
  base = {
    tableName: table,
    inboundQueueUrl: inbound.url,
    settings: resolveSettings({ shardCount: 8, groupCount: 2 }),
    idKey: { base64: Buffer.alloc(32, 7).toString('base64') },
    scheduler: { groupName: GROUP, roleArn: 'arn:aws:iam::000000000000:role/dynein-scheduler', targetArn: arn },
  };
  w = await newSystem();
  schedules = new DynamoScheduleStore(table, emu.dynamo);
  for (const name of ['acme', 'other']) {
    const q = await emu.createQueue(`t-${name}`);
    await w.store.putTenant({ name, queueUrl: q.url, dlqUrl: q.url });
  }
});

function event(method: string, path: string, body?: string, query: Record<string, string> = {}): APIGatewayProxyEventV2 {
  const m = /^\/v1\/tenants\/([^/]+)\/schedules(?:\/([^/]+))?/.exec(path)!;
  return httpApiEvent({
    method,
    path,
    body,
    ...(Object.keys(query).length > 0 ? { queryStringParameters: query } : {}),
    pathParameters: { tenant: m[1]!, ...(m[2] !== undefined ? { name: m[2] } : {}) },
  });
}

async function call(method: string, path: string, body?: unknown, query?: Record<string, string>, wiring: Wiring = w) {
  const text = body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const res = await schedulesHandler(wiring)(event(method, path, text, query));
  return { status: res.statusCode, json: JSON.parse(res.body) as any, body: res.body };
}

const minute = (iso: string) => Date.parse(`2027-01-04T${iso}Z`);

async function record(tenant: string, name: string): Promise<ScheduleRecord> {
  const r = await schedules.getSchedule(tenant, name);
  if (!r) throw new Error(`no record ${tenant}/${name}`);
  return r;
}

/** The state of a revision's occurrence at `dueMs`, by its derived id. */
async function occurrenceState(r: { tenant: string; name: string; rev: string; shardCount: number }, dueMs: number): Promise<string> {
  const { jobId } = occurrenceJob(w, r, dueMs);
  return (await w.jobs.status(r.tenant, jobId)).state;
}

/** What an occurrence's tombstone says was at its key before. */
async function priorState(
  r: { tenant: string; name: string; rev: string; shardCount: number },
  dueMs: number,
): Promise<string | undefined> {
  const { jobId, shard } = occurrenceJob(w, r, dueMs);
  const res = await emu.dynamo.send(new GetItemCommand({ TableName: table, Key: keys.row({ shard, dueMs, jobId }), ConsistentRead: true }));
  return res.Item?.priorState?.S;
}

/**
 * The occurrence jobs of a schedule (every revision) that are, or will be, delivered (SCHEDULED,
 * ACQUIRED, or a delivered marker), by due time: a scan of the whole table.
 */
async function liveOccurrences(tenant: string, name: string): Promise<Map<number, { payload?: string }[]>> {
  const out = new Map<number, { payload?: string }[]>();
  let start: Record<string, AttributeValue> | undefined;
  do {
    const res = await emu.dynamo.send(
      new ScanCommand({
        TableName: table,
        FilterExpression: 'sched = :s AND tenant = :t AND #state IN (:a, :b, :c)',
        ExpressionAttributeNames: { '#state': 'state' },
        ExpressionAttributeValues: {
          ':s': { S: name },
          ':t': { S: tenant },
          ':a': { S: 'SCHEDULED' },
          ':b': { S: 'ACQUIRED' },
          ':c': { S: 'QUEUED' },
        },
        ...(start ? { ExclusiveStartKey: start } : {}),
      }),
    );
    for (const item of res.Items ?? []) {
      // Only job rows (pk = shard number): not the late-lane pointers or cancel records.
      if (!/^\d+$/.test(item.pk!.S!)) continue;
      const dueMs = Number(item.sk!.S!.slice(0, 13));
      out.set(dueMs, [...(out.get(dueMs) ?? []), item.payload?.S !== undefined ? { payload: item.payload.S } : {}]);
    }
    start = res.LastEvaluatedKey;
  } while (start);
  return out;
}

async function fire(tenant: string, name: string): Promise<void> {
  const res = await ingestHandler(w)({
    Records: [{ messageId: 'm1', body: firingBody({ tenant, name }), attributes: { ApproximateReceiveCount: '1' } }],
  } as never);
  expect(res.batchItemFailures).toEqual([]);
}

describe('creating a schedule', () => {
  it('answers 201 with the definition and the next 5 runs, and 200 when replaced', async () => {
    const body = { expression: 'cron(0/15 * * * ? *)', timezone: 'Asia/Kathmandu', payload: { report: 'daily' } };
    const created = await call('PUT', '/v1/tenants/acme/schedules/quarterly', body);
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({
      tenant: 'acme',
      name: 'quarterly',
      expression: 'cron(0/15 * * * ? *)',
      timezone: 'Asia/Kathmandu',
      payload: { report: 'daily' },
      state: 'ENABLED',
      createdAt: '2027-01-04T10:00:30.000Z',
    });
    // Kathmandu is UTC+05:45: its quarter hours fall on :00, :15, :30, :45 local = :15, :30, :45, :00 UTC.
    expect(created.json.nextRuns).toEqual([
      '2027-01-04T10:15:00.000Z',
      '2027-01-04T10:30:00.000Z',
      '2027-01-04T10:45:00.000Z',
      '2027-01-04T11:00:00.000Z',
      '2027-01-04T11:15:00.000Z',
    ]);
    now += 1_000;
    const replaced = await call('PUT', '/v1/tenants/acme/schedules/quarterly', { ...body, payload: 2 });
    expect(replaced.status).toBe(200);
    expect(replaced.json.createdAt).toBe('2027-01-04T10:00:30.000Z');
    expect(replaced.json.updatedAt).toBe('2027-01-04T10:00:31.000Z');
    expect(replaced.json.payload).toBe(2);
  });

  it('an every-minute schedule gets a 5-minute clock and is materialised 8 minutes ahead; a repeated firing adds none', async () => {
    expect((await call('PUT', '/v1/tenants/acme/schedules/every-minute', { expression: 'cron(* * * * ? *)' })).status).toBe(201);
    const r = await record('acme', 'every-minute');
    expect(r.clockPeriodMs).toBe(COARSE_CLOCK_MS);
    // The clock may fire up to 5 minutes later, and EventBridge up to a minute late: 5 + 3 minutes ahead.
    expect(r.throughMs).toBe(T0 + COARSE_CLOCK_MS + MATERIALISE_AHEAD_MS);
    for (let m = 1; m <= 8; m++) expect(await occurrenceState(r, minute(`10:0${m}:00`))).toBe('SCHEDULED');
    expect(await occurrenceState(r, minute('10:09:00'))).toBe('UNKNOWN');
    // The same firing twice, or retried: the same ids, nothing new.
    expect(await materialiseFiring(w.recurring, { tenant: 'acme', name: 'every-minute' })).toBe(0);
    await fire('acme', 'every-minute');
    expect(await materialiseFiring(w.recurring, { tenant: 'acme', name: 'every-minute' })).toBe(0);
    // The clock's next firing, five minutes later, adds the next five.
    now += COARSE_CLOCK_MS;
    expect(await materialiseFiring(w.recurring, { tenant: 'acme', name: 'every-minute' })).toBe(5);
    expect(await occurrenceState(r, minute('10:13:00'))).toBe('SCHEDULED');
    const clockDef = await client.send(
      new GetScheduleCommand({ GroupName: GROUP, Name: clockName({ tenant: 'acme', name: 'every-minute' }) }),
    );
    expect(clockDef).toMatchObject({ ScheduleExpression: 'rate(5 minutes)', State: 'ENABLED' });
    expect(clockDef.Target?.Arn).toBe(base.scheduler!.targetArn);
    expect(JSON.parse(clockDef.Target!.Input!)).toEqual({ v: 3, firing: { tenant: 'acme', schedule: 'every-minute' } });
    expect(clockDef.FlexibleTimeWindow?.Mode).toBe('OFF');
  });

  it('a schedule running less often than every 5 minutes: its clock mirrors it, at least two occurrences and 3 minutes ahead', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/quarter', { expression: 'cron(0/15 * * * ? *)', timezone: 'Asia/Kolkata' });
    const r = await record('acme', 'quarter');
    expect(r.clockPeriodMs).toBeUndefined();
    // Kolkata is UTC+05:30: quarter hours fall on :00, :15, :30, :45 UTC too. Two ahead: 10:15 and 10:30.
    expect(r.throughMs).toBe(minute('10:30:00'));
    for (const t of ['10:15:00', '10:30:00']) expect(await occurrenceState(r, minute(t))).toBe('SCHEDULED');
    expect(await occurrenceState(r, minute('10:45:00'))).toBe('UNKNOWN');
    const clockDef = await client.send(new GetScheduleCommand({ GroupName: GROUP, Name: clockName({ tenant: 'acme', name: 'quarter' }) }));
    expect(clockDef).toMatchObject({ ScheduleExpression: 'cron(0/15 * * * ? *)', ScheduleExpressionTimezone: 'Asia/Kolkata' });
    // Its firing at 10:15 adds 10:45.
    now = minute('10:15:00');
    expect(await materialiseFiring(w.recurring, { tenant: 'acme', name: 'quarter' })).toBe(1);
  });

  it('materialises two occurrences of a sparse schedule however far they are', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/new-year', { expression: 'cron(0 0 1 1 ? *)', timezone: 'Pacific/Chatham' });
    const r = await record('acme', 'new-year');
    // Chatham is UTC+13:45 in January.
    expect(await occurrenceState(r, Date.parse('2027-12-31T10:15:00Z'))).toBe('SCHEDULED');
    expect(await occurrenceState(r, Date.parse('2028-12-31T10:15:00Z'))).toBe('SCHEDULED');
  });

  it('keeps the payload byte for byte, and the occurrence row carries it with the schedule name', async () => {
    const raw = '{"expression":"rate(5 minutes)","payload":{"n": 1.0, "big": 9007199254740993, "e": "\\u00e9"}}';
    const res = await call('PUT', '/v1/tenants/acme/schedules/raw', raw);
    expect(res.status).toBe(201);
    expect(res.body).toContain('"payload":{"n": 1.0, "big": 9007199254740993, "e": "\\u00e9"}');
    const r = await record('acme', 'raw');
    // rate() runs first at creation: the occurrence due now.
    const { jobId, shard } = occurrenceJob(w, r, T0);
    const row = await w.store.acquire({ shard, dueMs: T0, jobId }, now, now + 30_000);
    expect(row?.payload).toBe('{"n": 1.0, "big": 9007199254740993, "e": "\\u00e9"}');
    expect(row?.schedule).toBe('raw');
    expect((await call('GET', '/v1/tenants/acme/schedules/raw')).body).toContain('"payload":{"n": 1.0, "big": 9007199254740993');
  });

  it('materialises the single occurrence of at() at creation and keeps no clock for it', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/once', { expression: 'at(2027-01-04T12:00:00)', timezone: 'Europe/Paris' });
    const r = await record('acme', 'once');
    expect(await occurrenceState(r, Date.parse('2027-01-04T11:00:00Z'))).toBe('SCHEDULED');
    await expect(
      client.send(new GetScheduleCommand({ GroupName: GROUP, Name: clockName({ tenant: 'acme', name: 'once' }) })),
    ).rejects.toThrow(/does not exist/);
  });

  it('answers a dry run with up to `count` runs and stores nothing', async () => {
    const res = await call(
      'PUT',
      '/v1/tenants/acme/schedules/preview',
      { expression: 'rate(1 hour)', state: 'DISABLED' },
      { dryRun: 'true', count: '100' },
    );
    expect(res.status).toBe(200);
    expect(res.json.dryRun).toBe(true);
    expect(res.json.state).toBe('DISABLED');
    expect(res.json.nextRuns).toHaveLength(100);
    expect(res.json.nextRuns[1]).toBe('2027-01-04T11:00:30.000Z');
    expect((await call('GET', '/v1/tenants/acme/schedules/preview')).status).toBe(404);
    expect(
      (await client.send(new ListSchedulesCommand({ GroupName: GROUP, NamePrefix: clockName({ tenant: 'acme', name: 'preview' }) })))
        .Schedules,
    ).toEqual([]);
    expect(
      (await call('PUT', '/v1/tenants/acme/schedules/preview', { expression: 'rate(1 hour)' }, { dryRun: 'true', count: '101' })).status,
    ).toBe(400);
  });
});

describe('tracing (docs/tracing.md)', () => {
  it('each occurrence starts a trace of its own: its dynein.schedule.fire span, linked to the call that defined the schedule, and its ingest under it', async () => {
    const recorded: SpanRecord[] = [];
    const traced = await wire(base, {
      dynamo: emu.dynamo,
      sqs: emu.sqs,
      scheduler: client,
      clock,
      idKey: Buffer.alloc(32, 7),
      spans: { record: (s) => void recorded.push(s), flush: async () => undefined },
    });
    const definition = JSON.stringify({ expression: 'cron(* * * * ? *)', payload: { secret: 'not in a span' } });
    const put = (name: string, headers: Record<string, string>) =>
      schedulesHandler(traced)(
        httpApiEvent({
          method: 'PUT',
          path: `/v1/tenants/acme/schedules/${name}`,
          body: definition,
          headers,
          pathParameters: { tenant: 'acme', name },
        }),
      );
    const caller = { traceId: '4bf92f3577b34da6a3ce929d0e0e4736', spanId: '00f067aa0ba902b7' };
    expect((await put('traced', { traceparent: `00-${caller.traceId}-${caller.spanId}-01` })).statusCode).toBe(201);
    const fires = recorded.filter((s) => s.name === 'dynein.schedule.fire');
    expect(fires).toHaveLength(8); // 8 minutes ahead (see above)
    for (const f of fires) {
      const jobId = String(f.attributes['dynein.job_id']);
      expect([f.traceId, f.spanId]).toEqual([jobTrace(jobId).traceId, jobTrace(jobId).spanId]);
      expect(f.parentSpanId).toBeUndefined();
      expect(f.links).toEqual([caller]);
      expect(f.attributes['dynein.schedule']).toBe('traced');
      const ingest = recorded.find((s) => s.name === 'dynein.ingest' && s.attributes['dynein.job_id'] === jobId);
      expect(ingest).toMatchObject({ traceId: f.traceId, parentSpanId: f.spanId });
    }
    expect(new Set(fires.map((f) => f.traceId)).size).toBe(8);
    expect(JSON.stringify(recorded)).not.toContain('not in a span');
    // Paused and resumed, it is the same definition: the link stays. Defined again without a trace: none.
    recorded.length = 0;
    now += 60_000;
    const action = (verb: string) =>
      schedulesHandler(traced)(
        httpApiEvent({
          method: 'POST',
          path: `/v1/tenants/acme/schedules/traced/${verb}`,
          pathParameters: { tenant: 'acme', name: 'traced' },
        }),
      );
    expect((await action('pause')).statusCode).toBe(200);
    expect((await action('resume')).statusCode).toBe(200);
    expect(
      recorded.filter((s) => s.name === 'dynein.schedule.fire').every((f) => JSON.stringify(f.links) === JSON.stringify([caller])),
    ).toBe(true);
    expect(recorded.some((s) => s.name === 'dynein.schedule.fire')).toBe(true);
    recorded.length = 0;
    now += 60_000;
    expect((await put('traced', {})).statusCode).toBe(200);
    const again = recorded.filter((s) => s.name === 'dynein.schedule.fire');
    expect(again.length).toBeGreaterThan(0);
    expect(again.every((f) => f.links === undefined)).toBe(true);
  });
});

describe('invalid definitions', () => {
  const cases: [string, unknown, RegExp][] = [
    ['* in both day fields', { expression: 'cron(0 10 * * * *)' }, /^expression: /],
    ['five fields', { expression: 'cron(0 10 * * ?)' }, /^expression: /],
    ['minute 60', { expression: 'cron(60 * * * ? *)' }, /^expression: minutes/],
    ['rate(0 minutes)', { expression: 'rate(0 minutes)' }, /^expression: /],
    ['an unknown unit', { expression: 'rate(2 weeks)' }, /^expression: /],
    ['a malformed at()', { expression: 'at(2027-02-30T10:00:00)' }, /^expression: /],
    ['an unknown zone', { expression: 'rate(1 day)', timezone: 'Mars/Olympus' }, /^timezone: /],
    ['free text', { expression: 'every day at noon' }, /^expression: /],
    ['no expression', { payload: 1 }, /^expression is required/],
    ['an unknown field', { expression: 'rate(1 day)', cron: 'x' }, /unknown field 'cron'/],
    ['endAt before startAt', { expression: 'rate(1 day)', startAt: '2027-02-01T00:00:00Z', endAt: '2027-01-01T00:00:00Z' }, /^endAt/],
    ['a bad startAt', { expression: 'rate(1 day)', startAt: 'tomorrow' }, /^startAt/],
    ['a bad state', { expression: 'rate(1 day)', state: 'PAUSED' }, /^state/],
    ['a payload SQS cannot carry', '{"expression":"rate(1 day)","payload":"\uFFFF"}', /^payload/],
  ];
  it.each(cases)('refuses %s with 400 ValidationError naming the field, storing nothing', async (_what, body, message) => {
    const res = await call('PUT', '/v1/tenants/acme/schedules/bad', body);
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe('ValidationError');
    expect(res.json.error.message).toMatch(message);
    expect((await call('GET', '/v1/tenants/acme/schedules/bad')).status).toBe(404);
    expect((await call('GET', '/v1/tenants/acme/schedules')).json.schedules).toEqual([]);
  });

  it('refuses names over 64 characters or with other characters', async () => {
    for (const name of ['x'.repeat(65), 'a%2Fb', 'sp%20ace']) {
      const res = await call('PUT', `/v1/tenants/acme/schedules/${name}`, { expression: 'rate(1 day)' });
      expect(res.status).toBe(400);
      expect(res.json.error.message).toMatch(/^name /);
    }
    expect((await call('PUT', `/v1/tenants/acme/schedules/${'x'.repeat(64)}`, { expression: 'rate(1 day)' })).status).toBe(201);
  });

  it('answers 404 for an unregistered tenant', async () => {
    const res = await call('PUT', '/v1/tenants/ghost/schedules/a', { expression: 'rate(1 day)' });
    expect(res.status).toBe(404);
    expect(res.json.error.code).toBe('TenantNotFound');
  });
});

describe('changing a schedule', () => {
  it('update: occurrences past the 5 s cut-off are cancelled and replaced; those within it stay', async () => {
    now = minute('10:00:57');
    await call('PUT', '/v1/tenants/acme/schedules/m', { expression: 'cron(* * * * ? *)', payload: 'v1' });
    const v1 = await record('acme', 'm');
    now = minute('10:00:57.500');
    await call('PUT', '/v1/tenants/acme/schedules/m', { expression: 'cron(* * * * ? *)', payload: 'v2' });
    const v2 = await record('acme', 'm');
    expect(v2.rev).not.toBe(v1.rev);
    expect(v2.pending).toEqual([]);
    // 10:01 is due within 5 s: the v1 occurrence is delivered, v2 has none then (never twice).
    expect(await occurrenceState(v1, minute('10:01:00'))).toBe('SCHEDULED');
    expect(await occurrenceState(v2, minute('10:01:00'))).toBe('UNKNOWN');
    for (const t of ['10:02:00', '10:03:00']) {
      expect(await occurrenceState(v1, minute(t))).toBe('CANCELLED');
      expect(await occurrenceState(v2, minute(t))).toBe('SCHEDULED');
    }
  });

  it('pause cancels what was materialised, firings while paused add nothing, resume skips the runs that fell while paused', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/p', { expression: 'cron(* * * * ? *)' });
    const v1 = await record('acme', 'p');
    const paused = await call('POST', '/v1/tenants/acme/schedules/p/pause');
    expect(paused.status).toBe(200);
    expect(paused.json).toMatchObject({ state: 'DISABLED', nextRuns: [] });
    for (const t of ['10:01:00', '10:02:00', '10:03:00']) expect(await occurrenceState(v1, minute(t))).toBe('CANCELLED');
    // A tombstone says whether the occurrence existed: 10:08 was materialised, 10:09 only blocked (a firing in flight).
    expect(await priorState(v1, minute('10:08:00'))).toBe('SCHEDULED');
    expect(await occurrenceState(v1, minute('10:09:00'))).toBe('CANCELLED');
    expect(await priorState(v1, minute('10:09:00'))).toBe('NONE');
    // Listed: the cancelled occurrences that existed, not the blocker.
    const listed = await w.lister.list('acme', { state: 'CANCELLED', schedule: 'p' });
    expect(listed.jobs.map((j) => j.runAt)).toEqual(
      ['10:01', '10:02', '10:03', '10:04', '10:05', '10:06', '10:07', '10:08'].map((t) => `2027-01-04T${t}:00.000Z`),
    );
    const clockDef = await client.send(new GetScheduleCommand({ GroupName: GROUP, Name: clockName({ tenant: 'acme', name: 'p' }) }));
    expect(clockDef.State).toBe('DISABLED');
    // Pausing again changes nothing.
    const again = await call('POST', '/v1/tenants/acme/schedules/p/pause');
    expect(again.json.updatedAt).toBe(paused.json.updatedAt);
    now = minute('10:05:30');
    const v2 = await record('acme', 'p');
    expect(await materialiseFiring(w.recurring, { tenant: 'acme', name: 'p' })).toBe(0);
    const resumed = await call('POST', '/v1/tenants/acme/schedules/p/resume');
    expect(resumed.json).toMatchObject({ state: 'ENABLED', nextRuns: expect.arrayContaining(['2027-01-04T10:06:00.000Z']) });
    const v3 = await record('acme', 'p');
    for (const t of ['10:03:00', '10:04:00', '10:05:00']) {
      for (const r of [v1, v2, v3]) expect(await occurrenceState(r, minute(t))).not.toBe('SCHEDULED');
    }
    for (const t of ['10:06:00', '10:07:00', '10:08:00']) expect(await occurrenceState(v3, minute(t))).toBe('SCHEDULED');
    expect((await client.send(new GetScheduleCommand({ GroupName: GROUP, Name: clockName({ tenant: 'acme', name: 'p' }) }))).State).toBe(
      'ENABLED',
    );
  });

  it('delete: cancels the occurrences, removes the clock, then answers 404', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/d', { expression: 'rate(1 minute)' });
    const r = await record('acme', 'd');
    now += 1_000;
    const res = await call('DELETE', '/v1/tenants/acme/schedules/d');
    expect(res.status).toBe(200);
    expect(res.json).toEqual({ tenant: 'acme', name: 'd', deleted: true });
    expect(await occurrenceState(r, T0 + 60_000)).toBe('CANCELLED');
    expect(await occurrenceState(r, T0 + 120_000)).toBe('CANCELLED');
    // What stays is a marker of the floor (the cut-off), which the table's TTL removes a day later.
    const marker = await record('acme', 'd');
    expect(marker).toMatchObject({ deleting: true, deleted: true, pending: [], throughMs: now + 5_000 });
    const item = await emu.dynamo.send(
      new GetItemCommand({ TableName: table, Key: { pk: { S: 'sched#acme' }, sk: { S: 'd' } }, ConsistentRead: true }),
    );
    expect(item.Item?.expiresAt?.N).toBe(String(Math.ceil((now + 5_000 + 86_400_000) / 1000)));
    expect((await call('GET', '/v1/tenants/acme/schedules/d')).json.error.code).toBe('ScheduleNotFound');
    expect((await call('GET', '/v1/tenants/acme/schedules')).json.schedules).toEqual([]);
    expect((await call('DELETE', '/v1/tenants/acme/schedules/d')).status).toBe(404);
    await expect(client.send(new GetScheduleCommand({ GroupName: GROUP, Name: clockName({ tenant: 'acme', name: 'd' }) }))).rejects.toThrow(
      /does not exist/,
    );
    // A firing of a clock deleted since writes nothing.
    expect(await materialiseFiring(w.recurring, { tenant: 'acme', name: 'd' })).toBe(0);
    // The name can be used again: a new schedule, new occurrence ids.
    expect((await call('PUT', '/v1/tenants/acme/schedules/d', { expression: 'rate(1 minute)' })).status).toBe(201);
    const again = await record('acme', 'd');
    expect(again.anchorMs).toBe(now);
    expect(await occurrenceState(again, now + 60_000)).toBe('SCHEDULED');
  });

  it('delete of a schedule whose floor has passed removes the item; the name is free at once', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/old', { expression: 'cron(* * * * ? *)' });
    await call('POST', '/v1/tenants/acme/schedules/old/pause');
    now = minute('10:20:30');
    expect((await call('DELETE', '/v1/tenants/acme/schedules/old')).status).toBe(200);
    expect(await schedules.getSchedule('acme', 'old')).toBeUndefined();
    expect((await call('PUT', '/v1/tenants/acme/schedules/old', { expression: 'cron(* * * * ? *)' })).status).toBe(201);
    expect((await liveOccurrences('acme', 'old')).get(minute('10:21:00'))).toHaveLength(1);
  });

  it('a call that dies after writing the new revision leaves its cancels to the next firing', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/c', { expression: 'cron(* * * * ? *)', payload: 1 });
    const v1 = await record('acme', 'c');
    // The process dies at its first tombstone (an instance killed mid-call: the emulator cannot fail on cue).
    let crash = true;
    const dying = await newSystem((s) =>
      Object.assign(Object.create(s) as JobStore, {
        cancel: (...args: Parameters<JobStore['cancel']>) => {
          if (crash) {
            crash = false;
            return Promise.reject(new Error('instance died'));
          }
          return s.cancel(...args);
        },
      }),
    );
    expect(
      (await call('PUT', '/v1/tenants/acme/schedules/c', { expression: 'cron(* * * * ? *)', payload: 2 }, undefined, dying)).status,
    ).toBe(500);
    const v2 = await record('acme', 'c');
    expect(v2.pending.map((p) => p.rev)).toEqual([v1.rev]);
    // The next firing finishes the cancels before anything else.
    await fire('acme', 'c');
    expect((await record('acme', 'c')).pending).toEqual([]);
    for (const t of ['10:01:00', '10:02:00', '10:03:00']) {
      expect(await occurrenceState(v1, minute(t))).toBe('CANCELLED');
      expect(await occurrenceState(v2, minute(t))).toBe('SCHEDULED');
    }
  });

  it('a change while firings were missed first writes the old revision up to the cut-off: late, never skipped', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/behind', { expression: 'cron(* * * * ? *)', payload: 'v1' });
    const v1 = await record('acme', 'behind');
    // Ingest was down: no firing since 10:00:30 (the watermark is 10:03:30).
    now = minute('10:10:30');
    await call('PUT', '/v1/tenants/acme/schedules/behind', { expression: 'cron(* * * * ? *)', payload: 'v2' });
    const v2 = await record('acme', 'behind');
    for (let m = 1; m <= 10; m++) expect(await occurrenceState(v1, minute(`10:${String(m).padStart(2, '0')}:00`))).toBe('SCHEDULED');
    for (const t of ['10:11:00', '10:12:00', '10:13:00']) {
      expect(await occurrenceState(v1, minute(t))).not.toBe('SCHEDULED');
      expect(await occurrenceState(v2, minute(t))).toBe('SCHEDULED');
    }
  });

  it('a firing that read the old revision before a change cannot write past the change', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/race', { expression: 'cron(* * * * ? *)' });
    const v1 = await record('acme', 'race');
    // The firing read its clock and the record at 10:01:59, then stalled; the change lands at 10:02:00.
    now = minute('10:02:00');
    await call('POST', '/v1/tenants/acme/schedules/race/pause');
    // The stalled firing goes on with what it read: every occurrence it would write is tombstoned.
    expect(await materialise(w.recurring, v1, { nowMs: minute('10:01:59') })).toBe(0);
    for (const t of ['10:03:00', '10:04:00']) expect(await occurrenceState(v1, minute(t))).toBe('CANCELLED');
  });

  it('a firing after an outage writes every occurrence it missed, once each', async () => {
    await call('PUT', '/v1/tenants/acme/schedules/o', { expression: 'cron(* * * * ? *)' });
    const r = await record('acme', 'o');
    now = minute('10:10:30');
    // 10:04 to 10:13 (three minutes ahead of 10:10:30): ten occurrences, six of them overdue.
    expect(await materialiseFiring(w.recurring, { tenant: 'acme', name: 'o' })).toBe(10);
    expect(await materialiseFiring(w.recurring, { tenant: 'acme', name: 'o' })).toBe(0);
    for (let m = 1; m <= 13; m++) expect(await occurrenceState(r, minute(`10:${String(m).padStart(2, '0')}:00`))).toBe('SCHEDULED');
  });
});

describe('every occurrence once, whatever the change', () => {
  const MINUTE = 60_000;
  // A catch-up pass writes at most MAX_OCCURRENCES_PER_PASS (1,000) occurrences; these tests lower
  // it to PASS through the service's internal option, so that crossing the pass boundary takes 80
  // rows rather than 1,100 (each pass of 1,000 took ~4 s of CPU per test here). The code path is
  // the same: only the constant the loop compares with differs.
  const PASS = 50;
  let behind: Wiring;
  beforeEach(async () => {
    behind = await newSystem(undefined, schedules, PASS);
  });

  // PASS + 30 occurrences up to the cut-off, all but the first few overdue: a rate(1 minute)
  // schedule whose firings stopped (the watermark stayed at creation + 8 minutes, the first 9
  // occurrences). The other PASS + 21 take two passes of at most PASS: a full one, then one that
  // goes on from its watermark. A third pass would go on from the second's the same way (one loop).
  const BEHIND = PASS + 30;
  it.each([
    ['pause', BEHIND, 'POST', '/pause', undefined],
    ['replace', BEHIND, 'PUT', '', { expression: 'rate(1 minute)', payload: 'v2' }],
    ['delete', BEHIND, 'DELETE', '', undefined],
  ] as const)(
    'a %s of a schedule %i occurrences behind (passes of 50) writes every one of them once first, none after the cut-off',
    async (_change, count, method, suffix, body) => {
      const path = '/v1/tenants/acme/schedules/far';
      expect((await call('PUT', path, { expression: 'rate(1 minute)', payload: 'v1' }, undefined, behind)).status).toBe(201);
      const created = await record('acme', 'far');
      // More than a full pass after the watermark: the change needs a second pass.
      expect(count - 1 - (created.throughMs - T0) / MINUTE).toBeGreaterThan(PASS);
      now = T0 + (count - 1) * MINUTE + 1_000;
      const cutOff = now + base.settings.lookaheadMs;
      expect((await call(method, `${path}${suffix}`, body, undefined, behind)).status).toBe(200);
      const live = await liveOccurrences('acme', 'far');
      const kept = [...live.keys()].filter((t) => t <= cutOff).sort((a, b) => a - b);
      expect(kept).toHaveLength(count);
      expect(kept[0]).toBe(T0);
      expect(kept.at(-1)).toBe(T0 + (count - 1) * MINUTE);
      for (const t of kept) expect(live.get(t)).toEqual([{ payload: '"v1"' }]);
      const after = [...live.keys()].filter((t) => t > cutOff);
      if (body === undefined) expect(after).toEqual([]);
      else {
        expect(after.length).toBeGreaterThan(0);
        for (const t of after) expect(live.get(t)).toEqual([{ payload: '"v2"' }]);
      }
    },
    60_000,
  );

  it('a change that runs out of time catching up answers 503 CatchingUp, applies nothing, and the repeated call goes on from there', async () => {
    const path = '/v1/tenants/acme/schedules/slow';
    await call('PUT', path, { expression: 'rate(1 minute)', payload: 'v1' }, undefined, behind);
    const v1 = await record('acme', 'slow');
    // BEHIND occurrences up to the cut-off, PASS + 21 after the watermark: two passes (PASS and 21).
    now = T0 + (BEHIND - 1) * MINUTE + 1_000;
    // Each pass takes 11 s on this clock: the 10 s budget ends after the first of two passes.
    let slow = true;
    const slowStore: ScheduleStore = {
      getSchedule: (...args) => schedules.getSchedule(...args),
      putSchedule: (...args) => schedules.putSchedule(...args),
      advanceThrough: (...args) => {
        if (slow) now += 11_000;
        return schedules.advanceThrough(...args);
      },
      clearPending: (...args) => schedules.clearPending(...args),
      deleteSchedule: (...args) => schedules.deleteSchedule(...args),
      listSchedules: (...args) => schedules.listSchedules(...args),
    };
    const slowSystem = await newSystem((s) => s, slowStore, PASS);
    const first = await call('POST', `${path}/pause`, undefined, undefined, slowSystem);
    expect(first.status).toBe(503);
    expect(first.json.error.code).toBe('CatchingUp');
    const between = await record('acme', 'slow');
    // One pass of PASS written, the watermark on the last of them; the change not written.
    const lastWritten = T0 + (Math.floor((v1.throughMs - T0) / MINUTE) + PASS) * MINUTE;
    expect(between).toMatchObject({ rev: v1.rev, state: 'ENABLED', throughMs: lastWritten, pending: [] });
    expect(first.json.error.message).toContain(new Date(lastWritten).toISOString());
    slow = false;
    const second = await call('POST', `${path}/pause`, undefined, undefined, slowSystem);
    expect(second.status).toBe(200);
    const cutOff = now + base.settings.lookaheadMs;
    const live = await liveOccurrences('acme', 'slow');
    const expected = Array.from({ length: Math.floor((cutOff - T0) / MINUTE) + 1 }, (_, k) => T0 + k * MINUTE);
    expect([...live.keys()].sort((a, b) => a - b)).toEqual(expected);
    for (const t of expected) expect(live.get(t)).toHaveLength(1);
  }, 60_000);
});

describe('one job per occurrence across pause and resume, disable and enable, delete and re-create', () => {
  const path = '/v1/tenants/acme/schedules/edge';
  const definition = { expression: 'cron(* * * * ? *)', payload: 'p' };
  const sequences = {
    'pause then resume': [() => call('POST', `${path}/pause`), () => call('POST', `${path}/resume`)],
    'disable then enable': [() => call('PUT', path, { ...definition, state: 'DISABLED' }), () => call('PUT', path, definition)],
    'delete then re-create': [() => call('DELETE', path), () => call('PUT', path, definition)],
  } as const;
  type Sequence = keyof typeof sequences;
  /** What a dispatcher did with the occurrence before the change reached it. */
  type Taken = 'materialised' | 'acquired' | 'delivered';
  const X = minute('10:01:00');

  async function take(v1: ScheduleRecord, taken: Taken): Promise<void> {
    const { jobId, shard } = occurrenceJob(w, v1, X);
    const key = { shard, dueMs: X, jobId };
    if (taken === 'materialised') return;
    expect(await w.store.acquire(key, now, now + 30_000)).toBeDefined();
    if (taken === 'delivered')
      expect(await w.store.markDelivered([{ ...key, tenant: 'acme', expiresAtMs: X + 86_400_000, schedule: 'edge' }], now)).toEqual([]);
  }

  /** Creates the schedule at T0 (10:00:30), then stops it at `stopAt` and starts it again at `startAt`; the live jobs per due time. */
  async function run(sequence: Sequence, taken: Taken, stopAt: string, startAt: string) {
    expect((await call('PUT', path, definition)).status).toBe(201);
    const v1 = await record('acme', 'edge');
    const [stop, start] = sequences[sequence];
    now = minute(stopAt);
    await take(v1, taken);
    expect((await stop()).status).toBe(200);
    now = minute(startAt);
    expect((await start()).status).toBeLessThan(300);
    expect((await record('acme', 'edge')).pending).toEqual([]);
    return liveOccurrences('acme', 'edge');
  }

  const all = Object.keys(sequences) as Sequence[];

  // 10:01:00 is within the 5 s cut-off of a stop at 10:00:57: the first revision keeps it; the
  // start a second later must not write it again, whatever became of it meanwhile.
  it.each(all.flatMap((q) => (['materialised', 'acquired', 'delivered'] as const).map((t) => [q, t] as const)))(
    '%s within the lookahead of an occurrence (%s): one job for it, never two',
    async (sequence, taken) => {
      const live = await run(sequence, taken, '10:00:57', '10:00:58');
      expect(live.get(X)).toHaveLength(1);
      expect(live.get(minute('10:02:00'))).toHaveLength(1);
    },
  );

  // 10:01:00 is after the cut-off of a stop at 10:00:50, but a dispatcher took it before the
  // cancel reached it (a slow call): it is delivered as it was, and the start does not add one.
  it.each(all.flatMap((q) => (['acquired', 'delivered'] as const).map((t) => [q, t] as const)))(
    '%s: an occurrence after the cut-off that a dispatcher already held (%s) is delivered once',
    async (sequence, taken) => {
      const live = await run(sequence, taken, '10:00:50', '10:00:51');
      expect(live.get(X)).toHaveLength(1);
      expect(live.get(minute('10:02:00'))).toHaveLength(1);
    },
  );

  // Cancelled at the stop (after its cut-off): delivered once when the start comes before it, by
  // the new revision; never when the start comes after it (it fell while stopped).
  it.each(all.flatMap((q) => (['10:00:51', '10:01:30'] as const).map((t) => [q, t] as const)))(
    '%s of a cancelled occurrence, started again at %s: once before it, never after it',
    async (sequence, startAt) => {
      const live = await run(sequence, 'materialised', '10:00:50', startAt);
      expect(live.get(X)?.length ?? 0).toBe(minute(startAt) < X ? 1 : 0);
      expect(live.get(minute('10:02:00'))).toHaveLength(1);
    },
  );
});

describe('reading schedules', () => {
  it("lists a tenant's schedules in name order with cursors that cannot be tampered with or replayed across tenants", async () => {
    const names = Array.from({ length: 7 }, (_, i) => `s${i}`);
    for (const n of names) await call('PUT', `/v1/tenants/acme/schedules/${n}`, { expression: 'rate(1 day)', state: 'DISABLED' });
    await call('PUT', '/v1/tenants/other/schedules/theirs', { expression: 'rate(1 day)' });
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await call('GET', '/v1/tenants/acme/schedules', undefined, { limit: '3', ...(cursor ? { cursor } : {}) });
      expect(page.status).toBe(200);
      seen.push(...page.json.schedules.map((s: { name: string }) => s.name));
      cursor = page.json.nextCursor;
      pages++;
    } while (cursor);
    expect(seen).toEqual(names);
    expect(pages).toBe(3);
    const first = await call('GET', '/v1/tenants/acme/schedules', undefined, { limit: '3' });
    const c = first.json.nextCursor as string;
    expect((await call('GET', '/v1/tenants/other/schedules', undefined, { cursor: c })).status).toBe(400);
    const tampered = `${Buffer.from('s0').toString('base64url')}${c.slice(c.indexOf('.'))}`;
    const bad = await call('GET', '/v1/tenants/acme/schedules', undefined, { cursor: tampered });
    expect(bad.status).toBe(400);
    expect(bad.json.error.message).toMatch(/^cursor/);
    for (const limit of ['0', '101', 'ten'])
      expect((await call('GET', '/v1/tenants/acme/schedules', undefined, { limit })).json.error.message).toMatch(/^limit/);
  });

  it("a tenant never sees another tenant's schedule", async () => {
    await call('PUT', '/v1/tenants/acme/schedules/private', { expression: 'rate(1 day)' });
    expect((await call('GET', '/v1/tenants/other/schedules/private')).status).toBe(404);
    expect((await call('DELETE', '/v1/tenants/other/schedules/private')).status).toBe(404);
    expect((await call('POST', '/v1/tenants/other/schedules/private/pause')).status).toBe(404);
    expect((await call('GET', '/v1/tenants/acme/schedules/private')).status).toBe(200);
  });
});

describe('the never-fired check', () => {
  it('names each occurrence not delivered 5 minutes after its time: written and unsent, or never written (the clock stopped); a delivered or cancelled one passes', async () => {
    // rate(1 minute) from T0 (xx:00:30): the PUT writes the occurrences up to T0 + 8 minutes.
    expect((await call('PUT', '/v1/tenants/acme/schedules/beat', { expression: 'rate(1 minute)', payload: { n: 1 } })).status).toBe(201);
    const r = await record('acme', 'beat');
    expect(r.throughMs).toBe(T0 + 8 * 60_000);
    // The PUT noted the tenant for the check.
    expect(await schedules.scheduleTenants()).toEqual(['acme']);
    const at = (m: number) => T0 + m * 60_000;
    // The occurrence at +6 minutes was delivered, the one at +7 cancelled; +8 stays scheduled
    // (no dispatcher runs here), +9 and +10 were never written (no firing came).
    const six = occurrenceJob(w, r, at(6));
    expect(
      await w.store.markDelivered([{ ...six, dueMs: at(6), tenant: 'acme', expiresAtMs: at(60 * 24), schedule: 'beat' }], at(6)),
    ).toEqual([]);
    const seven = occurrenceJob(w, r, at(7));
    expect(await w.store.cancel({ ...seven, dueMs: at(7) }, 'acme', at(60 * 24))).toBe('cancelled');

    // 15 minutes on, the first check covers (T0 + 5 min, T0 + 10 min].
    now = T0 + 15 * 60_000;
    const counts: Record<string, number> = {};
    const perTenant: Record<string, number> = {};
    const warnings: Record<string, unknown>[] = [];
    const t: Telemetry = {
      count: (name, n) => void (counts[name] = (counts[name] ?? 0) + n),
      values() {},
      error: (message, err) => {
        throw new Error(`${message}: ${String(err)}`);
      },
      warn: (_message, fields) => void warnings.push(fields),
      tenantMetrics: (tenant, c) => void (perTenant[tenant] = (perTenant[tenant] ?? 0) + (c.MissedOccurrences ?? 0)),
    };
    const result = await occurrenceAuditHandler(w, t)();
    expect(result).toMatchObject({ schedules: 1, occurrences: 5, missed: 3 });
    expect(counts).toMatchObject({ MissedOccurrences: 3, OccurrencesChecked: 5 });
    expect(perTenant).toEqual({ acme: 3 });
    expect(warnings.map((f) => [f.occurrenceAt, f.reason])).toEqual([
      [new Date(at(8)).toISOString(), 'not-delivered'],
      [new Date(at(9)).toISOString(), 'not-materialised'],
      [new Date(at(10)).toISOString(), 'not-materialised'],
    ]);
    const eight = occurrenceJob(w, r, at(8)).jobId;
    expect(warnings[0]).toMatchObject({ tenant: 'acme', schedule: 'beat', jobId: eight, traceId: jobTrace(eight).traceId });

    // The next check right after has nothing new to judge; a paused schedule is not checked.
    expect(await occurrenceAuditHandler(w, t)()).toMatchObject({ occurrences: 0, missed: 0 });
    expect((await call('POST', '/v1/tenants/acme/schedules/beat/pause')).status).toBe(200);
    now += 10 * 60_000;
    expect(await occurrenceAuditHandler(w, t)()).toMatchObject({ schedules: 0, missed: 0 });
  });
});
