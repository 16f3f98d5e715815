/**
 * The HTTP transport of `DyneinClient`: each call signed with SigV4 (service `execute-api`), each
 * attempt bounded by a timeout, retried on 429, 5xx and network errors (exponential backoff with
 * full jitter, at least `Retry-After`, bounded in attempts and total time), JSON replies parsed
 * and error replies turned into the typed errors of errors.ts. The per-resource calls
 * (resources/*.ts) go through {@link ApiTransport.request}.
 */
import { fromNodeProviderChain } from '@aws-sdk/credential-providers';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { backoffMs, cutText, sleep } from '../core/util/index.js';
import { type DyneinError, DyneinApiError, NetworkError, errorFromResponse } from './errors.js';
import { type OtelApi, otelApi } from './tracing.js';

/** Static keys, or a provider of (refreshable) keys, as the AWS SDK takes them. */
export type Credentials = ConstructorParameters<typeof SignatureV4>[0]['credentials'];

export interface RetryOptions {
  /** HTTP attempts per request, the first included. @default 5 */
  readonly maxAttempts?: number;
  /** Backoff base: attempt n waits a uniform delay in `[0, min(capMs, baseMs * 2^(n-1)))`. @default 100 */
  readonly baseMs?: number;
  /** @default 5_000 */
  readonly capMs?: number;
  /** No retry starts later than this after the first attempt. @default 30_000 */
  readonly maxElapsedMs?: number;
  /** Each attempt is abandoned (and retried) after this. @default 10_000 */
  readonly attemptTimeoutMs?: number;
}

export interface DyneinClientOptions {
  /** The HTTP API's URL, e.g. `https://abc123.execute-api.eu-west-1.amazonaws.com` or `http://127.0.0.1:8080`. */
  readonly endpoint: string;
  /** Region the API lives in (the SigV4 scope). */
  readonly region: string;
  /** @default the AWS default provider chain (environment, SSO, profile, container, instance) */
  readonly credentials?: Credentials;
  readonly retry?: RetryOptions;
  /** Clock and randomness, for tests. */
  readonly now?: () => number;
  readonly random?: () => number;
  /**
   * OpenTelemetry (docs/tracing.md): each request carries the active context's trace headers
   * (`traceparent`, `tracestate`, as the application's propagator writes them), so the jobs it
   * submits go in the caller's trace. Default: `@opentelemetry/api` when the application has it
   * (without a registered propagator it writes nothing); pass the module in a bundle; `false`: none.
   */
  readonly otel?: OtelApi | false;
}

/** One attempt's result: the parsed reply, or the typed error (and the server's `Retry-After`). */
type Attempt<T> = { ok: true; status: number; value: T } | { ok: false; error: DyneinError; retryAfterMs?: number };

/** Signs, sends and retries the API's requests for one client. */
export class ApiTransport {
  /** The retry policy, defaults filled in (the batch call retries its failed jobs with it too). */
  readonly retry: Required<RetryOptions>;
  readonly now: () => number;
  readonly random: () => number;
  readonly #base: URL;
  readonly #signer: SignatureV4;
  readonly #otel: OtelApi | false | undefined;

