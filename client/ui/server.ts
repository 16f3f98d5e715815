import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { packageRoot } from '../cli/target.js';
import type { Credentials } from '../transport.js';
import { appScript, FROM_SOURCES } from './appScript.js';
import type { UiConfig } from './uiConfig.js';
import { PAGE_HTML } from './page.js';

/** Where the job browser sends its API calls, and with which credentials. */
export interface UiServerOptions {
  /** The API's base URL (the local stack's or API Gateway's). */
  readonly endpoint: string;
  readonly region: string;
  /** The credentials a tenant's calls are signed with (the local stack: that tenant's key; AWS: the default chain). */
  readonly credentialsFor: (tenant: string) => Credentials | undefined;
  /** Tenants to offer in the picker (the local stack's; on AWS, those given with --tenant). */
  readonly tenants: readonly string[];
  /** The tenant selected when the page opens. */
  readonly tenant?: string;
  /** Whether the API is the local stack (shown in the header). */
  readonly local: boolean;
  /** @default 0 (any free port) */
  readonly port?: number;
  /** How often the page refreshes what it shows, ms. @default 2000 */
  readonly refreshMs?: number;
}

export interface UiServer {
  /** `http://127.0.0.1:<port>/<token>/`: the page, and below it everything the page calls. */
  readonly url: string;
  /** This run's random token (32 URL-safe characters), the first path segment of every request. */
  readonly token: string;
  readonly server: Server;
  close(): Promise<void>;
}

