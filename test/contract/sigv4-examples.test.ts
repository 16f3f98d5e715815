import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDocument, ReplyValidator } from './openapi.js';
import { startLocalStack, type LocalJson } from '../support/localStack.js';

/**
 * docs/examples/ against the local stack: the API called from other languages with nothing but
 * their SDK's SigV4 signer, as docs/api.md shows. The Python example runs where Python 3 with
 * botocore is installed (CI's image has both); the Go example where Go and aws-sdk-go-v2 are
 * (Debian: golang-go, golang-github-aws-aws-sdk-go-v2-dev; built in GOPATH mode, no module
 * proxy needed). Elsewhere each is skipped, and says why.
 */
const SCRIPT = 'docs/examples/python/dynein_submit.py';
const GO_EXAMPLE = 'docs/examples/go/main.go';
const GOPATH = '/usr/share/gocode';

function pythonWithBotocore(): string | undefined {
  try {
    execFileSync('python3', ['-c', 'import botocore'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'python3 with botocore is not installed (apt-get install -y python3-botocore, or pip install botocore)';
  }
}
function goWithSdk(): string | undefined {
  if (spawnSync('go', ['version']).status !== 0) return 'go is not installed';
  if (!existsSync(join(GOPATH, 'src/github.com/aws/aws-sdk-go-v2/config')))
    return `aws-sdk-go-v2 is not under ${GOPATH} (apt-get install -y golang-github-aws-aws-sdk-go-v2-dev)`;
  return undefined;
}
const missing = pythonWithBotocore();
if (missing) console.warn(`skipping ${SCRIPT}: ${missing}`);
const missingGo = goWithSdk();
if (missingGo) console.warn(`skipping ${GO_EXAMPLE}: ${missingGo}`);

let stack: Awaited<ReturnType<typeof startLocalStack>> | undefined;
let local: LocalJson;
beforeAll(async () => {
  if (missing && missingGo) return;
  stack = await startLocalStack({ DYNEIN_TENANTS: 'py,go' });
  local = await stack.waitForLocalJson();
}, 60_000);
afterAll(async () => stack?.stop());

/** The example's environment: the local stack's endpoint and a tenant's keys (one per example: they share an idempotency key). */
function exampleEnv(tenant: string): NodeJS.ProcessEnv {
  const keys = local.tenants[tenant]!;
  return {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    DYNEIN_ENDPOINT: local.endpoint,
    DYNEIN_REGION: local.region,
    DYNEIN_TENANT: tenant,
    AWS_ACCESS_KEY_ID: keys.accessKeyId,
    AWS_SECRET_ACCESS_KEY: keys.secretAccessKey,
  };
}

/** The JSON after `prefix` on its line of an example's output. */
const printed = (out: string, prefix: RegExp): unknown => JSON.parse(new RegExp(`^${prefix.source}(.*)$`, 'm').exec(out)![1]!);

/** Runs an example twice: it submits with an idempotency key, then reads the status; the rerun gets the same job. */
function checkExample(tenant: string, run: () => ReturnType<typeof spawnSync>): void {
  const first = run();
  expect(String(first.stderr)).toBe('');
  expect(first.status).toBe(0);
  const out = String(first.stdout);
  expect(out).toMatch(/^submitted \(201\): /m);
  const submitted = printed(out, /submitted \(201\): /) as { jobId: string };
  const status = printed(out, /status: /) as { jobId: string; state: string };
  expect(status.jobId).toBe(submitted.jobId);
  // What the example printed are the API's replies: they match the contract.
  const contract = new ReplyValidator(loadDocument());
  expect(contract.check('POST', `/v1/tenants/${tenant}/jobs`, 201, JSON.stringify(submitted))).toBeUndefined();
  expect(
    contract.check('GET', `/v1/tenants/${tenant}/jobs/${encodeURIComponent(submitted.jobId)}`, 200, JSON.stringify(status)),
  ).toBeUndefined();
  const again = run();
  expect(again.status).toBe(0);
  expect((printed(String(again.stdout), /submitted \(200\): /) as { jobId: string }).jobId).toBe(submitted.jobId);
}

describe.skipIf(missing !== undefined)('the Python example (botocore SigV4)', () => {
  const run = () => spawnSync('python3', [SCRIPT], { env: exampleEnv('py'), encoding: 'utf8', timeout: 30_000 });
  it('submits a job and reads its status; a rerun with the same idempotency key answers 200 with the same job', () => {
    checkExample('py', run);
  }, 60_000);
});

describe.skipIf(missingGo !== undefined)('the Go example (aws-sdk-go-v2 v4.Signer)', () => {
  it('builds, submits a job and reads its status; a rerun with the same idempotency key answers 200 with the same job', () => {
    const dir = mkdtempSync(join(tmpdir(), 'dynein-go-'));
    copyFileSync(GO_EXAMPLE, join(dir, 'main.go'));
    const goEnv = { ...process.env, GO111MODULE: 'off', GOPATH, GOCACHE: join(dir, 'cache'), GOFLAGS: '' };
    execFileSync('go', ['build', '-o', 'example', '.'], { cwd: dir, env: goEnv, stdio: 'pipe' });
    checkExample('go', () => spawnSync(join(dir, 'example'), [], { env: exampleEnv('go'), encoding: 'utf8', timeout: 30_000 }));
  }, 120_000);
});
