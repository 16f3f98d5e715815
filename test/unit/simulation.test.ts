import { describe, expect, it } from 'vitest';
import { ThrottledError } from '../../core/model/errors.js';
import { VirtualTime } from '../../bench/sim/clock.js';
import { simulate } from '../../bench/sim/engine.js';
import { awsConfig } from '../../bench/sim/run.js';
import { MEASURED } from '../support/simMeasured.js';
import { AWS_TABLE_LIMITS, Cpu, SimJobStore, SimNetwork, SimTable, SimThrottle } from '../../bench/sim/store.js';

const measured = MEASURED;

const T0 = 1_800_000_000_000;
const key = { shard: 3, dueMs: T0 + 1_000, jobId: 'j1.demo.3.x.t.aaaaaaaaaaaaaaaa.bbbbbbbbbbbbbbbbbbbbbb' };

describe('simulation: the in-memory table', () => {
  it('keeps the conditional acquire: a second acquire fails while the lease holds, succeeds once it has expired', () => {
    const vt = new VirtualTime(T0);
    const table = new SimTable(vt);
    expect(table.putJob({ ...key, tenant: 'demo', payload: '{}' })).toBe('created');
    expect(table.putJob({ ...key, tenant: 'demo', payload: '{}' })).toBe('exists');
    const a = table.acquire(key, T0, T0 + 30_000);
    expect(a?.leaseUntil).toBe(T0 + 30_000);
    expect(table.acquire(key, T0 + 1, T0 + 30_001)).toBeUndefined();
    // renew is conditional on the round's own lease
    expect(table.updateWhileHeld(key, T0 + 12, () => {}, 'renew')).toBe(false);
    expect(table.acquire(key, T0 + 30_001, T0 + 60_000)?.leaseUntil).toBe(T0 + 60_000);
    // a delivered marker is final: never acquired again
    expect(table.markDelivered([{ ...key, tenant: 'demo', expiresAtMs: T0 + 1e9 }], T0)).toEqual([]);
    expect(table.acquire(key, T0 + 1e8, T0 + 1e8 + 1)).toBeUndefined();
  });

  it('reads a due range by sort key, after < sk <= through, in pages', () => {
    const vt = new VirtualTime(T0);
    const table = new SimTable(vt);
    for (let i = 0; i < 5; i++) table.putJob({ ...key, dueMs: T0 + i * 10, jobId: `j1.demo.3.${i}`, tenant: 'demo', payload: '{}' });
    const through = `${T0 + 30}#~`;
    const p1 = table.readDue(3, { through }, 2);
    expect(p1.rows.map((r) => r.dueMs)).toEqual([T0, T0 + 10]);
    expect(p1.more).toBe(true);
    const p2 = table.readDue(3, { after: p1.last!, through }, 10);
    expect(p2.rows.map((r) => r.dueMs)).toEqual([T0 + 20, T0 + 30]);
    expect(p2.more).toBe(false);
  });

  it('throttles a partition past 1,000 WCU a second, and the client surfaces ThrottledError after the SDK retries', async () => {
    const vt = new VirtualTime(T0);
    const table = new SimTable(vt, AWS_TABLE_LIMITS);
    let throttled = 0;
    for (let i = 0; i < 1_100; i++) {
      try {
        table.putJob({ ...key, dueMs: T0 + i, jobId: `j1.demo.3.${i}`, tenant: 'demo', payload: '{}' });
      } catch (err) {
        expect(err).toBeInstanceOf(SimThrottle);
        throttled++;
      }
    }
    expect(throttled).toBe(100);
    expect(table.counters.throttles['partition WCU']).toBe(100);
    // Through a client, on a partition that never has a unit to spare: the SDK-like retries
    // (virtual backoff), then ThrottledError, as adapters/dynamoJobStore.ts rethrows it.
    const slow = new SimTable(vt, { ...AWS_TABLE_LIMITS, partitionWcu: 0.5 });
    const zero = { medianMs: 5, sigma: 0 };
    const net = new SimNetwork(vt, { write: zero, query: zero, batchWrite: zero, send: zero }, () => 0.5);
    const store = new SimJobStore(slow, net, new Cpu('c', 1), {
      acquireUs: 0,
      sendPerMessageUs: 0,
      markerPerRowUs: 0,
      readPerItemUs: 0,
      callUs: 0,
    });
    vt.install();
    try {
      const pending = store.putJob({ ...key, tenant: 'demo', payload: '{}' }).then(
        () => 'created',
        (err: unknown) => err,
      );
      await vt.run(T0 + 10_000);
      expect(await pending).toBeInstanceOf(ThrottledError);
      expect(net.sdkRetries).toBe(2);
    } finally {
      vt.uninstall();
    }
  });
});

describe('simulation: a run of the real dispatch code', () => {
  it('delivers every job exactly once and never early at a rate one cell carries', async () => {
    const r = await simulate({ ...awsConfig(measured, 1, 500, 3_000), drainMs: 5_000 });
    expect(r.jobs).toBe(4_000); // 3 s measured, and a lookahead (5 s) of load after it
    expect(r.lost).toBe(0);
    expect(r.early).toBe(0);
    expect(r.duplicates).toBe(0);
    expect(r.delivered).toBe(4_000);
    expect(r.pass).toBe(true);
  });

  it('names the table quota as the binding limit when the offered rate is past it', async () => {
    // 2,000 jobs/s is 6,000 WRU/s: past a quota of 2,500 WRU/s, far within the dispatchers' CPU.
    const r = await simulate({ ...awsConfig(measured, 1, 2_000, 4_000, 2_500), drainMs: 3_000 });
    expect(r.pass).toBe(false);
    expect(r.binding).toBe('table WRU quota');
    expect(r.early).toBe(0);
  });

  it('names the dispatcher CPU when the dispatchers cannot keep up', async () => {
    // One dispatcher at 64 MB (0.036 vCPU): about 55 jobs/s.
    const base = awsConfig(measured, 1, 300, 3_000);
    const r = await simulate({
      ...base,
      settings: { ...base.settings, groupCount: 1, shardCount: 8 },
      lambda: { ...base.lambda, dispatchMemoryMb: 64 },
      drainMs: 2_000,
    });
    expect(r.pass).toBe(false);
    expect(r.binding).toBe('dispatcher CPU');
    expect(r.early).toBe(0);
  });
});
