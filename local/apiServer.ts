import { randomUUID } from 'node:crypto';
import { isUtf8 } from 'node:buffer';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { LAMBDA_SYNC_PAYLOAD_BYTES } from '../core/model/index.js';
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
  /** The operator key: it may invoke the admin routes only, and only it may (as `grantAdmin`). */
  readonly admin?: TenantKeys;
  readonly handlers: {
    readonly submit: Handler;
    readonly status: Handler;
    readonly cancel: Handler;
    readonly schedules?: Handler;
    /** `POST .../jobs/outcomes` (docs/history.md) and `POST .../jobs/heartbeats` (docs/flow-control.md). */
    readonly outcomes?: Handler;
    readonly dlq?: Handler;
    /** The operator API, `/v1/admin/tenants/{tenant}...` (docs/tenant-controls.md). */
    readonly admin?: Handler;
    /** `POST .../workflows`, `GET` and `DELETE .../workflows/{workflowId}` (docs/workflows.md). */
    readonly workflows?: Handler;
  };
  /** `GET /local/metrics` (unsigned, local only). */
  readonly metrics: () => unknown;
  /** `GET /local/traces/<traceId>`: the spans of a trace the stack kept (unsigned, local only; none without). */
  readonly trace?: (traceId: string) => unknown[];
  /** Default route throttling, as the stage's. @default { rateLimit: 1000, burstLimit: 2000 } */
  readonly throttle?: { rateLimit: number; burstLimit: number };
  readonly now?: () => number;
}

const ACCOUNT = '000000000000';
const API_ID = 'local';
/** API Gateway's payload limit (HTTP APIs: 10 MB, a hard quota). */
export const MAX_BODY_BYTES = 10 * 1024 * 1024;
/** API Gateway's quota on the request line and headers together (HTTP APIs: 10,240 bytes). */
export const MAX_HEADER_BYTES = 10_240;

interface Route {
  readonly method: string;
  readonly pattern: RegExp;
  readonly routeKey: string;
  readonly handler: keyof ApiServerOptions['handlers'];
  readonly params: readonly string[];
}

