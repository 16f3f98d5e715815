import { describe, expect, it } from 'vitest';
import { resolveSettings } from '../../core/model/config.js';
import type { AcquiredRow, OutgoingMessage, QueueSender } from '../../core/model/ports.js';
import { Releaser, type ReleaserDeps } from '../../core/dispatch/releaser.js';
import type { ReleaseStats } from '../../core/dispatch/releaseStats.js';
import { TenantRegistry } from '../../core/tenants/registry.js';
import { gate } from '../support/faults.js';

/** The release timer over in-memory ports (no AWS): what it sends, when, and in which batches. */
function harness(
  releaseWindowMs: number,
  markDelivered: ReleaserDeps['store']['markDelivered'] = async () => [],
  opts: { signal?: AbortSignal; beforeSend?: (n: number) => Promise<void> } = {},
) {
  const batches: { at: number; queue: string; jobIds: string[] }[] = [];
  const sender: QueueSender = {
    async sendBatch(_url, messages: readonly OutgoingMessage[]) {
      await opts.beforeSend?.(batches.length + 1);
      batches.push({ at: Date.now(), queue: _url, jobIds: messages.map((m) => JSON.parse(m.body).jobId) });
      return [];
    },
  };
  const store: ReleaserDeps['store'] = { renew: async () => true, unacquire: async () => true, markDelivered };
  const tenants = new TenantRegistry({
    getTenant: async (name) => ({ name, queueUrl: `q/${name}`, dlqUrl: `q/${name}-dlq` }),
    putTenant: async () => {},
  });
  const deps: ReleaserDeps = { store, sender, tenants, clock: { now: () => Date.now() }, settings: resolveSettings({ releaseWindowMs }) };
  const stats: ReleaseStats = { sent: 0, recorded: 0, leaseLost: 0, renewed: 0, sendRetries: 0, latenessMs: [], deferred: 0, givenBack: 0 };
  const releaser = new Releaser(deps, stats, opts.signal);
  const row = (jobId: string, dueMs: number, tenant = 'demo'): AcquiredRow => ({
    shard: 0,
    dueMs,
    jobId,
    tenant,
    payload: '{}',
    leaseUntil: dueMs + 60_000,
  });
  return { batches, stats, releaser, row };
}

