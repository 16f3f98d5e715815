/**
 * Fault injection, a test facility of the local stack, the tests and the benchmark: a share of
 * the DynamoDB, SQS and EventBridge Scheduler calls fails as AWS fails them. Set with
 * `DYNEIN_FAULTS` (docs/local.md), e.g. `dynamodb=0.05,sqs=0.05`: 5 % of every HTTP attempt to
 * each service fails, at random, with one of the five failures AWS answers with, equally likely:
 *
 * - two throttles (DynamoDB `ProvisionedThroughputExceededException` and `ThrottlingException`,
 *   SQS `ThrottlingException` and `RequestThrottled`, Scheduler `ThrottlingException`),
 * - a 500 (DynamoDB `InternalServerError`, SQS `InternalFailure`, Scheduler `InternalServerException`),
 * - a timeout (the call hangs for `timeoutMs`, then fails with the SDK's `TimeoutError`),
 * - a reset connection (`ECONNRESET`).
 *
 * Throttles, 500s and resets are refused before they reach the emulator (nothing applied): a reset
 * is the SDK writing a request on a kept-alive connection the far end already closed, AWS's
 * common case. A timeout happens either before the emulator sees the request or after it answered
 * (the write happened, the caller sees only the error), half and half: on AWS a timed-out call
 * says nothing about whether it was applied. (A connection lost after the request was applied
 * looks to the caller exactly like that timeout, so the timeouts cover it.)
 *
 * Errors are real HTTP answers, deserialised by the client's own protocol code, and network
 * errors are shaped as the SDK's Node.js handler shapes them: the SDK's retry strategy classifies
 * them as it classifies AWS's (throttles by error name, 500s by status, timeouts and resets as
 * transient), so its retries absorb most of them, as on AWS.
 *
 * Only the local stack (local/compute.ts, local/services.ts) and the tests install it: the
 * Lambdas' code (lambdas/) never imports this module and never reads `DYNEIN_FAULTS`.
 */
import { randomUUID } from 'node:crypto';

export const FAULT_SERVICES = ['dynamodb', 'sqs', 'scheduler'] as const;
export type FaultService = (typeof FAULT_SERVICES)[number];
export type FaultKind = 'throttle' | 'serverError' | 'timeout' | 'reset';
export const FAULT_KINDS: readonly FaultKind[] = ['throttle', 'serverError', 'timeout', 'reset'];

export interface FaultSettings {
  /** Share of each service's HTTP attempts that fail, 0 to 1 (a service not named: none). */
  readonly rates: Readonly<Partial<Record<FaultService, number>>>;
  /** How long a timeout holds the call before it fails. @default 1000 */
  readonly timeoutMs: number;
  /**
   * Makes the faults repeatable: with a seed, the n-th attempt to each service fails (or not), and
   * how, the same way on every run, whatever the other services' calls did in between. Unset: at
   * random.
   */
  readonly seed?: number;
}

/** One injected fault: `after` when the emulator had applied the request. */
export interface Fault {
  readonly service: FaultService;
  readonly operation: string;
  readonly kind: FaultKind;
  readonly after: boolean;
  /** The error name the caller sees. */
  readonly error: string;
}

export class FaultsConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'FaultsConfigError';
  }
}

const DEFAULT_TIMEOUT_MS = 1_000;
const USAGE = `DYNEIN_FAULTS is a list like 'dynamodb=0.05,sqs=0.05' (keys ${FAULT_SERVICES.join(', ')}: a share from 0 to 1; timeoutMs: 1 to 60000; seed: 0 to 4294967295)`;

/**
 * Parses `DYNEIN_FAULTS`. Empty or unset: no faults (`undefined`). Throws {@link FaultsConfigError},
 * one line naming the problem, for anything else it cannot use.
 *
 * @example parseFaults('dynamodb=0.05,sqs=0.05') // { rates: { dynamodb: 0.05, sqs: 0.05 }, timeoutMs: 1000 }
 */