/** The routes of DESIGN.md's HTTP API, as the CDK construct declares them. */
const ROUTES: readonly Route[] = [
  {
    method: 'POST',
    pattern: /^\/v1\/tenants\/([^/]+)\/jobs$/,
    routeKey: 'POST /v1/tenants/{tenant}/jobs',
    handler: 'submit',
    params: ['tenant'],
  },
  {
    method: 'POST',
    pattern: /^\/v1\/tenants\/([^/]+)\/jobs\/batch$/,
    routeKey: 'POST /v1/tenants/{tenant}/jobs/batch',
    handler: 'submit',
    params: ['tenant'],
  },
  {
    method: 'POST',
    pattern: /^\/v1\/tenants\/([^/]+)\/jobs\/outcomes$/,
    routeKey: 'POST /v1/tenants/{tenant}/jobs/outcomes',
    handler: 'outcomes',
    params: ['tenant'],
  },
  {
    method: 'POST',
    pattern: /^\/v1\/tenants\/([^/]+)\/jobs\/heartbeats$/,
    routeKey: 'POST /v1/tenants/{tenant}/jobs/heartbeats',
    handler: 'outcomes',
    params: ['tenant'],
  },
  {
    method: 'GET',
    pattern: /^\/v1\/tenants\/([^/]+)\/jobs$/,
    routeKey: 'GET /v1/tenants/{tenant}/jobs',
    handler: 'status',
    params: ['tenant'],
  },
  {
    method: 'GET',
    pattern: /^\/v1\/tenants\/([^/]+)\/jobs\/([^/]+)$/,
    routeKey: 'GET /v1/tenants/{tenant}/jobs/{jobId}',
    handler: 'status',
    params: ['tenant', 'jobId'],
  },
  {
    method: 'DELETE',
    pattern: /^\/v1\/tenants\/([^/]+)\/jobs\/([^/]+)$/,
    routeKey: 'DELETE /v1/tenants/{tenant}/jobs/{jobId}',
    handler: 'cancel',
    params: ['tenant', 'jobId'],
  },
  {
    method: 'POST',
    pattern: /^\/v1\/tenants\/([^/]+)\/jobs\/cancel$/,
    routeKey: 'POST /v1/tenants/{tenant}/jobs/cancel',
    handler: 'cancel',
    params: ['tenant'],
  },
  {
    method: 'GET',
    pattern: /^\/v1\/tenants\/([^/]+)\/operations\/([^/]+)$/,
    routeKey: 'GET /v1/tenants/{tenant}/operations/{operationId}',
    handler: 'cancel',
    params: ['tenant', 'operationId'],
  },
  {
    method: 'POST',
    pattern: /^\/v1\/tenants\/([^/]+)\/workflows$/,
    routeKey: 'POST /v1/tenants/{tenant}/workflows',
    handler: 'workflows',
    params: ['tenant'],
  },
  ...(['GET', 'DELETE'] as const).map((method) => ({
    method,
    pattern: /^\/v1\/tenants\/([^/]+)\/workflows\/([^/]+)$/,
    routeKey: `${method} /v1/tenants/{tenant}/workflows/{workflowId}`,
    handler: 'workflows' as const,
    params: ['tenant', 'workflowId'],
  })),
  ...(['PUT', 'GET', 'DELETE'] as const).map((method) => ({
    method,
    pattern: /^\/v1\/tenants\/([^/]+)\/schedules\/([^/]+)$/,
    routeKey: `${method} /v1/tenants/{tenant}/schedules/{name}`,
    handler: 'schedules' as const,
    params: ['tenant', 'name'],
  })),
  {
    method: 'GET',
    pattern: /^\/v1\/tenants\/([^/]+)\/schedules$/,
    routeKey: 'GET /v1/tenants/{tenant}/schedules',
    handler: 'schedules',
    params: ['tenant'],
  },
  ...(['pause', 'resume'] as const).map((action) => ({
    method: 'POST',
    pattern: new RegExp(`^/v1/tenants/([^/]+)/schedules/([^/]+)/${action}$`),
    routeKey: `POST /v1/tenants/{tenant}/schedules/{name}/${action}`,
    handler: 'schedules' as const,
    params: ['tenant', 'name'],
  })),
  {
    method: 'GET',
    pattern: /^\/v1\/tenants\/([^/]+)\/dlq$/,
    routeKey: 'GET /v1/tenants/{tenant}/dlq',
    handler: 'dlq',
    params: ['tenant'],
  },
  ...(['redrive', 'delete', 'edit'] as const).map((action) => ({
    method: 'POST',
    pattern: new RegExp(`^/v1/tenants/([^/]+)/dlq/${action}$`),
    routeKey: `POST /v1/tenants/{tenant}/dlq/${action}`,
    handler: 'dlq' as const,
    params: ['tenant'],
  })),
  ...(['redrive', 'audit'] as const).map((action) => ({
    method: 'GET',
    pattern: new RegExp(`^/v1/tenants/([^/]+)/dlq/${action}$`),
    routeKey: `GET /v1/tenants/{tenant}/dlq/${action}`,
    handler: 'dlq' as const,
    params: ['tenant'],
  })),
  ...(
    [
      ['GET', ''],
      ['POST', '/pause'],
      ['POST', '/resume'],
      ['PUT', '/settings'],
    ] as const
  ).map(([method, suffix]) => ({
    method,
    pattern: new RegExp(`^/v1/admin/tenants/([^/]+)${suffix}$`),
    routeKey: `${method} /v1/admin/tenants/{tenant}${suffix}`,
    handler: 'admin' as const,
    params: ['tenant'],
  })),
];

/** The operator API's routes: only the admin key may call them, and it may call nothing else. */
const isAdminRoute = (r: Route) => r.handler === 'admin';
/** The admin key's caller name (it has no tenant). */
const ADMIN = Symbol('admin');

/**
 * The local API Gateway: matches DESIGN.md's routes, checks SigV4 against each tenant's local
 * key, applies the same per-tenant path rule as the IAM grants, throttles like the stage, turns
 * the request into the HTTP API (payload 2.0) event the handlers receive on AWS, and answers
 * gateway-level errors in API Gateway's own `{"message"}` shape, with an `apigw-requestid`.
 */
