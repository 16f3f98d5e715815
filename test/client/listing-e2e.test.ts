import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DyneinClient, ForbiddenError, ValidationError, type ListedJob } from '../../client/index.js';
import { startLocalStack, type LocalJson } from '../support/localStack.js';
import { runCli } from './support.js';

/**
 * Listing jobs through the client end to end, against the local stack (the real route on the status
 * function, signed requests, the gateway's tenant rule): `listJobs` and the `jobs` iterator with
 * filters and paging, typed errors, and `dynein jobs` as a user runs it.
 */
let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let alpha: DyneinClient;
let beta: DyneinClient;

beforeAll(async () => {
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta', DYNEIN_LOOKAHEAD_MS: '2000' });
  local = await stack.waitForLocalJson();
  alpha = new DyneinClient({ endpoint: local.endpoint, region: local.region, credentials: local.tenants.alpha! });
  beta = new DyneinClient({ endpoint: local.endpoint, region: local.region, credentials: local.tenants.beta! });
}, 60_000);
afterAll(async () => stack?.stop());

const HOUR = 3_600_000;
const iso = (ms: number) => new Date(ms).toISOString();

const dynein = (args: string[]) => runCli(args, { DYNEIN_DATA_DIR: stack.dataDir });

describe('listing jobs through DyneinClient and dynein jobs, on the local stack', () => {
  const base = Math.ceil((Date.now() + 24 * HOUR) / 1000) * 1000;
  let submitted: { jobId: string; runAt: string }[] = [];

  it('lists every job once across pages, filtered, and only the tenant’s own', async () => {
    const results = await alpha.scheduleBatch(
      'alpha',
      Array.from({ length: 25 }, (_, i) => ({ payload: { i }, runAt: iso(base + i * 1_000) })),
    );
    submitted = results.map((r) => {
      if (!r.ok) throw r.error;
      return r.job;
    });
    await beta.schedule('beta', { payload: null, runAt: iso(base) });
    await alpha.cancel('alpha', submitted[3]!.jobId);
    // Stored a second or two after submit (ingest), each tenant's in its own inbound message.
    for (let until = Date.now() + 30_000; Date.now() < until; await new Promise((r) => setTimeout(r, 100)))
      if ((await alpha.listJobs('alpha', { limit: 1000 })).jobs.length === 25 && (await beta.listJobs('beta')).jobs.length === 1) break;

    const page = await alpha.listJobs('alpha', { limit: 10 });
    expect(page.jobs.map((j) => j.jobId)).toEqual(submitted.slice(0, 10).map((j) => j.jobId));
    expect(page.nextCursor).toEqual(expect.any(String));
    expect(page.jobs[0]).toEqual(await alpha.get('alpha', submitted[0]!.jobId));

    const all: ListedJob[] = [];
    for await (const j of alpha.jobs('alpha', { limit: 7 })) all.push(j);
    expect(all.map((j) => j.jobId)).toEqual(submitted.map((j) => j.jobId));
    expect(all[3]!.state).toBe('CANCELLED');

    const window: ListedJob[] = [];
    for await (const j of alpha.jobs('alpha', { state: 'SCHEDULED', from: new Date(base + 2_000), to: iso(base + 5_000), order: 'desc' }))
      window.push(j);
    expect(window.map((j) => j.jobId)).toEqual([5, 4, 2].map((i) => submitted[i]!.jobId));

    const betaJobs = (await beta.listJobs('beta')).jobs;
    expect(betaJobs).toHaveLength(1);
    expect(betaJobs[0]!.tenant).toBe('beta');
    // Another tenant's route is refused by the gateway (the IAM grant), its cursors by the API.
    await expect(beta.listJobs('alpha')).rejects.toBeInstanceOf(ForbiddenError);
    await expect(beta.listJobs('beta', { cursor: page.nextCursor! })).rejects.toThrow(/^cursor /);
  });

  it('answers typed errors naming the parameter', async () => {
    for (const [filter, param] of [
      [{ state: 'DONE' }, 'state'],
      [{ from: 'tomorrow' }, 'from'],
      [{ order: 'sideways' as 'asc' }, 'order'],
      [{ cursor: 'abc.def' }, 'cursor'],
    ] as const) {
      const err = await alpha.listJobs('alpha', filter).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as Error).message).toMatch(new RegExp(`^${param} `));
    }
    // Checked before sending.
    await expect(alpha.listJobs('alpha', { limit: 1001 })).rejects.toThrow(/limit must be a whole number from 1 to 1000/);
  });

  it('dynein jobs prints a page and the next command, every page with --all, JSON with --json', async () => {
    const first = await dynein(['jobs', '--tenant', 'alpha', '--limit', '10', '--state', 'SCHEDULED']);
    expect(first.code).toBe(0);
    const lines = first.stdout.trim().split('\n');
    expect(lines).toHaveLength(10);
    expect(lines[0]).toMatch(
      new RegExp(`^${iso(base).replace(/\./g, '\\.')}\\s+SCHEDULED\\s+${submitted[0]!.jobId.replace(/\./g, '\\.')}$`),
    );
    const more = /^more: (dynein jobs .*--cursor '([^']+)')$/m.exec(first.stderr);
    expect(more).not.toBeNull();
    expect(more![1]).toContain('--state SCHEDULED --limit 10');

    const next = await dynein(['jobs', '--tenant', 'alpha', '--limit', '10', '--state', 'SCHEDULED', '--cursor', more![2]!, '--json']);
    expect(next.code).toBe(0);
    const body = JSON.parse(next.stdout) as { jobs: ListedJob[]; nextCursor?: string };
    expect(body.jobs.map((j) => j.jobId)).toEqual(
      submitted
        .filter((_, i) => i !== 3)
        .slice(10, 20)
        .map((j) => j.jobId),
    );

    const every = await dynein(['jobs', '--tenant', 'alpha', '--all', '--json', '--order', 'desc']);
    expect(every.code).toBe(0);
    const allBody = JSON.parse(every.stdout) as { jobs: ListedJob[]; nextCursor?: string };
    expect(allBody.jobs.map((j) => j.jobId)).toEqual(submitted.map((j) => j.jobId).reverse());
    expect(allBody.nextCursor).toBeUndefined();
    expect(every.stderr).toBe('');

    const bad = await dynein(['jobs', '--tenant', 'alpha', '--limit', '0']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/--limit must be a whole number from 1 to 1000/);
    const refused = await dynein(['jobs', '--tenant', 'alpha', '--state', 'NOPE']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/state "NOPE" is not a listable state/);
  });
});
