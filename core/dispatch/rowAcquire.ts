/**
 * One row's acquire, as the round's {@link Acquirer} runs it: a parked tenant's row is watched, a
 * paused tenant's goes to the hold lane, any other is taken with the conditional acquire and handed
 * to the releaser; a failed condition is resolved with one lookup of what is at the key now.
 */
import { type AcquiredRow, ThrottledError } from '../model/index.js';
import { backoffMs } from '../util/index.js';
import type { Acquirer } from './acquirer.js';
import type { DispatchDeps } from './deps.js';
import type { HoldLanes, RoundRows } from './holdLanes.js';
import { ParkedTenants } from './parked.js';
import type { Track } from './rowTracker.js';

export class RowAcquire {
  /** Consecutive throttled or failed acquires, for the backoff. */
  #attempt = 0;

  constructor(
    private readonly deps: Pick<DispatchDeps, 'store' | 'tenants' | 'controls' | 'clock' | 'settings' | 'log'>,
    private readonly parkedTenants: ParkedTenants,
    private readonly rows: RoundRows,
    private readonly holds: Pick<HoldLanes, 'hold'>,
    private readonly acquirer: () => Pick<Acquirer<Track>, 'pushFresh' | 'paused' | 'pause'>,
    private readonly release: (row: AcquiredRow) => void,
    private readonly signal?: AbortSignal,
  ) {}

  /** Resolves with the latency of the acquire's call to the table, when it made one. */
  async acquire(t: Track): Promise<number | undefined> {
    const { store, clock, settings, controls } = this.deps;
    const { report, tracker } = this.rows;
    if (t.backlog) {
      const lane = this.rows.laneOf(t.key.shard);
      if (lane) lane.backlogOpen--;
      t.backlog = false;
    }
    const at = clock.now();
    // A row of an unregistered tenant stays parked: looked at again after the recheck interval.
    if (await this.parkedTenants.parks(t.key.jobId, this.deps.tenants, at)) {
      this.#park(t, at);
      return;
    }
    tracker.parked.delete(t.id);
    if (controls && (await controls.get(t.tenant)).paused) {
      await this.holds.hold(t);
      return;
    }
    let row: AcquiredRow | undefined;
    const called = clock.now();
    try {
      row = await store.acquire(t.key, at, at + settings.leaseMs);
    } catch (err) {
      if (!this.signal?.aborted) this.#failed(t, err);
      return;
    }
    const latencyMs = clock.now() - called;
    this.#attempt = 0;
    if (this.signal?.aborted) return;
    if (row) {
      report.acquired++;
      if (t.wasAcquired) report.recovered++;
      this.release(row);
      return latencyMs;
    }
    report.conflicts++;
    await this.#resolve(t);
    return latencyMs;
  }

  #park(t: Track, at: number): void {
    const { report, tracker } = this.rows;
    tracker.parked.add(t.id);
    report.parked = Math.max(report.parked, tracker.parked.size);
    const tenant = ParkedTenants.tenantOf(t.key.jobId);
    if (tenant !== undefined && !report.parkedTenants.includes(tenant)) report.parkedTenants.push(tenant);
    tracker.watch(t, at + this.parkedTenants.recheckMs, false);
  }

  /** The acquire's call failed: back in the queue, and the acquirer pauses (one backoff for the calls that fail together). */
  #failed(t: Track, err: unknown): void {
    const acquirer = this.acquirer();
    acquirer.pushFresh(t);
    if (acquirer.paused) return;
    if (err instanceof ThrottledError) this.rows.report.throttled++;
    else this.rows.report.errors++;
    this.deps.log?.('acquire backing off', { error: (err as Error).message, attempt: this.#attempt });
    acquirer.pause(Math.max(1, backoffMs(this.#attempt++, { baseMs: 50, capMs: 2_000 })));
  }

  /** After a failed acquire: what is at the key now? One strongly consistent lookup. */
  async #resolve(t: Track): Promise<void> {
    const { store, clock } = this.deps;
    const { report, tracker } = this.rows;
    try {
      const row = await store.getRow(t.key);
      report.queries++;
      if (row) report.itemsRead++;
      const now = clock.now();
      if (!row || (row.expiresAtMs !== undefined && row.expiresAtMs <= now) || (row.state !== 'ACQUIRED' && row.state !== 'SCHEDULED'))
        tracker.finish(t.id);
      else if (row.state === 'ACQUIRED') tracker.watch(t, row.leaseUntil + 1);
      else tracker.watch(t, now + 100, false); // SCHEDULED again (a redrive replaced a DEAD record): try again shortly
    } catch (err) {
      report.errors++;
      this.deps.log?.('looking a row up failed; retrying later', { error: (err as Error).message });
      tracker.watch(t, clock.now() + 1_000);
    }
  }
}
