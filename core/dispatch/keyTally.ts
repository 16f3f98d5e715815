/**
 * What one dispatch invocation saw of each concurrency key (docs/flow-control.md, "Metrics"), for
 * the per-key metrics of the busiest keys: jobs that took a slot, asks refused, the most jobs
 * waiting at once, and a uniform sample of how long jobs that waited for a slot waited past their
 * due time. Only the busiest keys are published, so the metrics' cost stays bounded however many
 * keys a tenant uses.
 */
import { LATENESS_SAMPLE } from './tenantTally.js';

export interface KeyDispatch {
  readonly tenant: string;
  readonly key: string;
  /** Jobs that took a slot of the key (and went to be sent). */
  started: number;
  /** Asks for a slot refused: the key's slots were all held. */
  refused: number;
  /** The most of the key's jobs waiting for a slot at once. */
  waitingMax: number;
  /** A uniform sample of waits: ms from a job's due time to its slot, for jobs that waited. */
  readonly waitSampleMs: number[];
  /** Jobs that waited (the sample's population). */
  waited: number;
}

/** Keys published per invocation at most. */
export const BUSIEST_KEYS = 10;

export class KeyTally {
  readonly #keys = new Map<string, KeyDispatch>();

  constructor(private readonly random: () => number = Math.random) {}

  /** A job of the key took a slot; `waitedMs` past its due time when it had to wait for one. */
  started(tenant: string, key: string, waitedMs?: number): void {
    const k = this.#of(tenant, key);
    k.started++;
    if (waitedMs === undefined) return;
    k.waited++;
    if (k.waitSampleMs.length < LATENESS_SAMPLE) k.waitSampleMs.push(waitedMs);
    else {
      const slot = Math.floor(this.random() * k.waited);
      if (slot < LATENESS_SAMPLE) k.waitSampleMs[slot] = waitedMs;
    }
  }

  /** An ask for a slot of the key was refused, with `waiting` of its jobs waiting now. */
  refused(tenant: string, key: string, waiting: number): void {
    const k = this.#of(tenant, key);
    k.refused++;
    k.waitingMax = Math.max(k.waitingMax, waiting);
  }

  /** The `n` busiest keys: the most waiting at once, then the most refusals, then the most started. */
  busiest(n = BUSIEST_KEYS): KeyDispatch[] {
    return [...this.#keys.values()]
      .sort((a, b) => b.waitingMax - a.waitingMax || b.refused - a.refused || b.started - a.started)
      .slice(0, n);
  }

  get size(): number {
    return this.#keys.size;
  }

  #of(tenant: string, key: string): KeyDispatch {
    const id = `${tenant}\u0000${key}`;
    let k = this.#keys.get(id);
    if (!k) this.#keys.set(id, (k = { tenant, key, started: 0, refused: 0, waitingMax: 0, waitSampleMs: [], waited: 0 }));
    return k;
  }
}
