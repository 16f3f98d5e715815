import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DyneinClient, ValidationError, type ListedJob } from '../../client/index.js';
import { STUB_CREDENTIALS, STUB_REGION, startSignedStub } from '../support/signedStub.js';
import { runMain, stubDataDir } from './support.js';

/**
 * Listing a tenant's jobs by concurrency key, the client's side: the SDK's `listJobs` and `jobs`
 * send `concurrencyKey` (encoded) beside the other filters, on every page, and read each keyed
 * job's `concurrencyKey` and `concurrencyLimit`; `dynein jobs --key` does the same, prints the key
 * on each line and names `--key` in the next page's command; a key the API refuses is a
 * `ValidationError` (exit 1 for the CLI); then cancelling by that key empties the pending listing.
 * The API is a signed stub that answers `GET .../jobs` as the route does (state, tag,
 * concurrencyKey, limit, cursor) and `POST .../jobs/cancel` by key, done at once. The server's
 * side: docs/listing.md.
 */

interface Job {
  jobId: string;
  tenant: string;
  runAt: string;
  state: string;
  tags?: string[];
  concurrencyKey?: string;
  concurrencyLimit?: number;
}

/** An awkward key: a space, a slash, an ampersand and a non-ASCII letter, to be encoded in the query. */
const KEY = 'customer 7/ü&x';
const T0 = Date.parse('2030-01-01T00:00:00.000Z');
const job = (i: number, extra: Partial<Job> = {}): Job => ({
  jobId: `job-${String(i).padStart(3, '0')}`,
  tenant: 'demo',
  runAt: new Date(T0 + i * 60_000).toISOString(),
  state: 'SCHEDULED',
  ...extra,
});
const JOBS: Job[] = [
  job(1, { concurrencyKey: KEY, concurrencyLimit: 2, tags: ['eu'] }),
  job(2),
  job(3, { concurrencyKey: 'customer-8', concurrencyLimit: 1 }),
  job(4, { concurrencyKey: KEY, concurrencyLimit: 2 }),
  job(5, { concurrencyKey: KEY, concurrencyLimit: 2, state: 'QUEUED' }),
  job(6, { concurrencyKey: KEY, concurrencyLimit: 2, tags: ['eu'] }),
];

const validKey = (key: unknown): key is string => typeof key === 'string' && key.length >= 1 && key.length <= 128 && !/\p{Cc}/u.test(key);
const BAD_KEY = 'concurrencyKey must be a string of 1 to 128 characters without control characters';

let api: Awaited<ReturnType<typeof startSignedStub>>;
let jobs: Job[];
const listings = () => api.requests.filter((r) => r.method === 'GET' && r.url.startsWith('/v1/tenants/demo/jobs?'));
const query = (url: string) => new URL(url, 'http://x').searchParams;

beforeAll(async () => {
  const operations = new Map<string, object>();
  api = await startSignedStub(({ method, path, params, raw, reply, error }) => {
    if (method === 'GET' && path === '/v1/tenants/demo/jobs') {
      const key = params.get('concurrencyKey');
      if (key !== null && !validKey(key)) return error(400, 'ValidationError', BAD_KEY);
      const limit = Number(params.get('limit') ?? 100);
      const after = params.get('cursor') ?? '';
      const matching = jobs
        .filter((j) => !params.has('state') || j.state === params.get('state'))
        .filter((j) => !params.has('tag') || (j.tags ?? []).includes(params.get('tag')!))
        .filter((j) => key === null || j.concurrencyKey === key)
        .filter((j) => j.jobId > after);
      const page = matching.slice(0, limit);
      return reply(200, { jobs: page, ...(matching.length > limit ? { nextCursor: page.at(-1)!.jobId } : {}) });
    }
    if (method === 'POST' && path === '/v1/tenants/demo/jobs/cancel') {
      const { concurrencyKey } = JSON.parse(raw) as { concurrencyKey?: unknown };
      if (!validKey(concurrencyKey)) return error(400, 'ValidationError', BAD_KEY);
      const chosen = jobs.filter((j) => j.concurrencyKey === concurrencyKey && j.state === 'SCHEDULED');
      for (const j of chosen) j.state = 'CANCELLED';
      const operationId = `op1.test-${operations.size}`;
      operations.set(operationId, {
        operationId,
        tenant: 'demo',
        kind: 'cancel',
        filter: { concurrencyKey },
        createdAt: new Date(T0).toISOString(),
        state: 'DONE',
        matched: chosen.length,
        cancelled: chosen.length,
        alreadyQueued: 0,
        notCancellable: 0,
      });
      return reply(202, { operationId, state: 'RUNNING' });
    }
    const op = method === 'GET' ? /^\/v1\/tenants\/demo\/operations\/([^/]+)$/.exec(path) : null;
    if (op) return operations.has(op[1]!) ? reply(200, operations.get(op[1]!)) : error(404, 'OperationNotFound', 'no such operation');
    return reply(404, { message: 'Not Found' });
  });
});
afterAll(() => api?.close());

const sdk = () => new DyneinClient({ endpoint: api.endpoint, region: STUB_REGION, credentials: STUB_CREDENTIALS });

