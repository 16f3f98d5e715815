/**
 * Keeps what a round holds bounded without stopping its reads: rows beyond a tenant's share of
 * the round's queue, and parked rows beyond what the round watches, go to the hold lane, to be
 * read back as the queue drains (or once their tenant is registered again).
 */
import type { Acquirer } from './acquirer.js';
import { SPILL_AT, type HoldLanes, type RoundRows } from './holdLanes.js';
import type { Releaser } from './releaser.js';
import type { Track } from './rowTracker.js';

/** A delivery-limited tenant keeps at most this many seconds of its rate (at least two pages) waiting for an acquire: the rest goes to the hold lane. */
const LIMITED_QUEUED_SECONDS = 10;
/** Parked rows a round keeps watching, in pages (at most a quarter of its cap): the older ones go to the hold lane. */
const PARKED_KEEP_PAGES = 2;

export class Spill {
  /** Parked rows the round keeps watching at most; see {@link parked}. */
  readonly #parkedKeep: number;

  constructor(
    private readonly rows: RoundRows,
    private readonly holds: HoldLanes,
    private readonly acquirer: Pick<Acquirer<Track>, 'tenants' | 'spill' | 'largestFresh' | 'queued' | 'backlogQueued'>,
    private readonly releaser: Pick<Releaser, 'tenants' | 'rateOf' | 'size'>,
    private readonly opts: { readonly maxRows: number; readonly pageRows: number },
  ) {
    this.#parkedKeep = Math.max(1, Math.min(PARKED_KEEP_PAGES * opts.pageRows, Math.floor(opts.maxRows / 4)));
  }

  /**
   * A delivery-limited tenant keeps at most {@link LIMITED_QUEUED_SECONDS} of its rate queued,
   * and when the round nears its cap the tenant with the most rows queued keeps two pages. The
   * rest goes to the hold lane (the rows it would reach last): one tenant's flood, or a limited
   * tenant's backlog, neither holds the shards' marks back nor stops the reads that find other
   * tenants' rows.
   */
  queued(): void {
    const { acquirer, releaser } = this;
    const keepMin = 2 * this.opts.pageRows;
    const out: Track[] = [];
    for (const tenant of new Set([...acquirer.tenants(), ...releaser.tenants()])) {
      const rate = releaser.rateOf(tenant);
      if (rate !== undefined) out.push(...acquirer.spill(tenant, Math.max(keepMin, Math.ceil(rate * LIMITED_QUEUED_SECONDS))));
    }
    while (acquirer.queued - acquirer.backlogQueued + releaser.size > this.opts.maxRows * SPILL_AT) {
      const largest = acquirer.largestFresh();
      if (!largest || largest.queued <= keepMin) break;
      out.push(...acquirer.spill(largest.tenant, keepMin, true));
    }
    for (const t of out) {
      if (t.backlog) {
        const lane = this.rows.laneOf(t.key.shard);
        if (lane) lane.backlogOpen--;
        t.backlog = false;
      }
      this.rows.report.spilled++;
      void this.holds.hold(t, false);
    }
  }

  /**
   * Parked rows count against the round's cap like any other: the round keeps watching the newest
   * (their tenant is looked up again every recheck; they hold the shard's mark, so every round
   * meets them and reports them), and the older ones go to the hold lane, to be read back once
   * their tenant is registered again. A deregistered tenant's backlog thus neither grows the
   * round's memory nor stops the reads that find other tenants' rows.
   */
  parked(): void {
    const { tracker } = this.rows;
    if (tracker.parked.size <= this.#parkedKeep) return;
    const rows: Track[] = [];
    for (const id of tracker.parked) {
      const t = tracker.get(id);
      if (t && tracker.watching.has(t)) rows.push(t);
    }
    rows.sort((a, b) => a.key.dueMs - b.key.dueMs || (a.id < b.id ? -1 : 1));
    for (const t of rows.slice(0, Math.max(0, rows.length - this.#parkedKeep))) {
      tracker.parked.delete(t.id);
      tracker.watching.delete(t);
      this.rows.report.spilled++;
      void this.holds.hold(t, false);
    }
  }
}
