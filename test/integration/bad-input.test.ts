/**
 * Guarantee 5 of DESIGN.md: bad input gets a clear 4xx error with a machine-readable code, and
 * writes nothing. Every request goes through the real handler factories (submit, status,
 * cancel) over dynalite and fauxqs with real SDK clients; expectations come from DESIGN.md's
 * HTTP API table, not from the code's replies.
 */
import { randomBytes } from 'node:crypto';
import { ScanCommand, type AttributeValue } from '@aws-sdk/client-dynamodb';
import { DeleteMessageBatchCommand, GetQueueAttributesCommand, ReceiveMessageCommand } from '@aws-sdk/client-sqs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobIdCodec, type JobIdParts } from '../../core/model/jobId.js';
import { parseInboundBody } from '../../core/model/messages.js';
import { DynamoScheduleStore } from '../../adapters/dynamoScheduleStore.js';
import type { ScheduleTrigger } from '../../core/recurring/ports.js';
import { SchedulesService } from '../../core/recurring/service.js';
import {
  adminHandler,
  cancelHandler,
  dlqHandler,
  outcomesHandler,
  schedulesHandler,
  statusHandler,
  submitHandler,
  workflowsHandler,
} from '../../lambdas/runtime/handlers.js';
import type { HttpResult } from '../../lambdas/runtime/http.js';
import { ROUTES, type RouteSpec } from '../../lambdas/runtime/routes.js';
import type { Wiring } from '../../lambdas/runtime/wiring.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { createSystem, httpEvent, type TestSystem } from '../support/system.js';

const KiB = 1024;
const MiB = 1024 * KiB;
const MAX_PAYLOAD = 240 * KiB; // DESIGN.md: "A payload is at most 240 KiB serialized"
const MAX_BATCH_BODY = 5 * MiB; // DESIGN.md: "at most 5 MiB"
const DAY_MS = 86_400_000;
/** Safely beyond DESIGN.md's 10-year horizon however a year is counted (10 × 366 days + 30). */
const BEYOND_HORIZON_MS = (10 * 366 + 30) * DAY_MS;
const LOOKAHEAD_MS = 5_000; // DESIGN.md default

type Route = 'submit' | 'batch' | 'status' | 'cancel';

/** Ids built once the system (and so its id key) exists. */
interface Ids {
  /** A job id of tenant `demo` signed with the deployment's key, due in a day, path `t`. */
  readonly demo: string;
  readonly demoParts: JobIdParts;
  /** Same for tenant `other`. */
  readonly other: string;
  /** Tenant `demo`, signed with another (random) key. */
  readonly foreignKey: string;
  /** Tenant `ghost` (not registered), signed with the deployment's key. */
  readonly ghost: string;
  /** Tenant `demo`, the path a job takes straight to its queue (`d`) (as a cancellable:false job due within 900 s would), due in 10 min. */
  readonly direct: string;
  /** Tenant `demo`, `cancellable: false` job kept in the table (`u`), due in a day. */
  readonly uncancellable: string;
  /** Tenant `demo`, path `t`, due in 2.5 s from the call: inside the cancel cut-off, not yet due. */
  pastCutOff(): string;
  /** Tenant `demo`, path `t`, due a minute ago. */
  readonly pastDue: string;
}

interface Case {
  readonly name: string;
  readonly route: Route;
  /** Path tenant; `demo` unless given. */
  readonly tenant?: string;
  /** Request body (POST routes). */
  readonly body?: string | (() => string);
  /** Job id for GET / DELETE, URL-encoded into the path parameter as API Gateway passes it. */
  readonly jobId?: (ids: Ids) => string;
  /** Path parameter given as is (not URL-encoded). */
  readonly rawJobId?: boolean;
  readonly status: number;
  /** The expected error code, or the codes DESIGN.md allows. */
  readonly code: string | readonly string[];
  /** Every one of these must match the message. */
  readonly message: RegExp | readonly RegExp[];
}

const j = (v: unknown) => JSON.stringify(v);
const isoIn = (ms: number) => new Date(Date.now() + ms).toISOString();
const validJob = (extra: Record<string, unknown> = {}) => ({ payload: { hello: 'world' }, delaySeconds: 3600, ...extra });

/** Replaces one character of `s` at `index` with another one from the same alphabet. */
function alterChar(s: string, index: number, alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_'): string {
  const old = s[index]!;
  const replacement = [...alphabet].find((c) => c !== old)!;
  const out = s.slice(0, index) + replacement + s.slice(index + 1);
  expect(out).not.toBe(s);
  expect(out.length).toBe(s.length);
  return out;
}

/** `j1.<tenant>.<shard>.<dueMs>.<path>.<random>.<mac>`: replace one dot-separated part. */
function withPart(id: string, part: number, fn: (p: string) => string): string {
  const parts = id.split('.');
  parts[part] = fn(parts[part]!);
  const out = parts.join('.');
  expect(out).not.toBe(id);
  return out;
}

// A body of exactly 5 MiB + 1 byte: 21 jobs whose payloads are each well under 240 KiB, padded
// with JSON whitespace, so that only the batch body size is wrong.
function oversizeBatchBody(): string {
  const jobs = Array.from({ length: 21 }, (_, i) => ({ payload: `${i}:${'x'.repeat(240_000)}`, delaySeconds: 3600 }));
  const core = j({ jobs });
  expect(Buffer.byteLength(core)).toBeLessThan(MAX_BATCH_BODY);
  const body = core.slice(0, -1) + ' '.repeat(MAX_BATCH_BODY + 1 - Buffer.byteLength(core)) + '}';
  expect(Buffer.byteLength(body)).toBe(MAX_BATCH_BODY + 1);
  return body;
}

/** A payload whose serialized JSON is exactly `bytes` bytes (a string: two bytes of quotes). */
const payloadOfBytes = (bytes: number) => 'x'.repeat(bytes - 2);

const V = 'ValidationError';
const TOO_LARGE = 'PayloadTooLarge';
const BAD_ID = 'InvalidJobId';
const NO_TENANT = 'TenantNotFound';
const NO_JOB = 'JobNotFound';
const NO_CANCEL = ['NotCancellable', 'AlreadyQueued'] as const;

