/**
 * Weighted fair share between tenants (docs/tenant-controls.md#fair-share-and-priority), the one
 * the acquirer uses for acquires and the releaser for send slots: stride scheduling. Each tenant
 * with work has a lane with a virtual time (`pass`); the next turn goes to the lane with the
 * least, and a turn advances it by 1 / weight. When more is waiting than can be served, tenants
 * get turns in proportion to their weights, so a flooding tenant delays another's work by its
 * own share, not by its whole flood. A lane that had nothing waiting re-enters at the virtual
 * time of the last turn: it earns no credit while idle.
 */

/** A tenant's lane: whatever the caller queues per tenant, with its virtual time. */
export interface FairLane {
  readonly tenant: string;
  /** Virtual time: advanced by 1 / weight per turn. */
  pass: number;
}

export class FairShare<L extends FairLane> {
  /** The virtual time of the last turn: where a lane becoming active starts. */
  #vtime = 0;

  /** `lane` has work again after having none: no credit for the time it was idle. */
  enter(lane: L): void {
    lane.pass = Math.max(lane.pass, this.#vtime);
  }

  /** A new lane, at the current virtual time. */
  lane<E extends object>(tenant: string, extra: E): E & FairLane {
    return { ...extra, tenant, pass: this.#vtime };
  }

  /** The lane with the least virtual time among `lanes` that `may` allows (ties: the first met). */
  pick(lanes: Iterable<L>, may?: (lane: L) => boolean): L | undefined {
    let best: L | undefined;
    for (const l of lanes) {
      if (best && l.pass >= best.pass) continue;
      if (may && !may(l)) continue;
      best = l;
    }
    return best;
  }

  /** `lane` had its turn: the virtual time moves to it, and it advances by 1 / `weight` (at least 1). */
  served(lane: L, weight: number): void {
    this.#vtime = lane.pass;
    lane.pass += 1 / Math.max(1, weight);
  }
}
