import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DyneinClient, type JobDebounce } from '../../client/index.js';
import { STUB_CREDENTIALS, STUB_REGION, startSignedStub } from '../support/signedStub.js';
import { bashOffers, runMain, stubDataDir } from './support.js';

/**
 * Debounce (issue #26), the client's side: the SDK sends `debounce` without `runAt` or an
 * idempotency key and reads `debounced` and `debounceKey` back; `dynein schedule --debounce-key
 * --debounce-period [--debounce-max-wait]` builds that body, refuses the combinations the API
 * refuses before sending anything, and says on stderr whether the submit replaced the key's
 * pending job; `dynein show` prints a job's debounce key. The API is a signed stub that records
 * every request and answers a debounced submit as the route does: 201 `debounced: false` for a
 * key's first submit, then 200 `debounced: true` with the same job id. The server's side:
 * test/integration (debounce on the emulators).
 */

let api: Awaited<ReturnType<typeof startSignedStub>>;
/** The pending job of each debounce key (tenant/key), as the stub keeps it. */
const pending = new Map<string, string>();

beforeAll(async () => {
  api = await startSignedStub(({ method, path, raw, reply }) => {
    const m = /^\/v1\/tenants\/([^/]+)\/jobs(?:\/([^/]+))?$/.exec(path);
    if (!m) return reply(404, { message: 'Not Found' });
    const tenant = m[1]!;
    const rest = m[2];
    if (method === 'POST' && rest === undefined) {
      const body = JSON.parse(raw) as { runAt?: string; debounce?: JobDebounce };
      if (body.debounce === undefined)
        return reply(201, { jobId: `job-${api.requests.length}`, tenant, runAt: body.runAt, state: 'SCHEDULED' });
      const runAt = new Date(Date.now() + body.debounce.periodSeconds * 1000).toISOString();
      const slot = `${tenant}/${body.debounce.key}`;
      const existing = pending.get(slot);
      if (existing !== undefined) return reply(200, { jobId: existing, tenant, runAt, state: 'SCHEDULED', debounced: true });
      const jobId = `deb-${api.requests.length}`;
      pending.set(slot, jobId);
      return reply(201, { jobId, tenant, runAt, state: 'SCHEDULED', debounced: false });
    }
    if (method === 'GET' && rest !== undefined)
      return reply(200, { jobId: rest, tenant, runAt: '2030-01-01T00:00:30.000Z', state: 'SCHEDULED', debounceKey: 'profile-7' });
    return reply(404, { message: 'Not Found' });
  });
});
afterAll(async () => {
  await api?.close();
});

const sdk = () => new DyneinClient({ endpoint: api.endpoint, region: STUB_REGION, credentials: STUB_CREDENTIALS });

/** The raw bodies of the submits (`POST .../jobs`) of one tenant since request `from`. */
const submits = (tenant: string, from = 0): string[] =>
  api.requests.slice(from).flatMap((r) => (r.method === 'POST' && r.url === `/v1/tenants/${tenant}/jobs` ? [r.body] : []));

const unique = (prefix: string) => `${prefix}-${Math.random().toString(36).slice(2, 10)}`;

describe('SDK', () => {
  it('schedule sends debounce without runAt or an idempotency key; the reply says whether it replaced the pending job; get reads debounceKey', async () => {
    const client = sdk();
    const key = unique('profile');
    const from = api.requests.length;
    const first = await client.schedule('demo', { payload: { n: 1 }, debounce: { key, periodSeconds: 30 } });
    const second = await client.schedule('demo', {
      payload: { n: 2 },
      debounce: { key, periodSeconds: 30, maxWaitSeconds: 300 },
      priority: 7,
      tags: ['profiles'],
    });
    expect(submits('demo', from)).toEqual([
      `{"payload":{"n":1},"debounce":{"key":"${key}","periodSeconds":30}}`,
      `{"payload":{"n":2},"debounce":{"key":"${key}","periodSeconds":30,"maxWaitSeconds":300},"priority":7,"tags":["profiles"]}`,
    ]);
    expect(first).toMatchObject({ state: 'SCHEDULED', debounced: false });
    expect(second).toMatchObject({ jobId: first.jobId, state: 'SCHEDULED', debounced: true });

    const status = await client.get('demo', first.jobId);
    expect(status.debounceKey).toBe('profile-7');

    // A job without debounce still gets its absolute runAt and an idempotency key, and no debounce field.
    const plainFrom = api.requests.length;
    const plain = await client.schedule('demo', { payload: null, delaySeconds: 60 });
    const [body] = submits('demo', plainFrom).map((b) => JSON.parse(b) as Record<string, unknown>);
    expect(Object.keys(body!).sort()).toEqual(['idempotencyKey', 'payload', 'runAt']);
    expect(plain).not.toHaveProperty('debounced');
  });
});

