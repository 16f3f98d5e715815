import { randomBytes, randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { StateMachine } from 'aws-local-stepfunctions';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DispatchStepInput, DispatchStepResult } from '../../core/dispatch/loop.js';
import { ingestJob } from '../../core/ingest/ingest.js';
import { forEachLimit } from '../../core/util/backoff.js';
import { dispatchHandler, tickHandler, type TickInput, type TickPlan } from '../../lambdas/runtime/handlers.js';
import type { Wiring } from '../../lambdas/runtime/wiring.js';
import { ERROR_BACKOFF_SECONDS, MAX_CONSECUTIVE_FAILURES, renderTickDefinition, tickDefinition } from '../../lib/tickDefinition.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { consume, createSystem, waitForEmptyQueue, type Delivery, type TestSystem } from '../support/system.js';

/**
 * The tick state machine as deployed (lib/tickDefinition.ts), validated, and run in
 * aws-local-stepfunctions with its two tasks bound to the real tick and dispatch handlers against
 * dynalite and fauxqs.
 */
const require = createRequire(import.meta.url);
const aslValidator = require('asl-validator') as (definition: object) => {
  isValid: boolean;
  errors: { message?: string }[];
  errorsText(sep?: string): string;
};

const ARNS = {
  tick: 'arn:aws:lambda:us-east-1:000000000000:function:dynein-tick',
  dispatch: 'arn:aws:lambda:us-east-1:000000000000:function:dynein-dispatch',
};
const SETTINGS = { lookaheadMs: 2_000, leaseMs: 4_000, shardCount: 8, groupCount: 4 };

/**
 * The local runner hands each task its input as untyped JSON (and the execution's output too):
 * each is checked for the fields its reader uses, and a wrong shape fails the step, named.
 */
function jsonObject(x: unknown, what: string): Record<string, unknown> {
  if (typeof x !== 'object' || x === null || Array.isArray(x)) throw new TypeError(`${what} is not an object: ${JSON.stringify(x)}`);
  return Object.fromEntries(Object.entries(x));
}

function numberAt(o: Record<string, unknown>, key: string, what: string): number {
  const v = o[key];
  if (typeof v !== 'number') throw new TypeError(`${what}.${key} is not a number: ${JSON.stringify(v)}`);
  return v;
}

function stringAt(o: Record<string, unknown>, key: string, what: string): string {
  const v = o[key];
  if (typeof v !== 'string') throw new TypeError(`${what}.${key} is not a string: ${JSON.stringify(v)}`);
  return v;
}

const isNumbers = (v: unknown): v is number[] => Array.isArray(v) && v.every((n) => typeof n === 'number');

function numbersAt(o: Record<string, unknown>, key: string, what: string): number[] {
  const v = o[key];
  if (!isNumbers(v)) throw new TypeError(`${what}.${key} is not an array of numbers: ${JSON.stringify(v)}`);
  return v;
}

/** The Plan task's input (the definition's Parameters: execution name and start, runMs, cell). */
function asTickInput(x: unknown): TickInput {
  const o = jsonObject(x, 'tick input');
  const cell = o.cell;
  if (cell !== undefined && typeof cell !== 'number' && typeof cell !== 'string')
    throw new TypeError(`tick input.cell is neither a number nor a string: ${JSON.stringify(cell)}`);
  return {
    executionName: stringAt(o, 'executionName', 'tick input'),
    executionStartTime: stringAt(o, 'executionStartTime', 'tick input'),
    ...(o.runMs !== undefined ? { runMs: numberAt(o, 'runMs', 'tick input') } : {}),
    ...(cell !== undefined ? { cell } : {}),
  };
}

/** The Dispatch task's input (a Map item's fields, then each step's result). */
function asDispatchStepInput(x: unknown): DispatchStepInput {
  const what = 'dispatch step input';
  const o = jsonObject(x, what);
  return {
    ...(o.groups !== undefined ? { groups: numbersAt(o, 'groups', what) } : {}),
    ...(o.group !== undefined ? { group: numberAt(o, 'group', what) } : {}),
    owner: stringAt(o, 'owner', what),
    ownerStartMs: numberAt(o, 'ownerStartMs', what),
    untilMs: numberAt(o, 'untilMs', what),
    ...(o.idleWaitSeconds !== undefined ? { idleWaitSeconds: numberAt(o, 'idleWaitSeconds', what) } : {}),
  };
}

