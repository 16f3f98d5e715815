import { startSignedStub, type StubRequest } from '../support/signedStub.js';

export { STUB_CREDENTIALS, STUB_REGION, type StubRequest } from '../support/signedStub.js';

/**
 * A small in-memory stand-in for the schedules routes of the HTTP API (the contract of
 * docs/api.md), for the client's unit tests: it checks SigV4 (query string included) as the
 * local gateway does, keeps schedules per tenant, pages in name order, and records every request.
 * Its next runs are fake (one a minute from a fixed clock): the evaluator is not under test here.
 */
export interface StubApi {
  readonly endpoint: string;
  readonly requests: StubRequest[];
  /** Replies to answer before the routes, in turn (e.g. a 503 to test retries). */
  readonly inject: { status: number; body: unknown }[];
  close(): Promise<void>;
}

const NOW = Date.parse('2030-01-01T00:00:30.000Z');
const FIELDS = new Set(['expression', 'timezone', 'startAt', 'endAt', 'payload', 'state']);

type Stored = Record<string, unknown> & { name: string; state: 'ENABLED' | 'DISABLED' };

export async function startScheduleStub(tenants: readonly string[] = ['alpha']): Promise<StubApi> {
  const store = new Map<string, Map<string, Stored>>(tenants.map((t) => [t, new Map()]));
  const inject: StubApi['inject'] = [];
  const runs = (n: number) => Array.from({ length: n }, (_, i) => new Date(Math.ceil(NOW / 60_000) * 60_000 + i * 60_000).toISOString());
  const view = (s: Stored, count = 5) => ({ ...s, nextRuns: s.state === 'DISABLED' ? [] : runs(count) });

  const stub = await startSignedStub(async ({ method, path, params, raw, reply, error }) => {
    const injected = inject.shift();
    if (injected) return reply(injected.status, injected.body);

    const m = /^\/v1\/tenants\/([^/]+)\/schedules(?:\/([^/]+)(?:\/(pause|resume))?)?$/.exec(path);
    if (!m) return reply(404, { message: 'Not Found' });
    const [, tenant, name, action] = m;
    const schedules = store.get(decodeURIComponent(tenant!));
    if (!schedules) return error(404, 'TenantNotFound', `tenant ${tenant} is not registered`);

    if (name === undefined) {
      if (method !== 'GET') return reply(404, { message: 'Not Found' });
      const limit = params.has('limit') ? Number(params.get('limit')) : 50;
      if (!Number.isInteger(limit) || limit < 1 || limit > 100) return error(400, 'ValidationError', 'limit must be 1 to 100');
      let after = '';
      if (params.has('cursor')) {
        after = Buffer.from(params.get('cursor')!, 'base64url').toString();
        if (!after.startsWith('after:')) return error(400, 'ValidationError', 'cursor is not a cursor of this list');
        after = after.slice('after:'.length);
      }
      const names = [...schedules.keys()].sort().filter((n) => n > after);
      const page = names.slice(0, limit);
      const more = names.length > limit;
      return reply(200, {
        schedules: page.map((n) => view(schedules.get(n)!)),
        ...(more ? { nextCursor: Buffer.from(`after:${page.at(-1)}`).toString('base64url') } : {}),
      });
    }
    if (name === 'busy') return error(409, 'ConcurrentModification', `schedule ${name} was changed concurrently: retry`);
    const existing = schedules.get(name);
    if (method === 'PUT' && action === undefined) {
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(raw);
      } catch {
        return error(400, 'ValidationError', 'the body is not JSON');
      }
      const unknown = Object.keys(body).find((k) => !FIELDS.has(k));
      if (unknown) return error(400, 'ValidationError', `${unknown} is not a field of a schedule`);
      if (typeof body.expression !== 'string' || !/^(cron|rate|at)\(.+\)$/.test(body.expression))
        return error(400, 'ValidationError', `expression ${JSON.stringify(body.expression)} is not cron(), rate() or at()`);
      if (body.timezone !== undefined && body.timezone !== 'UTC' && !String(body.timezone).includes('/'))
        return error(400, 'ValidationError', `timezone ${JSON.stringify(body.timezone)} is not an IANA time zone`);
      const stored: Stored = {
        tenant,
        name,
        expression: body.expression,
        timezone: body.timezone ?? 'UTC',
        ...(body.startAt !== undefined ? { startAt: body.startAt } : {}),
        ...(body.endAt !== undefined ? { endAt: body.endAt } : {}),
        payload: body.payload ?? null,
        state: body.state === 'DISABLED' ? 'DISABLED' : 'ENABLED',
        createdAt: (existing?.createdAt as string | undefined) ?? new Date(NOW).toISOString(),
        updatedAt: new Date(NOW).toISOString(),
      };
      if (params.get('dryRun') === 'true') return reply(200, { ...view(stored, Number(params.get('count') ?? 100)), dryRun: true });
      schedules.set(name, stored);
      return reply(existing ? 200 : 201, view(stored));
    }
    if (!existing) return error(404, 'ScheduleNotFound', `tenant ${tenant} has no schedule ${name}`);
    if (method === 'GET' && action === undefined) return reply(200, view(existing));
    if (method === 'DELETE' && action === undefined) {
      schedules.delete(name);
      return reply(200, { tenant, name, deleted: true });
    }
    if (method === 'POST' && action !== undefined) {
      const state = action === 'pause' ? 'DISABLED' : 'ENABLED';
      existing.state = state;
      return reply(200, view(existing));
    }
    return reply(404, { message: 'Not Found' });
  });
  return { ...stub, inject };
}