export function parseFaults(text: string | undefined): FaultSettings | undefined {
  if (text === undefined || text.trim() === '') return undefined;
  const rates: Partial<Record<FaultService, number>> = {};
  let timeoutMs: number | undefined;
  let seed: number | undefined;
  const seen = new Set<string>();
  for (const part of text.split(',')) {
    const entry = part.trim();
    const eq = entry.indexOf('=');
    if (eq <= 0) throw new FaultsConfigError(`DYNEIN_FAULTS: '${entry}' is not key=value; ${USAGE}`);
    const key = entry.slice(0, eq).trim();
    const raw = entry.slice(eq + 1).trim();
    if (seen.has(key)) throw new FaultsConfigError(`DYNEIN_FAULTS: '${key}' is given twice; ${USAGE}`);
    seen.add(key);
    const value = raw === '' ? NaN : Number(raw);
    if (key === 'timeoutMs') {
      if (!Number.isInteger(value) || value < 1 || value > 60_000)
        throw new FaultsConfigError(`DYNEIN_FAULTS: timeoutMs must be a whole number of milliseconds from 1 to 60000, got '${raw}'`);
      timeoutMs = value;
    } else if (key === 'seed') {
      if (!Number.isInteger(value) || value < 0 || value > 0xffff_ffff)
        throw new FaultsConfigError(`DYNEIN_FAULTS: seed must be a whole number from 0 to 4294967295, got '${raw}'`);
      seed = value;
    } else if ((FAULT_SERVICES as readonly string[]).includes(key)) {
      if (!Number.isFinite(value) || value < 0 || value > 1)
        throw new FaultsConfigError(`DYNEIN_FAULTS: ${key} must be a share from 0 to 1 (0.05 is 5 %), got '${raw}'`);
      rates[key as FaultService] = value;
    } else {
      throw new FaultsConfigError(`DYNEIN_FAULTS: unknown key '${key}'; ${USAGE}`);
    }
  }
  return { rates, timeoutMs: timeoutMs ?? DEFAULT_TIMEOUT_MS, ...(seed === undefined ? {} : { seed }) };
}

/** The settings as `DYNEIN_FAULTS` text (for a child process's environment, or a report). */
export function faultsText(s: FaultSettings): string {
  const parts = FAULT_SERVICES.filter((k) => s.rates[k] !== undefined).map((k) => `${k}=${s.rates[k]}`);
  if (s.timeoutMs !== DEFAULT_TIMEOUT_MS) parts.push(`timeoutMs=${s.timeoutMs}`);
  if (s.seed !== undefined) parts.push(`seed=${s.seed}`);
  return parts.join(',');
}

export interface FaultInjectorOptions {
  /** Draws for every service (overrides `settings.seed`). @default per-service seeded streams, or Math.random */
  readonly random?: () => number;
  /** Called for every fault injected. */
  readonly onFault?: (f: Fault) => void;
}

type MiddlewareClient = { middlewareStack: { add: (mw: never, opts: never) => void } };
type Next = (args: unknown) => Promise<{ response: unknown }>;
type Context = { clientName?: string; commandName?: string };

/**
 * Makes a share of a client's requests fail (see the module comment). Counts what it injected.
 *
 * @example
 * const faults = new FaultInjector(parseFaults(process.env.DYNEIN_FAULTS)!);
 * const dynamo = faults.attach(new DynamoDBClient({ endpoint }));
 */
export class FaultInjector {
  readonly #counts = new Map<string, number>();
  readonly #random: (service: FaultService) => number;

  constructor(
    readonly settings: FaultSettings,
    private readonly opts: FaultInjectorOptions = {},
  ) {
    const { random } = opts;
    if (random) this.#random = () => random();
    else if (settings.seed === undefined) this.#random = () => Math.random();
    else {
      const streams = new Map(FAULT_SERVICES.map((service, i) => [service, seededRandom(settings.seed! + i * 0x9e37_79b9)]));
      this.#random = (service) => streams.get(service)!();
    }
  }

  /** Adds the injecting middleware to a client (once per client); a service at rate 0 passes through. */
  attach<C extends MiddlewareClient>(client: C): C {
    const mw = (next: Next, context: Context) => async (args: unknown) => {
      const service = serviceOf(context.clientName);
      const rate = service ? (this.settings.rates[service] ?? 0) : 0;
      if (!service || rate <= 0 || this.#random(service) >= rate) return next(args);
      return this.#inject(service, (context.commandName ?? 'Unknown').replace(/Command$/, ''), next, args);
    };
    // Innermost: below the deserializer (an error answer is parsed as AWS's would be) and below
    // the retry middleware (each attempt may fail, and the SDK's retry strategy sees each).
    (client.middlewareStack.add as (mw: unknown, opts: unknown) => void)(mw, {
      step: 'deserialize',
      priority: 'low',
      name: 'dyneinFaultInjector',
      override: true,
    });
    return client;
  }

  /** Faults injected so far, by `service.kind[.after]`. */
  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.#counts].sort(([a], [b]) => a.localeCompare(b)));
  }