/** The plan's items in an execution's output (the Map keeps the Plan task's result: ResultPath null). */
function planItemsOf(output: unknown): TickPlan['items'] {
  const items = jsonObject(output, 'execution output').items;
  if (!Array.isArray(items)) throw new TypeError(`execution output.items is not an array: ${JSON.stringify(items)}`);
  return items.map((item, i) => {
    const what = `plan item ${i}`;
    const o = jsonObject(item, what);
    return {
      groups: numbersAt(o, 'groups', what),
      owner: stringAt(o, 'owner', what),
      ownerStartMs: numberAt(o, 'ownerStartMs', what),
      untilMs: numberAt(o, 'untilMs', what),
      idleWaitSeconds: numberAt(o, 'idleWaitSeconds', what),
      shards: numberAt(o, 'shards', what),
    };
  });
}

interface Step {
  readonly exec: string;
  readonly endedAt: number;
  readonly input: DispatchStepInput;
  readonly result: DispatchStepResult;
}

/**
 * The state machine of a definition, built once per definition and run as often as needed (each
 * run is its own execution). Building one validates the definition (asl-validator, ARNs and paths
 * checked): about half a second of one core, during which nothing else in the process runs, so a
 * second execution started mid-test would stall the first one's steps that long.
 */
const machines = new Map<string, StateMachine>();
function machineOf(definition: object): StateMachine {
  const rendered = renderTickDefinition(definition, ARNS);
  let machine = machines.get(rendered);
  if (!machine) machines.set(rendered, (machine = new StateMachine(JSON.parse(rendered))));
  return machine;
}

/**
 * Starts one execution of the tick state machine, named `name` ($$.Execution.Name; the library
 * sets $$.Execution.StartTime to the moment it starts), its tasks bound to the real handlers.
 */
function startTick(sys: TestSystem, w: Wiring, name: string, runMs: number, steps: Step[], dispatcherRowsPerSecond = 300) {
  const machine = machineOf(tickDefinition({ runMs, timeoutSeconds: 60 }));
  const tick = tickHandler({ store: w.store, settings: { ...sys.w.config.settings, dispatcherRowsPerSecond } });
  const dispatch = dispatchHandler(w);
  // A Lambda invocation always has time left; without it a step would run up to 60 s, the
  // library's default Task timeout.
  const lambdaContext = { getRemainingTimeInMillis: () => 55_000 };
  let plan: TickPlan | undefined;
  const execution = machine.run(
    {},
    {
      context: { Execution: { Name: name } },
      overrides: {
        taskResourceLocalHandlers: {
          Plan: async (input) => (plan = await tick(asTickInput(input))) as never,
          Dispatch: async (input) => {
            const stepInput = asDispatchStepInput(input);
            const result = await dispatch(stepInput, lambdaContext);
            steps.push({ exec: name, endedAt: Date.now(), input: stepInput, result });
            return result as never;
          },
        },
        waitTimeOverrides: { AfterError: 200 },
      },
    },
  );
  return { result: execution.result, plan: () => plan };
}

/** Every job delivered exactly once, none before its runAt; returns the deliveries' lateness (ms). */
function checkDeliveries(deliveries: readonly Delivery[], expected: Map<string, number>): number[] {
  const perJob = new Map<string, number>();
  for (const d of deliveries) perJob.set(d.jobId, (perJob.get(d.jobId) ?? 0) + 1);
  expect([...expected.keys()].filter((id) => !perJob.has(id))).toEqual([]);
  expect([...perJob].filter(([, n]) => n > 1)).toEqual([]);
  expect(deliveries.filter((d) => !expected.has(d.jobId))).toEqual([]);
  const early = deliveries.filter((d) => d.receivedAt < Date.parse(d.runAt) || d.firstReceiveAt < Date.parse(d.runAt));
  expect(early).toEqual([]);
  for (const d of deliveries) expect(Date.parse(d.runAt)).toBe(expected.get(d.jobId));
  return deliveries.map((d) => d.firstReceiveAt - Date.parse(d.runAt));
}