describe('Releaser', () => {
  it('sends rows due within the window in one batch when the last is due, and a lone row at once', async () => {
    const { batches, releaser, row, stats } = harness(40);
    const base = Date.now() + 100;
    const due: Record<string, number> = {
      a: base,
      b: base + 10,
      c: base + 30,
      lone: base + 300,
      d: base + 600,
      e: base + 639,
      f: base + 800,
    };
    for (const [id, t] of Object.entries(due)) releaser.add(row(id, t));
    await releaser.drain(base + 2_000);
    expect(batches.map((b) => b.jobIds)).toEqual([['a', 'b', 'c'], ['lone'], ['d', 'e'], ['f']]);
    for (const b of batches) for (const id of b.jobIds) expect(b.at).toBeGreaterThanOrEqual(due[id]!); // never early
    // A batch leaves once its last row is due: not before, whatever the window allows.
    expect(batches[0]!.at).toBeGreaterThanOrEqual(due.c!);
    expect(stats.sent).toBe(7);
    expect(stats.recorded).toBe(7);
  });

  it("batches per tenant: another tenant's rows due within the window neither hold a row back nor join its batch", async () => {
    const { batches, releaser, row } = harness(1_000);
    const base = Date.now() + 100;
    const due: Record<string, [number, string]> = {
      f1: [base, 'flood'],
      q1: [base + 10, 'quiet'],
      f2: [base + 300, 'flood'],
      f3: [base + 600, 'flood'],
      f4: [base + 900, 'flood'],
    };
    for (const [id, [t, tenant]] of Object.entries(due)) releaser.add(row(id, t, tenant));
    await releaser.drain(base + 3_000);
    const quiet = batches.find((b) => b.queue === 'q/quiet')!;
    const flood = batches.filter((b) => b.queue === 'q/flood');
    expect(quiet.jobIds).toEqual(['q1']);
    expect(flood.map((b) => b.jobIds)).toEqual([['f1', 'f2', 'f3', 'f4']]);
    for (const b of batches) for (const id of b.jobIds) expect(b.at).toBeGreaterThanOrEqual(due[id]![0]); // never early
    // The quiet tenant's lone row left at its own time, not when the flood's batch was complete.
    expect(quiet.at).toBeLessThan(due.f4![0]);
  });

  it('with a window of 0 sends each due millisecond on its own', async () => {
    const { batches, releaser, row } = harness(0);
    const base = Date.now() + 50;
    for (const [id, t] of [
      ['a', base],
      ['b', base],
      ['c', base + 15],
    ] as const)
      releaser.add(row(id, t));
    await releaser.drain(base + 1_000);
    expect(batches.map((b) => b.jobIds.sort())).toEqual([['a', 'b'], ['c']]);
  });

  it('caps a batch at ten rows', async () => {
    const { batches, releaser, row } = harness(100);
    const base = Date.now() + 50;
    for (let i = 0; i < 12; i++) releaser.add(row(`r${String(i).padStart(2, '0')}`, base + i));
    await releaser.drain(base + 1_000);
    // Ten leave together (how the rest split depends on how late the timer fires on a busy
    // machine), never more than ten in a batch, none before its row is due, each once.
    expect(Math.max(...batches.map((b) => b.jobIds.length))).toBe(10);
    for (const b of batches) for (const id of b.jobIds) expect(b.at).toBeGreaterThanOrEqual(base + Number(id.slice(1)));
    expect(batches.flatMap((b) => b.jobIds).sort()).toEqual(Array.from({ length: 12 }, (_, i) => `r${String(i).padStart(2, '0')}`));
  });

  it('lets a round end only once its own marker write in flight has finished, and re-arms nothing after', async () => {
    const g = gate();
    let writes = 0;
    const { releaser, row, stats } = harness(0, async () => {
      writes++;
      await g.hold();
      return [];
    });
    releaser.add(row('a', Date.now() + 10));
    await g.reached; // sent, and its marker write is in flight
    expect(stats.sent).toBe(1);
    releaser.abandon();
    let settled = false;
    const done = releaser.settled(10_000).then(() => (settled = true));
    await new Promise((r) => setTimeout(r, 50));
    expect(settled).toBe(false); // the write is still running: the round must not end yet
    g.release();
    await done;
    expect(writes).toBe(1);
    // Nothing added after abandon is held or sent.
    releaser.add(row('b', Date.now()));
    expect(releaser.size).toBe(0);
  });

  it('on a stop, writes the markers of rows it sent, also of a send in flight, so a restart does not send them again', async () => {
    const marked: string[] = [];
    const inFlight = gate();
    const stop = new AbortController();
    const { releaser, row, batches } = harness(
      0,
      async (rows) => {
        marked.push(...rows.map((r) => r.jobId));
        return [];
      },
      // The second send is in flight when the stop comes.
      { signal: stop.signal, beforeSend: async (n) => (n === 2 ? inFlight.hold() : undefined) },
    );
    const base = Date.now() + 20;
    releaser.add(row('sent', base));
    releaser.add(row('in-flight', base + 100));
    releaser.add(row('later', base + 60_000)); // held: its marker waits (the record timer, a second)
    await inFlight.reached;
    expect(marked).toEqual([]); // 'sent' waits for its batch of markers
    stop.abort();
    inFlight.release();
    await releaser.settled(1_000);
    expect(marked.sort()).toEqual(['in-flight', 'sent']);
    expect(batches.flatMap((x) => x.jobIds)).toEqual(['sent', 'in-flight']); // 'later' was not sent
  });

  it('bounds the wait for a request that never returns', async () => {
    const { releaser, row } = harness(0, () => new Promise(() => {}));
    releaser.add(row('a', Date.now()));
    while (releaser.size > 0) await new Promise((r) => setTimeout(r, 5)); // sent; its marker write hangs
    releaser.abandon();
    const started = Date.now();
    await releaser.settled(100);
    expect(Date.now() - started).toBeGreaterThanOrEqual(90);
  });
});
