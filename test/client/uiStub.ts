import { startSignedStub } from '../support/signedStub.js';

/**
 * An in-memory stand-in for the API routes the job browser reads (docs/api.md): the listing
 * (`GET /jobs` with state, from, to, schedule, tag, concurrencyKey, order, limit, cursor), one job with
 * its timeline, cancel, bulk cancel by tag or concurrency key (`POST /jobs/cancel`, done at once, and
 * `GET /operations/{id}`), the schedules list, and the dead-letter queue with redrive. It checks SigV4
 * as the gateway does and records every request. With `listing: false` / `dlq: false` those routes
 * answer API Gateway's own 404 (`{"message":"Not Found"}`), as a stack deployed before them does.
 */
export interface StubJob {
  jobId: string;
  tenant: string;
  runAt: string;
  state: string;
  deliveredAt?: string;
  schedule?: string;
  tags?: string[];
  concurrencyKey?: string;
  concurrencyLimit?: number;
  cancelRequested?: true;
  traceId?: string;
  timeline?: { at: string; event: string; [k: string]: unknown }[];
}

/** A message as `GET .../dlq` answers it (docs/api.md, Dead letters). */
export interface StubDeadLetter {
  handle: string;
  messageId: string;
  jobId: string;
  runAt: string;
  receiveCount: number;
  sentAt: string;
  firstReceivedAt: string;
  attributes: Record<string, string>;
  body: string;
}

export interface UiStub {
  readonly endpoint: string;
  readonly jobs: StubJob[];
  readonly dlq: StubDeadLetter[];
  /** Redriven messages, in order. */
  readonly redriven: StubDeadLetter[];
  readonly requests: { method: string; url: string; body: string }[];
  /** Handles whose redrive sends the message but fails its delete: they stay in `dlq` and are answered `sentNotDeleted`. */
  readonly failDeletes: Set<string>;
  /** Workflows as `GET .../workflows/{workflowId}` answers them, by id. */
  readonly workflows: Map<string, object>;
  /** Spans as the local stack's `GET /local/traces/<traceId>` answers them, by trace id. */
  readonly traces: Map<string, object[]>;
  close(): Promise<void>;
}

export const T0 = Date.parse('2030-01-01T00:00:00.000Z');

export function stubJob(tenant: string, i: number, state = 'SCHEDULED', extra: Partial<StubJob> = {}): StubJob {
  return {
    jobId: `${tenant}-job-${String(i).padStart(3, '0')}`,
    tenant,
    runAt: new Date(T0 + i * 60_000).toISOString(),
    state,
    ...extra,
  };
}

/** A concurrency key as the API takes it: 1 to 128 characters, no control characters. */
const validKey = (key: unknown): key is string => typeof key === 'string' && key.length >= 1 && key.length <= 128 && !/\p{Cc}/u.test(key);