/** Each planned dispatcher's last step (a step belongs to the item whose groups hold its first group). */
function lastSteps(steps: readonly Step[], exec: string, plan: Pick<TickPlan, 'items'>): (Step | undefined)[] {
  return plan.items.map((item) => steps.filter((s) => s.exec === exec && item.groups.includes(s.input.groups![0]!)).at(-1));
}

/** Waits for every job to arrive, stops the consumer and ingest, and checks the deliveries; returns their lateness. */
async function finish(
  sys: TestSystem,
  consumer: ReturnType<typeof consume>,
  ingest: { stop(): Promise<void> },
  expected: Map<string, number>,
): Promise<number[]> {
  await waitForEmptyQueue(em.sqs, sys.tenants.demo!.url, 10_000);
  await consumer.waitFor((d) => new Set(d.map((x) => x.jobId)).size >= expected.size, 5_000);
  await consumer.stop();
  await ingest.stop();
  return checkDeliveries(consumer.deliveries, expected);
}

/**
 * Stores `n` jobs due at random milliseconds in [from, to] (epoch ms) in the table, each as ingest
 * stores a job (core/ingest `ingestJob`: the row, its late pointer, its group's wake-up). Not
 * through the inbound queue: this file checks what the tick's executions do with stored rows, and
 * on a busy machine (three test files beside CI's static checks) ingest took 10-17 s over 300 jobs,
 * so jobs stored after the executions' last reads were never sent by them (2026-11-28). The way in
 * has its own tests.
 */
async function submitDue(sys: TestSystem, n: number, from: number, to: number): Promise<Map<string, number>> {
  // Never within the lookahead of the write itself, however long the set-up before it took.
  const first = Math.max(from, Date.now() + SETTINGS.lookaheadMs + 1_000);
  const last = Math.max(to, first + 1_000);
  const dueAt = Array.from({ length: n }, () => first + Math.floor(Math.random() * (last - first))).sort((a, b) => a - b);
  const expected = new Map<string, number>();
  await forEachLimit(
    dueAt.map((dueMs, i) => ({ dueMs, i })),
    16,
    async ({ dueMs, i }) => {
      const shard = Math.floor(Math.random() * SETTINGS.shardCount);
      const jobId = sys.w.codec.encode({ tenant: 'demo', shard, dueMs, path: 't', random: randomBytes(12).toString('base64url') });
      expect(await ingestJob(sys.w.ingest, { jobId, tenant: 'demo', shard, dueMs, payload: JSON.stringify({ i }) })).toBe('created');
      expected.set(jobId, dueMs);
    },
  );
  return expected;
}

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