describe('dynein schedule --debounce-key', () => {
  let dataDir = '';
  beforeAll(() => {
    dataDir = stubDataDir('dynein-debounce-cli-', api.endpoint, 'demo');
  });

  /** `dynein <args>` in process, with local.json pointing at the stub (but for `completion`, which takes no options). */
  const run = (...args: string[]) => runMain(args[0] === 'completion' ? args : [...args, '--data-dir', dataDir]);
  const schedule = (...flags: string[]) => run('schedule', '--tenant', 'demo', ...flags);

  it('sends the key, the period and the max wait as debounce, without runAt or an idempotency key', async () => {
    const [a, b, c] = [unique('k'), unique('k'), unique('k')];
    const from = api.requests.length;
    expect((await schedule('--debounce-key', a, '--debounce-period', '30', '--payload', '{"n":1}')).code).toBe(0);
    expect((await schedule('--debounce-key', b, '--debounce-period', '1.5', '--debounce-max-wait', '5m', '--tag', 'x')).code).toBe(0);
    expect((await schedule('--debounce-key', c, '--debounce-period', '2m', '--debounce-max-wait', '3600')).code).toBe(0);
    expect(submits('demo', from)).toEqual([
      `{"payload":{"n":1},"debounce":{"key":"${a}","periodSeconds":30}}`,
      `{"payload":null,"debounce":{"key":"${b}","periodSeconds":1.5,"maxWaitSeconds":300},"tags":["x"]}`,
      `{"payload":null,"debounce":{"key":"${c}","periodSeconds":120,"maxWaitSeconds":3600}}`,
    ]);
  });

  it('prints the job id on stdout and on stderr whether it replaced the pending job; with --json the reply as is', async () => {
    const key = unique('profile');
    const first = await schedule('--debounce-key', key, '--debounce-period', '30', '--payload', '{"n":1}');
    expect(first.code).toBe(0);
    expect(first.out).toHaveLength(1);
    const jobId = first.out[0]!;
    expect(jobId).toMatch(/^deb-\d+$/);
    expect(first.err).toHaveLength(1);
    expect(first.err[0]).toMatch(new RegExp(`^scheduled ${jobId} for debounce key ${key}: due \\d{4}-`));

    const again = await schedule('--debounce-key', key, '--debounce-period', '30', '--payload', '{"n":2}');
    expect(again).toMatchObject({ code: 0, out: [jobId] });
    expect(again.err).toHaveLength(1);
    expect(again.err[0]).toMatch(new RegExp(`^replaced the pending job of debounce key ${key}: ${jobId} now due \\d{4}-`));

    const json = await schedule('--debounce-key', key, '--debounce-period', '30', '--json');
    expect(json).toMatchObject({ code: 0, err: [] });
    expect(JSON.parse(json.out.join(''))).toEqual({
      jobId,
      tenant: 'demo',
      runAt: expect.any(String),
      state: 'SCHEDULED',
      debounced: true,
    });

    const fresh = await schedule('--debounce-key', unique('profile'), '--debounce-period', '30', '--json');
    expect(JSON.parse(fresh.out.join(''))).toMatchObject({ debounced: false });

    // Without --debounce-key: the id alone, as before.
    const plain = await schedule('--in', '1h');
    expect(plain).toMatchObject({ code: 0, err: [] });
    expect(plain.out).toHaveLength(1);
  });

  it.each([
    [['--debounce-key', 'k'], /^dynein: --debounce-key needs --debounce-period <seconds>/],
    [['--debounce-period', '30'], /^dynein: --debounce-period needs --debounce-key/],
    [['--debounce-max-wait', '60', '--in', '1h'], /^dynein: --debounce-max-wait needs --debounce-key/],
    [
      ['--debounce-key', 'k', '--debounce-period', '30', '--in', '1h'],
      /^dynein: --debounce-key takes no --in: a debounced job is due --debounce-period/,
    ],
    [['--debounce-key', 'k', '--debounce-period', '30', '--at', '2030-01-01T00:00:00Z'], /^dynein: --debounce-key takes no --at:/],
    [
      ['--debounce-key', 'k', '--debounce-period', '30', '--at', '2030-01-01T00:00:00Z', '--in', '1h'],
      /^dynein: --debounce-key takes no --at or --in:/,
    ],
    [
      ['--debounce-key', 'k', '--debounce-period', '30', '--idempotency-key', 'i'],
      /--debounce-key and --idempotency-key cannot be combined/,
    ],
    [['--debounce-key', 'k', '--debounce-period', '30', '--not-cancellable'], /--debounce-key and --not-cancellable cannot be combined/],
    [['--debounce-key', 'k', '--debounce-period', '30', '--key', 'c'], /--debounce-key and --key cannot be combined yet/],
    [['--debounce-key', 'k', '--debounce-period', '30', '--limit', '2'], /--debounce-key and --limit cannot be combined yet/],
    [['--debounce-key', 'k', '--debounce-period', '0'], /--debounce-period must be from 1 to 86400 seconds, got '0'/],
    [['--debounce-key', 'k', '--debounce-period', '86401'], /--debounce-period must be from 1 to 86400 seconds/],
    [['--debounce-key', 'k', '--debounce-period', '2d'], /--debounce-period must be from 1 to 86400 seconds, got '2d'/],
    [['--debounce-key', 'k', '--debounce-period', 'soon'], /^dynein: --debounce-period 'soon' is not a duration/],
    [['--debounce-key', 'k', '--debounce-period', ''], /^dynein: --debounce-period '' is not a duration/],
    [['--debounce-key', 'k', '--debounce-period=-5'], /^dynein: --debounce-period '-5' is not a duration/],
    [
      ['--debounce-key', 'k', '--debounce-period', '60', '--debounce-max-wait', '30'],
      /--debounce-max-wait must be from 60 to 604800 seconds, got '30'/,
    ],
    [
      ['--debounce-key', 'k', '--debounce-period', '60', '--debounce-max-wait', '8d'],
      /--debounce-max-wait must be from 60 to 604800 seconds/,
    ],
  ])('refuses %j: one line, exit 2, nothing sent', async (flags, reason) => {
    const from = api.requests.length;
    const r = await schedule(...flags);
    expect(r).toMatchObject({ code: 2, out: [] });
    expect(r.err).toHaveLength(1);
    expect(r.err[0]).toMatch(reason);
    expect(api.requests.length).toBe(from);
  });

  it('lists the debounce flags in its help and its completion; show prints a job’s debounce key', async () => {
    const help = (await run('schedule', '--help')).out.join('\n');
    expect(help).toMatch(/--debounce-key <key> --debounce-period <seconds>/);
    expect(help).toMatch(/^\s+--debounce-key <key>\s+\S/m);
    expect(help).toMatch(/^\s+--debounce-period <seconds>\s+with --debounce-key/m);
    expect(help).toMatch(/^\s+--debounce-max-wait <seconds>\s+with --debounce-key/m);

    const completion = await run('completion', 'bash');
    expect(completion.code).toBe(0);
    const offered = bashOffers(completion.out.join('\n'), dataDir);
    expect(offered('schedule', '--debounce-')).toEqual(['--debounce-key', '--debounce-period', '--debounce-max-wait']);

    const shown = await run('show', '--tenant', 'demo', 'deb-1');
    expect(shown.code).toBe(0);
    expect(shown.out).toContain('  debounceKey  profile-7');
    expect(shown.out).toContain('  runAt  2030-01-01T00:00:30.000Z');
  });
});