/** Only these API paths go through the proxy: a tenant's jobs, schedules, dead letters, workflows and operations (bulk cancels). */
const API_PATH = /^\/v1\/tenants\/([^/?#]+)\/(jobs|schedules|dlq|workflows|operations)(\/[^?#]*)?$/;
const API_METHODS = new Set(['GET', 'POST', 'DELETE']);
/** The header the page sends on every API call: a cross-site form or image cannot set it (CORS). */
export const UI_HEADER = 'x-dynein-ui';
const MAX_BODY = 1024 * 1024;

/**
 * The `dynein ui` server, on 127.0.0.1 only, under a random per-run token: every path starts with
 * `/<token>/` (`url`), and a request without it is refused (403) before anything else, the token
 * compared in constant time. So another user of the machine, who can reach 127.0.0.1 but not read
 * the operator's terminal, cannot call the API with the operator's credentials. Under the token:
 * `/` is the page (one HTML file, its script at `app.js`, nothing from elsewhere), `ui/config`
 * what the page needs to start, and `api/v1/...` a proxy to the Dynein API that signs each call
 * here with SigV4: the page never holds a key. It calls these by relative URLs, so carries the
 * token on every call.
 *
 * Only the tenant routes go through, with GET, POST and DELETE; each call must carry the
 * `x-dynein-ui` header (which other sites' pages cannot send without a CORS preflight this server
 * never grants); every request needs a `Host` of 127.0.0.1 or localhost and, when it has an
 * `Origin`, this server's own (against DNS rebinding and other sites' pages). Request bodies are
 * forwarded as the bytes received.
 */
export async function startUiServer(opts: UiServerOptions): Promise<UiServer> {
  const base = new URL(opts.endpoint.endsWith('/') ? opts.endpoint : `${opts.endpoint}/`);
  const token = randomBytes(24).toString('base64url');
  const tokenDigest = createHash('sha256').update(token).digest();
  /** Equal digests, compared in constant time: how long it takes says nothing of the token. */
  const isToken = (given: string) => timingSafeEqual(createHash('sha256').update(given).digest(), tokenDigest);
  let port = 0;
  const signers = new Map<string, SignatureV4>();
  const signerFor = (tenant: string) => {
    let s = signers.get(tenant);
    if (!s) {
      const credentials = opts.credentialsFor(tenant);
      if (!credentials) return undefined;
      s = new SignatureV4({ service: 'execute-api', region: opts.region, credentials, sha256: Hash.bind(null, 'sha256') });
      signers.set(tenant, s);
    }
    return s;
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) json(res, 502, { error: { code: 'ProxyError', message: (err as Error)?.message ?? String(err) } });
      else res.destroy();
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const host = (req.headers.host ?? '').replace(/:\d+$/, '');
    if (host !== '127.0.0.1' && host !== 'localhost' && host !== '[::1]')
      return json(res, 403, { error: { code: 'Forbidden', message: `Host ${req.headers.host} is not this machine` } });
    const origin = req.headers.origin;
    if (origin !== undefined && !['127.0.0.1', 'localhost', '[::1]'].some((h) => origin === `http://${h}:${port}`))
      return json(res, 403, { error: { code: 'Forbidden', message: `Origin ${origin} is not the job browser's page` } });
    const full = new URL(req.url ?? '/', 'http://127.0.0.1');
    const [, first = '', ...below] = full.pathname.split('/');
    if (!isToken(first))
      return json(res, 403, {
        error: { code: 'Forbidden', message: 'this job browser answers only at the URL `dynein ui` printed, with its token' },
      });
    if (below.length === 0) {
      res.writeHead(308, { location: `/${token}/${full.search}`, 'cache-control': 'no-store' });
      return void res.end();
    }
    const url = new URL(`/${below.join('/')}${full.search}`, 'http://127.0.0.1');
    const method = (req.method ?? 'GET').toUpperCase();
    const headers = { 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' };
    if (method === 'GET' && url.pathname === '/') {
      res.writeHead(200, {
        ...headers,
        'content-type': 'text/html; charset=utf-8',
        'content-security-policy':
          "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
      });
      return void res.end(PAGE_HTML);
    }
    if (method === 'GET' && url.pathname === '/app.js') return serveAppScript(res, headers);
    if (method === 'GET' && url.pathname === '/openapi.yaml') {
      res.writeHead(200, { ...headers, 'content-type': 'application/yaml; charset=utf-8' });
      return void res.end(openApiDocument());
    }
    if (method === 'GET' && url.pathname === '/ui/config') {
      const config: UiConfig = {
        endpoint: base.origin + base.pathname.replace(/\/$/, ''),
        local: opts.local,
        tenants: opts.tenants,
        tenant: opts.tenant ?? opts.tenants[0] ?? '',
        refreshMs: opts.refreshMs ?? 2_000,
      };
      return json(res, 200, config);
    }
    const traced = /^\/traces\/([0-9a-f]{32})$/.exec(url.pathname);
    if (!url.pathname.startsWith('/api/') && !traced)
      return json(res, 404, { error: { code: 'NotFound', message: `no page ${url.pathname}` } });

    if (req.headers[UI_HEADER] !== '1')
      return json(res, 403, { error: { code: 'Forbidden', message: `API calls through the job browser need the ${UI_HEADER} header` } });
    if (traced) return serveTrace(res, headers, base, traced[1]!, opts.local);
    const path = url.pathname.slice('/api'.length);
    const m = API_PATH.exec(path);
    if (!m || !API_METHODS.has(method))
      return json(res, 404, { error: { code: 'NotFound', message: `the job browser does not proxy ${method} ${path}` } });
    let tenant: string;
    try {
      tenant = decodeURIComponent(m[1]!);
    } catch {
      return json(res, 400, { error: { code: 'ValidationError', message: 'tenant is not a valid URL path segment' } });
    }
    const signer = signerFor(tenant);
    if (!signer)
      return json(res, 403, {
        error: {
          code: 'Forbidden',
          message: `no credentials for tenant '${tenant}' (the local stack has ${opts.tenants.join(', ') || 'none'})`,
        },
      });
    // The bytes as received, forwarded unchanged: a character split across chunks stays whole.
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > MAX_BODY) return json(res, 413, { error: { code: 'PayloadTooLarge', message: 'the body is over 1 MiB' } });
      chunks.push(chunk);
    }
    const body = Buffer.concat(chunks);
    const target = new URL(path.slice(1) + url.search, base);
    const outgoing: Record<string, string> = { host: target.host, accept: 'application/json' };
    if (body.length > 0) outgoing['content-type'] = 'application/json';
    const signed = await signer.sign({
      method,
      protocol: target.protocol,
      hostname: target.hostname,
      ...(target.port ? { port: Number(target.port) } : {}),
      path: target.pathname,
      query: Object.fromEntries(target.searchParams),
      headers: outgoing,
      ...(body.length > 0 ? { body } : {}),
    });
    const sent = { ...(signed.headers as Record<string, string>) };
    delete sent.host;
    const reply = await fetch(target, {
      method,
      headers: sent,
      ...(body.length > 0 ? { body } : {}),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await reply.text();
    res.writeHead(reply.status, {
      ...headers,
      'content-type': reply.headers.get('content-type') ?? 'application/json',
      ...(reply.headers.get('apigw-requestid') ? { 'apigw-requestid': reply.headers.get('apigw-requestid')! } : {}),
    });
    res.end(text);
  }

  // Installed, the script is a file of the build: a missing one fails `dynein ui` now, saying to build.
  if (!FROM_SOURCES) await appScript();
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port ?? 0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/${token}/`,
    token,
    server,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** The page's script; one that cannot be bundled or read is a 500 saying why, in the browser's devtools. */
async function serveAppScript(res: ServerResponse, headers: Record<string, string>): Promise<void> {
  let script: string;
  try {
    script = await appScript();
  } catch (err) {
    res.writeHead(500, { ...headers, 'content-type': 'text/plain; charset=utf-8' });
    return void res.end(`dynein ui: ${(err as Error).message}\n`);
  }
  res.writeHead(200, { ...headers, 'content-type': 'text/javascript; charset=utf-8' });
  res.end(script);
}

/**
 * A trace's spans (`traces/<traceId>`, the job panel's waterfall: docs/tracing.md): the local
 * stack's memory of them (`GET /local/traces/<traceId>`, unsigned, local only). A deployment on
 * AWS keeps none: its spans are in the tracing tool they were exported to (404 `NotKept`).
 */
async function serveTrace(res: ServerResponse, headers: Record<string, string>, base: URL, traceId: string, local: boolean): Promise<void> {
  if (!local)
    return json(res, 404, {
      error: { code: 'NotKept', message: 'a deployment on AWS keeps no spans: they are in the tracing tool they are exported to' },
    });
  const reply = await fetch(new URL(`local/traces/${traceId}`, base), { signal: AbortSignal.timeout(10_000) });
  res.writeHead(reply.status, { ...headers, 'content-type': 'application/json' });
  res.end(await reply.text());
}

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

let document: string | undefined;
/** The HTTP API's OpenAPI document (`docs/openapi.yaml`, shipped in the package), read on first request. */
function openApiDocument(): string {
  return (document ??= readFileSync(join(packageRoot(), 'docs', 'openapi.yaml'), 'utf8'));
}
