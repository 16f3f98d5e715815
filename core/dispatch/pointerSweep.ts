import type { RowKey } from '../model/index.js';
import { rowKeyString } from './releaseStats.js';

/** A deleted pointer may still show in the late lane's (eventually consistent) reads this long. */
const POINTER_ECHO_MS = 10_000;

/**
 * Pointers (late lane, hold lane) of rows that became final, deleted in batches, and those
 * deleted lately, remembered for {@link POINTER_ECHO_MS}: a lane's read may still show them
 * (eventually consistent), and the round must not take them for new rows.
 */
export class PointerSweep<K extends RowKey> {
  readonly #toDelete = new Map<string, K>();
  readonly #deleted = new Map<string, number>();

  constructor(private readonly remove: (keys: readonly K[]) => Promise<K[]>) {}

  add(id: string, key: K): void {
    this.#toDelete.set(id, key);
  }

  /** Waiting for its delete, or deleted within the echo window before `nowMs`. */
  goneLately(id: string, nowMs: number): boolean {
    return this.#toDelete.has(id) || (this.#deleted.get(id) ?? -Infinity) > nowMs - POINTER_ECHO_MS;
  }

  /** Deletes what is waiting (one call, batched by the store); failed deletes wait for the next flush. */
  flush(now: () => number): Promise<void> | undefined {
    if (this.#toDelete.size === 0) return undefined;
    const batch = [...this.#toDelete.values()];
    this.#toDelete.clear();
    return this.remove(batch)
      .then((failed) => {
        const left = new Set(failed.map(rowKeyString));
        for (const k of batch) {
          const id = rowKeyString(k);
          if (left.has(id)) this.#toDelete.set(id, k);
          else {
            if (this.#deleted.size >= 10_000) this.#deleted.clear();
            this.#deleted.set(id, now());
          }
        }
      })
      .catch(() => batch.forEach((k) => this.#toDelete.set(rowKeyString(k), k)));
  }
}