  constructor(opts: DyneinClientOptions) {
    this.#base = new URL(opts.endpoint.endsWith('/') ? opts.endpoint : `${opts.endpoint}/`);
    this.#signer = new SignatureV4({
      service: 'execute-api',
      region: opts.region,
      credentials: opts.credentials ?? fromNodeProviderChain(),
      sha256: Hash.bind(null, 'sha256'),
    });
    this.retry = { maxAttempts: 5, baseMs: 100, capMs: 5_000, maxElapsedMs: 30_000, attemptTimeoutMs: 10_000, ...opts.retry };
    this.now = opts.now ?? Date.now;
    this.random = opts.random ?? Math.random;
    this.#otel = opts.otel;
  }

  /** One API call with retries; resolves with the parsed 2xx body or throws a typed error. */
  async request<T>(method: string, path: string, body: string | undefined, signal: AbortSignal | undefined): Promise<T> {
    return (await this.call<T>(method, path, body, signal)).value;
  }

  /** {@link request}, with the reply's HTTP status. */
  async call<T>(
    method: string,
    path: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<{ status: number; value: T }> {
    const { maxAttempts, maxElapsedMs } = this.retry;
    const started = this.now();
    const trace = await this.#traceHeaders();
    for (let attempt = 1; ; attempt++) {
      const outcome = await this.#once<T>(method, path, body, signal, trace);
      if (outcome.ok) return { status: outcome.status, value: outcome.value };
      const { error, retryAfterMs } = outcome;
      error.attempts = attempt;
      if (!error.retryable || attempt >= maxAttempts) throw error;
      // After `Retry-After` (never before it), plus the jittered backoff: clients throttled in
      // the same second (a tenant's maxSubmitsPerSecond) do not all come back at once.
      const jitter = backoffMs(attempt - 1, this.retry, this.random);
      const delay = retryAfterMs === undefined ? jitter : retryAfterMs + jitter;
      if (this.now() + delay - started > maxElapsedMs) throw error;
      await sleep(delay, signal);
      if (signal?.aborted) throw signal.reason;
    }
  }

  /** The active OpenTelemetry context's headers (`traceparent`, `tracestate`), when there is an API and a propagator. */
  async #traceHeaders(): Promise<Record<string, string>> {
    const api = await otelApi(this.#otel);
    if (!api?.propagation || !api.context.active) return {};
    const carrier: Record<string, string> = {};
    api.propagation.inject(api.context.active(), carrier);
    const out: Record<string, string> = {};
    for (const name of ['traceparent', 'tracestate'])
      if (typeof carrier[name] === 'string' && carrier[name] !== '') out[name] = carrier[name];
    return out;
  }

  /** One attempt: the parsed reply, or the typed error (and the server's `Retry-After`). */
  async #once<T>(
    method: string,
    path: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
    extra: Record<string, string>,
  ): Promise<Attempt<T>> {
    let res: Response;
    let text: string;
    try {
      res = await this.#attempt(method, path, body, signal, extra);
      text = await res.text();
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      return { ok: false, error: new NetworkError(`${method} ${new URL(path, this.#base).href} failed: ${describe(err)}`, err) };
    }
    const requestId = res.headers.get('apigw-requestid') ?? res.headers.get('x-request-id') ?? undefined;
    if (!res.ok)
      return {
        ok: false,
        error: errorFromResponse(res.status, text, requestId),
        retryAfterMs: parseRetryAfter(res.headers.get('retry-after'), this.now()),
      };
    try {
      return { ok: true, status: res.status, value: JSON.parse(text) as T };
    } catch {
      throw new DyneinApiError({
        status: res.status,
        code: 'InvalidResponse',
        message: `the API answered ${res.status} with a body that is not JSON (${cutText(text, 100)}): check the endpoint`,
        requestId,
        source: 'gateway',
      });
    }
  }

  /** Signs (afresh: each attempt has its own date) and sends one HTTP request. */
  async #attempt(
    method: string,
    path: string,
    body: string | undefined,
    signal: AbortSignal | undefined,
    extra: Record<string, string>,
  ): Promise<Response> {
    const url = new URL(path, this.#base);
    const headers: Record<string, string> = {
      ...extra,
      host: url.host,
      accept: 'application/json',
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    };
    const signed = await this.#signer.sign({
      method,
      protocol: url.protocol,
      hostname: url.hostname,
      ...(url.port ? { port: Number(url.port) } : {}),
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers,
      body,
    });
    const sent = { ...(signed.headers as Record<string, string>) };
    delete sent.host; // fetch sets it from the URL
    const timeout = AbortSignal.timeout(this.retry.attemptTimeoutMs);
    return fetch(url, { method, headers: sent, body, signal: signal ? AbortSignal.any([signal, timeout]) : timeout });
  }
}

/** `Retry-After` as milliseconds from now: delay-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null, nowMs: number): number | undefined {
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.ceil(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - nowMs);
}

function describe(err: unknown): string {
  const e = err as Error & { cause?: { code?: string; message?: string } };
  if (e?.name === 'TimeoutError') return 'timed out';
  return [e?.message ?? String(err), e?.cause?.code ?? e?.cause?.message].filter(Boolean).join(': ');
}
