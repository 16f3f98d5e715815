/**
 * core/util/concurrencyLimit.ts: never more than `max` tasks at once, and waiters start in arrival order, even
 * when a new caller arrives in the same tick as a running task finishes.
 */
import { describe, expect, it } from 'vitest';
import { limiter } from '../../core/util/concurrencyLimit.js';

/** A task the test finishes by hand; records the order of starts and the most running at once. */
function tracker() {
  let running = 0;
  const seen = { max: 0, started: [] as string[] };
  const finish = new Map<string, () => void>();
  const promises = new Map<string, Promise<string>>();
  const task = (name: string) => () => {
    running++;
    seen.max = Math.max(seen.max, running);
    seen.started.push(name);
    const p = new Promise<string>((resolve) =>
      finish.set(name, () => {
        running--;
        resolve(name);
      }),
    );
    promises.set(name, p);
    return p;
  };
  return { seen, task, finish: (name: string) => finish.get(name)!(), promise: (name: string) => promises.get(name)! };
}

const settle = async () => {
  for (let i = 0; i < 10; i++) await Promise.resolve();
};

describe('limiter', () => {
  it('hands a finished slot to the waiter: a caller arriving at that moment waits behind it', async () => {
    const limit = limiter(1);
    const t = tracker();
    const a = limit(t.task('A'));
    const b = limit(t.task('B'));
    await settle();
    expect(t.seen.started).toEqual(['A']);
    // C arrives as A finishes: in the same turn as the limiter's release of A's slot (a reaction
    // on A's promise registered after the limiter's own), before B's wake-up has run.
    let c: Promise<string> | undefined;
    void t.promise('A').then(() => (c = limit(t.task('C'))));
    t.finish('A');
    await a;
    await settle();
    expect(t.seen.started).toEqual(['A', 'B']);
    expect(t.seen.max).toBe(1);
    t.finish('B');
    await b;
    await settle();
    expect(t.seen.started).toEqual(['A', 'B', 'C']);
    t.finish('C');
    await expect(c).resolves.toBe('C');
    expect(t.seen.max).toBe(1);
  });

  it('never runs more than max under churn, and starts every task in arrival order', async () => {
    const limit = limiter(3);
    const t = tracker();
    const names = Array.from({ length: 40 }, (_, i) => `t${i}`);
    const done: Promise<string>[] = [];
    let next = 0;
    const submit = () => {
      const name = names[next++]!;
      done.push(limit(t.task(name)));
    };
    // Five at once; then, as each task finishes, a new caller arrives in the same turn.
    for (let i = 0; i < 5; i++) submit();
    for (let finished = 0; finished < names.length; finished++) {
      await settle();
      const name = t.seen.started[finished]!;
      if (next < names.length) void t.promise(name).then(submit);
      t.finish(name);
    }
    await Promise.all(done);
    expect(t.seen.max).toBe(3);
    expect(t.seen.started).toEqual(names);
  });

  it('frees the slot when a task throws', async () => {
    const limit = limiter(1);
    await expect(limit(() => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(limit(() => Promise.resolve(7))).resolves.toBe(7);
  });

  it('refuses a limit that is not a positive integer', () => {
    expect(() => limiter(0)).toThrow(RangeError);
    expect(() => limiter(1.5)).toThrow(RangeError);
  });
});
