import { execFileSync, spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDocument, ReplyValidator } from './openapi.js';
import { startLocalStack, type LocalJson } from '../support/localStack.js';

/**
 * docs/examples/python/dynein_submit.py against the local stack: the API called from another
 * language with nothing but botocore's SigV4 signer, as docs/api.md shows. Runs where Python 3
 * with botocore is installed (CI's Debian image has both); elsewhere it is skipped, and says why.
 */
const SCRIPT = 'docs/examples/python/dynein_submit.py';

function pythonWithBotocore(): string | undefined {
  try {
    execFileSync('python3', ['-c', 'import botocore'], { stdio: 'ignore' });
    return undefined;
  } catch {
    return 'python3 with botocore is not installed (apt-get install -y python3-botocore, or pip install botocore)';
  }
}
const missing = pythonWithBotocore();
if (missing) console.warn(`skipping ${SCRIPT}: ${missing}`);

describe.skipIf(missing !== undefined)('the Python example (botocore SigV4)', () => {
  let stack: Awaited<ReturnType<typeof startLocalStack>>;
  let local: LocalJson;
  beforeAll(async () => {
    stack = await startLocalStack({ DYNEIN_TENANTS: 'demo' });
    local = await stack.waitForLocalJson();
  }, 60_000);
  afterAll(async () => stack?.stop());

  const run = () => {
    const keys = local.tenants.demo!;
    const env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      DYNEIN_ENDPOINT: local.endpoint,
      DYNEIN_REGION: local.region,
      DYNEIN_TENANT: 'demo',
      AWS_ACCESS_KEY_ID: keys.accessKeyId,
      AWS_SECRET_ACCESS_KEY: keys.secretAccessKey,
    };
    return spawnSync('python3', [SCRIPT], { env, encoding: 'utf8', timeout: 30_000 });
  };
  /** The JSON after `prefix` on its line of the script's output. */
  const printed = (out: string, prefix: RegExp): unknown => JSON.parse(new RegExp(`^${prefix.source}(.*)$`, 'm').exec(out)![1]!);

  it('submits a job and reads its status; a rerun with the same idempotency key answers 200 with the same job', () => {
    const first = run();
    expect(first.stderr).toBe('');
    expect(first.status).toBe(0);
    expect(first.stdout).toMatch(/^submitted \(201\): /m);
    const submitted = printed(first.stdout, /submitted \(201\): /) as { jobId: string };
    const status = printed(first.stdout, /status: /) as { jobId: string; state: string };
    expect(status.jobId).toBe(submitted.jobId);
    // What the script printed are the API's replies: they match the contract.
    const contract = new ReplyValidator(loadDocument());
    expect(contract.check('POST', '/v1/tenants/demo/jobs', 201, JSON.stringify(submitted))).toBeUndefined();
    expect(
      contract.check('GET', `/v1/tenants/demo/jobs/${encodeURIComponent(submitted.jobId)}`, 200, JSON.stringify(status)),
    ).toBeUndefined();

    const again = run();
    expect(again.status).toBe(0);
    expect((printed(again.stdout, /submitted \(200\): /) as { jobId: string }).jobId).toBe(submitted.jobId);
  }, 60_000);
});