const cases: Case[] = [
  // ---- POST /jobs: the body as a whole
  { name: 'body not JSON', route: 'submit', body: '{"payload": 1, "delaySeconds": 30', status: 400, code: V, message: /JSON/ },
  {
    name: 'body JSON followed by garbage',
    route: 'submit',
    body: '{"payload": 1, "delaySeconds": 30} trailing',
    status: 400,
    code: V,
    message: /JSON/,
  },
  { name: 'empty body', route: 'submit', body: '', status: 400, code: V, message: /empty|body/i },
  { name: 'no body at all', route: 'submit', status: 400, code: V, message: /empty|body/i },
  { name: 'body a JSON array', route: 'submit', body: j([validJob()]), status: 400, code: V, message: /object/i },
  { name: 'body a JSON string', route: 'submit', body: j('run this'), status: 400, code: V, message: /object/i },
  { name: 'body a JSON number', route: 'submit', body: '42', status: 400, code: V, message: /object/i },
  { name: 'body JSON null', route: 'submit', body: 'null', status: 400, code: V, message: /object/i },
  {
    name: 'a batch body sent to the single-job route',
    route: 'submit',
    body: j({ jobs: [validJob()] }),
    status: 400,
    code: V,
    message: /jobs/,
  },

  // ---- runAt / delaySeconds
  {
    name: 'both runAt and delaySeconds',
    route: 'submit',
    body: j({ payload: 1, runAt: isoIn(DAY_MS), delaySeconds: 30 }),
    status: 400,
    code: V,
    message: [/runAt/, /delaySeconds/],
  },
  {
    name: 'runAt and delaySeconds null',
    route: 'submit',
    body: j({ payload: 1, runAt: isoIn(DAY_MS), delaySeconds: null }),
    status: 400,
    code: V,
    message: /delaySeconds/,
  },
  {
    name: 'neither runAt nor delaySeconds',
    route: 'submit',
    body: j({ payload: 1 }),
    status: 400,
    code: V,
    message: [/runAt/, /delaySeconds/],
  },
  {
    name: 'runAt "tomorrow"',
    route: 'submit',
    body: j({ payload: 1, runAt: 'tomorrow' }),
    status: 400,
    code: V,
    message: [/runAt/, /RFC ?3339/i],
  },
  {
    name: 'runAt February 30th',
    route: 'submit',
    body: j({ payload: 1, runAt: '2030-02-30T00:00:00Z' }),
    status: 400,
    code: V,
    message: [/runAt/, /RFC ?3339/i],
  },
  {
    name: 'runAt February 29th of a common year',
    route: 'submit',
    body: j({ payload: 1, runAt: '2030-02-29T12:00:00Z' }),
    status: 400,
    code: V,
    message: /runAt/,
  },
  {
    name: 'runAt month 13',
    route: 'submit',
    body: j({ payload: 1, runAt: '2030-13-01T00:00:00Z' }),
    status: 400,
    code: V,
    message: /runAt/,
  },
  {
    name: 'runAt hour 24',
    route: 'submit',
    body: j({ payload: 1, runAt: '2030-01-01T24:00:00Z' }),
    status: 400,
    code: V,
    message: /runAt/,
  },
  {
    name: 'runAt without a zone',
    route: 'submit',
    body: j({ payload: 1, runAt: '2030-01-01T00:00:00' }),
    status: 400,
    code: V,
    message: [/runAt/, /RFC ?3339/i],
  },
  {
    name: 'runAt without seconds',
    route: 'submit',
    body: j({ payload: 1, runAt: '2030-01-01T00:00Z' }),
    status: 400,
    code: V,
    message: /runAt/,
  },
  { name: 'runAt a date only', route: 'submit', body: j({ payload: 1, runAt: '2030-01-01' }), status: 400, code: V, message: /runAt/ },
  {
    name: 'runAt with an offset of +24:00',
    route: 'submit',
    body: j({ payload: 1, runAt: '2030-01-01T00:00:00+24:00' }),
    status: 400,
    code: V,
    message: /runAt/,
  },
  {
    name: 'runAt epoch milliseconds (a number)',
    route: 'submit',
    body: j({ payload: 1, runAt: 1_900_000_000_000 }),
    status: 400,
    code: V,
    message: /runAt/,
  },
  { name: 'runAt "NaN"', route: 'submit', body: j({ payload: 1, runAt: 'NaN' }), status: 400, code: V, message: /runAt/ },
  { name: 'runAt null', route: 'submit', body: j({ payload: 1, runAt: null }), status: 400, code: V, message: /runAt/ },
  {
    name: 'runAt beyond the 10-year horizon',
    route: 'submit',
    body: () => j({ payload: 1, runAt: isoIn(BEYOND_HORIZON_MS) }),
    status: 400,
    code: V,
    message: /horizon/i,
  },
  {
    name: 'runAt in year 9999',
    route: 'submit',
    body: j({ payload: 1, runAt: '9999-12-31T23:59:59Z' }),
    status: 400,
    code: V,
    message: /horizon/i,
  },
  {
    name: 'delaySeconds negative',
    route: 'submit',
    body: j({ payload: 1, delaySeconds: -1 }),
    status: 400,
    code: V,
    message: /delaySeconds/,
  },
  {
    name: 'delaySeconds slightly negative',
    route: 'submit',
    body: j({ payload: 1, delaySeconds: -0.001 }),
    status: 400,
    code: V,
    message: /delaySeconds/,
  },
  {
    name: 'delaySeconds a numeric string',
    route: 'submit',
    body: j({ payload: 1, delaySeconds: '30' }),
    status: 400,
    code: V,
    message: /delaySeconds/,
  },
  {
    name: 'delaySeconds null',
    route: 'submit',
    body: j({ payload: 1, delaySeconds: null }),
    status: 400,
    code: V,
    message: /delaySeconds/,
  },
  {
    name: 'delaySeconds true',
    route: 'submit',
    body: j({ payload: 1, delaySeconds: true }),
    status: 400,
    code: V,
    message: /delaySeconds/,
  },
  {
    name: 'delaySeconds "NaN"',
    route: 'submit',
    body: j({ payload: 1, delaySeconds: 'NaN' }),
    status: 400,
    code: V,
    message: /delaySeconds/,
  },
  {
    name: 'delaySeconds "Infinity"',
    route: 'submit',
    body: j({ payload: 1, delaySeconds: 'Infinity' }),
    status: 400,
    code: V,
    message: /delaySeconds/,
  },
  {
    name: 'delaySeconds a bare NaN literal (not JSON)',
    route: 'submit',
    body: '{"payload": 1, "delaySeconds": NaN}',
    status: 400,
    code: V,
    message: /JSON/,
  },
  {
    name: 'delaySeconds 1e400 (Infinity once parsed)',
    route: 'submit',
    body: '{"payload": 1, "delaySeconds": 1e400}',
    status: 400,
    code: V,
    message: /delaySeconds|horizon/,
  },
  {
    name: 'delaySeconds beyond the 10-year horizon',
    route: 'submit',
    body: j({ payload: 1, delaySeconds: BEYOND_HORIZON_MS / 1000 }),
    status: 400,
    code: V,
    message: /horizon/i,
  },

  // ---- payload, idempotencyKey, cancellable, unknown fields
  {
    name: 'payload 240 KiB + 1 byte serialized',
    route: 'submit',
    body: () => j({ payload: payloadOfBytes(MAX_PAYLOAD + 1), delaySeconds: 3600 }),
    status: 413,
    code: TOO_LARGE,
    message: /payload/i,
  },
  {
    name: 'payload under 240 KiB in characters but over it in UTF-8 bytes',
    route: 'submit',
    body: () => j({ payload: 'é'.repeat(125_000), delaySeconds: 3600 }),
    status: 413,
    code: TOO_LARGE,
    message: /payload/i,
  },
  {
    name: 'payload of 6 MiB',
    route: 'submit',
    body: () => j({ payload: 'x'.repeat(6 * MiB), delaySeconds: 3600 }),
    status: 413,
    code: TOO_LARGE,
    message: /./,
  },
  {
    name: 'idempotencyKey of 129 characters',
    route: 'submit',
    body: j(validJob({ idempotencyKey: 'k'.repeat(129) })),
    status: 400,
    code: V,
    message: /idempotencyKey/,
  },
  {
    name: 'idempotencyKey a number',
    route: 'submit',
    body: j(validJob({ idempotencyKey: 12345 })),
    status: 400,
    code: V,
    message: /idempotencyKey/,
  },
  { name: 'cancellable "yes"', route: 'submit', body: j(validJob({ cancellable: 'yes' })), status: 400, code: V, message: /cancellable/ },
  {
    name: 'cancellable "false" (a string)',
    route: 'submit',
    body: j(validJob({ cancellable: 'false' })),
    status: 400,
    code: V,
    message: /cancellable/,
  },
  { name: 'cancellable 0', route: 'submit', body: j(validJob({ cancellable: 0 })), status: 400, code: V, message: /cancellable/ },
  { name: 'priority not 1..9', route: 'submit', body: j(validJob({ priority: 'high' })), status: 400, code: V, message: /^priority must/ },
  { name: 'unknown field', route: 'submit', body: j(validJob({ urgency: 'high' })), status: 400, code: V, message: /'urgency'/ },
  {
    name: 'misspelled field runat',
    route: 'submit',
    body: j({ payload: 1, runat: isoIn(DAY_MS) }),
    status: 400,
    code: V,
    message: /runat|runAt/,
  },

  // ---- tenants (body valid, only the tenant is wrong)
  { name: 'tenant name in uppercase', route: 'submit', tenant: 'Demo', body: j(validJob()), status: 400, code: V, message: /tenant/i },
  {
    name: 'tenant name of 41 characters',
    route: 'submit',
    tenant: 'a'.repeat(41),
    body: j(validJob()),
    status: 400,
    code: V,
    message: /tenant/i,
  },
  {
    name: "tenant name starting with '-'",
    route: 'submit',
    tenant: '-demo',
    body: j(validJob()),
    status: 400,
    code: V,
    message: /tenant/i,
  },
  {
    name: 'tenant name with an underscore',
    route: 'submit',
    tenant: 'demo_1',
    body: j(validJob()),
    status: 400,
    code: V,
    message: /tenant/i,
  },
  { name: 'unknown tenant', route: 'submit', tenant: 'ghost', body: j(validJob()), status: 404, code: NO_TENANT, message: /ghost/ },
  {
    name: 'unknown tenant with a valid 40-character name',
    route: 'submit',
    tenant: 'b'.repeat(40),
    body: j(validJob()),
    status: 404,
    code: NO_TENANT,
    message: /b{40}/,
  },
  {
    name: 'batch for an unknown tenant',
    route: 'batch',
    tenant: 'ghost',
    body: j({ jobs: [validJob()] }),
    status: 404,
    code: NO_TENANT,
    message: /ghost/,
  },
  {
    name: 'batch for a tenant name in uppercase',
    route: 'batch',
    tenant: 'DEMO',
    body: j({ jobs: [validJob()] }),
    status: 400,
    code: V,
    message: /tenant/i,
  },

  // ---- POST /jobs/batch: the request as a whole
  { name: 'batch with 0 jobs', route: 'batch', body: j({ jobs: [] }), status: 400, code: V, message: /jobs|batch/i },
  {
    name: 'batch with 101 valid jobs',
    route: 'batch',
    body: j({ jobs: Array.from({ length: 101 }, (_, i) => validJob({ payload: i })) }),
    status: 400,
    code: V,
    message: /100/,
  },
  { name: 'batch jobs an object', route: 'batch', body: j({ jobs: validJob() }), status: 400, code: V, message: /jobs/ },
  { name: 'batch jobs null', route: 'batch', body: j({ jobs: null }), status: 400, code: V, message: /jobs/ },
  { name: 'batch without jobs (a single job body)', route: 'batch', body: j(validJob()), status: 400, code: V, message: /jobs/ },
  { name: 'batch body a JSON array of jobs', route: 'batch', body: j([validJob()]), status: 400, code: V, message: /jobs/ },
  {
    name: 'batch with an extra top-level field',
    route: 'batch',
    body: j({ jobs: [validJob()], dryRun: true }),
    status: 400,
    code: V,
    message: /dryRun/,
  },
  { name: 'batch body not JSON', route: 'batch', body: '{"jobs": [', status: 400, code: V, message: /JSON/ },
  { name: 'batch body empty', route: 'batch', body: '', status: 400, code: V, message: /empty|body/i },
  {
    name: 'batch body of 5 MiB + 1 byte',
    route: 'batch',
    body: oversizeBatchBody,
    status: 413,
    code: TOO_LARGE,
    message: /5242880|5 ?MiB/i,
  },

  // ---- GET / DELETE with bad job ids
  { name: 'GET a malformed id', route: 'status', jobId: () => 'not-a-job-id', status: 400, code: BAD_ID, message: /job ?id/i },
  { name: 'DELETE a malformed id', route: 'cancel', jobId: () => 'not-a-job-id', status: 400, code: BAD_ID, message: /job ?id/i },
  { name: 'GET an empty id', route: 'status', jobId: () => '', status: 400, code: BAD_ID, message: /job ?id/i },
  {
    name: 'GET an id with one MAC character changed',
    route: 'status',
    jobId: (ids) => alterChar(ids.demo, ids.demo.length - 5),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'DELETE an id with one MAC character changed',
    route: 'cancel',
    jobId: (ids) => alterChar(ids.demo, ids.demo.length - 5),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'GET an id with one random-part character changed',
    route: 'status',
    jobId: (ids) => withPart(ids.demo, 5, (p) => alterChar(p, 3)),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'DELETE an id with its due time changed by one digit',
    route: 'cancel',
    jobId: (ids) => withPart(ids.demo, 3, (p) => alterChar(p, p.length - 1, '0123456789')),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'DELETE an id with its shard changed',
    route: 'cancel',
    jobId: (ids) => withPart(ids.demo, 2, (p) => alterChar(p, 0, '123456789')),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: "GET an id with its path changed from 't' to 'd'",
    route: 'status',
    jobId: (ids) => withPart(ids.demo, 4, () => 'd'),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: "DELETE a direct job's id with its path changed to 't'",
    route: 'cancel',
    jobId: (ids) => withPart(ids.direct, 4, () => 't'),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: "GET another tenant's id relabelled as demo",
    route: 'status',
    jobId: (ids) => withPart(ids.other, 1, () => 'demo'),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'GET an id in uppercase',
    route: 'status',
    jobId: (ids) => ids.demo.toUpperCase(),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'GET an id signed with another key',
    route: 'status',
    jobId: (ids) => ids.foreignKey,
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'DELETE an id signed with another key',
    route: 'cancel',
    jobId: (ids) => ids.foreignKey,
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'GET an id with trailing garbage',
    route: 'status',
    jobId: (ids) => `${ids.demo}x`,
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'DELETE an id with a trailing part',
    route: 'cancel',
    jobId: (ids) => `${ids.demo}.x`,
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'GET an id with a trailing space',
    route: 'status',
    jobId: (ids) => `${ids.demo} `,
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'DELETE an id with leading garbage',
    route: 'cancel',
    jobId: (ids) => `x${ids.demo}`,
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'GET an id of 10,000 characters',
    route: 'status',
    jobId: (ids) => ids.demo + 'A'.repeat(10_000 - ids.demo.length),
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  {
    name: 'GET an id with broken percent-encoding',
    route: 'status',
    jobId: (ids) => `${ids.demo}%E0%A4%A`,
    rawJobId: true,
    status: 400,
    code: BAD_ID,
    message: /job ?id/i,
  },
  { name: "GET another tenant's id", route: 'status', jobId: (ids) => ids.other, status: 404, code: NO_JOB, message: /./ },
  { name: "DELETE another tenant's id", route: 'cancel', jobId: (ids) => ids.other, status: 404, code: NO_JOB, message: /./ },
  {
    name: 'GET a job under an unknown tenant',
    route: 'status',
    tenant: 'ghost',
    jobId: (ids) => ids.ghost,
    status: 404,
    code: NO_TENANT,
    message: /ghost/,
  },
  {
    name: 'DELETE a job under an unknown tenant',
    route: 'cancel',
    tenant: 'ghost',
    jobId: (ids) => ids.ghost,
    status: 404,
    code: NO_TENANT,
    message: /ghost/,
  },
  {
    name: 'GET under a tenant name in uppercase',
    route: 'status',
    tenant: 'DEMO',
    jobId: (ids) => ids.demo,
    status: 400,
    code: V,
    message: /tenant/i,
  },
  {
    name: "DELETE under a tenant name starting with '-'",
    route: 'cancel',
    tenant: '-demo',
    jobId: (ids) => ids.demo,
    status: 400,
    code: V,
    message: /tenant/i,
  },

  // ---- DELETE that must answer 409 and write nothing (DESIGN.md: Cancel, guarantee 3)
  {
    name: 'DELETE a job sent straight to its queue',
    route: 'cancel',
    jobId: (ids) => ids.direct,
    status: 409,
    code: NO_CANCEL,
    message: /./,
  },
  {
    name: 'DELETE a cancellable:false job',
    route: 'cancel',
    jobId: (ids) => ids.uncancellable,
    status: 409,
    code: NO_CANCEL,
    message: /./,
  },
  {
    name: 'DELETE a job inside the cancel cut-off',
    route: 'cancel',
    jobId: (ids) => ids.pastCutOff(),
    status: 409,
    code: NO_CANCEL,
    message: /./,
  },
  { name: 'DELETE a job already due', route: 'cancel', jobId: (ids) => ids.pastDue, status: 409, code: NO_CANCEL, message: /./ },
  // Issue #12: characters SQS cannot carry (once a 500), ambiguous envelopes, limits of the raw payload.
  {
    name: 'payload holding a raw U+FFFF',
    route: 'submit',
    body: '{"payload": "a\uFFFF", "delaySeconds": 30}',
    status: 400,
    code: V,
    message: [/U\+FFFF/, /byte \d+ of the payload/, /\\uFFFF/],
  },
  {
    name: 'payload holding a raw U+FFFE, due at once (straight to the queue)',
    route: 'submit',
    body: '{"payload": {"k": "\uFFFE"}, "delaySeconds": 0}',
    status: 400,
    code: V,
    message: /U\+FFFE/,
  },
  {
    name: 'a field given twice',
    route: 'submit',
    body: '{"payload": 1, "delaySeconds": 30, "payload": 2}',
    status: 400,
    code: V,
    message: /'payload'.*more than once/,
  },
  {
    name: 'a batch with jobs given twice',
    route: 'batch',
    body: `{"jobs": [${j(validJob())}], "jobs": [${j(validJob())}]}`,
    status: 400,
    code: V,
    message: /'jobs'.*more than once/,
  },
  {
    name: 'payload nested 1,001 deep',
    route: 'submit',
    body: `{"delaySeconds": 60, "payload": ${'['.repeat(1_001)}${']'.repeat(1_001)}}`,
    status: 400,
    code: V,
    message: /nests 1001 levels/,
  },
  {
    name: 'idempotencyKey an unpaired surrogate escape',
    route: 'submit',
    body: '{"payload": 1, "delaySeconds": 30, "idempotencyKey": "k\\ud800"}',
    status: 400,
    code: V,
    message: /idempotencyKey/,
  },
  // Once answered 500 (an out-of-range Date in the error message, a stack overflow): now 400.
  {
    name: 'payload nested 100,000 deep',
    route: 'submit',
    body: () => `{"delaySeconds": 60, "payload": ${'['.repeat(100_000)}${']'.repeat(100_000)}}`,
    status: 400,
    code: V,
    message: /nest/,
  },
  {
    name: 'delaySeconds 1e300 (far beyond the horizon)',
    route: 'submit',
    body: '{"payload": 1, "delaySeconds": 1e300}',
    status: 400,
    code: V,
    message: /delaySeconds|horizon/,
  },
  {
    name: 'delaySeconds 1e13 (beyond the horizon and the Date range)',
    route: 'submit',
    body: j({ payload: 1, delaySeconds: 1e13 }),
    status: 400,
    code: V,
    message: /delaySeconds|horizon/,
  },
];

// ---------------------------------------------------------------------------------------------

const ROUTE_KEYS: Record<Route, string> = {
  submit: 'POST /v1/tenants/{tenant}/jobs',
  batch: 'POST /v1/tenants/{tenant}/jobs/batch',
  status: 'GET /v1/tenants/{tenant}/jobs/{jobId}',
  cancel: 'DELETE /v1/tenants/{tenant}/jobs/{jobId}',
};

type Handlers = Record<Route, (e: ReturnType<typeof httpEvent>) => Promise<HttpResult>>;

function handlersOf(sys: TestSystem): Handlers {
  const submit = submitHandler(sys.w);
  return { submit, batch: submit, status: statusHandler(sys.w), cancel: cancelHandler(sys.w) };
}

/** Sends one request through the handler as API Gateway would deliver it. */
function send(
  h: Handlers,
  route: Route,
  tenant: string,
  opts: { body?: string; jobId?: string; rawJobId?: boolean } = {},
): Promise<HttpResult> {
  const encodedTenant = encodeURIComponent(tenant);
  const jobId = opts.jobId === undefined ? undefined : opts.rawJobId ? opts.jobId : encodeURIComponent(opts.jobId);
  const path =
    route === 'submit'
      ? `/v1/tenants/${encodedTenant}/jobs`
      : route === 'batch'
        ? `/v1/tenants/${encodedTenant}/jobs/batch`
        : `/v1/tenants/${encodedTenant}/jobs/${jobId}`;
  const method = ROUTE_KEYS[route].split(' ')[0]!;
  const pathParameters: Record<string, string> = { tenant: encodedTenant };
  if (jobId !== undefined) pathParameters.jobId = jobId;
  return h[route](
    httpEvent(method, path, { routeKey: ROUTE_KEYS[route], pathParameters, ...(opts.body !== undefined ? { body: opts.body } : {}) }),
  );
}

/** Asserts DESIGN.md's error shape and returns the error. */
function expectError(res: HttpResult, c: Pick<Case, 'status' | 'code' | 'message'>): { code: string; message: string } {
  const parsed = JSON.parse(res.body) as unknown;
  expect({ status: res.statusCode, body: parsed }).toMatchObject({ status: c.status });
  expect(String(res.headers?.['content-type'] ?? '')).toMatch(/application\/json/);
  expect(typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed)).toBe(true);
  expect(Object.keys(parsed as object)).toEqual(['error']);
  const error = (parsed as { error: unknown }).error as Record<string, unknown>;
  expect(Object.keys(error).sort()).toEqual(['code', 'message']);
  expect(typeof error.code).toBe('string');
  expect(typeof error.message).toBe('string');
  expect((error.message as string).trim().length).toBeGreaterThan(0);
  const codes = typeof c.code === 'string' ? [c.code] : c.code;
  expect(codes).toContain(error.code);
  for (const re of c.message instanceof RegExp ? [c.message] : c.message) expect(error.message).toMatch(re);
  return error as { code: string; message: string };
}

