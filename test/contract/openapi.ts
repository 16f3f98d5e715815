/**
 * docs/openapi.yaml as the tests use it: the parsed document, its operations by method and path,
 * and a validator of replies against the documented response schemas (Ajv, JSON Schema 2020-12,
 * the dialect of OpenAPI 3.1). Shared by the document test and the reply check of the e2e runs
 * (replies.setup.ts), so both read the document the same way.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { parse } from 'yaml';

/** Where the document lives (the package ships it as `dynein-serverless/openapi.yaml`). */
export const DOCUMENT_PATH = fileURLToPath(new URL('../../docs/openapi.yaml', import.meta.url));

/** The id the document is registered under in Ajv, so that its `#/components/...` references resolve. */
const DOCUMENT_ID = 'https://dynein.invalid/openapi.json';

export const HTTP_METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'] as const;

/** The parts of an OpenAPI document these helpers read; the rest stays `unknown`. */
export interface OpenApiDocument {
  readonly openapi: string;
  readonly paths: Readonly<Record<string, PathItem>>;
  readonly components?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  readonly [key: string]: unknown;
}

export type PathItem = Readonly<Record<string, unknown>> & { readonly parameters?: readonly unknown[] };

/** One operation: `METHOD /path/{template}` and where it sits in the document. */
export interface Operation {
  readonly method: string;
  readonly path: string;
  readonly operationId: string;
  readonly responses: Readonly<Record<string, unknown>>;
  readonly parameters: readonly unknown[];
}

/** What a reply check found: nothing (valid), or why the reply does not match the document. */
export interface ReplyProblem {
  readonly reason: string;
  readonly errors?: readonly ErrorObject[];
}

/** Parses docs/openapi.yaml (each call reads the file again: callers cache). */
export function loadDocument(path = DOCUMENT_PATH): OpenApiDocument {
  return parse(readFileSync(path, 'utf8')) as OpenApiDocument;
}

/** Every operation of the document, in document order. */
export function operationsOf(doc: OpenApiDocument): Operation[] {
  const out: Operation[] = [];
  for (const [path, item] of Object.entries(doc.paths ?? {}))
    for (const method of HTTP_METHODS) {
      const op = item[method] as { operationId?: string; responses?: Record<string, unknown>; parameters?: unknown[] } | undefined;
      if (!op) continue;
      out.push({
        method: method.toUpperCase(),
        path,
        operationId: op.operationId ?? '',
        responses: op.responses ?? {},
        parameters: [...(item.parameters ?? []), ...(op.parameters ?? [])],
      });
    }
  return out;
}

