import { randomUUID } from 'node:crypto';
import { isUtf8 } from 'node:buffer';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { LAMBDA_SYNC_PAYLOAD_BYTES } from '../core/schema.js';
import type { HttpResult } from '../lambdas/runtime/http.js';
import { DASHBOARD_HTML } from './dashboard.js';
import type { TenantKeys } from './settings.js';
import { verifySigV4 } from './sigv4.js';

type Handler = (event: APIGatewayProxyEventV2) => Promise<HttpResult>;

export interface ApiServerOptions {
  readonly port: number;
  readonly region: string;
  /** Each tenant's access key: a key may invoke its own tenant's routes only (as the IAM grants). */
  readonly keys: Readonly<Record<string, TenantKeys>>;
  readonly handlers: { readonly submit: Handler; readonly status: Handler; readonly cancel: Handler };
  /** `GET /local/metrics` (unsigned, local only). */
  readonly metrics: () => unknown;
  /** Default route throttling, as the stage's. @default { rateLimit: 1000, burstLimit: 2000 } */
  readonly throttle?: { rateLimit: number; burstLimit: number };
  readonly now?: () => number;
}

const ACCOUNT = '000000000000';
const API_ID = 'local';
const MAX_BODY = 10 * 1024 * 1024;

interface Route {
  readonly method: string;
  readonly pattern: RegExp;
  readonly routeKey: string;
  readonly handler: keyof ApiServerOptions['handlers'];
  readonly params: readonly string[];
}

/** The routes of DESIGN.md's HTTP API, as the CDK construct declares them. */
const ROUTES: readonly Route[] = [
  { method: 'POST', pattern: /^\/v1\/tenants\/([^/]+)\/jobs$/, routeKey: 'POST /v1/tenants/{tenant}/jobs', handler: 'submit', params: ['tenant'] },
  { method: 'POST', pattern: /^\/v1\/tenants\/([^/]+)\/jobs\/batch$/, routeKey: 'POST /v1/tenants/{tenant}/jobs/batch', handler: 'submit', params: ['tenant'] },
  { method: 'GET', pattern: /^\/v1\/tenants\/([^/]+)\/jobs\/([^/]+)$/, routeKey: 'GET /v1/tenants/{tenant}/jobs/{jobId}', handler: 'status', params: ['tenant', 'jobId'] },
  { method: 'DELETE', pattern: /^\/v1\/tenants\/([^/]+)\/jobs\/([^/]+)$/, routeKey: 'DELETE /v1/tenants/{tenant}/jobs/{jobId}', handler: 'cancel', params: ['tenant', 'jobId'] },
];

/**
 * The local API Gateway: matches DESIGN.md's routes, checks SigV4 against each tenant's local
 * key, applies the same per-tenant path rule as the IAM grants, throttles like the stage, turns
 * the request into the HTTP API (payload 2.0) event the handlers receive on AWS, and answers
 * gateway-level errors in API Gateway's own `{"message"}` shape, with an `apigw-requestid`.
 */
