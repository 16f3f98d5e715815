/**
 * Keeps the leases of the rows a releaser holds: a row is never sent with less than `safetyMs` of
 * its lease left (renewed first, with a conditional write), and rows waiting for their time are
 * renewed once they have used half of their lease (not those waiting for a key's slot, see
 * {@link Leased.waiting}). A row whose renewal fails belongs to another round now: the releaser lets it go.
 */
import type { AcquiredRow, RowLeases } from '../model/index.js';
import type { DispatchDeps } from './deps.js';
import type { ReleaseStats } from './releaseStats.js';

/** A held row's lease, as the releaser keeps it. */
export interface Leased {
  readonly key: string;
  readonly row: AcquiredRow;
  leaseUntil: number;
  /** Being sent: its renewal is the send's business. */
  busy: boolean;
  /**
   * Waiting for a slot of its concurrency key: not renewed while it waits. Its round tracks it, so
   * no other round of the group acquires it (only one that takes over after this round ends or
   * dies, as with any lease), and the renewal after its take is conditional on the lease read:
   * a row whose lease ran out while waiting is still sent once, or given back when it was taken.
   */
  waiting?: boolean;
  /** A renewal in flight, shared by whoever asks for one meanwhile. */
  renewing?: Promise<boolean>;
}

export class LeaseKeeper<H extends Leased> {
  /** A row is sent only with at least this much of its lease left. */
  readonly safetyMs: number;
  #timer: NodeJS.Timeout | undefined;

  /**
   * @param held the rows held (read at each renewal pass)
   * @param lost called for each waiting row whose lease could not be renewed
   * @param track runs a renewal pass in the background (the releaser awaits them when it settles)
   */
  constructor(
    private readonly deps: Pick<DispatchDeps, 'clock' | 'settings'> & { readonly store: Pick<RowLeases, 'renew'> },
    private readonly stats: Pick<ReleaseStats, 'renewed'>,
    private readonly held: () => ReadonlyMap<string, H>,
    private readonly lost: (h: H) => void,
    private readonly track: (p: Promise<void>) => void,
  ) {
    this.safetyMs = Math.min(5_000, Math.floor(deps.settings.leaseMs / 3));
  }

  /** Extends `h`'s lease to `newLeaseUntil`; false when it is lost (or, after an error, too short to send under). */
  renew(h: H, newLeaseUntil: number): Promise<boolean> {
    h.renewing ??= this.#renewOnce(h, newLeaseUntil).finally(() => (h.renewing = undefined));
    return h.renewing;
  }

  async #renewOnce(h: H, newLeaseUntil: number): Promise<boolean> {
    try {
      if (!(await this.deps.store.renew(h.row, h.leaseUntil, newLeaseUntil))) return false;
    } catch {
      return h.leaseUntil - this.deps.clock.now() >= this.safetyMs;
    }
    h.leaseUntil = newLeaseUntil;
    this.stats.renewed++;
    return true;
  }

  /**
   * Starts renewing, unless it is already: every quarter of a lease, the leases of the held rows
   * not being sent that have used half of theirs. Stops by itself when nothing is held.
   */
  keep(): void {
    this.#timer ??= setInterval(this.#pass, Math.max(250, Math.floor(this.deps.settings.leaseMs / 4)));
  }

  readonly #pass = () => this.track(this.#renewWaiting(this.held(), this.lost));

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  async #renewWaiting(held: ReadonlyMap<string, H>, lost: (h: H) => void): Promise<void> {
    if (held.size === 0) {
      this.stop();
      return;
    }
    const { clock, settings } = this.deps;
    const now = clock.now();
    const due = [...held.values()].filter((h) => !h.busy && !h.waiting && h.leaseUntil - now < settings.leaseMs / 2);
    await Promise.all(
      due.map(async (h) => {
        if (!(await this.renew(h, now + settings.leaseMs))) lost(h);
      }),
    );
  }
}
