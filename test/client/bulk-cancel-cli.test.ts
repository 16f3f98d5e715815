import { mkdtempSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Operation } from '../../client/apiTypes.js';
import { main } from '../../client/cli/index.js';
import { DyneinClient } from '../../client/client.js';
import { DyneinApiError, ValidationError } from '../../client/errors.js';
import { cancelHandler, statusHandler } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { serveApi } from '../support/localApi.js';
import { createSystem, submitJobs, type TestSystem } from '../support/system.js';

/**
 * Bulk cancel from the client side (docs/flow-control.md "Bulk cancel"): the SDK's cancelJobs,
 * operation and cancelJobsAndWait, and `dynein jobs cancel` / `dynein operation` in process
 * (bin/dynein.js's main()), against the cancel and status handlers behind the local API server on
 * the emulators, through a local.json pointing at it; ingest runs the operations' passes. Every
 * reply is checked against docs/openapi.yaml (test/contract/replies.setup.ts).
 */
let em: Emulators;
let sys: TestSystem;
let server: Server;
let endpoint: string;
const dataDir = mkdtempSync(join(tmpdir(), 'dynein-bulk-cancel-'));
const keys = { demo: { accessKeyId: 'AKIDDEMO', secretAccessKey: 'demo-secret' } };
const HOUR = 3_600_000;

beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em, { tenants: ['demo'] });
  ({ server, endpoint } = await serveApi(em, sys, {
    keys,
    handlers: { status: statusHandler(sys.w), cancel: cancelHandler(sys.w) },
    dataDir,
    localTenants: ['demo'],
  }));
});
afterAll(async () => {
  server?.close();
  await em?.stop();
});

const api = () => new DyneinClient({ endpoint, region: 'us-east-1', credentials: keys.demo });

/** The CLI in process; `onErr` sees each stderr line as it is printed. */
async function run(args: string[], onErr: (line: string) => void = () => {}): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...args, '--data-dir', dataDir], {
    out: (l) => out.push(...l.split('\n')),
    err: (l) => {
      err.push(l);
      onErr(l);
    },
  });
  return { code, out, err };
}

/** Submits `n` jobs due in an hour with the fields of `job` (ingest running) and waits until every one is stored. */
async function storedJobs(n: number, job: object): Promise<string[]> {
  const runAt = new Date(Date.now() + HOUR).toISOString();
  const ids = (
    await submitJobs(
      sys,
      'demo',
      Array.from({ length: n }, (_, i) => ({ payload: i, runAt, ...job })),
    )
  ).map((r) => r.jobId);
  const until = Date.now() + 20_000;
  while (!(await states(ids)).every((s) => s === 'SCHEDULED')) {
    if (Date.now() > until) throw new Error('jobs not stored in 20 s');
    await new Promise((r) => setTimeout(r, 100));
  }
  return ids;
}

/**
 * Stops ingest and lets its last long poll (1 s) end on the emulator's side: a message sent to the
 * inbound queue before then could be handed to that receive, abandoned, and hidden for the queue's
 * 30 s visibility timeout.
 */
async function stopIngest(ingest: { stop(): Promise<void> }): Promise<void> {
  await ingest.stop();
  await new Promise((r) => setTimeout(r, 1_500));
}

const states = (ids: readonly string[]) => Promise.all(ids.map(async (id) => (await api().get('demo', id)).state));

/**
 * One at a time: a test stops ingest to hold its operation RUNNING, and the operations' passes of
 * one test are the other's ingest work.
 */
