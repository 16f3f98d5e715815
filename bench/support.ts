/**
 * What the benchmark's phases share: progress lines, machine facts, percentiles, emulators in
 * processes of their own, a billing meter (SDK middleware) and a queue consumer that measures
 * lateness where a tenant's worker would.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { cpus, freemem, loadavg, release, totalmem, type } from 'node:os';
import { fileURLToPath } from 'node:url';
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import type { OutcomeReport, OutcomeResult, OutcomeSink } from '../client/outcomes.js';
import type { HttpResult } from '../lambdas/runtime/http.js';
import { DeleteMessageBatchCommand, ReceiveMessageCommand, type SQSClient } from '@aws-sdk/client-sqs';
import type { DispatchDeps } from '../core/dispatch/round.js';
import { dispatchLoop, type DispatchStepResult } from '../core/dispatch/loop.js';
import { planDispatchers, type DispatchPlan } from '../core/dispatch/plan.js';
import type { JobRow } from '../core/model/ports.js';
import { emulatorsAt, type Emulators } from '../test/support/emulators.js';
import { httpEvent, type TestSystem } from '../test/support/system.js';

const benchStart = Date.now();

/** A progress line: seconds since the benchmark started, then the message. */
export function progress(message: string): void {
  console.log(`[bench ${((Date.now() - benchStart) / 1000).toFixed(1).padStart(6)} s] ${message}`);
}

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)));

/** Load averages (1, 5, 15 min) rounded, to say how busy the shared machine was. */
export function load(): [number, number, number] {
  const [a, b, c] = loadavg();
  return [+a!.toFixed(2), +b!.toFixed(2), +c!.toFixed(2)];
}

export interface MachineInfo {
  cpuModel: string;
  cpus: number;
  memoryGiB: number;
  freeMemoryGiB: number;
  os: string;
  node: string;
  loadAvgAtStart: [number, number, number];
}

export function machineInfo(): MachineInfo {
  const c = cpus();
  return {
    cpuModel: c[0]?.model.trim() ?? 'unknown',
    cpus: c.length,
    memoryGiB: +(totalmem() / 2 ** 30).toFixed(1),
    freeMemoryGiB: +(freemem() / 2 ** 30).toFixed(1),
    os: `${type()} ${release()}`,
    node: process.version,
    loadAvgAtStart: load(),
  };
}

export interface Summary {
  count: number;
  p50Ms: number;
  p95Ms: number;
  p99Ms: number;
  /** The 99.9th percentile (with fewer than 1,000 values, nearest rank: the maximum or near it). */
  p999Ms: number;
  maxMs: number;
  meanMs: number;
  minMs: number;
}

/** Nearest-rank percentiles of a list of milliseconds. */
export function summarize(values: readonly number[]): Summary {
  const s = [...values].sort((a, b) => a - b);
  const at = (p: number) => (s.length === 0 ? 0 : s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!);
  const mean = s.length === 0 ? 0 : s.reduce((a, b) => a + b, 0) / s.length;
  return {
    count: s.length,
    p50Ms: at(50),
    p95Ms: at(95),
    p99Ms: at(99),
    p999Ms: at(99.9),
    maxMs: s.length ? s[s.length - 1]! : 0,
    meanMs: Math.round(mean),
    minMs: s.length ? s[0]! : 0,
  };
}

export const median = (xs: readonly number[]) => summarize(xs).p50Ms;

function startChild(kind: 'dynalite' | 'fauxqs'): Promise<{ child: ChildProcess; port: number }> {
  const child = fork(fileURLToPath(new URL('./emulator.ts', import.meta.url)), [kind], {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve({ child, port: (m as { port: number }).port }));
    child.once('exit', (code) => reject(new Error(`${kind} exited before it was ready (code ${code})`)));
  });
}

/**
 * dynalite and fauxqs, each in a process of its own (on AWS the storage never shares a core with
 * the dispatcher), behind the same interface as the tests' in-process emulators, so that
 * `createSystem` from test/support/system.ts wires the core over them.
 */
export async function startRemoteEmulators(): Promise<Emulators & { pids: { dynamo?: number; sqs?: number } }> {
  const [dyn, sqsChild] = await Promise.all([startChild('dynalite'), startChild('fauxqs')]);
  const em = emulatorsAt(`http://127.0.0.1:${dyn.port}`, `http://127.0.0.1:${sqsChild.port}`, async () => {
    for (const c of [dyn.child, sqsChild.child]) {
      if (c.exitCode !== null || c.signalCode !== null) continue;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill('SIGTERM');
      await Promise.race([exited, sleep(3_000)]);
      if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    }
  });
  return Object.assign(em, { pids: { dynamo: dyn.child.pid, sqs: sqsChild.child.pid } });
}

