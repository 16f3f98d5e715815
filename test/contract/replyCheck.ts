/**
 * A `fetch` that checks the API's replies against docs/openapi.yaml as they arrive: each reply it
 * selects is cloned (the caller still reads the original) and validated in the background;
 * {@link ReplyCheck.settle} waits for the checks and hands over what failed.
 *
 * This module imports nothing heavy: the document is parsed and Ajv loaded only when the first
 * selected reply arrives, so a test file that never calls the API pays nothing for it.
 */
import type { ReplyProblem, ReplyValidator } from './openapi.js';

/** One reply that does not match the document. */
export interface Violation {
  readonly method: string;
  readonly url: string;
  readonly status: number;
  readonly problem: ReplyProblem;
  readonly body: string;
}

export interface ReplyCheck {
  /** `fetch`, with every selected reply checked. */
  readonly fetch: typeof fetch;
  /** Waits for the checks of the replies so far, then returns their violations and forgets them. */
  settle(): Promise<Violation[]>;
}

export interface ReplyCheckOptions {
  /** Which replies to check. @default {@link isLocalStackReply} */
  readonly select?: (url: URL, reply: Response) => boolean;
  /** The validator, built on first use. @default docs/openapi.yaml */
  readonly validator?: () => Promise<ReplyValidator>;
}

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]']);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A reply of the local stack's API: an `/v1/...` path on a local server, answered with the
 * `apigw-requestid` the local API gateway (local/apiServer.ts) gives every reply, a random UUID.
 * The UUID is what tells the stack apart from the stubs of the client tests (test/support/
 * signedStub.ts answers `req-<n>`), which answer deliberately malformed replies to test the SDK.
 */
export function isLocalStackReply(url: URL, reply: Response): boolean {
  return LOCAL_HOSTS.has(url.hostname) && url.pathname.startsWith('/v1/') && UUID.test(reply.headers.get('apigw-requestid') ?? '');
}

/** The document's validator, built once per process (each vitest worker) on first use. */
let shared: Promise<ReplyValidator> | undefined;
function documentValidator(): Promise<ReplyValidator> {
  shared ??= import('./openapi.js').then((m) => new m.ReplyValidator(m.loadDocument()));
  return shared;
}

/** The method and URL of a `fetch` call, whatever form its arguments take. */
function requestOf(input: Parameters<typeof fetch>[0], init?: RequestInit): { method: string; url: URL } {
  const isRequest = typeof input === 'object' && 'method' in input && !(input instanceof URL);
  const url = new URL(isRequest ? input.url : String(input));
  const method = (init?.method ?? (isRequest ? input.method : 'GET')).toUpperCase();
  return { method, url };
}

/** Wraps `inner` so that the replies `options.select` picks are checked against the document. */
export function checkReplies(inner: typeof fetch, options: ReplyCheckOptions = {}): ReplyCheck {
  const select = options.select ?? isLocalStackReply;
  const validator = options.validator ?? documentValidator;
  const pending = new Set<Promise<void>>();
  let violations: Violation[] = [];

  const inspect = async (method: string, url: URL, reply: Response): Promise<void> => {
    let body: string;
    try {
      body = await reply.text();
    } catch {
      return; // the caller aborted the request: there is no reply to judge
    }
    const problem = (await validator()).check(method, url.pathname, reply.status, body);
    if (problem) violations.push({ method, url: url.pathname + url.search, status: reply.status, problem, body });
  };

  const wrapped = (async (input: Parameters<typeof fetch>[0], init?: RequestInit): Promise<Response> => {
    const reply = await inner(input, init);
    const { method, url } = requestOf(input, init);
    if (select(url, reply)) {
      const check = inspect(method, url, reply.clone()).catch((err: unknown) => {
        violations.push({
          method,
          url: url.pathname,
          status: reply.status,
          problem: { reason: `the check failed: ${String(err)}` },
          body: '',
        });
      });
      pending.add(check);
      void check.finally(() => pending.delete(check));
    }
    return reply;
  }) as typeof fetch;

  return {
    fetch: wrapped,
    async settle() {
      while (pending.size > 0) await Promise.all([...pending]);
      const found = violations;
      violations = [];
      return found;
    },
  };
}

/** Longest body shown in a report. */
const BODY_SHOWN = 600;

/** A report of violations, one block each: what was called, what came back, and why it does not match. */
export function formatViolations(found: readonly Violation[]): string {
  const blocks = found.map((v) => {
    const errors = (v.problem.errors ?? []).map((e) => `    ${e.instancePath || '(body)'} ${e.message ?? ''} ${JSON.stringify(e.params)}`);
    const body = v.body.length > BODY_SHOWN ? `${v.body.slice(0, BODY_SHOWN)}... (${v.body.length} chars)` : v.body;
    return [`  ${v.method} ${v.url} -> ${v.status}: ${v.problem.reason}`, ...errors, `    body: ${body}`].join('\n');
  });
  return `${found.length} API repl${found.length === 1 ? 'y does' : 'ies do'} not match docs/openapi.yaml:\n${blocks.join('\n')}`;
}
