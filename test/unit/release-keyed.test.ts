import { describe, expect, it } from 'vitest';
import { resolveSettings } from '../../core/model/config.js';
import type { AcquiredRow, KeyFull, KeySlots, OutgoingMessage, QueueSender } from '../../core/model/ports.js';
import { Releaser, type ReleaserDeps } from '../../core/dispatch/releaser.js';
import type { ReleaseStats } from '../../core/dispatch/releaseStats.js';
import { TenantRegistry } from '../../core/tenants/registry.js';

/**
 * The releaser with keyed rows (docs/flow-control.md), over ports in memory: a keyed row is sent
 * once it holds its key's slot, its lease renewed after the take and before the send; a row that
 * takes its slot while its batch's other keys are still being checked is sent all the same.
 */
function harness(slots: KeySlots, renewOk: (jobId: string) => boolean = () => true) {
  const sent: string[] = [];
  const renewed: string[] = [];
  const sender: QueueSender = {
    async sendBatch(_url, messages: readonly OutgoingMessage[]) {
      sent.push(...messages.map((m) => JSON.parse(m.body).jobId as string));
      return [];
    },
  };
  const givenBack: string[] = [];
  const store: ReleaserDeps['store'] = {
    renew: async (k) => (renewed.push(k.jobId), renewOk(k.jobId)),
    unacquire: async (k) => (givenBack.push(k.jobId), true),
    markDelivered: async () => [],
  };
  const tenants = new TenantRegistry({
    getTenant: async (name) => ({ name, queueUrl: `q/${name}`, dlqUrl: `q/${name}-dlq` }),
    putTenant: async () => {},
  });
  const deps: ReleaserDeps = {
    store,
    sender,
    tenants,
    clock: { now: () => Date.now() },
    settings: resolveSettings({ releaseWindowMs: 5 }),
    keySlots: slots,
  };
  const stats: ReleaseStats = { sent: 0, recorded: 0, leaseLost: 0, renewed: 0, sendRetries: 0, latenessMs: [], deferred: 0, givenBack: 0 };
  const releaser = new Releaser(deps, stats);
  const row = (jobId: string, dueMs: number, key?: string): AcquiredRow => ({
    shard: 0,
    dueMs,
    jobId,
    tenant: 'demo',
    payload: '{}',
    leaseUntil: dueMs + 60_000,
    ...(key ? { concurrency: { key, limit: 1 } } : {}),
  });
  return { sent, renewed, givenBack, releaser, row };
}

/** One slot per key in memory; `slowKey`'s takes answer after `slowMs`. */
function slotsInMemory(opts: { slowKey?: string; slowMs?: number } = {}) {
  const holders = new Map<string, string>();
  const slots: KeySlots = {
    setLimit: async () => {},
    async take(_t, key, jobId): Promise<true | KeyFull> {
      if (key === opts.slowKey) await new Promise((r) => setTimeout(r, opts.slowMs));
      const h = holders.get(key);
      if (h === undefined || h === jobId) {
        holders.set(key, jobId);
        return true;
      }
      return { holders: new Map([[h, Date.now() + 60_000]]), limit: 1 };
    },
    evict: async () => 0,
    release: async (_t, key, jobId) => void (holders.get(key) === jobId && holders.delete(key)),
    extend: async () => true,
    holds: async (_t, key, jobId) => holders.get(key) === jobId,
  };
  return { slots, holders };
}

/** Slots with their lease ends, as the table keeps them: a take writes its lease, an evict removes a holder only at the lease read. */
function slotsWithLeases() {
  const holders = new Map<string, { jobId: string; until: number }>();
  const slots: KeySlots = {
    setLimit: async () => {},
    async take(_t, key, jobId, untilMs): Promise<true | KeyFull> {
      const h = holders.get(key);
      if (h === undefined || h.jobId === jobId) {
        holders.set(key, { jobId, until: untilMs });
        return true;
      }
      return { holders: new Map([[h.jobId, h.until]]), limit: 1 };
    },
    async evict(_t, key, held) {
      const h = holders.get(key);
      if (h && held.get(h.jobId) === h.until) return holders.delete(key) ? 1 : 0;
      return 0;
    },
    release: async (_t, key, jobId) => void (holders.get(key)?.jobId === jobId && holders.delete(key)),
    extend: async () => true,
    holds: async (_t, key, jobId) => holders.get(key)?.jobId === jobId,
  };
  return { slots, holders };
}

