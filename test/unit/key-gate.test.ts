import { describe, expect, it } from 'vitest';
import { KeyGate, type Gated } from '../../core/dispatch/keyGate.js';
import type { AcquiredRow, KeyFull, KeySlots } from '../../core/model/index.js';

/**
 * The releaser's gate for keyed rows (core/dispatch/keyGate.ts), over key slots kept in memory:
 * rows without a key pass at once, a key's rows pass up to its limit, the others wait and come
 * back in due order then priority as slots free, and a slot whose lease ran out is taken over.
 */
class MemorySlots implements Pick<KeySlots, 'take' | 'evict'> {
  readonly keys = new Map<string, { limit: number; holders: Map<string, number> }>();
  takes = 0;

  key(tenant: string, key: string, limit = 1) {
    const id = `${tenant}/${key}`;
    let k = this.keys.get(id);
    if (!k) this.keys.set(id, (k = { limit, holders: new Map() }));
    return k;
  }

  async take(tenant: string, key: string, jobId: string, untilMs: number, limit: number): Promise<true | KeyFull> {
    this.takes++;
    const k = this.key(tenant, key, limit);
    if (k.holders.has(jobId) || k.holders.size < k.limit) {
      k.holders.set(jobId, untilMs);
      return true;
    }
    return { holders: new Map(k.holders), limit: k.limit };
  }

  async evict(tenant: string, key: string, holders: ReadonlyMap<string, number>): Promise<number> {
    const k = this.key(tenant, key);
    let n = 0;
    for (const [jobId, until] of holders)
      if (k.holders.get(jobId) === until) {
        k.holders.delete(jobId);
        n++;
      }
    return n;
  }

  free(tenant: string, key: string, jobId: string): void {
    this.key(tenant, key).holders.delete(jobId);
  }
}

const row = (jobId: string, dueMs: number, key?: string, priority?: number, limit = 1): Gated => ({
  row: {
    shard: 0,
    dueMs,
    jobId,
    tenant: 't',
    payload: '{}',
    leaseUntil: dueMs + 30_000,
    ...(priority !== undefined ? { priority } : {}),
    ...(key !== undefined ? { concurrency: { key, limit } } : {}),
  } as AcquiredRow,
});

function gate(slots: MemorySlots, now = () => Date.now()) {
  const admitted: Gated[] = [];
  const g = new KeyGate<Gated>({ slots, clock: { now }, keyLeaseSeconds: () => undefined }, (rows) => admitted.push(...rows));
  return { g, admitted };
}

const until = async (pred: () => boolean, ms = 3_000) => {
  for (const end = Date.now() + ms; !pred() && Date.now() < end;) await new Promise((r) => setTimeout(r, 5));
};

