import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it, vi } from 'vitest';
import { signedFetch, startLocalStack, type LocalJson } from '../support/localStack.js';

/**
 * `npm start`'s life on one data directory, as a user lives it: a second start while one runs,
 * a crash (SIGKILL of every process) and the start after it, Ctrl-C, and files it cannot read.
 */
type Stack = Awaited<ReturnType<typeof startLocalStack>>;
const stacks: Stack[] = [];
afterAll(async () => {
  for (const s of stacks) await s.stop();
});
const start = async (env: Record<string, string>, dataDir?: string) => {
  const s = await startLocalStack(env, { dataDir, npmStart: true });
  stacks.push(s);
  return s;
};

/** Lines `npm start` itself printed (npm's own banner aside). */
const ownLines = (output: string) => output.split('\n').filter((l) => l.startsWith('dynein'));
const STACK_FRAME = /^\s+at .+[:(]/m;

/** Every process in a process group (Linux /proc), with its state. */
function groupMembers(pgid: number): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(fields[2]) === pgid) pids.push(Number(entry));
    } catch {
      // exited while listing
    }
  }
  return pids;
}

/** Gone: no such process, or a zombie waiting to be reaped. */
function gone(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z');
  } catch {
    return true;
  }
}

describe('npm start on one data directory', () => {
  let first: Stack;
  let firstLocal: LocalJson;
  let scheduledJob: string;

  it('refuses a second start with one line, touching nothing of the running stack', async () => {
    first = await start({ DYNEIN_TENANTS: 'alpha' });
    firstLocal = await first.waitForLocalJson();
    await vi.waitFor(() => expect(first.output()).toMatch(/Dynein Serverless is running locally/), { timeout: 10_000, interval: 50 });
    const job = await signedFetch(
      firstLocal.endpoint,
      firstLocal.tenants.alpha!,
      'POST',
      '/v1/tenants/alpha/jobs',
      JSON.stringify({ payload: { keep: 'me' }, delaySeconds: 3_600 }),
    );
    expect(job.status).toBe(201);
    scheduledJob = job.json.jobId;

    const snapshot = () => {
      const file = (f: string) => ({
        bytes: readFileSync(join(first.dataDir, f), 'utf8'),
        mtimeMs: statSync(join(first.dataDir, f)).mtimeMs,
      });
      return {
        local: file('local.json'),
        secrets: file('secrets.json'),
        lock: file('start.lock'),
        entries: readdirSync(first.dataDir).sort(),
      };
    };
    const before = snapshot();

    const second = await start({ DYNEIN_TENANTS: 'alpha' }, first.dataDir);
    expect(await second.exited).not.toBe(0);
    const lines = ownLines(second.output());
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^dynein: another `npm start` \(pid \d+\) is running on the data directory /);
    expect(lines[0]).toContain(first.dataDir);
    expect(second.output()).not.toMatch(STACK_FRAME);

    expect(snapshot()).toEqual(before);
    for (const pid of [firstLocal.pids.services, firstLocal.pids.compute]) expect(gone(pid)).toBe(false);
    // Stored by ingest a moment after submit (UNKNOWN until then).
    await vi.waitFor(
      async () => {
        const status = await signedFetch(firstLocal.endpoint, firstLocal.tenants.alpha!, 'GET', `/v1/tenants/alpha/jobs/${scheduledJob}`);
        expect([status.status, status.json.state]).toEqual([200, 'SCHEDULED']);
      },
      { timeout: 15_000, interval: 200 },
    );
  }, 90_000);

  let second: Stack;
  it('after a crash (every process SIGKILLed), detects the stale local.json and lock and replaces them', async () => {
    const members = groupMembers(first.proc.pid!);
    expect(members).toEqual(expect.arrayContaining([first.proc.pid, firstLocal.pids.services, firstLocal.pids.compute]));
    process.kill(-first.proc.pid!, 'SIGKILL');
    await first.exited;
    await vi.waitFor(() => expect(members.filter((p) => !gone(p))).toEqual([]), { timeout: 10_000, interval: 50 });
    expect(existsSync(join(first.dataDir, 'local.json'))).toBe(true);
    expect(existsSync(join(first.dataDir, 'start.lock'))).toBe(true);
    const secrets = readFileSync(join(first.dataDir, 'secrets.json'), 'utf8');

    second = await start({ DYNEIN_TENANTS: 'alpha' }, first.dataDir);
    const local = await second.waitForLocalJson((l) => l.pids.services !== firstLocal.pids.services, 60_000);
    await vi.waitFor(() => expect(second.output()).toMatch(/Dynein Serverless is running locally/), { timeout: 10_000, interval: 50 });
    expect(ownLines(second.output())[0]).toMatch(
      /^dynein: replaced a stale .*local\.json \(its processes, pids \d+ and \d+, no longer run\)$/,
    );
    expect(readFileSync(join(first.dataDir, 'secrets.json'), 'utf8')).toBe(secrets);
    expect(JSON.parse(readFileSync(join(first.dataDir, 'start.lock'), 'utf8')).pid).not.toBe(undefined);
    // The table survived the SIGKILL (dynalite's files), and the keys did: the job is still there.
    await vi.waitFor(
      async () => {
        const status = await signedFetch(local.endpoint, local.tenants.alpha!, 'GET', `/v1/tenants/alpha/jobs/${scheduledJob}`);
        expect([status.status, status.json.state]).toEqual([200, 'SCHEDULED']);
      },
      { timeout: 15_000, interval: 200 },
    );
  }, 90_000);

  it('stops every process on Ctrl-C, leaving no orphan, no local.json and no lock', async () => {
    const local = second.localJson()!;
    const members = groupMembers(second.proc.pid!);
    expect(members).toEqual(expect.arrayContaining([second.proc.pid, local.pids.services, local.pids.compute]));
    const printedBefore = second.output().length;
    // Ctrl-C in a terminal: SIGINT to the whole foreground process group.
    process.kill(-second.proc.pid!, 'SIGINT');
    await second.exited; // npm itself dies of the SIGINT it got, as in a terminal
    await vi.waitFor(() => expect(members.filter((p) => !gone(p))).toEqual([]), { timeout: 10_000, interval: 50 });
    expect(existsSync(join(second.dataDir, 'local.json'))).toBe(false);
    expect(existsSync(join(second.dataDir, 'start.lock'))).toBe(false);
    const shutdownOutput = second.output().slice(printedBefore);
    expect(shutdownOutput).toMatch(/dynein: stopping/);
    expect(shutdownOutput).not.toMatch(STACK_FRAME);
    expect(shutdownOutput).not.toMatch(/error/i);
  }, 60_000);

  it('stops its children when only the start process is told to stop (SIGTERM to its pid)', async () => {
    const s = await start({ DYNEIN_TENANTS: 'alpha' });
    const local = await s.waitForLocalJson();
    // The start process is the parent of services and compute (npm runs it under a shell).
    const parentOf = (pid: number) => {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    };
    const startPid = parentOf(local.pids.services);
    expect(parentOf(local.pids.compute)).toBe(startPid);
    process.kill(startPid, 'SIGTERM');
    await vi.waitFor(() => expect([startPid, local.pids.services, local.pids.compute].filter((p) => !gone(p))).toEqual([]), {
      timeout: 15_000,
      interval: 50,
    });
    await s.exited;
  }, 60_000);
});