export function startApiServer(opts: ApiServerOptions): Promise<Server> {
  const now = opts.now ?? Date.now;
  const byKey = new Map<string, { tenant: string | typeof ADMIN } & TenantKeys>(
    Object.entries(opts.keys).map(([tenant, k]) => [k.accessKeyId, { tenant, ...k }]),
  );
  if (opts.admin) byKey.set(opts.admin.accessKeyId, { tenant: ADMIN, ...opts.admin });
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

  // Node's own header limit sits above API Gateway's, so that most oversized headers reach
  // handle() and get the gateway's answer; beyond it, the parser's error gets the same answer.
  const server = createServer({ maxHeaderSize: 64 * 1024 }, (req, res) => {
    handle(req, res).catch((err) => {
      console.error(`dynein api: ${(err as Error).stack ?? err}`);
      if (!res.headersSent) gateway(res, randomUUID(), 500, 'Internal Server Error');
    });
  });
  server.on('clientError', answerClientError);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const requestId = randomUUID();
    const method = (req.method ?? 'GET').toUpperCase();
    // Routing and signing see the path exactly as sent (URL parsing would normalize it).
    const target = wireTarget(req.url ?? '/');
    // The limits come first, as at API Gateway's front door: before routing and authentication.
    if (headerBytes(req) > MAX_HEADER_BYTES) return refuse(req, res, requestId, 431, 'Request Header Fields Too Large');
    if (declaredLength(req) > MAX_BODY_BYTES) return refuse(req, res, requestId, 413, 'Request Entity Too Large');
    if (method === 'GET' && target.path === '/local/metrics')
      return send(res, 200, { 'content-type': 'application/json' }, JSON.stringify(opts.metrics(), null, 2));
    const traced = method === 'GET' ? /^\/local\/traces\/([0-9a-f]{32})$/.exec(target.path) : null;
    if (traced) return send(res, 200, { 'content-type': 'application/json' }, JSON.stringify({ spans: opts.trace?.(traced[1]!) ?? [] }));
    if (method === 'GET' && target.path === '/') return send(res, 200, { 'content-type': 'text/html; charset=utf-8' }, DASHBOARD_HTML);

    const route = ROUTES.find((r) => r.method === method && r.pattern.test(target.path));
    if (!route) return gateway(res, requestId, 404, 'Not Found');
    const body = await readBodyWithin(req, MAX_BODY_BYTES);
    if (body === undefined) return refuse(req, res, requestId, 413, 'Request Entity Too Large');

    const verdict = verifySigV4(
      { method, path: target.path, query: target.query, headers: req.headers, body },
      { secretOf: (id) => byKey.get(id)?.secretAccessKey, now: now(), region: opts.region },
    );
    if (!verdict.ok) return gateway(res, requestId, 403, verdict.message);
    const caller = byKey.get(verdict.accessKeyId);
    if (!caller) return gateway(res, requestId, 403, 'Forbidden');
    const values = route.pattern.exec(target.path) ?? [];
    const params = Object.fromEntries(route.params.map((p, i) => [p, safeDecode(values[i + 1] ?? '')]));
    // The IAM grants: a tenant's execute-api:Invoke on /v1/tenants/<own tenant>/... only; the
    // operator's (grantAdmin) on /v1/admin/... only.
    if (isAdminRoute(route) ? caller.tenant !== ADMIN : params.tenant !== caller.tenant) return gateway(res, requestId, 403, 'Forbidden');
    if (!takeToken()) return gateway(res, requestId, 429, 'Too Many Requests');

    const event = toEvent(req, target, method, route, params, body, requestId, caller, now());
    // An event above Lambda's synchronous-invoke limit never reaches the function on AWS (API
    // Gateway takes up to 10 MB): answer 413 here, before the handler, rather than call it.
    if (Buffer.byteLength(JSON.stringify(event)) > LAMBDA_SYNC_PAYLOAD_BYTES)
      return gateway(res, requestId, 413, 'Request Entity Too Large');
    const handler = opts.handlers[route.handler];
    if (!handler) return gateway(res, requestId, 404, 'Not Found');
    const result = await handler(event);
    send(res, result.statusCode, { ...stringHeaders(result.headers), 'apigw-requestid': requestId }, result.body ?? '');
  }

  function toEvent(
    req: IncomingMessage,
    target: { path: string; query: string },
    method: string,
    route: Route,
    params: Record<string, string>,
    body: Buffer,
    requestId: string,
    caller: { tenant: string | typeof ADMIN; accessKeyId: string },
    t: number,
  ): APIGatewayProxyEventV2 {
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, Array.isArray(v) ? v.join(',') : (v ?? '')]));
    return {
      version: '2.0',
      routeKey: route.routeKey,
      rawPath: target.path,
      rawQueryString: target.query,
      headers,
      ...(target.query ? { queryStringParameters: Object.fromEntries(new URLSearchParams(target.query)) } : {}),
      pathParameters: params,
      requestContext: {
        accountId: ACCOUNT,
        apiId: API_ID,
        domainName: headers.host ?? 'localhost',
        domainPrefix: 'localhost',
        http: {
          method,
          path: target.path,
          protocol: `HTTP/${req.httpVersion}`,
          sourceIp: req.socket.remoteAddress ?? '127.0.0.1',
          userAgent: headers['user-agent'] ?? '',
        },
        requestId,
        routeKey: route.routeKey,
        stage: '$default',
        time: new Date(t).toUTCString(),
        timeEpoch: t,
        authorizer: {
          iam: {
            accessKey: caller.accessKeyId,
            accountId: ACCOUNT,
            callerId: caller.accessKeyId,
            principalOrgId: null,
            // The operator has no IAM user locally: the audit trail names its access key id.
            userArn: caller.tenant === ADMIN ? null : `arn:aws:iam::${ACCOUNT}:user/dynein-${caller.tenant}`,
            userId: caller.accessKeyId,
            cognitoIdentity: null,
          },
        },
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

/** The path and query string of a request target exactly as sent (an absolute-form target loses its origin). */
function wireTarget(target: string): { path: string; query: string } {
  const origin = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(target);
  const rest = origin ? target.slice(origin[0].length) || '/' : target;
  const q = rest.indexOf('?');
  return q < 0 ? { path: rest, query: '' } : { path: rest.slice(0, q), query: rest.slice(q + 1) };
}

/** Bytes of the request line and the header values, as API Gateway's quota counts them. */
function headerBytes(req: IncomingMessage): number {
  let n = Buffer.byteLength(`${req.method} ${req.url} HTTP/${req.httpVersion}`);
  for (let i = 1; i < req.rawHeaders.length; i += 2) n += Buffer.byteLength(req.rawHeaders[i] ?? '');
  return n;
}

/** The Content-Length a request declares (0 when it streams without one). */
function declaredLength(req: IncomingMessage): number {
  const n = Number(req.headers['content-length'] ?? 0);
  return Number.isFinite(n) ? n : 0;
}

/**
 * The body, or undefined as soon as it passes `limit` bytes while streaming (chunked bodies
 * declare no length): nothing past the limit is kept in memory.
 */
function readBodyWithin(req: IncomingMessage, limit: number): Promise<Buffer | undefined> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      req.off('data', onData).off('end', onEnd).off('error', reject);
      chunks.length = 0;
      resolve(undefined);
    };
    const onEnd = () => resolve(Buffer.concat(chunks));
    req.on('data', onData).once('end', onEnd).once('error', reject);
  });
}