describe.concurrent('tick state machine definition', () => {
  it("passes the cell to the tick, and bounds the Map's failure handling by maxConsecutiveFailures", () => {
    const rendered = JSON.parse(renderTickDefinition(tickDefinition({ maxConsecutiveFailures: 10 }), ARNS, 3));
    expect(aslValidator(rendered).errors ?? []).toEqual([]);
    expect(rendered.States.Plan.Parameters.cell).toBe('3');
    const states = rendered.States.Groups.ItemProcessor.States;
    expect(states.TooManyErrors.Choices[0].NumericGreaterThanEquals).toBe(10);
    expect(states.CountError.Parameters['backoffSeconds.$']).toBe(
      `States.ArrayGetItem(States.Array(${ERROR_BACKOFF_SECONDS.join(', ')}), $.failures)`,
    );
    // The default definition (cell 0) is rendered for cell 0 when none is given.
    expect(JSON.parse(renderTickDefinition(tickDefinition(), ARNS)).States.Plan.Parameters.cell).toBe('0');
    for (const bad of [0, 11, 1.5]) expect(() => tickDefinition({ maxConsecutiveFailures: bad })).toThrow(/maxConsecutiveFailures/);
  });

  it('is valid Amazon States Language, with Retry and Catch inside the iteration', () => {
    const def = tickDefinition() as Record<string, any>;
    const rendered = renderTickDefinition(def, ARNS);
    const result = aslValidator(JSON.parse(rendered));
    expect(result.errors ?? []).toEqual([]);
    expect(result.isValid).toBe(true);
    expect(rendered).not.toContain('${');

    const parsed = JSON.parse(rendered);
    expect(parsed.TimeoutSeconds).toBe(150);
    expect(parsed.States.Plan).toMatchObject({
      Resource: ARNS.tick,
      Parameters: { runMs: 90_000, 'executionName.$': '$$.Execution.Name', 'executionStartTime.$': '$$.Execution.StartTime' },
    });
    const map = parsed.States.Groups;
    expect(map).toMatchObject({
      Type: 'Map',
      ItemsPath: '$.items',
      MaxConcurrency: 40,
      ResultPath: null,
      End: true,
      ItemProcessor: { ProcessorConfig: { Mode: 'INLINE' } },
    });
    // A Retry or Catch on the Map itself would mean one group's failure stops (or restarts) them all.
    expect(map.Retry).toBeUndefined();
    expect(map.Catch).toBeUndefined();
    const dispatch = map.ItemProcessor.States.Dispatch;
    expect(dispatch.Resource).toBe(ARNS.dispatch);
    expect(dispatch.Catch).toEqual([{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'CountError' }]);
    expect(Object.keys(dispatch.ResultSelector).sort()).toEqual([
      'done.$',
      'failures',
      'groups.$',
      'idle.$',
      'idleWaitSeconds.$',
      'owner.$',
      'ownerStartMs.$',
      'untilMs.$',
    ]);
    // The error path is bounded: retries with backoff and a cap, then counted catches with growing waits, then GaveUp.
    for (const r of dispatch.Retry) {
      expect(r.MaxAttempts).toBeGreaterThan(0);
      expect(r.MaxAttempts).toBeLessThanOrEqual(6);
      expect(r.BackoffRate).toBeGreaterThan(1);
      expect(r.MaxDelaySeconds).toBeGreaterThan(0);
    }
    expect(dispatch.Retry.at(-1).ErrorEquals).toEqual(['States.ALL']);
    const states = map.ItemProcessor.States;
    expect(states.CountError).toMatchObject({ Type: 'Pass', Next: 'TooManyErrors' });
    expect(states.TooManyErrors).toMatchObject({
      Type: 'Choice',
      Choices: [{ Variable: '$.failures', NumericGreaterThanEquals: MAX_CONSECUTIVE_FAILURES, Next: 'GaveUp' }],
      Default: 'AfterError',
    });
    expect(states.AfterError).toMatchObject({ Type: 'Wait', SecondsPath: '$.backoffSeconds', Next: 'Dispatch' });
    expect(states.GaveUp.Type).toBe('Succeed');
    expect(map.ItemSelector.failures).toBe(0);
    for (const [name, state] of [...Object.entries(parsed.States), ...Object.entries(map.ItemProcessor.States)]) {
      expect(typeof (state as { Comment?: unknown }).Comment, `${name} has a Comment`).toBe('string');
    }
  });

  it.each([
    ['packed into one dispatcher (light load)', 300, [[0, 1, 2, 3]]],
    ['one dispatcher per group (packing off)', 0, [[0], [1], [2], [3]]],
  ])('runs in aws-local-stepfunctions with the real handlers, %s: every job arrives, none early', async (_, rowsPerSecond, dispatchers) => {
    const sys = await createSystem(em, { settings: SETTINGS });
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const steps: Step[] = [];
    const name = `tick-${randomUUID()}`;
    const started = Date.now();
    // Jobs due 3 to 8 s in, the execution 18 s long: on a busy machine (CI's static checks beside
    // the test files) storing 100 jobs can take seconds, and a job stored after the execution's
    // last read would never be sent by it (a CI run lost 90 of 150 in 14 s, through ingest).
    const exec = startTick(sys, sys.w, name, 18_000, steps, rowsPerSecond);
    const expected = await submitDue(sys, 100, started + 3_000, started + 8_000);

    const output = { items: planItemsOf(await exec.result) };
    const ended = Date.now();
    const lateness = await finish(sys, consumer, ingest, expected);
    // Every job was sent by this execution (counted below), not a later one, and none early
    // (checked in finish). How prompt is a speed figure, which `npm run bench` measures: a busy CI
    // machine (static checks beside two test files) made the median 4.8 s here against well under
    // a second on a quiet one, so no bound on it belongs in a test.
    expect(lateness).toHaveLength(expected.size);
    // The execution's output is the plan (the Map keeps it: ResultPath null): its dispatchers, owned by this execution.
    expect(output.items.map((i) => [i.groups, i.owner])).toEqual(dispatchers.map((g) => [g, name]));
    expect(output.items.reduce((n, i) => n + i.shards, 0)).toBe(SETTINGS.shardCount);
    // The execution's start (its context's start time), not some other time: within seconds of the
    // start call on a loaded machine (1,025 ms seen with three test files at once, 2026-11-28).
    expect(Math.abs(output.items[0]!.ownerStartMs - started)).toBeLessThan(5_000);
    // Every step ran for this execution, each dispatcher's loop ended with done, and the execution ended near untilMs.
    expect(new Set(steps.map((s) => s.input.owner))).toEqual(new Set([name]));
    for (const last of lastSteps(steps, name, output)) expect(last?.result.done).toBe(true);
    expect(steps.reduce((n, s) => n + s.result.sent, 0)).toBe(expected.size);
    expect(steps.some((s) => s.result.idle)).toBe(true);
    expect(ended).toBeGreaterThanOrEqual(output.items[0]!.untilMs - 1_000);
    expect(ended).toBeLessThan(output.items[0]!.untilMs + 3_000);
  });
});