async function scanAll(em: Emulators, tableName: string): Promise<Record<string, AttributeValue>[]> {
  const items: Record<string, AttributeValue>[] = [];
  let start: Record<string, AttributeValue> | undefined;
  do {
    const res = await em.dynamo.send(new ScanCommand({ TableName: tableName, ConsistentRead: true, ExclusiveStartKey: start }));
    items.push(...(res.Items ?? []));
    start = res.LastEvaluatedKey;
  } while (start);
  return items.sort((a, b) => `${a.pk?.S}|${a.sk?.S}`.localeCompare(`${b.pk?.S}|${b.sk?.S}`));
}

/** Visible + in flight + delayed: every message the queue holds. */
async function queueCounts(em: Emulators, url: string): Promise<{ visible: number; notVisible: number; delayed: number }> {
  const res = await em.sqs.send(
    new GetQueueAttributesCommand({
      QueueUrl: url,
      AttributeNames: ['ApproximateNumberOfMessages', 'ApproximateNumberOfMessagesNotVisible', 'ApproximateNumberOfMessagesDelayed'],
    }),
  );
  const a: Record<string, string | undefined> = res.Attributes ?? {};
  const num = (k: string) => {
    expect(a[k], `${k} of ${url}`).toMatch(/^\d+$/);
    return Number(a[k]);
  };
  return {
    visible: num('ApproximateNumberOfMessages'),
    notVisible: num('ApproximateNumberOfMessagesNotVisible'),
    delayed: num('ApproximateNumberOfMessagesDelayed'),
  };
}

