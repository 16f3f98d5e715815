import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Debounces } from '../../core/debounce/index.js';
import type { DispatchDeps } from '../../core/dispatch/deps.js';
import { Submitter } from '../../core/submit/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { inProcess, SimProcess, sleepMs } from '../support/faults.js';
import { consume, createSystem, runAllGroups, type TestSystem } from '../support/system.js';

/**
 * Debounce across deaths (docs/flow-control.md#debounce, "Crashes"): a submit killed after each
 * of the calls of a replace, and a dispatcher killed between its claim and the send. The job is
 * delivered once; its payload is the replaced one only if the replace's move of the generation
 * never happened, and the new one if it did: never a payload the job no longer holds.
 */
let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const settings = { lookaheadMs: 1_000, leaseMs: 3_000, shardCount: 8, groupCount: 2 };
const body = (key: string, payload: string) => `{"payload":${payload},"debounce":{"key":"${key}","periodSeconds":2}}`;

/** A submitter whose debounce calls die after the `killAfter`-th one (reads and writes alike); `moved` learns whether its move took effect. */
function dyingSubmitter(sys: TestSystem, killAfter: number, moved: { done: boolean }): Submitter {
  const proc = new SimProcess();
  let calls = 0;
  const count = async <T>(run: () => Promise<T>): Promise<T> => {
    const result = await run();
    if (++calls === killAfter) proc.kill();
    return result;
  };
  const deps = sys.w.submitter.deps;
  const debounces = deps.debounce!.debounces as Debounces;
  const rows = deps.debounce!.rows;
  return new Submitter({
    ...deps,
    debounce: {
      debounces: inProcess(debounces, proc, {
        pointer: (orig, ...a) => count(() => orig(...a)),
        generation: (orig, ...a) => count(() => orig(...a)),
        move: (orig, ...a) =>
          count(async () => {
            const ok = await orig(...a);
            if (ok) moved.done = true;
            return ok;
          }),
        deleteRow: (orig, ...a) => count(() => orig(...a)),
      }),
      rows: inProcess(rows, proc, {
        putJob: (orig, ...a) => count(() => orig(...a)),
        putLatePointer: (orig, ...a) => count(() => orig(...a)),
      }),
      wakes: deps.debounce!.wakes,
    },
  });
}

describe('debounce and crashes', () => {
  it('a submit killed after any call of a replace: one delivery, of the payload the generation names', async () => {
    const sys = await createSystem(em, { settings });
    const queue = consume(em.sqs, sys.tenants.demo!.url);
    const dispatch = runAllGroups(sys.w.dispatch);
    // A replace reads the pointer and the generation, puts the new row (and its late pointer),
    // moves the generation, deletes the old row: six calls; killed after each of them.
    const cases = [1, 2, 3, 4, 5, 6].map((killAfter) => ({ killAfter, key: `k${killAfter}`, moved: { done: false }, jobId: '' }));
    for (const c of cases) {
      const first = await sys.w.submitter.submit('demo', body(c.key, '"old"'));
      expect(first.status).toBe(201);
      c.jobId = first.job.jobId;
      void dyingSubmitter(sys, c.killAfter, c.moved).submit('demo', body(c.key, '"new"'));
    }
    await queue.waitFor((d) => cases.every((c) => d.some((x) => x.jobId === c.jobId)), 30_000);
    await sleepMs(3_500); // past a lease: a second version would be out by now
    await dispatch.stop();
    await queue.stop();
    for (const c of cases) {
      const got = queue.deliveries.filter((d) => d.jobId === c.jobId);
      expect(
        got.map((d) => d.payload),
        `killed after call ${c.killAfter}`,
      ).toEqual([c.moved.done ? 'new' : 'old']);
    }
    // The kill points reach both sides of the move.
    expect(cases.some((c) => c.moved.done)).toBe(true);
    expect(cases.some((c) => !c.moved.done)).toBe(true);
  });

  it('a dispatcher killed between its claim and the send: a fresh one sends the job once, and the key starts anew after', async () => {
    const sys = await createSystem(em, { settings });
    const queue = consume(em.sqs, sys.tenants.demo!.url);
    const first = await sys.w.submitter.submit('demo', body('crash', '{"v":1}'));
    await sys.w.submitter.submit('demo', body('crash', '{"v":2}'));
    const proc = new SimProcess();
    const debounces = sys.w.dispatch.debounces!;
    const crashed: DispatchDeps = {
      ...sys.w.dispatch,
      debounces: inProcess(debounces, proc, {
        claim: async (orig, ...a) => {
          const ok = await orig(...a);
          if (ok) proc.kill(); // claimed, never sent
          return ok;
        },
      }),
    };
    void runAllGroups(crashed, { owner: 'crashing', signal: proc.signal });
    for (const until = Date.now() + 15_000; !proc.dead && Date.now() < until;) await sleepMs(20);
    expect(proc.dead).toBe(true);
    // Claimed: the job can no longer be replaced; a submit now starts a new job.
    const after = await sys.w.submitter.submit('demo', body('crash', '{"v":3}'));
    expect(after.status).toBe(201);
    expect(after.job.jobId).not.toBe(first.job.jobId);

    const fresh = await sys.another();
    const recovery = runAllGroups(fresh.dispatch, { owner: 'fresh' });
    await queue.waitFor((d) => d.some((x) => x.jobId === first.job.jobId) && d.some((x) => x.jobId === after.job.jobId), 30_000);
    await sleepMs(1_500);
    await recovery.stop();
    await queue.stop();
    expect(queue.deliveries.filter((d) => d.jobId === first.job.jobId).map((d) => d.payload)).toEqual([{ v: 2 }]);
    expect(queue.deliveries.filter((d) => d.jobId === after.job.jobId).map((d) => d.payload)).toEqual([{ v: 3 }]);
  });
});
