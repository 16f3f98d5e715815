import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { SQSClient } from '@aws-sdk/client-sqs';

export interface LocalJson {
  endpoint: string;
  region: string;
  sqsEndpoint: string;
  dynamodbEndpoint: string;
  pids: { services: number; compute: number };
  tenants: Record<string, { accessKeyId: string; secretAccessKey: string; queueUrl: string; dlqUrl: string }>;
  /** The operator key (the admin routes only). */
  admin?: { accessKeyId: string; secretAccessKey: string };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * The start file the system tests' global setup bundled from this checkout's sources
 * (test/support/testBuild.ts), when this runs in one of them; otherwise none.
 */
async function testBuildStart(): Promise<string | undefined> {
  if (!process.env.VITEST) return undefined;
  const { inject } = await import('vitest');
  return inject('testBuild')?.localStart;
}

/**
 * The size the system tests' stacks run at unless a test's `env` says otherwise: 8 shards in 2
 * groups rather than 64 in 8. An idle stack's dispatch reads every shard each step: at the
 * default size it costs about 0.16 of a core doing nothing, at this one 0.04, and the suite runs
 * two dozen stacks on two cores. The default size runs in the `npmStart` tests and the benchmark.
 */
const TEST_SIZE = { DYNEIN_SHARDS: '8', DYNEIN_GROUPS: '2' };

/**
 * The local stack in its own process group, with a fresh data directory, on any free port
 * (local.json names it: no port picked here that another process could take first): in the system tests, the
 * bundles of this checkout's sources on plain node (as `dynein local` runs them: the same start,
 * services and compute processes, without tsx's cost), at {@link TEST_SIZE}; with `npmStart`, and
 * everywhere else (the benchmark), `npm start` as a user runs it, at the default size.
 */
export async function startLocalStack(
  env: Record<string, string>,
  opts: { dataDir?: string; npmStart?: boolean } = {},
): Promise<{
  proc: ChildProcess;
  dataDir: string;
  output: () => string;
  exited: Promise<number | null>;
  localJson: () => LocalJson | undefined;
  waitForLocalJson(pred?: (l: LocalJson) => boolean, timeoutMs?: number): Promise<LocalJson>;
  stop(): Promise<void>;
}> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), 'dynein-e2e-'));
  let out = '';
  const built = opts.npmStart ? undefined : await testBuildStart();
  const [command, args] = built ? [process.execPath, ['--enable-source-maps', built]] : ['npm', ['start']];
  const proc = spawn(command, args, {
    cwd: process.cwd(),
    env: { ...process.env, ...(built ? TEST_SIZE : {}), DYNEIN_DATA_DIR: dataDir, DYNEIN_PORT: '0', ...env },
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  proc.stdout!.on('data', (d) => (out += d));
  proc.stderr!.on('data', (d) => (out += d));
  // Resolves with the exit code once the start process has exited and its output pipes are drained.
  const exited = new Promise<number | null>((resolve) => proc.once('close', (code) => resolve(code)));
  const file = join(dataDir, 'local.json');
  const read = () => (existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as LocalJson) : undefined);
  return {
    proc,
    dataDir,
    exited,
    output: () => out,
    localJson: read,
    async waitForLocalJson(pred = () => true, timeoutMs = 30_000) {
      const until = Date.now() + timeoutMs;
      for (;;) {
        let l: LocalJson | undefined;
        try {
          l = read();
        } catch {
          l = undefined; // never half-written (atomic rename), but be safe
        }
        if (l && pred(l)) return l;
        if (Date.now() > until) throw new Error(`local.json not ready after ${timeoutMs} ms; output:\n${out}`);
        if (proc.exitCode !== null) throw new Error(`the local stack exited (${proc.exitCode}); output:\n${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    },
    async stop() {
      const running = () => proc.exitCode === null && proc.signalCode === null;
      const signal = (s: NodeJS.Signals) => {
        try {
          process.kill(-proc.pid!, s);
        } catch {
          // the group is gone already
        }
      };
      if (!running()) return;
      const exited = new Promise((r) => proc.once('exit', r));
      signal('SIGINT');
      await Promise.race([exited, new Promise((r) => setTimeout(r, 8_000))]);
      if (running()) signal('SIGKILL');
    },
  };
}

/** An SQS client of the stack's queue service (fauxqs), as local.json names it: any credentials do. */
export function localSqs(local: Pick<LocalJson, 'sqsEndpoint' | 'region'>): SQSClient {
  return new SQSClient({ endpoint: local.sqsEndpoint, region: local.region, credentials: { accessKeyId: 'x', secretAccessKey: 'x' } });
}

/** A SigV4-signed request to the API (service execute-api), as the SDK and curl sign it. */
export async function signedFetch(
  endpoint: string,
  creds: { accessKeyId: string; secretAccessKey: string },
  method: string,
  path: string,
  body?: string,
  opts: {
    region?: string;
    tamper?: (headers: Record<string, string>, body: string | undefined) => string | undefined;
    date?: Date;
    sessionToken?: string;
  } = {},
): Promise<{ status: number; json: any; headers: Headers }> {
  const url = new URL(path, endpoint);
  const credentials = opts.sessionToken ? { ...creds, sessionToken: opts.sessionToken } : creds;
  const signer = new SignatureV4({
    service: 'execute-api',
    region: opts.region ?? 'us-east-1',
    credentials,
    sha256: Hash.bind(null, 'sha256'),
  });
  const request = await signer.sign(
    {
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      port: Number(url.port),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: { host: url.host, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      body,
    },
    opts.date ? { signingDate: opts.date } : undefined,
  );
  const headers = { ...(request.headers as Record<string, string>) };
  delete headers.host;
  const sent = opts.tamper ? opts.tamper(headers, body) : body;
  const res = await fetch(url, { method, headers, body: sent });
  const text = await res.text();
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = text;
  }
  return { status: res.status, json, headers: res.headers };
}
