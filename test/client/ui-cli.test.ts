import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { main } from '../../client/cli/index.js';
import { STUB_CREDENTIALS, STUB_REGION } from './scheduleStub.js';
import { startUiStub, stubJob, type UiStub } from './uiStub.js';

/** `dynein ui`: its command line, and against a deployed API with credentials from the AWS default chain. */
async function dynein(args: string[]) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, stdout: out.join('\n'), stderr: err.join('\n') };
}

let stub: UiStub;
beforeAll(async () => {
  stub = await startUiStub();
  stub.jobs.push(stubJob('alpha', 1));
});
afterAll(() => stub?.close());

describe('dynein ui', () => {
  it('is in the usage, with its flags', async () => {
    expect((await dynein(['--help'])).stdout).toMatch(/\n {2}ui +open the job browser/);
    const help = await dynein(['ui', '--help']);
    expect(help.code).toBe(0);
    for (const flag of ['--port', '--tenant', '--endpoint', '--region', '--profile', '--data-dir']) expect(help.stdout).toContain(flag);
  });

  it('refuses a bad command line and says why', async () => {
    const port = await dynein(['ui', '--port', 'http']);
    expect(port).toMatchObject({ code: 2, stderr: "dynein: --port must be a port number from 0 to 65535, got 'http'" });
    expect((await dynein(['ui', '--port', '0', '--region', 'eu-west-1'])).stderr).toBe('dynein: --region and --profile go with --endpoint');
    const none = await dynein(['ui', '--data-dir', join(tmpdir(), 'no-such-dynein-dir')]);
    expect(none.code).toBe(1);
    expect(none.stderr).toMatch(/no local stack running .*npx dynein local/);
    const dir = mkdtempSync(join(tmpdir(), 'dynein-ui-'));
    writeFileSync(
      join(dir, 'local.json'),
      JSON.stringify({
        endpoint: stub.endpoint,
        region: STUB_REGION,
        sqsEndpoint: 'http://127.0.0.1:1',
        tenants: { alpha: { ...STUB_CREDENTIALS, queueUrl: 'q', dlqUrl: 'd' } },
      }),
    );
    const unknown = await dynein(['ui', '--data-dir', dir, '--tenant', 'zeta']);
    expect(unknown).toMatchObject({ code: 1, stderr: "dynein: tenant 'zeta' is not in the local stack (it has alpha)" });
    // A port in use.
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
    const taken = (busy.address() as { port: number }).port;
    try {
      const inUse = await dynein(['ui', '--data-dir', dir, '--port', String(taken)]);
      expect(inUse).toMatchObject({ code: 1, stderr: `dynein: port ${taken} is in use: pass another with --port (0 picks a free one)` });
    } finally {
      busy.close();
    }
  });

  it('with --endpoint signs with the AWS default credential chain, in the server only', async () => {
    const proc = spawn(
      process.execPath,
      ['bin/dynein.js', 'ui', '--port', '0', '--endpoint', stub.endpoint, '--region', STUB_REGION, '--tenant', 'alpha'],
      {
        env: {
          ...process.env,
          AWS_ACCESS_KEY_ID: STUB_CREDENTIALS.accessKeyId,
          AWS_SECRET_ACCESS_KEY: STUB_CREDENTIALS.secretAccessKey,
          AWS_PROFILE: '',
          AWS_CONFIG_FILE: '/nonexistent',
          AWS_SHARED_CREDENTIALS_FILE: '/nonexistent',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    try {
      let out = '';
      const url = await new Promise<string>((resolve, reject) => {
        const read = (d: Buffer) => {
          out += d;
          const m = /the job browser is at (http:\/\/127\.0\.0\.1:\d+\/[A-Za-z0-9_-]{32}\/) /.exec(out);
          if (m) resolve(m[1]!);
        };
        proc.stdout!.on('data', read);
        proc.stderr!.on('data', read);
        proc.once('exit', (code) => reject(new Error(`dynein ui exited (${code}): ${out}`)));
      });
      const config = (await (await fetch(`${url}ui/config`)).json()) as Record<string, unknown>;
      expect(config).toMatchObject({ local: false, tenant: 'alpha', tenants: ['alpha'], endpoint: stub.endpoint });
      // The HTTP API's contract, served beside the page (the same document the package ships).
      const spec = await fetch(`${url}openapi.yaml`);
      expect(spec.headers.get('content-type')).toBe('application/yaml; charset=utf-8');
      expect(await spec.text()).toBe(readFileSync('docs/openapi.yaml', 'utf8'));
      const job = await fetch(`${url}api/v1/tenants/alpha/jobs/alpha-job-001`, { headers: { 'x-dynein-ui': '1' } });
      expect(job.status).toBe(200); // the stub verified the SigV4 signature of the environment's key
      expect(((await job.json()) as { state: string }).state).toBe('SCHEDULED');
    } finally {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGINT');
      await exited;
    }
    expect(proc.exitCode).toBe(0);
  });
});