describe('KeyGate', () => {
  it('passes rows without a key and a key’s rows up to its limit; the rest wait', async () => {
    const slots = new MemorySlots();
    slots.key('t', 'a', 2);
    const { g } = gate(slots);
    const rows = [
      row('free', 1),
      row('a1', 1, 'a', undefined, 2),
      row('a2', 2, 'a', undefined, 2),
      row('a3', 3, 'a', undefined, 2),
      row('b1', 1, 'b'),
    ];
    const passed = await g.pass(rows);
    expect(passed.map((h) => h.row.jobId).sort()).toEqual(['a1', 'a2', 'b1', 'free']);
    expect(passed.filter((h) => h.row.concurrency).every((h) => h.slot)).toBe(true);
    expect(g.size).toBe(1);
    g.stop();
  });

  it('gives freed slots to the waiting rows in due order, then higher priority first', async () => {
    const slots = new MemorySlots();
    const { g, admitted } = gate(slots);
    expect((await g.pass([row('running', 0, 'k')])).length).toBe(1);
    // Arrive out of order: due 30, due 10 (priority 5), due 10 (priority 9), due 20.
    await g.pass([row('d30', 30, 'k'), row('d10p5', 10, 'k', 5), row('d10p9', 10, 'k', 9), row('d20', 20, 'k')]);
    expect(g.size).toBe(4);
    const order: string[] = [];
    let holder = 'running';
    for (let i = 0; i < 4; i++) {
      slots.free('t', 'k', holder);
      await until(() => admitted.length > i);
      expect(admitted).toHaveLength(i + 1);
      holder = admitted[i]!.row.jobId;
      order.push(holder);
    }
    expect(order).toEqual(['d10p9', 'd10p5', 'd20', 'd30']);
    expect(g.size).toBe(0);
    g.stop();
  });

  it('takes over a slot whose lease ran out, and never one renewed', async () => {
    const slots = new MemorySlots();
    let now = 1_000_000;
    const { g } = gate(slots, () => now);
    slots.key('t', 'k').holders.set('silent', now - 1); // its lease ended: no outcome, no heartbeat
    const [taken] = await g.pass([row('next', 0, 'k')]);
    expect(taken?.row.jobId).toBe('next');
    expect([...slots.key('t', 'k').holders.keys()]).toEqual(['next']);
    now += 1;
    expect(await g.pass([row('after', 0, 'k')])).toEqual([]); // 'next' holds it with a live lease
    g.stop();
  });

  it('a row that holds its slot already (taken by a dispatcher that died before the send) passes, though earlier rows of its key wait', async () => {
    const slots = new MemorySlots();
    // Both slots of key k are held by x and y: a dispatcher took them, then died before sending.
    const k = slots.key('t', 'k', 2);
    k.holders.set('x', Date.now() + 900_000).set('y', Date.now() + 900_000);
    const { g, admitted } = gate(slots);
    // A fresh round re-acquires the rows once their leases end: z, due first, gets no slot; x and
    // y hold theirs (their takes succeed, held by their job ids), and do not wait behind z.
    const passed = await g.pass([row('z', 1, 'k', undefined, 2), row('x', 2, 'k', undefined, 2), row('y', 3, 'k', undefined, 2)]);
    expect(passed.map((h) => h.row.jobId)).toEqual(['x', 'y']);
    expect(g.size).toBe(1);
    // The same when the key waits already: the next ask's refusal names the holders, and a
    // waiting row among them takes its slot at once.
    const w = await g.pass([row('w', 4, 'k', undefined, 2)]);
    expect(w).toEqual([]);
    k.holders.set('w', Date.now() + 900_000); // (w's take, written by the dead dispatcher)
    k.holders.delete('x');
    k.holders.delete('y');
    k.holders.set('v', Date.now() + 900_000);
    await g.pass([row('v', 5, 'k', undefined, 2)]);
    await until(() => admitted.length === 2);
    expect(admitted.map((h) => h.row.jobId).sort()).toEqual(['v', 'w']);
    expect(g.size).toBe(1); // z still waits: both slots are held
    g.stop();
  });

  it('asks less often the longer a key waits, and forgets a dropped row', async () => {
    const slots = new MemorySlots();
    const { g, admitted } = gate(slots);
    await g.pass([row('running', 0, 'k')]);
    const waiting = row('w', 1, 'k');
    await g.pass([waiting]);
    const before = slots.takes;
    await new Promise((r) => setTimeout(r, 600));
    const asks = slots.takes - before;
    // 10 ms, then each wait half again as long (capped at 250 ms): about 8 asks in 600 ms, not 60.
    expect(asks).toBeGreaterThanOrEqual(3);
    expect(asks).toBeLessThanOrEqual(15);
    g.drop(waiting);
    expect(g.size).toBe(0);
    slots.free('t', 'k', 'running');
    await new Promise((r) => setTimeout(r, 300));
    expect(admitted).toEqual([]);
    g.stop();
  });

  it('asks later once it learnt how long a key’s slot stays held', async () => {
    const slots = new MemorySlots();
    const { g, admitted } = gate(slots);
    await g.pass([row('running', 0, 'k')]);
    await g.pass([row('w1', 1, 'k'), row('w2', 2, 'k')]);
    // The running job holds its slot 400 ms: w1 takes it soon after, learning the hold.
    await new Promise((r) => setTimeout(r, 400));
    slots.free('t', 'k', 'running');
    await until(() => admitted.length === 1);
    const before = slots.takes;
    // w1 runs; within the next 150 ms the gate asks at most once (half the hold is 200 ms): before, it asked every 10 to 250 ms.
    await new Promise((r) => setTimeout(r, 150));
    expect(slots.takes - before).toBeLessThanOrEqual(1);
    slots.free('t', 'k', 'w1');
    await until(() => admitted.length === 2, 3_000);
    expect(admitted.map((h) => h.row.jobId)).toEqual(['w1', 'w2']);
    g.stop();
  });

  it('gates of one process share a key’s asks, and a freed slot goes to the earliest row whichever gate holds it', async () => {
    const slots = new MemorySlots();
    const a = gate(slots);
    const b = gate(slots);
    await a.g.pass([row('running', 0, 'k')]);
    await a.g.pass([row('a1', 2, 'k')]);
    await b.g.pass([row('b1', 1, 'k')]);
    expect([a.g.size, b.g.size]).toEqual([1, 1]);
    const before = slots.takes;
    await new Promise((r) => setTimeout(r, 600));
    // One timer for the key, as for one gate (about 8 asks in 600 ms), not one per gate.
    expect(slots.takes - before).toBeLessThanOrEqual(15);
    slots.free('t', 'k', 'running');
    await until(() => b.admitted.length === 1);
    expect(b.admitted.map((h) => h.row.jobId)).toEqual(['b1']);
    expect(a.admitted).toEqual([]);
    slots.free('t', 'k', 'b1');
    await until(() => a.admitted.length === 1);
    expect(a.admitted.map((h) => h.row.jobId)).toEqual(['a1']);
    expect([a.g.size, b.g.size]).toEqual([0, 0]);
    a.g.stop();
    b.g.stop();
  });

  it('a key asked later than its slots free (its hold time learnt too long) is asked in time again within a few jobs', async () => {
    const slots = new MemorySlots();
    const admittedAt: number[] = [];
    const g = new KeyGate<Gated>({ slots, clock: { now: () => Date.now() }, keyLeaseSeconds: () => undefined }, (rows) => {
      for (const h of rows) {
        admittedAt.push(Date.now());
        setTimeout(() => slots.free('t', 'k', h.row.jobId), 40); // each job holds its slot 40 ms
      }
    });
    await g.pass([row('slow', 0, 'k')]);
    await g.pass(Array.from({ length: 8 }, (_, i) => row(`w${i}`, i + 1, 'k')));
    await new Promise((r) => setTimeout(r, 800));
    slots.free('t', 'k', 'slow'); // held 800 ms: the gate learns about that much
    await until(() => admittedAt.length === 8, 8_000);
    expect(admittedAt).toHaveLength(8);
    const gaps = admittedAt.slice(1).map((t, i) => t - admittedAt[i]!);
    // Asked at the learnt time, each first ask finds the slot free and halves it: 800, 400, 200, 100, ...
    expect(Math.min(...gaps.slice(-2))).toBeLessThan(250);
    g.stop();
  });

  it('two gates (two dispatchers) over the same slots: never more holders than a key’s limit, and every row gets its turn', async () => {
    const memory = new MemorySlots();
    // Two processes: each its own view of the one store (gates over one view share their waits).
    const views = [0, 1].map(() => ({ take: memory.take.bind(memory), evict: memory.evict.bind(memory) }));
    const slots = memory;
    let seed = 7;
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646;
    const limits: Record<string, number> = { a: 1, b: 2, c: 3 };
    for (const [key, limit] of Object.entries(limits)) slots.key('t', key, limit);
    let most = 0;
    const running = new Map<string, number>();
    const finished: string[] = [];
    const run = (rows: Gated[]) => {
      for (const h of rows) {
        const key = h.row.concurrency!.key;
        running.set(key, (running.get(key) ?? 0) + 1);
        most = Math.max(most, ...Object.keys(limits).map((k) => (running.get(k) ?? 0) - limits[k]!));
        // Each job runs 5 to 40 ms, then its worker reports: the slot is freed.
        setTimeout(
          () => {
            running.set(key, running.get(key)! - 1);
            slots.free('t', key, h.row.jobId);
            finished.push(h.row.jobId);
          },
          5 + Math.floor(random() * 35),
        );
      }
    };
    const gates = views.map(
      (view) =>
        new KeyGate<Gated>({ slots: view, clock: { now: () => Date.now() }, keyLeaseSeconds: () => undefined }, (rows) => run(rows)),
    );
    const rows = Array.from({ length: 30 }, (_, i) => {
      const key = ['a', 'b', 'c'][i % 3]!;
      return row(`j${i}`, i, key, undefined, limits[key]);
    });
    // The rows reach the two gates in batches, as two rounds' releases would send them.
    for (let i = 0; i < rows.length; i += 5) run(await gates[(i / 5) % 2]!.pass(rows.slice(i, i + 5)));
    await until(() => finished.length === rows.length, 10_000);
    for (const g of gates) g.stop();
    expect(most).toBeLessThanOrEqual(0);
    expect(finished.sort()).toEqual(rows.map((h) => h.row.jobId).sort());
  });
});
