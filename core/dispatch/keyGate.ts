/**
 * Concurrency by key (docs/flow-control.md) in a releaser: a row with a `concurrencyKey` is sent
 * only once it holds one of its key's slots (a conditional write on the key's item, so rounds and
 * dispatchers never give out more than the limit between them). The rows of a key whose slots are
 * all held wait here, in due order then priority, still acquired (the releaser keeps renewing
 * their leases); the first of them asks again, sooner after a recent failure and less often as the
 * wait goes on, and takes over a slot whose lease ran out without an outcome or a heartbeat.
 */
import { type AcquiredRow, DEFAULT_KEY_LEASE_SECONDS, DEFAULT_PRIORITY, type KeyFull, type KeySlots } from '../model/index.js';
import { Heap } from '../util/index.js';
import type { KeyTally } from './keyTally.js';

/** A row as the gate sees it: `slot` once it holds its key's slot. */
export interface Gated {
  readonly row: AcquiredRow;
  slot?: boolean;
}

/**
 * The first ask after a failed take, how much longer each next wait is, and the longest wait
 * between two asks. Growing by half, the ask that finds a slot freed comes about a sixth of the
 * running job's time after (a tenth of a second at most): the key's throughput stays above 80 %
 * of its limit's, for at most one refused conditional write per ask.
 */
const FIRST_PROBE_MS = 10;
const PROBE_GROWTH = 1.5;
const MAX_PROBE_MS = 250;
/**
 * Once a key's slots have freed in this round, the first ask waits half the time a slot was held
 * (its running job's time, learnt as a moving average), and asks then come at most a quarter of
 * it apart (never more than 5 s): a key whose jobs run 200 ms is asked about twice per job, not
 * six times, and one whose jobs run a minute about four times, not 240.
 */
const LEARNT_WEIGHT = 0.3;
const MAX_LEARNT_PROBE_MS = 5_000;

interface Waiting<G extends Gated> {
  readonly tenant: string;
  readonly key: string;
  readonly rows: Heap<G>;
  attempt: number;
  /** When this wait began: the first refusal, or the latest slot taken. */
  since: number;
  timer?: NodeJS.Timeout;
  probing: boolean;
}

export interface KeyGateDeps {
  readonly slots: Pick<KeySlots, 'take' | 'evict'>;
  readonly clock: { now(): number };
  /** The tenant's `keyLeaseSeconds` (absent: the default). */
  keyLeaseSeconds(tenant: string): number | undefined;
  readonly log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** Where the per-key metrics are counted (the round's report). */
  readonly tally?: () => KeyTally;
}

export class KeyGate<G extends Gated> {
  readonly #waiting = new Map<string, Waiting<G>>();
  /** Per key, how long a slot stayed held before the next ask found it free (a moving average, ms). */
  readonly #heldMs = new Map<string, number>();
  #size = 0;
  #stopped = false;
  /** Slots taken (rows let through), and failed takes (rows that waited), for the round's report. */
  taken = 0;
  refused = 0;

  /** @param admit called with rows that took a slot while they waited: they go to be sent. */
  constructor(
    private readonly deps: KeyGateDeps,
    private readonly admit: (rows: G[]) => void,
  ) {}

  /** Rows waiting for a slot. */
  get size(): number {
    return this.#size;
  }