describe('npm start with files it cannot read', () => {
  const cases: { name: string; file: string; content: string; says: RegExp }[] = [
    {
      name: 'secrets.json that is not JSON',
      file: 'secrets.json',
      content: '{"idKey": "x", ',
      says: /secrets\.json is not valid JSON \(.+\): restore it from a backup, or delete it to generate new keys/,
    },
    {
      name: 'secrets.json of the wrong shape',
      file: 'secrets.json',
      content: '{"idKey": 5, "tenants": {}}',
      says: /secrets\.json is not usable \("idKey" must be base64 of at least 32 bytes\): restore it/,
    },
    {
      name: 'local.json that is not JSON',
      file: 'local.json',
      content: '{"endpoint": ',
      says: /local\.json is not valid JSON \(.+\): delete it and run npm start again/,
    },
  ];
  for (const c of cases) {
    it(`stops at a ${c.name} with one line naming the file and the fix, changing nothing`, async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'dynein-e2e-'));
      writeFileSync(join(dataDir, c.file), c.content);
      const s = await start({ DYNEIN_TENANTS: 'alpha' }, dataDir);
      expect(await s.exited).not.toBe(0);
      const lines = ownLines(s.output());
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(c.says);
      expect(lines[0]).toContain(join(dataDir, c.file));
      expect(s.output()).not.toMatch(STACK_FRAME);
      expect(readFileSync(join(dataDir, c.file), 'utf8')).toBe(c.content);
      expect(readdirSync(dataDir).sort()).toEqual([c.file]);
    }, 30_000);
  }
});