describe('bulk cancel from the SDK and the CLI', () => {
  it('SDK: cancelJobsAndWait cancels the tagged jobs, reports progress, and answers the DONE operation; operation reads it again', async () => {
    const ingest = sys.startIngest();
    try {
      const tagged = await storedJobs(40, { tags: ['sdk-42'] });
      const fixed = await storedJobs(1, { tags: ['sdk-42'], cancellable: false });
      const others = await storedJobs(5, { tags: ['sdk-7'] });
      const seen: Operation[] = [];
      const done = await api().cancelJobsAndWait('demo', { tag: 'sdk-42' }, { onProgress: (op) => seen.push(op), pollIntervalMs: 200 });
      // Every job was stored before the request: DONE counts them all.
      expect(done).toMatchObject({
        tenant: 'demo',
        kind: 'cancel',
        filter: { tag: 'sdk-42' },
        state: 'DONE',
        matched: 41,
        cancelled: 40,
        alreadyQueued: 0,
        notCancellable: 1,
      });
      expect(done.operationId).toMatch(/^op1\.[A-Za-z0-9_-]{22}$/);
      expect(seen.at(-1)).toEqual(done);
      expect(seen.slice(0, -1).every((op) => op.state === 'RUNNING')).toBe(true);
      expect(await api().operation('demo', done.operationId)).toEqual(done);
      expect(await states(tagged)).toEqual(tagged.map(() => 'CANCELLED'));
      expect(await states([...fixed, ...others])).toEqual(Array(6).fill('SCHEDULED'));
      expect(Date.parse(done.createdAt)).toBeLessThanOrEqual(Date.now());
    } finally {
      await stopIngest(ingest);
    }
  });

  it('SDK: a due-time range with Dates; refusals are typed errors', async () => {
    const started = await api().cancelJobs('demo', {
      state: 'SCHEDULED',
      from: new Date(Date.parse('2031-01-01T00:00:00.5Z')),
      to: '2031-01-02T00:00:00Z',
    });
    expect(started).toEqual({ operationId: expect.stringMatching(/^op1\./), state: 'RUNNING' });
    const op = await api().operation('demo', started.operationId);
    expect(op.filter).toEqual({ state: 'SCHEDULED', from: '2031-01-01T00:00:00.500Z', to: '2031-01-02T00:00:00.000Z' });

    await expect(api().cancelJobs('demo', {} as never)).rejects.toThrow(ValidationError);
    await expect(api().cancelJobs('demo', { tag: 'a', state: 'SCHEDULED' } as never)).rejects.toThrow(/given together/);
    await expect(api().cancelJobs('demo', { state: 'SCHEDULED', from: new Date(NaN) })).rejects.toMatchObject({ source: 'client' });
    await expect(api().operation('demo', 'nope')).rejects.toThrow(ValidationError);
    const unknown = await api()
      .operation('demo', 'op1.AAAAAAAAAAAAAAAAAAAAAA')
      .catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(DyneinApiError);
    expect(unknown).toMatchObject({ status: 404, code: 'OperationNotFound' });
  });

  it('CLI: jobs cancel prints the operation id and progress on stderr while it runs, then the summary on stdout; operation prints it', async () => {
    let ingest = sys.startIngest();
    const ids = await storedJobs(30, { tags: ['cli-42'] });
    // Ingest stopped: the operation stays RUNNING (its passes wait in the inbound queue) until a progress line was printed.
    await stopIngest(ingest);
    let resumed = false;
    const runs = run(['jobs', 'cancel', '--tenant', 'demo', '--tag', 'cli-42'], (line) => {
      if (!resumed && line.startsWith('cancelling: ')) {
        resumed = true;
        ingest = sys.startIngest();
      }
    });
    try {
      const cancelled = await runs;
      expect(cancelled.code).toBe(0);
      const operationId = /^started (op1\.\S+) \(dynein operation --tenant demo \1 shows it\)$/.exec(cancelled.err[0]!)?.[1];
      expect(operationId, cancelled.err[0]).toBeDefined();
      expect(cancelled.err[1]).toBe('cancelling: matched 0, cancelled 0, already queued 0, not cancellable 0');
      expect(
        cancelled.err.slice(1).every((l) => /^cancelling: matched \d+, cancelled \d+, already queued 0, not cancellable 0$/.test(l)),
      ).toBe(true);
      expect(cancelled.out).toEqual([`DONE  ${operationId}  matched 30, cancelled 30, already queued 0, not cancellable 0`]);
      expect(await states(ids)).toEqual(ids.map(() => 'CANCELLED'));

      const shown = await run(['operation', '--tenant', 'demo', operationId!]);
      expect(shown.code).toBe(0);
      expect(shown.out).toEqual([
        expect.stringMatching(
          new RegExp(
            `^DONE  ${operationId!.replace(/\./g, '\\.')}  tag cli-42  created \\S+Z  matched 30, cancelled 30, already queued 0, not cancellable 0$`,
          ),
        ),
      ]);
      expect(JSON.parse((await run(['operation', '--tenant', 'demo', operationId!, '--json'])).out[0]!)).toMatchObject({
        operationId,
        state: 'DONE',
        matched: 30,
      });

      // --no-wait: the id alone (with --json the 202 reply); a second cancel of the same tag finds nothing pending.
      const started = await run(['jobs', 'cancel', '--tenant', 'demo', '--tag', 'cli-42', '--no-wait']);
      expect([started.code, started.err]).toEqual([0, []]);
      expect(started.out).toEqual([expect.stringMatching(/^op1\.[A-Za-z0-9_-]{22}$/)]);
      const json = await run(['jobs', 'cancel', '--tenant', 'demo', '--tag', 'cli-42', '--no-wait', '--json']);
      expect(JSON.parse(json.out[0]!)).toEqual({ operationId: expect.stringMatching(/^op1\./), state: 'RUNNING' });
      const again = await run(['jobs', 'cancel', '--tenant', 'demo', '--tag', 'cli-42', '--json']);
      expect(JSON.parse(again.out[0]!)).toMatchObject({ state: 'DONE', matched: 0, filter: { tag: 'cli-42' } });
    } finally {
      await runs.catch(() => undefined);
      await stopIngest(ingest);
    }
  });

  it('CLI: on a terminal the progress is one line redrawn, ended once DONE', async () => {
    const out: string[] = [];
    const err: string[] = [];
    const drawn: string[] = [];
    let ingest: { stop(): Promise<void> } | undefined;
    const code = await main(
      ['jobs', 'cancel', '--tenant', 'demo', '--scheduled', '--from', '2032-01-01T00:00:00Z', '--data-dir', dataDir],
      {
        out: (l) => out.push(l),
        err: (l) => err.push(l),
        progress: (l) => {
          drawn.push(l);
          // Ingest runs the passes only once a line was drawn (the operation was RUNNING).
          if (drawn.length === 1) ingest = sys.startIngest();
        },
      },
    );
    try {
      expect(code).toBe(0);
      expect(drawn[0]).toBe('cancelling: matched 0, cancelled 0, already queued 0, not cancellable 0');
      expect(err).toEqual([expect.stringMatching(/^started op1\./), '']);
      expect(out).toEqual([expect.stringMatching(/^DONE {2}op1\.\S+ {2}matched 0, cancelled 0, already queued 0, not cancellable 0$/)]);
    } finally {
      if (ingest) await stopIngest(ingest);
    }
  });

  it('CLI: a bad command line is one line on stderr and exit 2, nothing sent; an unknown operation exit 1', async () => {
    const bad: [string[], RegExp][] = [
      [
        ['jobs', 'cancel', '--tenant', 'demo'],
        /^dynein: jobs cancel needs what to cancel: --tag <tag>, --key <key>, --debounce-key <key> or --scheduled/,
      ],
      [['jobs', 'cancel', '--tenant', 'demo', '--tag', 'a', '--key', 'b'], /not --tag and --key; nothing was sent$/],
      [['jobs', 'cancel', '--tenant', 'demo', '--debounce-key', 'a', '--scheduled'], /not --debounce-key and --scheduled/],
      [['jobs', 'cancel', '--tenant', 'demo', '--tag', 'a', '--from', '2030-01-01T00:00:00Z'], /--from and --to go with --scheduled only/],
      [['jobs', 'cancel', '--tenant', 'demo', '--scheduled', '--to', 'tomorrow'], /--to 'tomorrow' is not an RFC 3339 time/],
      [['jobs', 'cancel', '--tenant', 'demo', '--tags', 'a'], /Unknown option '--tags' \(see `dynein jobs cancel --help`\)/],
      [['jobs', 'cancel', '--tenant', 'demo', '--tag', 'a', 'b'], /jobs cancel takes no argument 'b'/],
      [['jobs', 'cancel', '--tag', 'a'], /jobs cancel needs --tenant <name>/],
      [['jobs', 'purge', '--tenant', 'demo'], /unknown jobs command 'purge': one of cancel/],
      [['operation', '--tenant', 'demo'], /operation needs one operation id/],
      [['operation', '--tenant', 'demo', 'a', 'b'], /operation needs one operation id \(as dynein jobs cancel printed it\), got 2/],
    ];
    for (const [args, pattern] of bad) {
      const r = await run(args);
      expect([r.code, r.out, r.err.length], args.join(' ')).toEqual([2, [], 1]);
      expect(r.err[0], args.join(' ')).toMatch(pattern);
    }
    // The API's refusals: exit 1, one line with the code.
    const refused = await run(['jobs', 'cancel', '--tenant', 'demo', '--tag', '']);
    expect([refused.code, refused.out]).toEqual([1, []]);
    expect(refused.err).toEqual([expect.stringMatching(/^dynein: ValidationError \(HTTP 400\): tag must be a string of 1 to 64/)]);
    const unknown = await run(['operation', '--tenant', 'demo', 'op1.AAAAAAAAAAAAAAAAAAAAAA']);
    expect([unknown.code, unknown.out]).toEqual([1, []]);
    expect(unknown.err).toEqual([expect.stringMatching(/^dynein: OperationNotFound \(HTTP 404\): /)]);
    // The listing still runs without a subcommand (with flags only it takes: --limit's value is no subcommand), and --help shows both.
    const listed = await run(['jobs', '--tenant', 'demo', '--limit', '5', '--order', 'desc', '--tag', 'nothing-has-this']);
    expect([listed.code, listed.out, listed.err]).toEqual([0, [], ['no jobs of tenant demo match']]);
    const help = await run(['jobs', '--help']);
    expect(help.out.join('\n')).toMatch(
      /Usage: dynein jobs --tenant <name> \[--state <S>\][\s\S]*Commands:\n {2}cancel {2}cancel every job/,
    );
  });
});