// Beside the runs above: stand-in handlers, no emulators, under a second each.
describe.concurrent('the dispatcher error path', () => {
  /** One execution with stand-in handlers: Plan plans `dispatchers` items, Dispatch is `dispatch`. */
  function run(dispatch: (input: DispatchStepInput) => Promise<unknown>, dispatchers = 2) {
    const execution = machineOf(tickDefinition({ runMs: 10_000, timeoutSeconds: 60 })).run(
      {},
      {
        context: { Execution: { Name: `errors-${randomUUID()}` } },
        overrides: {
          taskResourceLocalHandlers: {
            Plan: async () => {
              const now = Date.now();
              return {
                items: Array.from({ length: dispatchers }, (_, i) => ({
                  groups: [i],
                  owner: 'x',
                  ownerStartMs: now,
                  untilMs: now + 10_000,
                  idleWaitSeconds: 3,
                  shards: 1,
                })),
              } as never;
            },
            Dispatch: async (input) => (await dispatch(asDispatchStepInput(input))) as never,
          },
          // Waits and retry intervals shortened (the definition's own seconds are checked above).
          waitTimeOverrides: { AfterError: 10, Idle: 10 },
          retryIntervalOverrides: { Dispatch: 5 },
        },
      },
    );
    return { result: execution.result };
  }

  it('a dispatch function that always fails is retried with backoff, then given up after a bounded number of invocations; the execution still succeeds', async () => {
    const calls = new Map<number, number>();
    const { result } = run(async (input) => {
      const g = input.groups![0]!;
      calls.set(g, (calls.get(g) ?? 0) + 1);
      throw new Error('boom');
    });
    await expect(result).resolves.toBeDefined();
    // Per dispatcher: MAX_CONSECUTIVE_FAILURES catches, each after 1 + 2 retried attempts; no more.
    expect([...calls.values()]).toEqual([3 * MAX_CONSECUTIVE_FAILURES, 3 * MAX_CONSECUTIVE_FAILURES]);
    expect(ERROR_BACKOFF_SECONDS.slice(0, MAX_CONSECUTIVE_FAILURES - 1)).toEqual([5, 10, 20]);
  });

  it('a success resets the count: a dispatcher that fails now and then keeps dispatching until done', async () => {
    let n = 0;
    let successes = 0;
    const { result } = run(async (input) => {
      // Cycles of six invocations: three failures (one step, retried twice, then caught), three successes.
      // Five catches in all, more than the cap, but never MAX_CONSECUTIVE_FAILURES in a row.
      if (n++ % 6 < 3) throw new Error('flaky');
      successes++;
      return { ...input, done: successes >= 15, idle: false } as never;
    }, 1);
    await expect(result).resolves.toBeDefined();
    expect(successes).toBe(15);
    expect(Math.ceil(n / 6)).toBeGreaterThan(MAX_CONSECUTIVE_FAILURES);
  });
});

