/**
 * docs/openapi.yaml is a valid OpenAPI 3.1 document, its schemas are valid JSON Schema, it
 * describes exactly the routes the API serves, and the reply validator built on it catches
 * replies that do not match (so the e2e reply check, replies.setup.ts, can fail).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROUTES } from '../../lambdas/runtime/routes.js';
import { startApiServer } from '../../local/apiServer.js';
import {
  atPointer,
  componentSchema,
  createAjv,
  findOperation,
  loadDocument,
  operationsOf,
  ReplyValidator,
  type OpenApiDocument,
} from './openapi.js';
import { checkReplies, formatViolations, isLocalStackReply } from './replyCheck.js';

const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const doc = loadDocument();
const operations = operationsOf(doc);
const routeKey = (method: string, path: string) => `${method.toUpperCase()} ${path}`;

/** Every value under `node` with its JSON pointer, depth first. */
function* walk(node: unknown, pointer = '#'): Generator<[string, unknown]> {
  yield [pointer, node];
  if (node === null || typeof node !== 'object') return;
  for (const [key, value] of Object.entries(node)) yield* walk(value, `${pointer}/${key.replace(/~/g, '~0').replace(/\//g, '~1')}`);
}

describe('docs/openapi.yaml as a document', () => {
  it('is valid against the published OpenAPI 3.1 schema (2022-10-07)', () => {
    const validate = oasValidator();
    expect(validate(doc), JSON.stringify(validate.errors, null, 2)).toBe(true);
    expect(doc.openapi).toBe('3.1.0');
  });

  it('the OAS schema check can fail: a document without info or with an unknown field is refused', () => {
    const validate = oasValidator();
    const { info: _info, ...withoutInfo } = doc;
    expect(validate(withoutInfo)).toBe(false);
    expect(validate({ ...doc, pathz: {} })).toBe(false);
  });

  it('every $ref resolves', () => {
    const refs = [...walk(doc)].flatMap(([, v]) => {
      const ref = (v as { $ref?: unknown } | null)?.$ref;
      return typeof ref === 'string' ? [ref] : [];
    });
    expect(refs.length).toBeGreaterThan(50);
    for (const ref of new Set(refs)) expect(() => atPointer(doc, ref), ref).not.toThrow();
  });

  it('every component schema compiles in Ajv strict mode (2020-12), and its examples validate', () => {
    const ajv = createAjv(doc);
    const schemas = Object.keys(doc.components?.schemas ?? {});
    expect(schemas.length).toBeGreaterThan(40);
    for (const name of schemas) {
      const validate = componentSchema(ajv, name);
      expect(validate, name).toBeDefined();
      for (const example of (doc.components!.schemas as Record<string, { examples?: unknown[] }>)[name]!.examples ?? [])
        expect(validate!(example), `${name} example ${JSON.stringify(example)}`).toBe(true);
    }
  });

  it('operationIds are present and unique', () => {
    const ids = operations.map((o) => o.operationId);
    expect(ids.every((id) => /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('every path parameter is declared, required, and every declared one is in the path', () => {
    for (const op of operations) {
      const inPath = [...op.path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]);
      const declared = op.parameters.map((p) => resolveParameter(doc, p)).filter((p) => p.in === 'path');
      expect(declared.map((p) => p.name).sort(), routeKey(op.method, op.path)).toEqual([...inPath].sort());
      expect(declared.every((p) => p.required === true && p.schema !== undefined)).toBe(true);
    }
  });

  it('every response of every operation documents a JSON body schema, and each operation a 2xx', () => {
    for (const op of operations) {
      const statuses = Object.keys(op.responses);
      expect(
        statuses.some((s) => s.startsWith('2')),
        op.operationId,
      ).toBe(true);
      for (const status of statuses) {
        const response = resolveResponse(doc, op.responses[status]);
        expect(response.content?.['application/json']?.schema, `${op.operationId} ${status}`).toBeDefined();
      }
    }
  });

  it('the error codes are exactly those the handlers answer (core/, lambdas/)', () => {
    const codes = new Set<string>();
    for (const dir of ['core', 'lambdas'])
      for (const file of readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts')))
        for (const m of readFileSync(join(ROOT, dir, file), 'utf8').matchAll(/\bcode(?: =|:) '([A-Z][A-Za-z]+)'/g)) codes.add(m[1]!);
    const documented = (doc.components!.schemas as Record<string, { enum?: string[] }>).ErrorCode!.enum!;
    expect([...documented].sort()).toEqual([...codes].sort());
  });

  it('applies the SigV4 scheme (header Authorization, execute-api) to every operation', () => {
    const scheme = (doc.components!.securitySchemes as Record<string, Record<string, string>>).sigv4!;
    expect(scheme).toMatchObject({ type: 'apiKey', in: 'header', name: 'Authorization' });
    expect(scheme.description).toMatch(/Signature Version 4[\s\S]*execute-api/);
    expect(doc.security).toEqual([{ sigv4: [] }]);
  });
});

describe('the routes of the document are the routes the API serves', () => {
  it('exactly the routes lambdas/runtime/routes.ts declares, with the same query parameters', () => {
    const documented = operations.map((o) => routeKey(o.method, o.path)).sort();
    expect(documented).toEqual(ROUTES.map((r) => routeKey(r.method, r.path)).sort());
    for (const route of ROUTES) {
      const op = findOperation(operations, route.method, route.path)!;
      const query = op.parameters.map((p) => resolveParameter(doc, p)).filter((p) => p.in === 'query');
      expect(query.map((p) => p.name).sort(), routeKey(route.method, route.path)).toEqual([...route.query].sort());
    }
  });

  describe('the local API server (local/apiServer.ts)', () => {
    const tenantKey = { accessKeyId: 'AKIDCONTRACTTENANT', secretAccessKey: 'tenant-secret' };
    const adminKey = { accessKeyId: 'AKIDCONTRACTADMIN', secretAccessKey: 'admin-secret' };
    let server: Server;
    let port: number;

    beforeAll(async () => {
      // Each handler answers the route key the server chose; a 500 InternalError body keeps the
      // reply documented for every operation should the reply check be enabled around this file.
      const echo = async (event: { routeKey: string }) => ({
        statusCode: 500,
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ error: { code: 'InternalError', message: event.routeKey } }),
      });
      server = await startApiServer({
        port: 0,
        region: 'us-east-1',
        keys: { demo: tenantKey },
        admin: adminKey,
        handlers: { submit: echo, status: echo, cancel: echo, schedules: echo, outcomes: echo, dlq: echo, admin: echo, workflows: echo },
        metrics: () => ({}),
      });
      port = (server.address() as AddressInfo).port;
    });
    afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

    it.each(operations.map((o) => [routeKey(o.method, o.path), o] as const))('serves %s as that route', async (key, op) => {
      const path = concretePath(op.path);
      const creds = path.startsWith('/v1/admin/') ? adminKey : tenantKey;
      const reply = await send(port, op.method, path, await signedHeaders(port, op.method, path, creds));
      expect(reply.status, reply.body).toBe(500);
      expect(JSON.parse(reply.body).error.message).toBe(key);
    });

    it('answers every other method on the documented paths with the gateway 404', async () => {
      for (const template of Object.keys(doc.paths)) {
        const served = operations.filter((o) => o.path === template).map((o) => o.method);
        for (const method of ['GET', 'PUT', 'POST', 'DELETE', 'PATCH'].filter((m) => !served.includes(m))) {
          // A literal sibling (`/jobs/batch`) is matched by `/jobs/{jobId}` for GET and DELETE, as documented.
          if (findOperation(operations, method, concretePath(template))) continue;
          const reply = await send(port, method, concretePath(template), {});
          expect(reply.status, `${method} ${template}`).toBe(404);
          expect(JSON.parse(reply.body)).toEqual({ message: 'Not Found' });
        }
      }
    });
  });
});

describe('the reply validator', () => {
  const validator = new ReplyValidator(doc);
  const jobId = 'j1.demo.3.1893456000250.t.AbCdEfGhIjKlMnOp.AbCdEfGhIjKlMnOpQrStUv';
  const job = { jobId, tenant: 'demo', runAt: '2030-01-01T00:00:00.250Z', state: 'SCHEDULED' };

  it('accepts a documented reply', () => {
    expect(validator.check('POST', '/v1/tenants/demo/jobs', 201, JSON.stringify(job))).toBeUndefined();
    expect(
      validator.check('GET', `/v1/tenants/demo/jobs/${jobId}`, 200, JSON.stringify({ ...job, state: 'UNKNOWN', message: 'x' })),
    ).toBeUndefined();
    expect(validator.check('POST', '/v1/tenants/demo/jobs', 403, '{"message":"Forbidden"}')).toBeUndefined();
  });

  it('reports a wrong field value, an unknown field, a missing field and a wrong error code', () => {
    const wrongState = validator.check('POST', '/v1/tenants/demo/jobs', 201, JSON.stringify({ ...job, state: 'DONE' }));
    expect(wrongState?.errors?.some((e) => e.instancePath === '/state')).toBe(true);
    expect(validator.check('POST', '/v1/tenants/demo/jobs', 201, JSON.stringify({ ...job, extra: 1 }))).toBeDefined();
    const { runAt: _runAt, ...noRunAt } = job;
    expect(validator.check('POST', '/v1/tenants/demo/jobs', 201, JSON.stringify(noRunAt))).toBeDefined();
    const notFound = JSON.stringify({ error: { code: 'JobNotFound', message: 'x' } });
    expect(validator.check('POST', '/v1/tenants/demo/jobs', 404, notFound)).toBeDefined();
    expect(validator.check('GET', `/v1/tenants/demo/jobs/${jobId}`, 404, notFound)).toBeUndefined();
  });

  it('reports a status the operation does not document, and a body that is not JSON', () => {
    expect(validator.check('DELETE', `/v1/tenants/demo/jobs/${jobId}`, 201, JSON.stringify(job))?.reason).toMatch(
      /status 201 is not documented/,
    );
    expect(validator.check('POST', '/v1/tenants/demo/jobs', 201, 'oops')?.reason).toMatch(/not JSON/);
  });

  it('matches literal paths before templates, and accepts only the gateway 404 for an undocumented route', () => {
    expect(findOperation(operations, 'POST', '/v1/tenants/demo/jobs/batch')?.operationId).toBe('submitJobBatch');
    expect(findOperation(operations, 'GET', '/v1/tenants/demo/jobs/batch')?.operationId).toBe('getJob');
    expect(validator.check('PATCH', '/v1/tenants/demo/jobs', 404, '{"message":"Not Found"}')).toBeUndefined();
    expect(validator.check('GET', '/v1/tenants/demo/widgets', 200, '{}')?.reason).toMatch(/no operation/);
  });
});

describe('the fetch wrapper of replies.setup.ts', () => {
  let server: Server;
  let base: string;
  let answer: { status: number; body: string; requestId: string };

  beforeAll(async () => {
    const { createServer } = await import('node:http');
    server = createServer((_req, res) => {
      res.writeHead(answer.status, { 'content-type': 'application/json', 'apigw-requestid': answer.requestId });
      res.end(answer.body);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('records a reply that does not match, with method, path, status, errors and body, and leaves the reply readable', async () => {
    // Not a UUID request id: the reply check of the setup file (when enabled) leaves this server alone.
    answer = { status: 201, body: JSON.stringify({ jobId: 'nope', state: 'DONE' }), requestId: 'contract-test' };
    const check = checkReplies(fetch, { select: (url) => url.pathname.startsWith('/v1/') });
    const reply = await check.fetch(`${base}/v1/tenants/demo/jobs`, { method: 'POST', body: '{}' });
    expect(await reply.json()).toEqual({ jobId: 'nope', state: 'DONE' });
    const found = await check.settle();
    expect(found).toHaveLength(1);
    const report = formatViolations(found);
    expect(report).toContain('POST /v1/tenants/demo/jobs -> 201: the body does not match');
    expect(report).toContain('/state');
    expect(report).toContain('"jobId":"nope"');
    expect(await check.settle()).toEqual([]);
  });

  it('records nothing for a matching reply, nor for replies it does not select', async () => {
    answer = { status: 403, body: '{"message":"Forbidden"}', requestId: 'contract-test' };
    const check = checkReplies(fetch, { select: (url) => url.pathname.startsWith('/v1/') });
    await (await check.fetch(`${base}/v1/tenants/demo/jobs`)).text();
    answer = { status: 200, body: 'not json', requestId: 'contract-test' };
    await (await check.fetch(`${base}/health`)).text();
    expect(await check.settle()).toEqual([]);
  });

  it("selects by default only the local stack's replies: a local /v1/ path with a UUID apigw-requestid", () => {
    const reply = (id: string) => new Response('{}', { headers: { 'apigw-requestid': id } });
    const uuid = '0f8fad5b-d9cb-469f-a165-70867728950e';
    expect(isLocalStackReply(new URL('http://127.0.0.1:8080/v1/tenants/demo/jobs'), reply(uuid))).toBe(true);
    expect(isLocalStackReply(new URL('http://localhost:8080/v1/admin/tenants/demo'), reply(uuid))).toBe(true);
    expect(isLocalStackReply(new URL('http://127.0.0.1:8080/v1/tenants/demo/jobs'), reply('req-3'))).toBe(false);
    expect(isLocalStackReply(new URL('http://127.0.0.1:8080/local/metrics'), reply(uuid))).toBe(false);
    expect(isLocalStackReply(new URL('https://api.example.com/v1/tenants/demo/jobs'), reply(uuid))).toBe(false);
  });
});

/**
 * The published OAS 3.1 schema (test/contract/oas-3.1-schema.json, OAI/OpenAPI-Specification
 * schemas/v3.1/schema.json, id .../2022-10-07), compiled with Ajv. Ajv resolves its
 * `"$dynamicRef": "#meta"` to the wrong dynamic scope (it then checks schema objects as parameters),
 * so it is read as the `$ref` it stands for in this schema: `#/$defs/schema`, where `meta` is anchored.
 */
function oasValidator() {
  const text = readFileSync(join(ROOT, 'test/contract/oas-3.1-schema.json'), 'utf8');
  const oas = JSON.parse(text.replaceAll('"$dynamicRef": "#meta"', '"$ref": "#/$defs/schema"'));
  expect(oas.$id).toBe('https://spec.openapis.org/oas/3.1/schema/2022-10-07');
  // Not strict: the OAS schema uses keywords in ways Ajv's strict mode flags (it is not ours to change).
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats.default(ajv);
  ajv.addFormat('media-range', /^[\w.+*-]+\/[\w.+*-]+(\s*;.*)?$/);
  return ajv.compile(oas);
}

interface ParameterObject {
  readonly name: string;
  readonly in: string;
  readonly required?: boolean;
  readonly schema?: unknown;
}

function resolveParameter(d: OpenApiDocument, p: unknown): ParameterObject {
  const ref = (p as { $ref?: string }).$ref;
  return (ref ? atPointer(d, ref) : p) as ParameterObject;
}

function resolveResponse(d: OpenApiDocument, r: unknown): { content?: Record<string, { schema?: unknown }> } {
  const ref = (r as { $ref?: string }).$ref;
  return (ref ? atPointer(d, ref) : r) as { content?: Record<string, { schema?: unknown }> };
}

/** A concrete path for a template: tenant `demo`, a job id, a schedule name. */
function concretePath(template: string): string {
  const values: Record<string, string> = { tenant: 'demo', jobId: 'j1.demo.0.1.t.x.y', name: 'daily' };
  return template.replace(/\{([^}]+)\}/g, (_m, name: string) => values[name] ?? 'x');
}

/** SigV4 headers for a bodiless request to the local server, as the SDK signs them. */
async function signedHeaders(
  port: number,
  method: string,
  path: string,
  credentials: { accessKeyId: string; secretAccessKey: string },
): Promise<Record<string, string>> {
  const signer = new SignatureV4({ service: 'execute-api', region: 'us-east-1', credentials, sha256: Hash.bind(null, 'sha256') });
  const signed = await signer.sign({
    method,
    protocol: 'http:',
    hostname: '127.0.0.1',
    port,
    path,
    headers: { host: `127.0.0.1:${port}` },
  });
  return signed.headers as Record<string, string>;
}

/** One request with node:http (not `fetch`: these replies are not the API's). */
function send(port: number, method: string, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}