describe('listJobs({ concurrencyKey }) and jobs()', () => {
  beforeAll(() => {
    jobs = JOBS.map((j) => ({ ...j }));
  });

  it('sends the key encoded, with the other filters, and reads each keyed job’s key and limit', async () => {
    const page = await sdk().listJobs('demo', { concurrencyKey: KEY, state: 'SCHEDULED', tag: 'eu' });
    expect(page.jobs.map((j) => [j.jobId, j.concurrencyKey, j.concurrencyLimit])).toEqual([
      ['job-001', KEY, 2],
      ['job-006', KEY, 2],
    ]);
    expect(page.nextCursor).toBeUndefined();
    const sent = listings().at(-1)!.url;
    expect(sent).toContain(`concurrencyKey=${encodeURIComponent(KEY)}`);
    expect(Object.fromEntries(query(sent))).toEqual({ state: 'SCHEDULED', tag: 'eu', concurrencyKey: KEY });
  });

  it('jobs() sends the key on every page', async () => {
    const before = listings().length;
    const seen: ListedJob[] = [];
    for await (const j of sdk().jobs('demo', { concurrencyKey: KEY, limit: 2 })) seen.push(j);
    expect(seen.map((j) => j.jobId)).toEqual(['job-001', 'job-004', 'job-005', 'job-006']);
    const pages = listings()
      .slice(before)
      .map((r) => query(r.url));
    expect(pages.map((q) => [q.get('concurrencyKey'), q.get('cursor')])).toEqual([
      [KEY, null],
      [KEY, 'job-004'],
    ]);
  });

  it('a key the API refuses is a ValidationError naming concurrencyKey', async () => {
    const err = await sdk()
      .listJobs('demo', { concurrencyKey: 'a\u0007b' })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).message).toContain('concurrencyKey');
    expect(query(listings().at(-1)!.url).get('concurrencyKey')).toBe('a\u0007b');
  });

  it('cancelJobsAndWait by the key leaves none of its jobs pending in the listing', async () => {
    const done = await sdk().cancelJobsAndWait('demo', { concurrencyKey: KEY }, { pollIntervalMs: 10 });
    expect(done).toMatchObject({ state: 'DONE', cancelled: 3 });
    expect(JSON.parse(api.requests.filter((r) => r.method === 'POST').at(-1)!.body)).toEqual({ concurrencyKey: KEY });
    const left = await sdk().listJobs('demo', { concurrencyKey: KEY, state: 'SCHEDULED' });
    expect(left.jobs).toEqual([]);
    const all = await sdk().listJobs('demo', { concurrencyKey: KEY });
    expect(all.jobs.map((j) => j.state)).toEqual(['CANCELLED', 'CANCELLED', 'QUEUED', 'CANCELLED']);
    // Another key's job is left alone.
    expect((await sdk().listJobs('demo', { concurrencyKey: 'customer-8' })).jobs.map((j) => j.state)).toEqual(['SCHEDULED']);
  });
});

describe('dynein jobs --key', () => {
  let dataDir = '';
  beforeAll(() => {
    jobs = JOBS.map((j) => ({ ...j }));
    dataDir = stubDataDir('dynein-list-by-key-', api.endpoint, 'demo');
  });

  /** `dynein <args>` in process, with local.json pointing at the stub. */
  const run = (...args: string[]) => runMain([...args, '--data-dir', dataDir]);

  it('lists the key’s jobs with the other filters, each line ending with its tags and key', async () => {
    const r = await run('jobs', '--tenant', 'demo', '--key', KEY, '--state', 'SCHEDULED');
    expect([r.code, r.err]).toEqual([0, []]);
    // runAt, state, job id, the schedule (none: an empty column), then the tags and the key.
    expect(r.out).toEqual([
      `2030-01-01T00:01:00.000Z  SCHEDULED  job-001    tags eu  key ${KEY} (limit 2)`,
      `2030-01-01T00:04:00.000Z  SCHEDULED  job-004    key ${KEY} (limit 2)`,
      `2030-01-01T00:06:00.000Z  SCHEDULED  job-006    tags eu  key ${KEY} (limit 2)`,
    ]);
    expect(Object.fromEntries(query(listings().at(-1)!.url))).toEqual({ state: 'SCHEDULED', concurrencyKey: KEY });
  });

  it('names --key in the next page’s command, which lists the next page', async () => {
    const paged = await run('jobs', '--tenant', 'demo', '--key', KEY, '--limit', '2');
    expect(paged.code).toBe(0);
    expect(paged.out.map((l) => l.split(/\s+/)[2])).toEqual(['job-001', 'job-004']);
    expect(paged.err).toEqual([`more: dynein jobs --tenant demo --key '${KEY}' --limit 2 --cursor 'job-004'`]);
    const next = await run('jobs', '--tenant', 'demo', '--key', KEY, '--limit', '2', '--cursor', 'job-004');
    expect(next.out.map((l) => l.split(/\s+/)[2])).toEqual(['job-005', 'job-006']);
    expect(next.err).toEqual([]);
  });

  it('--all --json: every page asked with the key, each job with its key and limit', async () => {
    const before = listings().length;
    const r = await run('jobs', '--tenant', 'demo', '--key', KEY, '--all', '--limit', '2', '--json');
    expect(r.code).toBe(0);
    const listed = (JSON.parse(r.out[0]!) as { jobs: ListedJob[] }).jobs;
    expect(listed.map((j) => [j.jobId, j.concurrencyKey, j.concurrencyLimit])).toEqual(
      ['job-001', 'job-004', 'job-005', 'job-006'].map((id) => [id, KEY, 2]),
    );
    const sent = listings()
      .slice(before)
      .map((l) => query(l.url).get('concurrencyKey'));
    expect(sent).toEqual([KEY, KEY]);
  });

  it('a key the API refuses: one line naming concurrencyKey, exit 1', async () => {
    const r = await run('jobs', '--tenant', 'demo', '--key', 'x'.repeat(129));
    expect([r.code, r.out]).toEqual([1, []]);
    expect(r.err).toHaveLength(1);
    expect(r.err[0]).toMatch(/^dynein: .*concurrencyKey/);
  });
});