/**
 * CPU time (µs, user + system) a process has used so far, from /proc (Linux; clock ticks of
 * 10 ms): undefined elsewhere. The storage emulators' CPU per job does not depend on what else
 * the machine runs, where their rate does.
 */
export function processCpuUs(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of stat (utime, stime), counted from the state (field 3) here.
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return undefined;
  }
}

/** Billing units of one service operation: requests, and what AWS bills them in. */
export interface Metered {
  requests: number;
  /** DynamoDB: read or write request units; SQS: billed requests (64 KB chunks). */
  units: number;
}

const DYNAMO_READS = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem']);
const DYNAMO_METERED = new Set(['GetItem', 'Query', 'Scan', 'BatchGetItem', 'PutItem', 'UpdateItem', 'DeleteItem', 'BatchWriteItem']);
const SQS_CHUNK = 64 * 1024;

type Capacity = { CapacityUnits?: number } | undefined;

/**
 * Turns requests into the units AWS bills them in, as an SDK middleware beside the
 * `RequestCounter` (adapters/requestCounter.ts): DynamoDB requests ask for `ReturnConsumedCapacity: TOTAL` (dynalite
 * computes it from item sizes as DynamoDB does: writes per 1 KB, reads per 4 KB, eventually
 * consistent at half), with DynamoDB's minimum of 0.5 RRU per eventually consistent read that
 * finds nothing and 1 WRU per failed conditional write; SQS requests count one per 64 KB chunk
 * of message payload.
 */
export class BillingMeter {
  readonly #m = new Map<string, Metered>();