const total = (c: { visible: number; notVisible: number; delayed: number }) => c.visible + c.notVisible + c.delayed;

const WRITE_OPERATIONS = [
  'DynamoDB.PutItem',
  'DynamoDB.UpdateItem',
  'DynamoDB.DeleteItem',
  'DynamoDB.BatchWriteItem',
  'DynamoDB.TransactWriteItems',
  'SQS.SendMessage',
  'SQS.SendMessageBatch',
];

const writesIn = (snapshot: Record<string, number>) => Object.fromEntries(WRITE_OPERATIONS.map((op) => [op, snapshot[op] ?? 0]));

// ---------------------------------------------------------------------------------------------

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

describe('bad input gets a 4xx with a code and writes nothing', () => {
  let sys: TestSystem;
  let h: Handlers;
  let ids: Ids;
  let tableBefore: Record<string, AttributeValue>[];
  let writesBefore: Record<string, number>;
  let sent = 0;

  beforeAll(async () => {
    sys = await createSystem(em, { tenants: ['demo', 'other'] });
    h = handlersOf(sys);
    const codec = new JobIdCodec(sys.idKey);
    const foreign = new JobIdCodec(randomBytes(32));
    const dueMs = Date.now() + DAY_MS;
    const random = () => randomBytes(12).toString('base64url');
    const demoParts: JobIdParts = { tenant: 'demo', shard: 7, dueMs, path: 't', random: random() };
    ids = {
      demo: codec.encode(demoParts),
      demoParts,
      other: codec.encode({ tenant: 'other', shard: 3, dueMs, path: 't', random: random() }),
      foreignKey: foreign.encode(demoParts),
      ghost: codec.encode({ tenant: 'ghost', shard: 1, dueMs, path: 't', random: random() }),
      direct: codec.encode({ tenant: 'demo', shard: 2, dueMs: Date.now() + 600_000, path: 'd', random: random() }),
      uncancellable: codec.encode({ tenant: 'demo', shard: 4, dueMs, path: 'u', random: random() }),
      pastCutOff: () => codec.encode({ tenant: 'demo', shard: 5, dueMs: Date.now() + LOOKAHEAD_MS / 2, path: 't', random: random() }),
      pastDue: codec.encode({ tenant: 'demo', shard: 6, dueMs: Date.now() - 60_000, path: 't', random: random() }),
    };
    tableBefore = await scanAll(em, sys.tableName);
    writesBefore = writesIn(em.counter.snapshot());
  });

  it('starts from a table holding only the two tenant registrations and empty queues', async () => {
    expect(tableBefore).toHaveLength(2);
    expect(tableBefore.map((i) => i.queueUrl?.S).sort()).toEqual([sys.tenants.demo!.url, sys.tenants.other!.url].sort());
    for (const url of [sys.inboundUrl, ...Object.values(sys.tenants).flatMap((t) => [t.url, t.dlqUrl])])
      expect(total(await queueCounts(em, url))).toBe(0);
  });

  it('controls: the unaltered ids are accepted, so each rejection below is due to its one defect', async () => {
    // Reads only. A job id signed with the deployment key answers 200 under its own tenant.
    const demo = await send(h, 'status', 'demo', { jobId: ids.demo });
    expect(demo.statusCode).toBe(200);
    // Nothing stored it (no ingest runs here): status says it has no record of it, rather than guess.
    expect(JSON.parse(demo.body)).toMatchObject({ jobId: ids.demo, tenant: 'demo', state: 'UNKNOWN' });
    const other = await send(h, 'status', 'other', { jobId: ids.other });
    expect(other.statusCode).toBe(200);
    expect(JSON.parse(other.body)).toMatchObject({ jobId: ids.other, tenant: 'other' });
    // And the batch route is routed as a batch: a batch of invalid jobs is a 200 with per-job errors.
    const batch = await send(h, 'batch', 'demo', { body: j({ jobs: [{ payload: 1 }, 'not a job'] }) });
    expect(batch.statusCode).toBe(200);
  });

  it(`has a table of at least 30 bad requests (${cases.length})`, () => {
    expect(cases.length).toBeGreaterThanOrEqual(30);
    expect(new Set(cases.map((c) => c.name)).size).toBe(cases.length);
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const body = typeof c.body === 'function' ? c.body() : c.body;
    const res = await send(h, c.route, c.tenant ?? 'demo', { body, jobId: c.jobId?.(ids), rawJobId: c.rawJobId });
    sent++;
    expectError(res, c);
  });

  it('a batch job with delaySeconds 1e300 gets a per-job error, not a failed batch', async () => {
    const res = await send(h, 'batch', 'demo', { body: '{"jobs": [{"payload": 1, "delaySeconds": 1e300}]}' });
    expect(res.statusCode).toBe(200);
    const { results } = JSON.parse(res.body) as { results: { error?: { code: string; message: string } }[] };
    expect(results).toHaveLength(1);
    expect(results[0]!.error?.code).toBe(V);
    expect(results[0]!.error?.message).toContain('jobs[0]');
  });

  it('a batch whose every job is invalid answers 200 with an error per job, in order', async () => {
    const jobs = [
      { payload: 1 },
      7,
      { payload: 1, delaySeconds: -5 },
      { payload: payloadOfBytes(MAX_PAYLOAD + 1), delaySeconds: 60 },
      { payload: 1, delaySeconds: 5, extra: 1 },
    ];
    const res = await send(h, 'batch', 'demo', { body: j({ jobs }) });
    expect(res.statusCode).toBe(200);
    const { results } = JSON.parse(res.body) as { results: Record<string, unknown>[] };
    expect(results).toHaveLength(jobs.length);
    const expected = [V, V, V, TOO_LARGE, V];
    results.forEach((r, i) => {
      expect(Object.keys(r)).toEqual(['error']);
      expectError(
        { statusCode: 200, body: JSON.stringify(r), headers: res.headers },
        { status: 200, code: expected[i]!, message: new RegExp(`jobs\\[${i}\\]`) },
      );
    });
  });

  it('wrote nothing: no write call, the table holds only the tenant registry, every queue is empty', async () => {
    expect(sent).toBe(cases.length); // every bad request above was sent before this check
    // No write was even attempted against DynamoDB or SQS.
    const writesAfter = writesIn(em.counter.snapshot());
    expect(writesAfter).toEqual(writesBefore);
    // The table is exactly as it was after the tenants were registered.
    const tableAfter = await scanAll(em, sys.tableName);
    expect(tableAfter).toEqual(tableBefore);
    expect(tableAfter).toHaveLength(2);
    // The inbound queue, the tenant queues and their DLQs hold no message, visible, in flight or delayed.
    for (const url of [sys.inboundUrl, ...Object.values(sys.tenants).flatMap((t) => [t.url, t.dlqUrl])]) {
      expect({ url, ...(await queueCounts(em, url)) }).toEqual({ url, visible: 0, notVisible: 0, delayed: 0 });
    }
  });
});