/** A path template as a regular expression: each `{param}` one non-empty segment. */
function templatePattern(template: string): RegExp {
  const escaped = template
    .split(/(\{[^}]+\})/)
    .map((part) => (part.startsWith('{') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
    .join('');
  return new RegExp(`^${escaped}$`);
}

/** Literal segments of a template: where templates overlap, the most literal one wins (OpenAPI's rule). */
function literalSegments(template: string): number {
  return template.split('/').filter((s) => s !== '' && !s.startsWith('{')).length;
}

/**
 * The operation a request is for (`path` as sent, without the query), preferring concrete paths
 * over templated ones: `POST /jobs/batch` is the batch route, not `/jobs/{jobId}`.
 */
export function findOperation(operations: readonly Operation[], method: string, path: string): Operation | undefined {
  const upper = method.toUpperCase();
  return operations
    .filter((op) => op.method === upper && templatePattern(op.path).test(path))
    .sort((a, b) => literalSegments(b.path) - literalSegments(a.path))[0];
}

/** Follows a local `$ref` (`#/components/...`) to the object it names. */
export function resolveRef(doc: OpenApiDocument, value: unknown): unknown {
  let current = value;
  for (let hops = 0; hops < 10; hops++) {
    const ref = (current as { $ref?: unknown } | null)?.$ref;
    if (typeof ref !== 'string') return current;
    current = atPointer(doc, ref);
  }
  throw new Error(`$ref chain too long at ${JSON.stringify(value)}`);
}

/** The value at a local JSON pointer reference (`#/a/b~1c`); throws when there is none. */
export function atPointer(doc: unknown, ref: string): unknown {
  if (!ref.startsWith('#/')) throw new Error(`only local references are used in the document, got ${ref}`);
  let current: unknown = doc;
  for (const raw of ref.slice(2).split('/')) {
    const key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    if (current === null || typeof current !== 'object' || !(key in current)) throw new Error(`unresolved $ref ${ref}`);
    current = (current as Record<string, unknown>)[key];
  }
  return current;
}

/** Where a component schema sits once registered in Ajv: `#/components/schemas/X` becomes `<id>#/$defs/X`. */
const SCHEMA_REF = '#/components/schemas/';

/** A copy of `node` whose `$ref`s point at the component schemas as Ajv holds them (`base` + `#/$defs/...`). */
function rebase(node: unknown, base: string): unknown {
  if (Array.isArray(node)) return node.map((v) => rebase(v, base));
  if (node === null || typeof node !== 'object') return node;
  return Object.fromEntries(
    Object.entries(node).map(([key, value]) => {
      if (key !== '$ref' || typeof value !== 'string') return [key, rebase(value, base)];
      if (!value.startsWith(SCHEMA_REF)) throw new Error(`a schema may only reference component schemas, got ${value}`);
      return [key, `${base}#/$defs/${value.slice(SCHEMA_REF.length)}`];
    }),
  );
}

/**
 * An Ajv for the document's schemas: the 2020-12 dialect, formats checked, strict (a misspelt
 * keyword is an error, not a schema that accepts everything), with the component schemas
 * registered as `$defs` of one schema so that every reference between them resolves.
 * `strictRequired` and `strictTypes` stay off: `oneOf: [{required: [runAt]}, ...]` and
 * `if: {required: [priority]}` name properties declared beside them, which is the idiom, not a typo.
 */
export function createAjv(doc: OpenApiDocument): Ajv2020 {
  const ajv = new Ajv2020({ strict: true, strictTypes: false, strictRequired: false, allErrors: true, validateFormats: true });
  addFormats.default(ajv);
  // OpenAPI's own annotation keywords, allowed in its schema objects.
  for (const keyword of ['discriminator', 'xml', 'externalDocs', 'example']) ajv.addKeyword(keyword);
  ajv.addSchema({ $id: DOCUMENT_ID, $defs: rebase(doc.components?.schemas ?? {}, '') });
  return ajv;
}

/** The validator of a component schema (`JobReply`), as {@link createAjv} registered it. */
export function componentSchema(ajv: Ajv2020, name: string): ValidateFunction | undefined {
  return ajv.getSchema(`${DOCUMENT_ID}#/$defs/${name}`);
}

/** The JSON schema a response of `op` documents for `status`, if any. */
function responseSchema(doc: OpenApiDocument, op: Operation, status: string): unknown {
  const response = resolveRef(doc, op.responses[status]) as { content?: Record<string, { schema?: unknown }> } | undefined;
  return response?.content?.['application/json']?.schema;
}

/**
 * Checks replies against the document: the status must be documented for the operation, and the
 * body must be JSON valid against the response's schema. Validators are compiled on first use,
 * one per operation and status.
 */
export class ReplyValidator {
  readonly #ajv: Ajv2020;
  readonly #operations: Operation[];
  readonly #compiled = new Map<string, ValidateFunction>();

  constructor(readonly doc: OpenApiDocument) {
    this.#ajv = createAjv(doc);
    this.#operations = operationsOf(doc);
  }

  /** Validates one reply; undefined when it matches the document. */
  check(method: string, path: string, status: number, bodyText: string): ReplyProblem | undefined {
    const op = findOperation(this.#operations, method, path);
    if (!op) return this.#checkNoSuchRoute(status, bodyText);
    const key = String(status);
    if (!(key in op.responses)) return { reason: `status ${status} is not documented for ${op.method} ${op.path} (${op.operationId})` };
    const schema = responseSchema(this.doc, op, key);
    if (schema === undefined)
      return bodyText === '' ? undefined : { reason: `${op.method} ${op.path} ${status} documents no body, got one` };
    return this.#validate(`${op.operationId} ${key}`, schema, bodyText);
  }

  /** A path and method that is no operation: only API Gateway's 404 is an acceptable answer. */
  #checkNoSuchRoute(status: number, bodyText: string): ReplyProblem | undefined {
    const schema = atPointer(this.doc, '#/components/responses/NoSuchRoute/content/application~1json/schema');
    const problem = this.#validate('NoSuchRoute', schema, bodyText);
    if (status === 404 && !problem) return undefined;
    return { reason: `no operation in docs/openapi.yaml for this method and path, and the reply is not the gateway's 404 "Not Found"` };
  }

  #validate(cacheKey: string, schema: unknown, bodyText: string): ReplyProblem | undefined {
    let body: unknown;
    try {
      body = JSON.parse(bodyText);
    } catch {
      return { reason: 'the body is not JSON' };
    }
    let validate = this.#compiled.get(cacheKey);
    if (!validate) {
      validate = this.#ajv.compile(rebase(schema, DOCUMENT_ID) as object);
      this.#compiled.set(cacheKey, validate);
    }
    if (validate(body)) return undefined;
    return { reason: 'the body does not match the documented schema', errors: validate.errors ?? [] };
  }
}