describe('Releaser with concurrency keys', () => {
  it('a row that took its slot but lost its lease (cancelled while it waited) gives the slot back unsent; one another round took over keeps it', async () => {
    const { slots, holders } = slotsWithLeases();
    holders.set('k', { jobId: 'other', until: Date.now() + 60_000 });
    // 'cancelled': its renewal after the take fails (a DELETE wrote on the lease it read).
    const { sent, releaser, row } = harness(slots, (jobId) => jobId !== 'cancelled');
    releaser.add(row('cancelled', Date.now(), 'k'));
    releaser.add(row('next', Date.now() + 1, 'k'));
    await new Promise((r) => setTimeout(r, 50));
    holders.delete('k'); // other's worker reported its end
    await releaser.drain(Date.now() + 3_000);
    expect(sent).toEqual(['next']);
    expect(holders.get('k')?.jobId).toBe('next');

    // Taken over: another round acquired the row and took the slot again (a later lease, the same
    // job id) before this round's renewal failed: this round frees nothing.
    const b = slotsWithLeases();
    const takenOver = harness(b.slots, (jobId) => {
      if (jobId !== 'moved') return true;
      b.holders.set('k', { jobId: 'moved', until: Date.now() + 120_000 });
      return false;
    });
    takenOver.releaser.add(takenOver.row('moved', Date.now(), 'k'));
    takenOver.releaser.add(takenOver.row('after', Date.now() + 1, 'k'));
    await new Promise((r) => setTimeout(r, 400));
    expect(takenOver.sent).toEqual([]);
    expect(b.holders.get('k')?.jobId).toBe('moved');
    takenOver.releaser.abandon();
  });

  it('sends a keyed row once it holds its slot, renewing its lease after the take; the next waits for the slot', async () => {
    const { slots, holders } = slotsInMemory();
    const { sent, renewed, releaser, row } = harness(slots);
    const due = Date.now() + 20;
    releaser.add(row('k1', due, 'k'));
    releaser.add(row('k2', due, 'k'));
    releaser.add(row('free', due));
    for (const end = Date.now() + 2_000; sent.length < 2 && Date.now() < end;) await new Promise((r) => setTimeout(r, 5));
    expect(sent.sort()).toEqual(['free', 'k1']);
    expect(renewed).toEqual(['k1']);
    holders.delete('k'); // k1's worker reported its end
    await releaser.drain(Date.now() + 2_000);
    expect(sent).toContain('k2');
    expect(renewed).toEqual(['k1', 'k2']);
  });

  it('sends a row that took its slot while its batch’s other key was still being checked', async () => {
    // Key 'slow' answers its take after 300 ms; 'fast' is held by another job and freed at once:
    // its row, refused in the batch, takes the slot (after ~10 ms) long before the batch's checks end.
    const { slots, holders } = slotsInMemory({ slowKey: 'slow', slowMs: 300 });
    holders.set('fast', 'other');
    const { sent, releaser, row } = harness(slots);
    const due = Date.now() + 20;
    releaser.add(row('s1', due, 'slow'));
    releaser.add(row('f1', due, 'fast'));
    setTimeout(() => holders.delete('fast'), 40);
    await releaser.drain(Date.now() + 3_000);
    expect(sent.sort()).toEqual(['f1', 's1']);
    expect(releaser.size).toBe(0);
  });

  it('gives the rows still waiting for a slot back as the round ends, so that the next round takes them at once', async () => {
    const { slots, holders } = slotsInMemory();
    holders.set('k', 'other');
    const { sent, givenBack, releaser, row } = harness(slots);
    releaser.add(row('w1', Date.now(), 'k'));
    releaser.add(row('w2', Date.now(), 'k'));
    // Both due now: the first asks for the slot and waits, the second queues behind it.
    await new Promise((r) => setTimeout(r, 200));
    expect(await releaser.giveBackWaiting()).toBe(2);
    expect(givenBack.sort()).toEqual(['w1', 'w2']);
    expect(releaser.size).toBe(0);
    expect(sent).toEqual([]);
    releaser.abandon();
  });
});