  /**
   * The rows of `list` that may be sent now: those without a key, those holding their slot, and
   * those that take one now. The others wait here (and come back through `admit`).
   */
  async pass(list: readonly G[]): Promise<G[]> {
    const out: G[] = [];
    const byKey = new Map<string, G[]>();
    for (const h of list) {
      const c = h.row.concurrency;
      if (!c || h.slot) out.push(h);
      else {
        const id = keyId(h.row.tenant, c.key);
        byKey.set(id, [...(byKey.get(id) ?? []), h]);
      }
    }
    await Promise.all(
      [...byKey].map(async ([id, rows]) => {
        rows.sort((a, b) => (before(a, b) ? -1 : 1));
        const w = this.#waiting.get(id);
        // Rows of a key that already waits queue behind it: due order holds within the round.
        let i = 0;
        if (!w)
          for (; i < rows.length && (await this.#take(rows[i]!)) === true; i++) {
            out.push(rows[i]!);
            this.deps.tally?.().started(rows[i]!.row.tenant, rows[i]!.row.concurrency!.key);
          }
        for (const h of rows.slice(i)) this.#wait(id, h);
      }),
    );
    return out;
  }

  /** Forgets a waiting row (its lease was lost, or the round let it go). */
  drop(h: G): void {
    const c = h.row.concurrency;
    if (!c) return;
    const w = this.#waiting.get(keyId(h.row.tenant, c.key));
    if (!w) return;
    const kept: G[] = [];
    for (let x = w.rows.pop(); x; x = w.rows.pop()) if (x !== h) kept.push(x);
    for (const x of kept) w.rows.push(x);
    this.#recount();
    if (w.rows.size === 0) this.#forget(w);
  }

  /** Takes every waiting row out of the gate (their timers stopped): the round gives them back as it ends. */
  takeWaiting(): G[] {
    const out: G[] = [];
    for (const w of this.#waiting.values()) {
      clearTimeout(w.timer);
      for (let h = w.rows.pop(); h; h = w.rows.pop()) out.push(h);
    }
    this.#waiting.clear();
    this.#size = 0;
    return out;
  }

  /** Stops every timer and forgets the waiting rows (the round ends: their leases run out). */
  stop(): void {
    this.#stopped = true;
    for (const w of this.#waiting.values()) clearTimeout(w.timer);
    this.#waiting.clear();
    this.#size = 0;
  }

  #recount(): void {
    let n = 0;
    for (const w of this.#waiting.values()) n += w.rows.size;
    this.#size = n;
  }

  #wait(id: string, h: G): void {
    let w = this.#waiting.get(id);
    if (!w) {
      const c = h.row.concurrency!;
      w = { tenant: h.row.tenant, key: c.key, rows: new Heap<G>(before), attempt: 0, since: this.deps.clock.now(), probing: false };
      this.#waiting.set(id, w);
    }
    w.rows.push(h);
    this.#size++;
    this.refused++;
    this.deps.tally?.().refused(w.tenant, w.key, w.rows.size);
    this.#arm(w);
  }

  #arm(w: Waiting<G>): void {
    if (this.#stopped || w.timer || w.probing) return;
    const held = this.#heldMs.get(keyId(w.tenant, w.key));
    const first = held === undefined ? FIRST_PROBE_MS : Math.min(MAX_LEARNT_PROBE_MS, Math.max(FIRST_PROBE_MS, held / 2));
    const cap = held === undefined ? MAX_PROBE_MS : Math.min(MAX_LEARNT_PROBE_MS, Math.max(MAX_PROBE_MS, held / 4));
    const delay = Math.min(cap, first * PROBE_GROWTH ** w.attempt);
    w.timer = setTimeout(() => void this.#probe(w), Math.round(delay * (0.75 + Math.random() / 2)));
  }

  /** The first waiting row asks for a slot; while it gets one, the next asks too. */
  async #probe(w: Waiting<G>): Promise<void> {
    w.timer = undefined;
    w.probing = true;
    const admitted: G[] = [];
    try {
      for (let h = w.rows.pop(); h && !this.#stopped; h = w.rows.pop()) {
        this.#size--;
        let got: true | KeyFull = { holders: new Map(), limit: 0 };
        try {
          got = await this.#take(h);
        } finally {
          if (got !== true) {
            w.rows.push(h);
            this.#size++;
          }
        }
        if (got !== true) {
          this.deps.tally?.().refused(w.tenant, w.key, w.rows.size);
          break;
        }
        this.deps.tally?.().started(w.tenant, w.key, Math.max(0, this.deps.clock.now() - h.row.dueMs));
        admitted.push(h);
      }
    } catch (err) {
      this.deps.log?.('key slot take failed', { tenant: w.tenant, error: (err as Error).message });
    } finally {
      w.probing = false;
    }
    if (this.#stopped) return;
    if (admitted.length > 0) this.#learn(w);
    w.attempt = admitted.length > 0 ? 0 : w.attempt + 1;
    if (admitted.length > 0) this.admit(admitted);
    if (w.rows.size === 0) this.#forget(w);
    else this.#arm(w);
  }

  /** One take for `h`; a slot whose lease ran out is taken over (its holder evicted as read). */
  async #take(h: G): Promise<true | KeyFull> {
    const { slots, clock } = this.deps;
    const { tenant, jobId, concurrency } = h.row;
    const c = concurrency!;
    const leaseMs = (this.deps.keyLeaseSeconds(tenant) ?? DEFAULT_KEY_LEASE_SECONDS) * 1000;
    let now = clock.now();
    let got = await slots.take(tenant, c.key, jobId, now + leaseMs, c.limit, now);
    if (got !== true) {
      const expired = new Map([...got.holders].filter(([, until]) => until < now));
      if (expired.size > 0 && (await slots.evict(tenant, c.key, expired)) > 0) {
        now = clock.now();
        got = await slots.take(tenant, c.key, jobId, now + leaseMs, c.limit, now);
      }
    }
    if (got === true) {
      h.slot = true;
      this.taken++;
    }
    return got;
  }

  /** A slot freed: how long it was held since the wait began counts in the key's average; the next wait begins now. */
  #learn(w: Waiting<G>): void {
    const now = this.deps.clock.now();
    const id = keyId(w.tenant, w.key);
    const seen = now - w.since;
    const before = this.#heldMs.get(id);
    this.#heldMs.set(id, before === undefined ? seen : before + LEARNT_WEIGHT * (seen - before));
    w.since = now;
  }

  #forget(w: Waiting<G>): void {
    clearTimeout(w.timer);
    if (this.#waiting.get(keyId(w.tenant, w.key)) === w) this.#waiting.delete(keyId(w.tenant, w.key));
  }
}

const keyId = (tenant: string, key: string) => `${tenant}\u0000${key}`;

/** Due order, then higher priority first. */
function before(a: Gated, b: Gated): boolean {
  if (a.row.dueMs !== b.row.dueMs) return a.row.dueMs < b.row.dueMs;
  return (a.row.priority ?? DEFAULT_PRIORITY) > (b.row.priority ?? DEFAULT_PRIORITY);
}
