import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startUiServer, type UiServer } from '../../client/ui/server.js';
import { STUB_CREDENTIALS, STUB_REGION } from './scheduleStub.js';
import { startUiStub, stubJob, type UiStub } from './uiStub.js';

/**
 * The `dynein ui` server's proxy on its own (no browser): the per-run token every request needs,
 * loopback only, Host and Origin of this machine's page only, and request bodies forwarded as the
 * bytes received.
 */
let stub: UiStub;
let ui: UiServer;
beforeAll(async () => {
  stub = await startUiStub();
  stub.jobs.push(stubJob('alpha', 1));
  ui = await startUiServer({
    endpoint: stub.endpoint,
    region: STUB_REGION,
    credentialsFor: () => STUB_CREDENTIALS,
    tenants: ['alpha'],
    tenant: 'alpha',
    local: true,
  });
});
afterAll(async () => {
  await ui?.close();
  await stub?.close();
});

const origin = () => new URL(ui.url).origin;

/** A raw HTTP request (so that Host and Origin are as given), its status and body. */
function raw(
  url: string,
  opts: { method?: string; headers?: Record<string, string>; chunks?: readonly Buffer[] } = {},
): Promise<{ status: number; body: string; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = request(url, { method: opts.method ?? 'GET', headers: opts.headers ?? {} }, (res) => {
      const got: Buffer[] = [];
      res.on('data', (c: Buffer) => got.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: Buffer.concat(got).toString('utf8'), headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('the job browser server’s token', () => {
  it('is a random URL-safe token of 32 characters, the first path segment of the URL it prints; it listens on loopback only', async () => {
    expect(ui.url).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/[A-Za-z0-9_-]{32}\/$/);
    expect(ui.url).toContain(`/${ui.token}/`);
    expect((ui.server.address() as AddressInfo).address).toBe('127.0.0.1');
    const another = await startUiServer({
      endpoint: stub.endpoint,
      region: STUB_REGION,
      credentialsFor: () => undefined,
      tenants: [],
      local: true,
    });
    try {
      expect(another.token).not.toBe(ui.token);
    } finally {
      await another.close();
    }
  });

  it('refuses every request without the token (403, one line), and passes none to the API', async () => {
    const before = stub.requests.length;
    const wrong = `${ui.token.slice(0, -1)}${ui.token.endsWith('A') ? 'B' : 'A'}`;
    const attempts = [
      `${origin()}/`,
      `${origin()}/app.js`,
      `${origin()}/ui/config`,
      `${origin()}/api/v1/tenants/alpha/jobs/alpha-job-001`,
      `${origin()}/${wrong}/api/v1/tenants/alpha/jobs/alpha-job-001`,
      `${origin()}/${ui.token.slice(0, 16)}/api/v1/tenants/alpha/jobs/alpha-job-001`,
      `${origin()}/x/${ui.token}/api/v1/tenants/alpha/jobs/alpha-job-001`,
      `${origin()}/api/v1/tenants/alpha/jobs/alpha-job-001?token=${ui.token}`,
    ];
    for (const url of attempts) {
      const res = await raw(url, { headers: { 'x-dynein-ui': '1' } });
      expect(res.status, url).toBe(403);
      const message = (JSON.parse(res.body) as { error: { code: string; message: string } }).error;
      expect(message.code).toBe('Forbidden');
      expect(message.message).toMatch(/the URL `dynein ui` printed, with its token/);
      expect(message.message).not.toContain('\n');
    }
    const del = await raw(`${origin()}/api/v1/tenants/alpha/jobs/alpha-job-001`, { method: 'DELETE', headers: { 'x-dynein-ui': '1' } });
    expect(del.status).toBe(403);
    expect(stub.requests.length).toBe(before);
    expect(stub.jobs[0]!.state).toBe('SCHEDULED');

    // With it: the page, its script, its config and the API.
    for (const path of ['', 'app.js', 'ui/config']) expect((await raw(`${ui.url}${path}`)).status, path).toBe(200);
    const ok = await raw(`${ui.url}api/v1/tenants/alpha/jobs/alpha-job-001`, { headers: { 'x-dynein-ui': '1' } });
    expect(ok.status).toBe(200);
    expect((JSON.parse(ok.body) as { jobId: string }).jobId).toBe('alpha-job-001');
    // The token without its trailing slash: redirected to the page, so that its relative calls keep the token.
    const bare = await raw(`${origin()}/${ui.token}`);
    expect(bare.status).toBe(308);
    expect(bare.headers.location).toBe(`/${ui.token}/`);
  });

  it('serves a page whose script and API calls are relative to the token', async () => {
    const html = (await raw(ui.url)).body;
    expect(html).toContain('<script src="app.js">');
    const js = (await raw(`${ui.url}app.js`)).body;
    expect(js).toContain('fetch(`api/v1/tenants/${');
    expect(js).toContain('fetch("ui/config")');
    expect(js).not.toMatch(/fetch\(["'`]\//);
  });

  it('refuses a foreign Host (DNS rebinding) or Origin even with the token', async () => {
    const api = `${ui.url}api/v1/tenants/alpha/jobs/alpha-job-001`;
    const before = stub.requests.length;
    expect((await raw(api, { headers: { host: 'evil.example', 'x-dynein-ui': '1' } })).status).toBe(403);
    for (const o of ['http://evil.example', 'http://127.0.0.1:1', 'null', `https://127.0.0.1:${new URL(ui.url).port}`]) {
      const res = await raw(api, { method: 'DELETE', headers: { origin: o, 'x-dynein-ui': '1' } });
      expect(res.status, o).toBe(403);
      expect(res.body).toMatch(/Origin .* is not the job browser's page/);
    }
    expect(stub.requests.length).toBe(before);
    const own = await raw(api, { headers: { origin: origin(), 'x-dynein-ui': '1' } });
    expect(own.status).toBe(200);
  });
});

describe('the job browser proxy’s request bodies', () => {
  let upstream: Server;
  let received: Buffer[] = [];
  let proxy: UiServer;
  beforeAll(async () => {
    // A plain upstream that records each body's bytes (no signature check: the stub's tests do that).
    upstream = createServer((req, res) => {
      const got: Buffer[] = [];
      req.on('data', (c: Buffer) => got.push(c));
      req.on('end', () => {
        received.push(Buffer.concat(got));
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end('{"redriven":[],"notFound":[]}');
      });
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    proxy = await startUiServer({
      endpoint: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      region: STUB_REGION,
      credentialsFor: () => STUB_CREDENTIALS,
      tenants: ['alpha'],
      local: true,
    });
  });
  afterAll(async () => {
    await proxy?.close();
    await new Promise<void>((resolve) => upstream?.close(() => resolve()));
  });

  it('forwards a body whose multibyte characters straddle chunk boundaries byte for byte', async () => {
    received = [];
    // Two-, three- and four-byte characters, written in chunks of 1 to 5 bytes: most boundaries
    // fall inside a character.
    const text = JSON.stringify({ handles: Array.from({ length: 40 }, (_, i) => `h-${i}-é€😀ü中`) });
    const bytes = Buffer.from(text, 'utf8');
    const chunks: Buffer[] = [];
    for (let at = 0, n = 1; at < bytes.length; at += n, n = (n % 5) + 1) chunks.push(bytes.subarray(at, at + n));
    expect(chunks.some((c) => c.toString('utf8').includes('\uFFFD'))).toBe(true); // some chunks split a character

    const status = await new Promise<number>((resolve, reject) => {
      const req = request(
        `${proxy.url}api/v1/tenants/alpha/dlq/redrive`,
        { method: 'POST', headers: { 'x-dynein-ui': '1', 'content-type': 'application/json' } },
        (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode!));
        },
      );
      req.on('error', reject);
      req.on('socket', (s) => s.setNoDelay(true));
      // Each chunk on its own, after the one before was flushed, so that the server reads them apart.
      (async () => {
        for (const c of chunks) {
          await new Promise<void>((r) => req.write(c, () => r()));
          await new Promise((r) => setTimeout(r, 1));
        }
        req.end();
      })().catch(reject);
    });
    expect(status).toBe(200);
    expect(received).toHaveLength(1);
    expect(received[0]!.equals(bytes)).toBe(true);
  });

  it('signs the bytes it forwards (the signed stub accepts a multibyte body sent in small chunks)', async () => {
    const body = Buffer.from(JSON.stringify({ handles: ['ünknown-€-😀'] }), 'utf8');
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${ui.url}api/v1/tenants/alpha/dlq/delete`, { method: 'POST', headers: { 'x-dynein-ui': '1' } }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      });
      req.on('error', reject);
      req.on('socket', (s) => s.setNoDelay(true));
      (async () => {
        for (let at = 0; at < body.length; at += 3) {
          await new Promise<void>((r) => req.write(body.subarray(at, at + 3), () => r()));
          await new Promise((r) => setTimeout(r, 1));
        }
        req.end();
      })().catch(reject);
    });
    expect(status).toBe(200);
    expect(JSON.parse(stub.requests.at(-1)!.body)).toEqual({ handles: ['ünknown-€-😀'] });
  });
});