  async #inject(service: FaultService, operation: string, next: Next, args: unknown): Promise<{ response: unknown }> {
    // The five failures equally likely: two throttles, a 500, a timeout, a reset.
    const pick = Math.floor(this.#random(service) * 5);
    const kind: FaultKind = pick < 2 ? 'throttle' : pick === 2 ? 'serverError' : pick === 3 ? 'timeout' : 'reset';
    const after = kind === 'timeout' && this.#random(service) < 0.5;
    const answer = kind === 'throttle' ? throttleAnswer(service, pick) : kind === 'serverError' ? SERVER_ERROR[service] : undefined;
    const error = answer?.type ?? (kind === 'timeout' ? 'TimeoutError' : 'ECONNRESET');
    const key = `${service}.${kind}${after ? '.after' : ''}`;
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + 1);
    this.opts.onFault?.({ service, operation, kind, after, error });
    if (after) drain((await next(args)).response);
    if (answer) return { response: errorResponse(service, answer) };
    if (kind === 'timeout') {
      await new Promise((r) => setTimeout(r, this.settings.timeoutMs));
      throw Object.assign(
        new Error(
          `@smithy/node-http-handler - the request socket timed out after ${this.settings.timeoutMs} ms of inactivity (injected by DYNEIN_FAULTS).`,
        ),
        { name: 'TimeoutError' },
      );
    }
    // As the SDK's Node.js handler rejects a reset socket.
    throw Object.assign(new Error('read ECONNRESET (injected by DYNEIN_FAULTS)'), {
      name: 'TimeoutError',
      code: 'ECONNRESET',
      errno: -104,
      syscall: 'read',
    });
  }
}

/** The injector `DYNEIN_FAULTS` asks for, or none. Throws {@link FaultsConfigError} on a bad value. */
export function faultsFromEnv(env: NodeJS.ProcessEnv = process.env, opts?: FaultInjectorOptions): FaultInjector | undefined {
  const settings = parseFaults(env.DYNEIN_FAULTS);
  return settings ? new FaultInjector(settings, opts) : undefined;
}

/** A small, fast, repeatable stream of numbers in [0, 1) from a seed (mulberry32): for tests and simulations, not secrets. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b_79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

function serviceOf(clientName: string | undefined): FaultService | undefined {
  switch (clientName) {
    case 'DynamoDBClient':
      return 'dynamodb';
    case 'SQSClient':
      return 'sqs';
    case 'SchedulerClient':
      return 'scheduler';
    default:
      return undefined;
  }
}

interface ErrorAnswer {
  readonly status: number;
  /** The error type as the service names it on the wire. */
  readonly type: string;
  /** The namespace of `__type` (JSON 1.0 protocols). */
  readonly namespace?: string;
  readonly message: string;
  /** SQS's JSON protocol also sends the query error code (awsQueryCompatible). */
  readonly queryError?: string;
}

/** The throttle `pick` (0 or 1) of a service. */
function throttleAnswer(service: FaultService, pick: number): ErrorAnswer {
  switch (service) {
    case 'dynamodb':
      return pick === 0
        ? {
            status: 400,
            type: 'ProvisionedThroughputExceededException',
            namespace: 'com.amazonaws.dynamodb.v20120810',
            message: 'The level of configured provisioned throughput for the table was exceeded.',
          }
        : {
            status: 400,
            type: 'ThrottlingException',
            namespace: 'com.amazonaws.dynamodb.v20120810',
            message: 'Rate of requests exceeds the allowed throughput.',
          };
    case 'sqs':
      return pick === 0
        ? { status: 400, type: 'ThrottlingException', namespace: 'com.amazon.coral.availability', message: 'Rate exceeded' }
        : {
            status: 403,
            type: 'RequestThrottled',
            namespace: 'com.amazonaws.sqs',
            message: 'Request is throttled.',
            queryError: 'RequestThrottled;Sender',
          };
    case 'scheduler':
      return { status: 429, type: 'ThrottlingException', message: 'Rate exceeded' };
  }
}

const SERVER_ERROR: Record<FaultService, ErrorAnswer> = {
  dynamodb: { status: 500, type: 'InternalServerError', namespace: 'com.amazonaws.dynamodb.v20120810', message: 'Internal server error' },
  sqs: {
    status: 500,
    type: 'InternalFailure',
    namespace: 'com.amazonaws.sqs',
    message: 'We encountered an internal error. Please try again.',
  },
  scheduler: { status: 500, type: 'InternalServerException', message: 'Unexpected error encountered when processing the request.' },
};

const REASONS: Record<number, string> = { 400: 'Bad Request', 403: 'Forbidden', 429: 'Too Many Requests', 500: 'Internal Server Error' };

/** An error answer in the service's protocol (JSON 1.0 for DynamoDB and SQS, REST-JSON for Scheduler). */
function errorResponse(service: FaultService, a: ErrorAnswer) {
  const json = service !== 'scheduler';
  const body = json ? { __type: `${a.namespace}#${a.type}`, message: a.message } : { Message: a.message };
  return {
    statusCode: a.status,
    reason: REASONS[a.status],
    headers: {
      'content-type': json ? 'application/x-amz-json-1.0' : 'application/json',
      'x-amzn-requestid': randomUUID(),
      'x-amzn-errortype': a.type,
      ...(a.queryError ? { 'x-amzn-query-error': a.queryError } : {}),
    },
    body: Buffer.from(JSON.stringify(body)),
  };
}

/** Reads and discards an answer that the caller never sees (frees the connection for reuse). */
function drain(response: unknown): void {
  const body = (response as { body?: { resume?: () => void } } | undefined)?.body;
  if (body && typeof body.resume === 'function') body.resume();
}
