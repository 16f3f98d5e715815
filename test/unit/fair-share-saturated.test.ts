/**
 * Fair share when dispatch is saturated (docs/tenant-controls.md, "Fair share under
 * saturation"): tenant A's due rows arrive faster than the local stack's dispatch can send them,
 * and tenant B's, 10 a second, must go out at their quiet lateness all the same.
 *
 * Deterministic: the simulation (bench/sim) runs the real dispatch code (plan, loop, rounds, the
 * Acquirer and the Releaser) against its table, queues and CPU in virtual time, on the local
 * stack's model: every dispatcher in one process sharing one CPU, and dynalite as one serial
 * server with the measured service times. Whatever queues in front of a shared resource in
 * arrival order (the CPU, the server) is where a flood delays everyone; fair share only works
 * where the rows wait in the dispatcher's own per-tenant queues.
 */
import { describe, expect, it } from 'vitest';
import { simulate, type SimConfig, type SimResult } from '../../bench/sim/engine.js';
import { localConfig } from '../../bench/sim/run.js';
import { MEASURED } from '../support/simMeasured.js';

const measured = MEASURED;

/** B: 10 jobs a second for 20 s, each written 5.5–8 s before it is due (the table path, as phase 11's). */
const B = { ratePerSec: 10, windowMs: 20_000, dueStartMs: 15_000, minAheadMs: 5_500, maxAheadMs: 8_000 };

/** B's load, and A's due at `floodPerSec` over `floodMs` from B's start (written before it opens, in the table when due). */
function run(floodPerSec: number, floodMs = B.windowMs): Promise<SimResult> {
  const cfg: SimConfig = { ...localConfig(measured, B, 1_000), drainMs: 60_000 };
  if (floodPerSec === 0) return simulate(cfg);
  const flood = {
    tenant: 'flood',
    ratePerSec: floodPerSec,
    windowMs: floodMs,
    dueStartMs: B.dueStartMs,
    minAheadMs: 10_000,
    maxAheadMs: 14_000,
  };
  return simulate({ ...cfg, tenants: [flood] });
}

describe('fair share when dispatch is saturated (simulated local stack)', () => {
  it("keeps B at its quiet lateness while A's due rows arrive at 1.5x what dispatch can send", async () => {
    // What dispatch sends here: A's 20,000 jobs due within 2 s (B's light load beside them).
    const capacity = await run(10_000, 2_000);
    const a = capacity.byTenant.flood!;
    expect(a.delivered).toBe(a.jobs);

    const quiet = await run(0);
    const flooded = await run(Math.round(1.5 * a.sentPerSec));
    const b = flooded.byTenant.demo!;
    const flood = flooded.byTenant.flood!;
    // Saturated on purpose: A's rows were sent late by far more than B's quiet lateness.
    expect(flood.lateness.p95Ms).toBeGreaterThan(2_000);
    // Nothing lost, nothing early, for either tenant.
    expect([flooded.lost, flooded.early, quiet.lost, quiet.early]).toEqual([0, 0, 0, 0]);
    expect(b.delivered).toBe(b.jobs);
    // B within its quiet lateness: twice its p95 alone, or 20 ms more (the quiet p95 is a few ms here).
    const quietP95 = quiet.byTenant.demo!.lateness.p95Ms;
    expect(b.lateness.p95Ms).toBeLessThanOrEqual(Math.max(2 * quietP95, quietP95 + 20));
  }, 120_000);
});