/** After a refusal, how much of a body still coming is read and discarded, and for how long, before the connection is cut. */
const LINGER_BYTES = 64 * 1024 * 1024;
const LINGER_MS = 10_000;

/**
 * A gateway refusal sent before the request was read to its end (413, 431). What the client still
 * sends is then read and thrown away, never kept (a "lingering close"): closing at once would
 * reset a connection the client is still writing to, and it would see the reset instead of the
 * answer. A client that goes on past {@link LINGER_BYTES} or {@link LINGER_MS} is cut off.
 */
function refuse(req: IncomingMessage, res: ServerResponse, requestId: string, status: 413 | 431, message: string): void {
  gateway(res, requestId, status, message);
  let discarded = 0;
  const cut = () => req.socket.destroy();
  const timer = setTimeout(cut, LINGER_MS);
  timer.unref();
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > LINGER_BYTES) cut();
  });
  req.once('end', () => clearTimeout(timer));
  req.once('close', () => clearTimeout(timer));
  req.resume();
}

/** Errors of Node's HTTP parser: headers past even Node's limit get the gateway's 431, the rest a 400. */
function answerClientError(err: NodeJS.ErrnoException, socket: Duplex): void {
  if (err.code === 'ECONNRESET' || !socket.writable) return void socket.destroy();
  const [status, message] =
    err.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large']
      : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout']
        : [400, 'Bad Request'];
  const body = JSON.stringify({ message });
  socket.end(
    `HTTP/1.1 ${status} ${message}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\napigw-requestid: ${randomUUID()}\r\nconnection: close\r\n\r\n${body}`,
  );
}