describe('a batch mixing valid and invalid jobs', () => {
  let sys: TestSystem;
  let h: Handlers;

  beforeAll(async () => {
    sys = await createSystem(em, { tenants: ['demo'] });
    h = handlersOf(sys);
  });

  it('answers 200 with a result per job in order, accepts only the valid ones, and writes exactly those', async () => {
    const soonRunAt = isoIn(3_000); // within the 5 s lookahead: straight to the tenant queue
    const laterRunAt = isoIn(2 * DAY_MS);
    const jobs: unknown[] = [
      /* 0 */ { payload: { n: 0 }, delaySeconds: 3600 },
      /* 1 */ { payload: 1, runAt: laterRunAt, delaySeconds: 10 },
      /* 2 */ { payload: { n: 2 }, runAt: soonRunAt },
      /* 3 */ { payload: 1, delaySeconds: 5, colour: 'red' },
      /* 4 */ 42,
      /* 5 */ { payload: { n: 5 }, delaySeconds: 120, cancellable: false },
      /* 6 */ { payload: payloadOfBytes(MAX_PAYLOAD + 1), delaySeconds: 60 },
      /* 7 */ { payload: { n: 7 }, runAt: laterRunAt, idempotencyKey: 'mixed-7' },
      /* 8 */ { payload: 1, runAt: 'tomorrow' },
      /* 9 */ { payload: 1, delaySeconds: 5, idempotencyKey: 'k'.repeat(129) },
      /* 10 */ { payload: payloadOfBytes(MAX_PAYLOAD), delaySeconds: 3600 }, // exactly 240 KiB: accepted
    ];
    const expected: ({ state: 'SCHEDULED' | 'QUEUED'; runAt?: string; delayMs?: number } | { code: string })[] = [
      { state: 'SCHEDULED', delayMs: 3_600_000 },
      { code: V },
      { state: 'QUEUED', runAt: soonRunAt },
      { code: V },
      { code: V },
      { state: 'QUEUED', delayMs: 120_000 },
      { code: TOO_LARGE },
      { state: 'SCHEDULED', runAt: laterRunAt },
      { code: V },
      { code: V },
      { state: 'SCHEDULED', delayMs: 3_600_000 },
    ];
    const before = Date.now();
    const res = await send(h, 'batch', 'demo', { body: j({ jobs }) });
    const after = Date.now();
    expect(res.statusCode).toBe(200);
    const { results } = JSON.parse(res.body) as { results: Record<string, unknown>[] };
    expect(results).toHaveLength(jobs.length);

    const accepted: { index: number; jobId: string; state: string }[] = [];
    results.forEach((r, i) => {
      const e = expected[i]!;
      if ('code' in e) {
        expectError(
          { statusCode: 200, body: JSON.stringify(r), headers: res.headers },
          { status: 200, code: e.code, message: new RegExp(`jobs\\[${i}\\]`) },
        );
        return;
      }
      expect(r, `jobs[${i}]`).not.toHaveProperty('error');
      expect(r).toMatchObject({ tenant: 'demo', state: e.state });
      expect(typeof r.jobId).toBe('string');
      const runAtMs = Date.parse(r.runAt as string);
      if (e.runAt !== undefined) expect(runAtMs).toBe(Date.parse(e.runAt));
      else {
        expect(runAtMs).toBeGreaterThanOrEqual(before + e.delayMs!);
        expect(runAtMs).toBeLessThanOrEqual(after + e.delayMs! + 1);
      }
      accepted.push({ index: i, jobId: r.jobId as string, state: r.state as string });
    });
    expect(accepted.map((a) => a.index)).toEqual([0, 2, 5, 7, 10]);
    expect(new Set(accepted.map((a) => a.jobId)).size).toBe(accepted.length);
    const scheduled = accepted.filter((a) => a.state === 'SCHEDULED').map((a) => a.jobId);
    const queued = accepted.filter((a) => a.state === 'QUEUED').map((a) => a.jobId);

    // Bad ids built from these real ids are refused and write nothing either.
    const real = scheduled[0]!;
    const control = await send(h, 'status', 'demo', { jobId: real });
    expect(control.statusCode).toBe(200);
    expect(JSON.parse(control.body)).toMatchObject({ jobId: real, tenant: 'demo', state: 'UNKNOWN' }); // accepted, not ingested here
    for (const bad of [alterChar(real, real.length - 2), withPart(real, 5, (p) => alterChar(p, 0)), `${real}=`]) {
      expectError(await send(h, 'status', 'demo', { jobId: bad }), { status: 400, code: BAD_ID, message: /job ?id/i });
      expectError(await send(h, 'cancel', 'demo', { jobId: bad }), { status: 400, code: BAD_ID, message: /job ?id/i });
    }
    // A direct job's real id, re-labelled as a table job to make it cancellable: a forgery.
    expectError(await send(h, 'cancel', 'demo', { jobId: withPart(queued[0]!, 4, () => 't') }), {
      status: 400,
      code: BAD_ID,
      message: /job ?id/i,
    });

    // Exactly the valid jobs were written: the table jobs wait in the inbound queue (no ingest
    // runs here), the direct ones in the tenant queue; the table holds the tenant registry and
    // the idempotency record of jobs[7], the one job with a key.
    const table = await scanAll(em, sys.tableName);
    expect(table.map((i) => i.pk?.S?.replace(/^idem#.+$/, 'idem#')).sort()).toEqual(['idem#', 'tenant#demo']);
    expect(table.find((i) => i.pk?.S === 'tenant#demo')!.queueUrl?.S).toBe(sys.tenants.demo!.url);
    expect(table.find((i) => i.pk?.S?.startsWith('idem#'))!.jobId?.S).toBe(accepted.find((a) => a.index === 7)!.jobId);
    // One batch request: its table-path jobs share one inbound message.
    expect(total(await queueCounts(em, sys.inboundUrl))).toBe(1);
    expect(total(await queueCounts(em, sys.tenants.demo!.url))).toBe(queued.length);
    expect(total(await queueCounts(em, sys.tenants.demo!.dlqUrl))).toBe(0);

    // The inbound message carries exactly the SCHEDULED jobs, each once.
    const inboundBodies: string[] = [];
    for (let tries = 0; tries < 10 && inboundBodies.length < 1; tries++) {
      const got = await em.sqs.send(new ReceiveMessageCommand({ QueueUrl: sys.inboundUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }));
      inboundBodies.push(...(got.Messages ?? []).map((m) => m.Body ?? ''));
    }
    expect(inboundBodies).toHaveLength(1);
    expect(
      parseInboundBody(inboundBodies[0]!)
        ?.map((j) => j.jobId)
        .sort(),
    ).toEqual([...scheduled].sort());

    // The job due in 3 s reaches its tenant queue, with the body DESIGN.md describes.
    const soonId = accepted.find((a) => a.index === 2)!.jobId;
    let delivered: Record<string, unknown> | undefined;
    for (let tries = 0; tries < 15 && !delivered; tries++) {
      const got = await em.sqs.send(
        new ReceiveMessageCommand({ QueueUrl: sys.tenants.demo!.url, MaxNumberOfMessages: 10, WaitTimeSeconds: 1 }),
      );
      for (const m of got.Messages ?? []) {
        const body = JSON.parse(m.Body ?? '{}') as Record<string, unknown>;
        if (body.jobId === soonId) delivered = body;
        await em.sqs.send(
          new DeleteMessageBatchCommand({ QueueUrl: sys.tenants.demo!.url, Entries: [{ Id: '0', ReceiptHandle: m.ReceiptHandle! }] }),
        );
      }
    }
    expect(delivered).toEqual({ jobId: soonId, tenant: 'demo', runAt: new Date(Date.parse(soonRunAt)).toISOString(), payload: { n: 2 } });
  });
});

// ---------------------------------------------------------------------------------------------
// Every route of the HTTP API (lambdas/runtime/routes.ts declares them): a body nested 100,000
// levels deep and a query parameter the route does not take are 400s that write nothing.

describe('every route, every bad input', () => {
  let sys: TestSystem;
  let w: Wiring;
  const triggerCalls: string[] = [];
  let jobId: string;
  let tableBefore: Record<string, AttributeValue>[];
  let writesBefore: Record<string, number>;

  const DEEP = 100_000;
  const deepArrays = () => `${'['.repeat(DEEP)}${']'.repeat(DEEP)}`;

  beforeAll(async () => {
    sys = await createSystem(em, { tenants: ['demo'] });
    // History on (the outcomes route answers 409 HistoryOff before reading a body otherwise).
    await sys.w.store.putTenant({ name: 'demo', queueUrl: sys.tenants.demo!.url, dlqUrl: sys.tenants.demo!.dlqUrl, historyTtlMs: DAY_MS });
    // The schedules service over the real table; its EventBridge clock only records calls (none may come).
    const trigger: ScheduleTrigger = {
      upsert: async (ref) => void triggerCalls.push(`upsert ${ref.name}`),
      remove: async (ref) => void triggerCalls.push(`remove ${ref.name}`),
    };
    w = {
      ...sys.w,
      schedules: new SchedulesService({
        store: sys.w.store,
        schedules: new DynamoScheduleStore(sys.tableName, em.dynamo),
        trigger,
        wakes: sys.w.ingest.wakes,
        tenants: sys.w.tenants,
        codec: sys.w.codec,
        clock: sys.w.dispatch.clock,
        settings: sys.w.dispatch.settings,
      }),
    };
    jobId = new JobIdCodec(sys.idKey).encode({
      tenant: 'demo',
      shard: 1,
      dueMs: Date.now() + DAY_MS,
      path: 't',
      random: 'AAAAAAAAAAAAAAAA',
    });
    tableBefore = await scanAll(em, sys.tableName);
    writesBefore = writesIn(em.counter.snapshot());
  });

  /** The handler API Gateway invokes for a route (one function per family, as the CDK construct wires them). */
  const handlerOf = (r: RouteSpec) => {
    if (r.path.startsWith('/v1/admin/')) return adminHandler(w);
    if (r.path.includes('/schedules')) return schedulesHandler(w);
    if (r.path.includes('/dlq')) return dlqHandler(w);
    if (r.path.endsWith('/jobs/outcomes') || r.path.endsWith('/jobs/heartbeats')) return outcomesHandler(w);
    if (r.path.includes('/workflows')) return workflowsHandler(w);
    if (r.path.endsWith('/jobs/cancel') || r.path.includes('/operations/')) return cancelHandler(w);
    if (r.method === 'POST') return submitHandler(w);
    if (r.method === 'DELETE') return cancelHandler(w);
    return statusHandler(w);
  };

  /** A request on `r` exactly as API Gateway delivers it: route key, path parameters, query, body. */
  function call(r: RouteSpec, opts: { body?: string; query?: Record<string, string> } = {}): Promise<HttpResult> {
    const params: Record<string, string> = {
      tenant: 'demo',
      jobId,
      name: 'nightly',
      workflowId: 'wf1.demo.0.unknown',
      operationId: 'op1.AAAAAAAAAAAAAAAAAAAAAA',
    };
    const pathParameters = Object.fromEntries([...r.path.matchAll(/\{(\w+)\}/g)].map((m) => [m[1]!, params[m[1]!]!]));
    const path = r.path.replace(/\{(\w+)\}/g, (_m, k: string) => encodeURIComponent(params[k]!));
    const event = httpEvent(r.method, path, {
      routeKey: `${r.method} ${r.path}`,
      pathParameters,
      ...(opts.body !== undefined ? { body: opts.body } : {}),
    });
    const query = opts.query ?? {};
    Object.assign(event, {
      rawQueryString: new URLSearchParams(query).toString(),
      ...(Object.keys(query).length > 0 ? { queryStringParameters: query } : {}),
    });
    return handlerOf(r)(event);
  }

  /** A body each route would accept, so that only the defect under test is wrong. */
  const goodBody = (r: RouteSpec): string | undefined =>
    r.method === 'GET' || r.method === 'DELETE' || /\/(pause|resume)$/.test(r.path)
      ? undefined
      : r.path.endsWith('/jobs')
        ? j({ payload: 1, delaySeconds: 3_600 })
        : r.path.endsWith('/jobs/batch')
          ? j({ jobs: [{ payload: 1, delaySeconds: 3_600 }] })
          : r.path.endsWith('/jobs/outcomes')
            ? j({ outcomes: [{ jobId, outcome: 'SUCCEEDED', attempts: 1, receivedAt: new Date().toISOString(), durationMs: 1 }] })
            : r.path.endsWith('/jobs/heartbeats')
              ? j({ jobIds: [jobId] })
              : r.path.includes('/schedules/')
                ? j({ expression: 'rate(1 hour)' })
                : r.path.endsWith('/workflows')
                  ? j({ jobs: [{ key: 'a', payload: 1, delaySeconds: 3_600 }] })
                  : r.path.endsWith('/dlq/redrive')
                    ? j({ all: true })
                    : r.path.endsWith('/dlq/delete')
                      ? j({ handles: ['h'] })
                      : r.path.endsWith('/dlq/edit')
                        ? j({ handle: 'h', payload: 1 })
                        : r.path.endsWith('/jobs/cancel')
                          ? j({ tag: 'order-42' })
                          : j({ weight: 2 });

  const bodyRoutes = ROUTES.filter((r) => goodBody(r) !== undefined);

  it('declares the 28 routes of the API, 11 of them with a body', () => {
    expect(ROUTES).toHaveLength(28);
    expect(bodyRoutes.map((r) => `${r.method} ${r.path}`).sort()).toEqual([
      'POST /v1/tenants/{tenant}/dlq/delete',
      'POST /v1/tenants/{tenant}/dlq/edit',
      'POST /v1/tenants/{tenant}/dlq/redrive',
      'POST /v1/tenants/{tenant}/jobs',
      'POST /v1/tenants/{tenant}/jobs/batch',
      'POST /v1/tenants/{tenant}/jobs/cancel',
      'POST /v1/tenants/{tenant}/jobs/heartbeats',
      'POST /v1/tenants/{tenant}/jobs/outcomes',
      'POST /v1/tenants/{tenant}/workflows',
      'PUT /v1/admin/tenants/{tenant}/settings',
      'PUT /v1/tenants/{tenant}/schedules/{name}',
    ]);
  });

  it.each(bodyRoutes.map((r) => [`${r.method} ${r.path}`, r] as const))('%s: a body nested 100,000 levels deep is a 400', async (_k, r) => {
    const res = await call(r, { body: deepArrays() });
    expectError(res, { status: 400, code: V, message: /nests more than 64 levels|JSON object/ });
  });

  // The same depth inside the field each route reads (and once wrote into its error message).
  const deepFields: [string, string, () => string][] = [
    ['POST /v1/tenants/{tenant}/jobs', 'runAt', () => `{"payload": 1, "runAt": ${deepArrays()}}`],
    ['POST /v1/tenants/{tenant}/jobs/batch', 'jobs[0].runAt', () => `{"jobs": [{"payload": 1, "runAt": ${deepArrays()}}]}`],
    ['POST /v1/tenants/{tenant}/jobs/outcomes', 'outcomes[0].jobId', () => `{"outcomes": [{"jobId": ${deepArrays()}}]}`],
    ['PUT /v1/tenants/{tenant}/schedules/{name}', 'state', () => `{"expression": "rate(1 hour)", "state": ${deepArrays()}}`],
    ['POST /v1/tenants/{tenant}/dlq/redrive', 'all', () => `{"all": ${deepArrays()}}`],
    ['POST /v1/tenants/{tenant}/dlq/delete', 'handles[0]', () => `{"handles": [${deepArrays()}]}`],
    ['POST /v1/tenants/{tenant}/dlq/edit', 'handle', () => `{"handle": ${deepArrays()}, "payload": 1}`],
    ['PUT /v1/admin/tenants/{tenant}/settings', 'weight', () => `{"weight": ${deepArrays()}}`],
    ['POST /v1/tenants/{tenant}/workflows', 'jobs[0].after', () => `{"jobs": [{"key": "a", "payload": 1, "after": ${deepArrays()}}]}`],
    ['POST /v1/tenants/{tenant}/jobs/cancel', 'tag', () => `{"tag": ${deepArrays()}}`],
    ['POST /v1/tenants/{tenant}/jobs/heartbeats', 'jobIds[0]', () => `{"jobIds": [${deepArrays()}]}`],
  ];
  it.each(deepFields)('%s: %s nested 100,000 levels deep is a 400', async (key, _field, body) => {
    const r = ROUTES.find((x) => `${x.method} ${x.path}` === key)!;
    expectError(await call(r, { body: body() }), { status: 400, code: V, message: /nests more than 64 levels/ });
  });

  it('an outcome result nested 100,000 levels deep refuses that entry (result above 1 KB), not the report', async () => {
    const r = ROUTES.find((x) => x.path.endsWith('/jobs/outcomes'))!;
    const entry = `{"jobId": ${j(jobId)}, "outcome": "SUCCEEDED", "attempts": 1, "receivedAt": ${j(new Date().toISOString())}, "durationMs": 1, "result": ${deepArrays()}}`;
    const res = await call(r, { body: `{"outcomes": [${entry}]}` });
    expect(res.statusCode).toBe(200);
    const { results } = JSON.parse(res.body) as { results: { error?: { code: string; message: string } }[] };
    expect(results.map((e) => [e.error?.code, e.error?.message.startsWith('result')])).toEqual([[V, true]]);
  });

  it.each(ROUTES.map((r) => [`${r.method} ${r.path}`, r] as const))('%s: an unknown query parameter is a 400 naming it', async (_k, r) => {
    const res = await call(r, { body: goodBody(r), query: { ...(r.query[0] ? { [r.query[0]]: 'x' } : {}), bogus: '1' } });
    const error = expectError(res, { status: 400, code: V, message: /^bogus is not a query parameter/ });
    expect(error.message).toContain(r.query.length > 0 ? `it takes ${r.query.join(', ')}` : 'it takes none');
  });

  it('PUT schedules with ?dryrun=true (wrong case) is a 400 pointing at dryRun, and stores nothing', async () => {
    const r = ROUTES.find((x) => x.method === 'PUT' && x.path.endsWith('/schedules/{name}'))!;
    const res = await call(r, { body: j({ expression: 'rate(1 hour)' }), query: { dryrun: 'true' } });
    expectError(res, { status: 400, code: V, message: [/^dryrun is not a query parameter/, /did you mean dryRun\?/] });
    const get = ROUTES.find((x) => x.method === 'GET' && x.path.endsWith('/schedules/{name}'))!;
    expect((await call(get)).statusCode).toBe(404);
  });

  it('wrote nothing: no write call, the table as it was, every queue empty, no schedule clock touched', async () => {
    expect(writesIn(em.counter.snapshot())).toEqual(writesBefore);
    expect(await scanAll(em, sys.tableName)).toEqual(tableBefore);
    for (const url of [sys.inboundUrl, sys.tenants.demo!.url, sys.tenants.demo!.dlqUrl])
      expect({ url, ...(await queueCounts(em, url)) }).toEqual({ url, visible: 0, notVisible: 0, delayed: 0 });
    expect(triggerCalls).toEqual([]);
  });
});
