/**
 * The page's calls to the Dynein API. They go to the `dynein ui` server's `api/...` proxy, which
 * signs each one (SigV4): the page holds no key. The URLs are relative, below the page's
 * `/<token>/`, which the server requires on every request.
 */
import type { ApiErrorBody } from './apiTypes.js';
import { state } from './state.js';

/**
 * An API reply: `data` is the parsed body (`null` when empty). A failed call has `ok: false`;
 * `status` 0 when the `dynein ui` server did not answer at all.
 */
export type ApiReply<T> = { readonly ok: true; readonly status: number; readonly data: T | null } | FailedReply;

/** A reply that failed: its body, when any, says why. */
export interface FailedReply {
  readonly ok: false;
  readonly status: number;
  readonly data: ApiErrorBody | null;
}

/**
 * A request body already written as JSON text, sent as it is: `callApi` serialises any other body
 * with `JSON.stringify`, which would rewrite a payload the user typed (`1.50` as `1.5`, spacing).
 *
 * @example callApi('POST', '/dlq/edit', new JsonText(`{"handle":${JSON.stringify(handle)},"payload":${typed}}`))
 */
export class JsonText {
  constructor(readonly text: string) {}
}

/**
 * Calls the selected tenant's route `path` (below `/v1/tenants/{tenant}`). It never throws: a
 * failure, the network's included, is a reply with `ok: false` for the page to show. A body is
 * sent as JSON: `JSON.stringify(body)`, or a {@link JsonText}'s text byte for byte.
 *
 * @example const reply = await callApi<JobPage>('GET', '/jobs?limit=25');
 */
export async function callApi<T>(method: 'GET' | 'POST' | 'DELETE', path: string, body?: unknown): Promise<ApiReply<T>> {
  // The server forwards only calls with this header: another site's page cannot send it.
  const headers: Record<string, string> = { 'x-dynein-ui': '1' };
  const init: RequestInit = { method, headers };
  if (body !== undefined) {
    headers['content-type'] = 'application/json';
    init.body = body instanceof JsonText ? body.text : JSON.stringify(body);
  }
  let res: Response;
  try {
    res = await fetch(`api/v1/tenants/${encodeURIComponent(state.tenant)}${path}`, init);
  } catch (err) {
    return { ok: false, status: 0, data: { message: `the job browser server is unreachable (${(err as Error).message})` } };
  }
  const data = parseBody(await res.text());
  return res.ok ? { ok: true, status: res.status, data: data as T | null } : { ok: false, status: res.status, data: data as ApiErrorBody };
}

/** JSON, or the text as the message of an error (a proxy's or gateway's plain-text reply). */
function parseBody(text: string): unknown {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return { message: text };
  }
}

/**
 * A 404 from API Gateway itself (no error code): the route is not deployed on this stack (one
 * older than the route). The page then says the feature is not available, rather than an error.
 */
export function missingRoute(reply: ApiReply<unknown>): boolean {
  return !reply.ok && reply.status === 404 && !reply.data?.error;
}

/**
 * A failed reply in words: the API's code and message, and the HTTP status.
 *
 * @example errorText(reply) // 'AlreadyQueued: the job was delivered ... (HTTP 409)'
 */
export function errorText(reply: FailedReply): string {
  const error: { readonly code?: string; readonly message?: string } | null = reply.data?.error ?? reply.data;
  const text = error ? `${error.code ? `${error.code}: ` : ''}${error.message ?? ''}` : '';
  return (text || `HTTP ${reply.status}`) + (reply.status ? ` (HTTP ${reply.status})` : '');
}