export function startApiServer(opts: ApiServerOptions): Promise<Server> {
  const now = opts.now ?? Date.now;
  const byKey = new Map(Object.entries(opts.keys).map(([tenant, k]) => [k.accessKeyId, { tenant, ...k }]));
  const throttle = opts.throttle ?? { rateLimit: 1000, burstLimit: 2000 };
  let tokens = throttle.burstLimit;
  let refilledAt = now();
  const takeToken = () => {
    const t = now();
    tokens = Math.min(throttle.burstLimit, tokens + ((t - refilledAt) / 1000) * throttle.rateLimit);
    refilledAt = t;
    if (tokens < 1) return false;
    tokens -= 1;
    return true;
  };

  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
      console.error(`dynein api: ${(err as Error).stack ?? err}`);
      if (!res.headersSent) gateway(res, randomUUID(), 500, 'Internal Server Error');
    });
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = randomUUID();
    const url = new URL(req.url ?? '/', 'http://local');
    const method = (req.method ?? 'GET').toUpperCase();
    if (method === 'GET' && url.pathname === '/local/metrics') return send(res, 200, { 'content-type': 'application/json' }, JSON.stringify(opts.metrics(), null, 2));
    if (method === 'GET' && url.pathname === '/') return send(res, 200, { 'content-type': 'text/html; charset=utf-8' }, DASHBOARD_HTML);

    const route = ROUTES.find((r) => r.method === method && r.pattern.test(url.pathname));
    if (!route) return gateway(res, requestId, 404, 'Not Found');
    const body = await readBody(req);
    if (body === undefined) return gateway(res, requestId, 413, 'Request Entity Too Large');

    const verdict = verifySigV4(
      { method, path: url.pathname, query: url.search.slice(1), headers: req.headers, body },
      (id) => byKey.get(id)?.secretAccessKey,
      now(),
    );
    if (!verdict.ok) return gateway(res, requestId, 403, verdict.message);
    const caller = byKey.get(verdict.accessKeyId)!;
    const params = Object.fromEntries(route.params.map((p, i) => [p, safeDecode(route.pattern.exec(url.pathname)![i + 1]!)]));
    // The IAM grant: execute-api:Invoke on /v1/tenants/<own tenant>/jobs and /jobs/* only.
    if (params.tenant !== caller.tenant) return gateway(res, requestId, 403, 'Forbidden');
    if (!takeToken()) return gateway(res, requestId, 429, 'Too Many Requests');

    const event = toEvent(req, url, method, route, params, body, requestId, caller, now());
    // An event above Lambda's synchronous-invoke limit never reaches the function on AWS (API
    // Gateway takes up to 10 MB): answer 413 here, before the handler, rather than call it.
    if (Buffer.byteLength(JSON.stringify(event)) > LAMBDA_SYNC_PAYLOAD_BYTES) return gateway(res, requestId, 413, 'Request Entity Too Large');
    const result = await opts.handlers[route.handler](event);
    send(res, result.statusCode, { ...stringHeaders(result.headers), 'apigw-requestid': requestId }, result.body ?? '');
  }

  function toEvent(req: IncomingMessage, url: URL, method: string, route: Route, params: Record<string, string>, body: Buffer, requestId: string, caller: { tenant: string; accessKeyId: string }, t: number): APIGatewayProxyEventV2 {
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : (v ?? '')]));
    return {
      version: '2.0',
      routeKey: route.routeKey,
      rawPath: url.pathname,
      rawQueryString: url.search.slice(1),
      headers,
      ...(url.search ? { queryStringParameters: Object.fromEntries(url.searchParams) } : {}),
      pathParameters: params,
      requestContext: {
        accountId: ACCOUNT,
        apiId: API_ID,
        domainName: headers.host ?? 'localhost',
        domainPrefix: 'localhost',
        http: { method, path: url.pathname, protocol: `HTTP/${req.httpVersion}`, sourceIp: req.socket.remoteAddress ?? '127.0.0.1', userAgent: headers['user-agent'] ?? '' },
        requestId,
        routeKey: route.routeKey,
        stage: '$default',
        time: new Date(t).toUTCString(),
        timeEpoch: t,
        authorizer: { iam: { accessKey: caller.accessKeyId, accountId: ACCOUNT, callerId: caller.accessKeyId, principalOrgId: null, userArn: `arn:aws:iam::${ACCOUNT}:user/dynein-${caller.tenant}`, userId: caller.accessKeyId, cognitoIdentity: null } },
      } as unknown as APIGatewayProxyEventV2['requestContext'],
      // Text as text; bytes that are not UTF-8 base64-encoded (as API Gateway passes a body it
      // does not treat as text), so the handler refuses them instead of reading U+FFFD.
      ...(body.length > 0 ? { body: isUtf8(body) ? body.toString('utf8') : body.toString('base64') } : {}),
      isBase64Encoded: body.length > 0 && !isUtf8(body),
    };
  }

  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, '127.0.0.1', () => resolve(server));
  });
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

function gateway(res: ServerResponse, requestId: string, status: number, message: string): void {
  send(res, status, { 'content-type': 'application/json', 'apigw-requestid': requestId }, JSON.stringify({ message }));
}

function send(res: ServerResponse, status: number, headers: Record<string, string>, body: string): void {
  res.writeHead(status, { ...headers, 'content-length': String(Buffer.byteLength(body)) });
  res.end(body);
}

function stringHeaders(h: HttpResult['headers']): Record<string, string> {
  return Object.fromEntries(Object.entries(h ?? {}).map(([k, v]) => [k, String(v)]));
}

/** The body, or undefined when it exceeds API Gateway's 10 MB limit. */
async function readBody(req: IncomingMessage): Promise<Buffer | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) return undefined;
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}
