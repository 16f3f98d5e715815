/**
 * Writes the delivered markers of sent rows (a put at the row's key: the write a delete would
 * cost), in full batches across sends, so that a request carries up to 25 rows even when rows
 * are sent one by one. A row whose marker is not written is sent again once its lease expires: a
 * duplicate, never a loss.
 */
import type { AcquiredRow, RowKey, RowLeases } from '../model/index.js';
import { backoffMs } from '../util/index.js';
import type { DispatchDeps } from './deps.js';
import { rowKeyString, type ReleaseHooks, type ReleaseStats } from './releaseStats.js';

/** Markers per BatchWriteItem. */
const RECORD_BATCH = 25;
/** A part batch waits at most this long for more rows. */
const RECORD_DELAY_MS = 1_000;
/** Attempts at a batch of markers. */
const RECORD_ATTEMPTS = 5;

/** A sent row waiting for its marker, with the lease it was sent under. */
export interface Sent {
  readonly row: AcquiredRow;
  readonly leaseUntil: number;
}

export class MarkerWriter {
  #waiting: Sent[] = [];
  #timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly deps: Pick<DispatchDeps, 'clock' | 'settings' | 'log'> & { readonly store: Pick<RowLeases, 'markDelivered'> },
    private readonly stats: Pick<ReleaseStats, 'recorded'>,
    private readonly hooks: Pick<ReleaseHooks, 'onRecorded' | 'onDropped'>,
    /** Runs a write in the background (the releaser awaits them when it settles). */
    private readonly track: (p: Promise<void>) => void,
    private readonly signal?: AbortSignal,
  ) {}

  /** Sent rows whose marker is not written yet. */
  get waiting(): number {
    return this.#waiting.length;
  }

  /**
   * Rows just sent: written at once when a batch is full or `now`, else within
   * {@link RECORD_DELAY_MS} (unless `mayWait` is false: the releaser has ended).
   */
  add(sent: readonly Sent[], now: boolean, mayWait: boolean): void {
    this.#waiting.push(...sent);
    if (this.#waiting.length >= RECORD_BATCH || now) this.flush();
    else if (this.#waiting.length > 0 && mayWait) this.#timer ??= setTimeout(() => this.flush(), RECORD_DELAY_MS);
  }

  /** Writes what waits now. */
  flush(): void {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const rows = this.#waiting;
    this.#waiting = [];
    if (rows.length > 0 && !this.signal?.aborted) this.track(this.#write(rows));
  }

  /** Stops: what waits is given up (returned: those rows are sent again after their lease, unless written by {@link writeOnce}). */
  stop(): Sent[] {
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const rows = this.#waiting;
    this.#waiting = [];
    return rows;
  }

  /** One attempt at the markers of `sent` (a graceful stop: a restart does not send them again). */
  writeOnce(sent: readonly Sent[]): void {
    if (sent.length === 0) return;
    const { store, clock, settings } = this.deps;
    this.track(
      store
        .markDelivered(
          sent.map((s) => ({ ...s.row, expiresAtMs: s.row.dueMs + settings.cancelRecordRetentionMs })),
          clock.now(),
        )
        .then((failed) => {
          this.stats.recorded += sent.length - failed.length;
        }),
    );
  }

  async #write(rows: Sent[]): Promise<void> {
    const { store, clock, settings } = this.deps;
    const bySk = new Map(rows.map((s) => [rowKeyString(s.row), s]));
    let pending: Sent[] = rows;
    for (let attempt = 0; pending.length > 0 && attempt < RECORD_ATTEMPTS; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, backoffMs(attempt, { baseMs: 50, capMs: 1_000 })));
      if (this.signal?.aborted) return;
      let failed: RowKey[];
      try {
        failed = await store.markDelivered(
          pending.map((s) => ({ ...s.row, expiresAtMs: s.row.dueMs + settings.cancelRecordRetentionMs })),
          clock.now(),
        );
      } catch {
        continue;
      }
      if (this.signal?.aborted) return;
      const left = new Set(failed.map(rowKeyString));
      const done = pending.filter((s) => !left.has(rowKeyString(s.row)));
      this.stats.recorded += done.length;
      this.hooks.onRecorded?.(done.map((s) => s.row));
      pending = [...left].flatMap((k) => bySk.get(k) ?? []);
    }
    // Rows without a marker are sent again once their lease expires: a duplicate, never a loss.
    if (pending.length > 0) {
      this.deps.log?.('rows sent but not recorded; they will be sent again', { rows: pending.length });
      for (const s of pending) this.hooks.onDropped?.(s.row, s.leaseUntil + 1);
    }
  }
}