  attachDynamo(client: DynamoDBClient): DynamoDBClient {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const op = (context.commandName ?? 'Unknown').replace(/Command$/, '');
        const input = args.input as Record<string, unknown>;
        if (DYNAMO_METERED.has(op)) input.ReturnConsumedCapacity = 'TOTAL';
        const read = DYNAMO_READS.has(op);
        try {
          const res = await next(args);
          const out = res.output as { ConsumedCapacity?: Capacity | Capacity[] };
          const caps = Array.isArray(out.ConsumedCapacity) ? out.ConsumedCapacity : [out.ConsumedCapacity];
          let units = caps.reduce((n, c) => n + (c?.CapacityUnits ?? 0), 0);
          if (read) units = Math.max(units, input.ConsistentRead ? 1 : 0.5);
          this.add(`DynamoDB.${op}`, units);
          return res;
        } catch (err) {
          // A failed conditional write is billed (at least 1 WRU); a throttled request is not.
          this.add(`DynamoDB.${op}`, (err as Error).name === 'ConditionalCheckFailedException' ? 1 : 0);
          throw err;
        }
      },
      { step: 'initialize', name: 'benchBillingMeter', override: true },
    );
    return client;
  }

  attachSqs(client: SQSClient): SQSClient {
    client.middlewareStack.add(
      (next, context) => async (args) => {
        const op = (context.commandName ?? 'Unknown').replace(/Command$/, '');
        const input = args.input as {
          MessageBody?: string;
          Entries?: { MessageBody?: string; MessageAttributes?: Record<string, { StringValue?: string }> }[];
          MessageAttributes?: Record<string, { StringValue?: string }>;
        };
        const res = await next(args);
        let bytes = 0;
        if (op === 'SendMessage') bytes = msgBytes(input.MessageBody, input.MessageAttributes);
        else if (op === 'SendMessageBatch')
          bytes = (input.Entries ?? []).reduce((n, e) => n + msgBytes(e.MessageBody, e.MessageAttributes), 0);
        else if (op === 'ReceiveMessage') {
          const msgs =
            (res.output as { Messages?: { Body?: string; MessageAttributes?: Record<string, { StringValue?: string }> }[] }).Messages ?? [];
          bytes = msgs.reduce((n, m) => n + msgBytes(m.Body, m.MessageAttributes), 0);
        }
        this.add(`SQS.${op}`, Math.max(1, Math.ceil(bytes / SQS_CHUNK)));
        return res;
      },
      { step: 'initialize', name: 'benchBillingMeter', override: true },
    );
    return client;
  }

  add(key: string, units: number): void {
    const m = this.#m.get(key) ?? { requests: 0, units: 0 };
    m.requests++;
    m.units += units;
    this.#m.set(key, m);
  }

  snapshot(): Record<string, Metered> {
    return Object.fromEntries([...this.#m].sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => [k, { ...v }]));
  }

  reset(): void {
    this.#m.clear();
  }
}

function msgBytes(body: string | undefined, attrs: Record<string, { StringValue?: string }> | undefined): number {
  let n = Buffer.byteLength(body ?? '', 'utf8');
  for (const [k, v] of Object.entries(attrs ?? {})) n += Buffer.byteLength(k) + Buffer.byteLength(v.StringValue ?? '') + 6;
  return n;
}

/** Difference of two meter snapshots (after − before). */
export function meterDelta(after: Record<string, Metered>, before: Record<string, Metered>): Record<string, Metered> {
  const out: Record<string, Metered> = {};
  for (const [k, v] of Object.entries(after)) {
    const b = before[k] ?? { requests: 0, units: 0 };
    if (v.requests - b.requests > 0) out[k] = { requests: v.requests - b.requests, units: +(v.units - b.units).toFixed(3) };
  }
  return out;
}

export interface Received {
  readonly jobId: string;
  readonly runAtMs: number;
  /** Local clock when the ReceiveMessage call returned. */
  readonly receivedAt: number;
  /** SQS's ApproximateFirstReceiveTimestamp. */
  readonly firstReceiveAt: number;
  /** SQS's SentTimestamp: when the send was accepted (the dispatcher's send acknowledged); 0 if the queue gave none. */
  readonly sentAt: number;
  /** A recurring schedule's occurrence: the `schedule` message attribute (undefined for a one-off job). */
  readonly schedule?: string;
  /** The body's `schedule` field (it must equal the attribute). */
  readonly bodySchedule?: string;
}

/**
 * A tenant's worker: long-polls a queue with a few pollers, records when each message arrived
 * against its `runAt` attribute, and deletes in the background (a delete never delays the next
 * receive).
 */
export function consumeQueue(
  sqs: SQSClient,
  queueUrl: string,
  opts: { pollers?: number } = {},
): { received: Received[]; stop(): Promise<void>; waitFor(n: number, timeoutMs: number): Promise<boolean> } {
  const received: Received[] = [];
  const abort = new AbortController();
  const deletes = new Set<Promise<unknown>>();
  const poll = async () => {
    while (!abort.signal.aborted) {
      try {
        const res = await sqs.send(
          new ReceiveMessageCommand({
            QueueUrl: queueUrl,
            MaxNumberOfMessages: 10,
            WaitTimeSeconds: 1,
            MessageAttributeNames: ['runAt', 'schedule'],
            MessageSystemAttributeNames: ['ApproximateFirstReceiveTimestamp', 'SentTimestamp'],
          }),
          { abortSignal: abort.signal },
        );
        const receivedAt = Date.now();
        const msgs = res.Messages ?? [];
        for (const m of msgs) {
          const body = JSON.parse(m.Body ?? '{}') as { jobId?: string; runAt?: string; schedule?: string };
          const schedule = m.MessageAttributes?.schedule?.StringValue;
          received.push({
            jobId: body.jobId ?? '',
            runAtMs: Date.parse(m.MessageAttributes?.runAt?.StringValue ?? body.runAt ?? ''),
            receivedAt,
            firstReceiveAt: Number(m.Attributes?.ApproximateFirstReceiveTimestamp ?? 0),
            sentAt: Number(m.Attributes?.SentTimestamp ?? 0),
            ...(schedule !== undefined ? { schedule } : {}),
            ...(body.schedule !== undefined ? { bodySchedule: body.schedule } : {}),
          });
        }
        if (msgs.length > 0) {
          const p = sqs
            .send(
              new DeleteMessageBatchCommand({
                QueueUrl: queueUrl,
                Entries: msgs.map((m, i) => ({ Id: String(i), ReceiptHandle: m.ReceiptHandle! })),
              }),
            )
            .catch(() => undefined)
            .finally(() => deletes.delete(p));
          deletes.add(p);
        }
      } catch {
        if (!abort.signal.aborted) await sleep(50);
      }
    }
  };
  const loops = Array.from({ length: opts.pollers ?? 3 }, poll);
  return {
    received,
    async stop() {
      abort.abort();
      await Promise.all(loops);
      await Promise.all(deletes);
    },
    async waitFor(n, timeoutMs) {
      const until = Date.now() + timeoutMs;
      while (new Set(received.map((r) => r.jobId)).size < n) {
        if (Date.now() > until) return false;
        await sleep(100);
      }
      return true;
    },
  };
}

/**
 * A JSON payload of about `bytes` bytes that looks like a real one (ids, amounts, words, a
 * timestamp), not a run of one letter: it compresses as real payloads do.
 */
export function realisticPayload(i: number, bytes = 1024): Record<string, unknown> {
  const words = [
    'invoice',
    'reminder',
    'customer',
    'renewal',
    'shipment',
    'account',
    'balance',
    'overdue',
    'notify',
    'premium',
    'region',
    'order',
    'refund',
    'digest',
    'weekly',
    'trial',
  ];
  const rnd = (n: number) => Math.floor(Math.random() * n);
  const p: Record<string, unknown> = {
    type: `${words[rnd(words.length)]}.${words[rnd(words.length)]}`,
    seq: i,
    customerId: randomUUID(),
    orderId: randomUUID(),
    amountCents: rnd(1_000_000),
    currency: 'EUR',
    createdAt: new Date(Date.now() - rnd(86_400_000)).toISOString(),
    tags: [] as string[],
    note: '',
  };
  const tags = p.tags as string[];
  while (JSON.stringify(p).length < bytes - 120) tags.push(`${words[rnd(words.length)]}-${rnd(10_000)}`);
  let note = '';
  while (JSON.stringify({ ...p, note }).length < bytes) note += words[rnd(words.length)]!.slice(0, 1 + rnd(7)) + ' ';
  p.note = note.slice(0, Math.max(0, note.length - (JSON.stringify({ ...p, note }).length - bytes)));
  return p;
}

export interface LoadShape {
  /** Jobs per second. */
  readonly rate: number;
  readonly durationMs: number;
  /** Each job is due this far ahead of its submission, uniformly at random milliseconds. */
  readonly minAheadMs: number;
  readonly maxAheadMs: number;
}

export interface LoadReport {
  submitted: number;
  failed: number;
  /** Most submissions in flight at once. */
  maxInFlight: number;
  /** How far the generator fell behind its schedule at worst (ms). */
  maxLagMs: number;
  /** Time from the call to its acknowledgement. */
  submitMs: Summary;
  firstError?: string;
}

/**
 * An open-loop steady load: job `i` is submitted at `start + i / rate` whatever the previous
 * ones are doing (submissions overlap), due `minAheadMs..maxAheadMs` after that moment at a
 * random millisecond. `submit` resolves when the system has accepted the job.
 */
export async function steadyLoad(
  shape: LoadShape,
  submit: (i: number, dueMs: number) => Promise<void>,
  label: string,
): Promise<LoadReport> {
  const total = Math.round((shape.rate * shape.durationMs) / 1000);
  const start = Date.now();
  let next = 0;
  let inFlight = 0;
  let maxInFlight = 0;
  let failed = 0;
  let maxLagMs = 0;
  let firstError: string | undefined;
  const took: number[] = [];
  const pending = new Set<Promise<void>>();
  let lastReport = start;
  while (next < total) {
    const now = Date.now();
    const target = Math.min(total, Math.floor(((now - start) * shape.rate) / 1000) + 1);
    if (target - 1 > next) maxLagMs = Math.max(maxLagMs, now - (start + (next * 1000) / shape.rate));
    for (; next < target; next++) {
      const i = next;
      const sentAt = Date.now();
      const dueMs = sentAt + shape.minAheadMs + Math.floor(Math.random() * (shape.maxAheadMs - shape.minAheadMs));
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      const p: Promise<void> = submit(i, dueMs)
        .then(() => void took.push(Date.now() - sentAt))
        .catch((err: unknown) => {
          failed++;
          firstError ??= (err as Error).message;
        })
        .finally(() => {
          inFlight--;
          pending.delete(p);
        });
      pending.add(p);
    }
    if (now - lastReport >= 10_000) {
      lastReport = now;
      progress(`${label}: ${next}/${total} submitted, ${inFlight} in flight, ${failed} failed, load ${load().join(' ')}`);
    }
    await sleep(start + (next * 1000) / shape.rate - Date.now());
  }
  await Promise.all(pending);
  return { submitted: total - failed, failed, maxInFlight, maxLagMs, submitMs: summarize(took), ...(firstError ? { firstError } : {}) };
}

/**
 * The tick in process, as the state machine runs it: an execution at once and every `everyMs`,
 * each planning its dispatchers from the table (core/dispatch/plan.ts) and running them until
 * `runMs` after its start, overlapping the next. Resolves once aborted and every loop ended.
 */
export async function runTicks(
  deps: DispatchDeps,
  opts: {
    name: string;
    signal: AbortSignal;
    everyMs?: number;
    runMs?: number;
    onPlan?: (p: DispatchPlan) => void;
    onStep?: (r: DispatchStepResult) => void;
  },
): Promise<void> {
  const loops: Promise<void>[] = [];
  let n = 0;
  const execute = async () => {
    const start = Date.now();
    const untilMs = start + (opts.runMs ?? 90_000);
    const plan = await planDispatchers({ store: deps.store, settings: deps.settings, log: deps.log }, start, untilMs);
    opts.onPlan?.(plan);
    const owner = `${opts.name}-${n++}`;
    for (const groups of plan.dispatchers)
      loops.push(
        handledLater(dispatchLoop(deps, { groups, owner, ownerStartMs: start, untilMs, signal: opts.signal, onStep: opts.onStep })),
      );
  };
  const executions: Promise<void>[] = [handledLater(execute())];
  const timer = setInterval(() => executions.push(handledLater(execute())), opts.everyMs ?? 60_000);
  await new Promise<void>((resolve) =>
    opts.signal.aborted ? resolve() : opts.signal.addEventListener('abort', () => resolve(), { once: true }),
  );
  clearInterval(timer);
  await Promise.all(executions);
  await Promise.all(loops);
}

/**
 * Writes `count` table-path rows as ingest writes them (realistic payloads, due 7 ms apart from
 * `due`), spread round-robin over `tenants`, 100 puts at a time: the data the listing phases read.
 */
export async function writeListingRows(sys: TestSystem, tenants: readonly string[], count: number, due: number): Promise<JobRow[]> {
  const { shardCount } = sys.w.config.settings;
  const rows: JobRow[] = Array.from({ length: count }, (_, i) => {
    const tenant = tenants[i % tenants.length]!;
    const { shard, random } = sys.w.codec.placement(tenant, shardCount);
    const dueMs = due + i * 7;
    return {
      shard,
      dueMs,
      tenant,
      jobId: sys.w.codec.encode({ tenant, shard, dueMs, path: 't', random }),
      payload: JSON.stringify(realisticPayload(i)),
    };
  });
  for (let i = 0; i < rows.length; i += 100) await Promise.all(rows.slice(i, i + 100).map((r) => sys.w.store.putJob(r)));
  return rows;
}

/** Reports the outcomes handler answered, and its time, counted by {@link inProcessOutcomes}. */
export interface OutcomeCalls {
  reports: number;
  handlerMs: number;
  /** Entries the handler kept (answered with a state). */
  stored: number;
}

/**
 * The outcomes route run in process as a Worker's client (`reportOutcomes`): each report one
 * invocation of `handle`, timed; `before` sees each report as it is sent. A reply other than 200
 * throws (the Worker reports the error).
 */
export function inProcessOutcomes(
  handle: (event: APIGatewayProxyEventV2) => Promise<HttpResult>,
  before?: (outcomes: readonly OutcomeReport[]) => void,
): { sink: OutcomeSink; calls: OutcomeCalls } {
  const calls: OutcomeCalls = { reports: 0, handlerMs: 0, stored: 0 };
  const sink: OutcomeSink = {
    async reportOutcomes(tenant, outcomes) {
      before?.(outcomes);
      calls.reports++;
      const t0 = performance.now();
      const res = await handle(
        httpEvent('POST', `/v1/tenants/${tenant}/jobs/outcomes`, { body: JSON.stringify({ outcomes }), pathParameters: { tenant } }),
      );
      calls.handlerMs += performance.now() - t0;
      if (res.statusCode !== 200) throw new Error(`outcomes answered ${res.statusCode}: ${res.body}`);
      const reply = JSON.parse(res.body) as { results: OutcomeResult[] };
      calls.stored += reply.results.filter((r) => 'state' in r).length;
      return reply;
    },
  };
  return { sink, calls };
}

/**
 * `p`, its failure marked as handled now: awaited later (once the run it belongs to stops), a
 * failure meanwhile (an emulator dropping a connection under load) fails that await instead of
 * ending the process as an unhandled rejection.
 */
export function handledLater<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}