// One at a time, after the tests above: each times its hand-over to the second (B starts 4 s after
// A, with jobs due from 3 s on), which other work in the same process would shift. And each keeps
// this process about half busy (300 jobs through dynalite and fauxqs, which run in it): run beside
// the two runs above on a busy machine, a 100-job inbound message took 10-17 s to ingest, and jobs
// stored after the executions' last reads were never sent (2026-11-28).
describe('tick state machine definition: hand-over', () => {
  it.each([
    ['from one packed dispatcher to one per group', 300, 0],
    ['from one dispatcher per group to one packed', 0, 300],
  ])('hands groups over between two overlapping executions, %s: no gap, no double send, none early', async (_, ratesA, ratesB) => {
    const sys = await createSystem(em, { settings: SETTINGS });
    const ingest = sys.startIngest();
    const consumer = consume(em.sqs, sys.tenants.demo!.url);
    const steps: Step[] = [];
    const [nameA, nameB] = [`tick-A-${randomUUID()}`, `tick-B-${randomUUID()}`];
    const t0 = Date.now();
    const a = startTick(sys, sys.w, nameA, 12_000, steps, ratesA);
    // Jobs due before, during and after the overlap (A alone until ~t0+4 s, B alone after ~t0+11 s).
    const expected = await submitDue(sys, 300, t0 + 3_000, t0 + 15_000);
    // B starts once A alone has had jobs falling due for 1.5 s: at t0 + 4 s, later when a busy
    // machine's set-up and submit pushed the first due time on (A must send some on its own).
    const firstDue = Math.min(...expected.values());
    await new Promise((r) => setTimeout(r, Math.max(t0 + 4_000, firstDue + 1_500) - Date.now()));
    // B runs on another wiring (another Lambda instance) over the same table and queues.
    const b = startTick(sys, await sys.another(), nameB, 12_000, steps, ratesB);

    await Promise.all([a.result, b.result]);
    const lateness = await finish(sys, consumer, ingest, expected);
    // No gap at the hand-over: a gap would leave jobs waiting up to a whole execution (12 s); a
    // busy machine (CI's static checks beside two test files) stalls a few reads for seconds, so
    // the bound is on the worst, not on a median (a speed figure, which the bench measures).
    expect(Math.max(...lateness)).toBeLessThan(9_000);
    expect(a.plan()!.items[0]!.ownerStartMs).toBeLessThan(b.plan()!.items[0]!.ownerStartMs);
    expect([a.plan()!.items.length, b.plan()!.items.length]).toEqual([ratesA === 0 ? 4 : 1, ratesB === 0 ? 4 : 1]);

    const ofA = steps.filter((s) => s.exec === nameA);
    const ofB = steps.filter((s) => s.exec === nameB);
    const firstLoss = Math.min(...ofA.filter((s) => s.result.lostGroup).map((s) => s.endedAt));
    expect(Number.isFinite(firstLoss)).toBe(true);
    expect(ofB.some((s) => s.endedAt > firstLoss && s.result.sent > 0)).toBe(true);
    // B never lost a group, and each of A's dispatchers ended (done, all its groups lost) rather than running on.
    expect(ofB.filter((s) => s.result.lostGroup)).toEqual([]);
    for (const last of lastSteps(steps, nameA, a.plan()!)) expect(last?.result).toMatchObject({ done: true, groups: [] });
    // Both executions sent, and every row was sent once in all.
    const sentA = ofA.reduce((n, s) => n + s.result.sent, 0);
    const sentB = ofB.reduce((n, s) => n + s.result.sent, 0);
    expect(sentA).toBeGreaterThan(0);
    expect(sentB).toBeGreaterThan(0);
    expect(sentA + sentB).toBe(expected.size);
    console.log(
      `hand-over: A sent ${sentA}, B sent ${sentB}; A lost ${ofA.filter((s) => s.result.lostGroup).length} groups; max lateness ${Math.max(...lateness)} ms`,
    );
  });
});