export async function startUiStub(opts: { listing?: boolean; dlq?: boolean } = {}): Promise<UiStub> {
  const jobs: StubJob[] = [];
  const dlq: StubDeadLetter[] = [];
  const redriven: StubDeadLetter[] = [];
  const failDeletes = new Set<string>();
  const workflows = new Map<string, object>();
  const operations = new Map<string, object>();
  const traces = new Map<string, object[]>();
  const stub = await startSignedStub(async ({ method, path, params, raw, reply, error }) => {
    const traced = /^\/local\/traces\/([0-9a-f]{32})$/.exec(path);
    if (traced && method === 'GET') return reply(200, { spans: traces.get(traced[1]!) ?? [] });
    const m = /^\/v1\/tenants\/([^/]+)\/(jobs|schedules|dlq|workflows|operations)(?:\/([^/]+))?$/.exec(path);
    if (!m) return reply(404, { message: 'Not Found' });
    const [, tenantEnc, kind, rest] = m;
    const tenant = decodeURIComponent(tenantEnc!);

    if (kind === 'jobs' && rest === undefined && method === 'GET') {
      if (opts.listing === false) return reply(404, { message: 'Not Found' });
      const state = params.get('state');
      const concurrencyKey = params.get('concurrencyKey');
      if (concurrencyKey !== null && !validKey(concurrencyKey))
        return error(400, 'ValidationError', 'concurrencyKey must be a string of 1 to 128 characters without control characters');
      if (state !== null && !/^(SCHEDULED|QUEUED|CANCELLED|DELIVERED|SUCCEEDED|FAILED|DEAD)$/.test(state))
        return error(400, 'ValidationError', `state '${state}' is not a job state`);
      const limit = Number(params.get('limit') ?? 100);
      if (!Number.isInteger(limit) || limit < 1 || limit > 1000) return error(400, 'ValidationError', 'limit must be 1 to 1000');
      const from = params.has('from') ? Date.parse(params.get('from')!) : -Infinity;
      const to = params.has('to') ? Date.parse(params.get('to')!) : Infinity;
      const desc = params.get('order') === 'desc';
      const key = (j: StubJob) => `${j.runAt}#${j.jobId}`;
      let matching = jobs
        .filter((j) => j.tenant === tenant && (state === null || j.state === state))
        .filter((j) => !params.has('schedule') || j.schedule === params.get('schedule'))
        .filter((j) => !params.has('tag') || (j.tags ?? []).includes(params.get('tag')!))
        .filter((j) => !params.has('concurrencyKey') || j.concurrencyKey === params.get('concurrencyKey'))
        .filter((j) => Date.parse(j.runAt) >= from && Date.parse(j.runAt) <= to)
        .sort((a, b) => (key(a) < key(b) ? -1 : 1));
      if (desc) matching.reverse();
      if (params.has('cursor')) {
        const after = Buffer.from(params.get('cursor')!, 'base64url').toString();
        if (!after.startsWith(`${tenant}|`)) return error(400, 'ValidationError', 'cursor was not issued for this listing');
        const at = after.slice(tenant.length + 1);
        matching = matching.filter((j) => (desc ? key(j) < at : key(j) > at));
      }
      const page = matching.slice(0, limit);
      return reply(200, {
        jobs: page.map(({ timeline: _t, ...j }) => j),
        ...(matching.length > limit ? { nextCursor: Buffer.from(`${tenant}|${key(page.at(-1)!)}`).toString('base64url') } : {}),
      });
    }
    if (kind === 'jobs' && rest === 'cancel' && method === 'POST') {
      const { tag, concurrencyKey, ...other } = JSON.parse(raw) as { tag?: unknown; concurrencyKey?: unknown };
      if ((tag === undefined) === (concurrencyKey === undefined) || Object.keys(other).length > 0)
        return error(400, 'ValidationError', 'give exactly one of tag or concurrencyKey');
      if (tag !== undefined && (typeof tag !== 'string' || tag === ''))
        return error(400, 'ValidationError', 'tag must be a string of 1 to 64 characters');
      if (concurrencyKey !== undefined && !validKey(concurrencyKey))
        return error(400, 'ValidationError', 'concurrencyKey must be a string of 1 to 128 characters without control characters');
      const selected = (j: StubJob) => (tag !== undefined ? (j.tags ?? []).includes(tag as string) : j.concurrencyKey === concurrencyKey);
      const chosen = jobs.filter((j) => j.tenant === tenant && selected(j) && j.state === 'SCHEDULED');
      for (const j of chosen) j.state = 'CANCELLED';
      const operationId = `op1.${String(operations.size).padStart(22, 'A')}`;
      operations.set(operationId, {
        operationId,
        tenant,
        state: 'DONE',
        matched: chosen.length,
        cancelled: chosen.length,
        alreadyQueued: 0,
        notCancellable: 0,
      });
      return reply(202, { operationId, state: 'RUNNING' });
    }
    if (kind === 'operations' && rest !== undefined && method === 'GET') {
      const op = operations.get(decodeURIComponent(rest));
      return op ? reply(200, op) : error(404, 'OperationNotFound', `tenant '${tenant}' has no such operation`);
    }
    if (kind === 'jobs' && rest !== undefined) {
      const job = jobs.find((j) => j.tenant === tenant && j.jobId === decodeURIComponent(rest));
      if (!job) return error(404, 'JobNotFound', `tenant ${tenant} has no job ${rest}`);
      if (method === 'GET') return reply(200, job);
      if (method === 'DELETE') {
        if (job.state === 'CANCELLED') return reply(200, { jobId: job.jobId, state: 'CANCELLED' });
        // A keyed job running (docs/flow-control.md): its worker is asked to stop it.
        if (job.state === 'QUEUED' && job.concurrencyKey !== undefined) {
          job.cancelRequested = true;
          return reply(202, { jobId: job.jobId, state: 'CANCEL_REQUESTED' });
        }
        if (job.state !== 'SCHEDULED') return error(409, 'AlreadyQueued', `the job was delivered to its queue at ${job.deliveredAt}`);
        job.state = 'CANCELLED';
        job.timeline?.push({ at: new Date().toISOString(), event: 'CANCELLED' });
        return reply(200, { jobId: job.jobId, state: 'CANCELLED' });
      }
    }
    if (kind === 'workflows' && rest !== undefined && method === 'GET') {
      const wf = workflows.get(decodeURIComponent(rest));
      return wf ? reply(200, wf) : error(404, 'WorkflowNotFound', `tenant '${tenant}' has no such workflow`);
    }
    if (kind === 'schedules' && rest === undefined && method === 'GET')
      return reply(200, {
        schedules: [
          {
            tenant,
            name: 'nightly-report',
            expression: 'cron(0 2 * * ? *)',
            timezone: 'Europe/Paris',
            state: 'ENABLED',
            payload: null,
            nextRuns: ['2030-01-02T01:00:00.000Z', '2030-01-03T01:00:00.000Z', '2030-01-04T01:00:00.000Z', '2030-01-05T01:00:00.000Z'],
            createdAt: '2029-12-01T00:00:00.000Z',
            updatedAt: '2029-12-01T00:00:00.000Z',
          },
          {
            tenant,
            name: 'paused-sync',
            expression: 'rate(5 minutes)',
            timezone: 'UTC',
            state: 'DISABLED',
            payload: null,
            nextRuns: [],
            createdAt: '2029-12-01T00:00:00.000Z',
            updatedAt: '2029-12-01T00:00:00.000Z',
          },
        ],
      });
    if (kind === 'dlq') {
      if (opts.dlq === false) return reply(404, { message: 'Not Found' });
      if (rest === undefined && method === 'GET') return reply(200, { messages: dlq.slice(0, 10), approximateDepth: dlq.length });
      if (rest === 'delete' && method === 'POST') {
        const { handles } = JSON.parse(raw) as { handles: string[] };
        const found = dlq.filter((d) => handles.includes(d.handle));
        for (const d of found) dlq.splice(dlq.indexOf(d), 1);
        return reply(200, { deleted: found.map((d) => d.handle), notFound: handles.filter((h) => !found.some((d) => d.handle === h)) });
      }
      if (rest === 'redrive' && method === 'POST') {
        let body: { all?: boolean; handles?: string[] };
        try {
          body = JSON.parse(raw);
        } catch {
          return error(400, 'ValidationError', 'the body is not JSON');
        }
        const chosen = body.all === true ? [...dlq] : dlq.filter((d) => body.handles?.includes(d.handle));
        if (body.all !== true && !Array.isArray(body.handles)) return error(400, 'ValidationError', 'give all: true or handles');
        const stuck = chosen.filter((d) => failDeletes.has(d.handle));
        for (const d of chosen) if (!stuck.includes(d)) dlq.splice(dlq.indexOf(d), 1);
        redriven.push(...chosen);
        const sentNotDeleted = stuck.length > 0 ? { sentNotDeleted: stuck.map((d) => d.handle) } : {};
        // As the local stack answers (AWS: {"method": "StartMessageMoveTask", "taskHandle"}).
        if (body.all === true)
          return reply(200, { method: 'copy', moved: chosen.length - stuck.length, complete: stuck.length === 0, ...sentNotDeleted });
        return reply(200, {
          redriven: chosen.filter((d) => !stuck.includes(d)).map((d) => d.handle),
          notFound: body.handles!.filter((h) => !chosen.some((d) => d.handle === h)),
          ...sentNotDeleted,
        });
      }
    }
    return reply(404, { message: 'Not Found' });
  });
  return { endpoint: stub.endpoint, jobs, dlq, redriven, failDeletes, workflows, traces, requests: stub.requests, close: stub.close };
}
