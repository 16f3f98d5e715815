/**
 * How many calls of one kind a dispatcher keeps in flight, learnt from their latency.
 *
 * Fair share between tenants is decided in the dispatcher's own queues (core/dispatch/acquirer.ts,
 * core/dispatch/releaser.ts): the next acquire or send goes to the tenant with the least virtual time.
 * That only holds while the rows wait there. Calls already sent wait in whatever queue the other
 * side keeps, in arrival order: the table's and the queue service's request queues, the
 * process's event loop (its responses), a connection pool. With 32 acquires and 8 sends in flight
 * per round, a tenant whose row falls due behind a flood waits for every call the flood has in
 * flight before its own, which is what docs/tenant-controls.md's "Fair share under saturation"
 * is about.
 *
 * The limit keeps those outside queues short: a call whose latency is more than `targetMs` above
 * the least latency seen lately (the latency with no queue: the base) means calls are queueing,
 * and the limit shrinks by a tenth of itself; while calls come back within the target, it grows
 * by one per limit's worth of calls (one round trip), up to `max`. Calls then queue in the
 * dispatcher, where fair share orders them, and the queue outside stays within about `targetMs`
 * of the base whatever the backlog. When nothing queues (AWS at any load the dispatcher's CPU can
 * carry), latencies stay at the base and the limit stays at `max`: throughput is the same.
 *
 * The base is the least latency of the current and the last window of `probeEveryMs`. A flood
 * that never ends would keep a queue standing and pass it off as the base: after a window in which
 * calls queued, a probe holds the calls in flight at `min` for about two round trips, the queue
 * outside drains, and the calls that come back show the base again (TCP BBR's ProbeRTT does the
 * same). A lasting change of the network is the new base within two windows.
 *
 * The callers (core/dispatch/acquirer.ts, core/dispatch/releaser.ts) let a tenant with no call in flight start one
 * whatever the limit (`start`): the limit holds back a tenant that already has calls out, never
 * the first call of one within its share. They name the tenant of each call: while a single
 * tenant calls, nobody waits behind it, and its calls go at `max` (the table serves a burst
 * faster with more calls out; the limit keeps learning meanwhile).
 *
 * @example
 * const sends = new AdaptiveLimit({ min: 2, max: 64, now: () => clock.now() });
 * const pump = () => {
 *   while (ready.length > 0 && sends.tryStart(pump)) { // queued and woken when a slot frees
 *     const started = clock.now();
 *     void send(ready.shift()).then(() => sends.done(clock.now() - started), () => sends.done());
 *   }
 * };
 */
export interface AdaptiveLimitOptions {
  /** The limit never goes below this. */
  readonly min: number;
  /** ...nor above this; it starts here. */
  readonly max: number;
  /** Queueing a call may meet, ms above the base. @default 10 */
  readonly targetMs?: number;
  /** How often the base is measured again while calls queue (a probe), ms. @default 5_000 */
  readonly probeEveryMs?: number;
  readonly now: () => number;
}

/** Calls of two keys within this long make the limit apply (see `limit`): longer than a quiet tenant's gaps between calls. */
const KEY_WINDOW_MS = 5_000;
/** The share of the limit one cut takes off (at most one cut per round trip: see `#skipCuts`). */
const CUT = 0.1;

export class AdaptiveLimit {
  #limit: number;
  #inflight = 0;
  /** Least latency of the current window, and of the one before (a window is `probeEveryMs`). */
  #baseNow = Infinity;
  #basePrev = Infinity;
  #windowStart: number;
  /** Completions to see before another cut: the calls in flight at the last cut (their latencies predate it). */
  #skipCuts = 0;
  /** Whether a call came back over the target in this window (calls are queueing: probe the base at its end). */
  #queued = false;
  /** A probe runs until then: at most `min` calls in flight, so the queue outside drains and the base shows. */
  #probeUntil = 0;
  /** Callers waiting for a free slot (each dispatch round sharing the limit), woken in turn. */
  readonly #waiters = new Set<() => void>();
  /** The caller just woken: its next `tryStart` takes the slot whoever else waits. */
  #turn: (() => void) | undefined;
  #waking = false;
  /** When each key (a tenant) last started a call, oldest first. */
  readonly #keys = new Map<string, number>();
  readonly #min: number;
  readonly #max: number;
  readonly #targetMs: number;
  readonly #windowMs: number;

  constructor(private readonly opts: AdaptiveLimitOptions) {
    if (!(opts.min >= 1 && opts.max >= opts.min)) throw new RangeError(`need 1 <= min <= max, got ${opts.min} and ${opts.max}`);
    this.#min = opts.min;
    this.#max = opts.max;
    this.#limit = opts.max;
    this.#targetMs = opts.targetMs ?? 10;
    this.#windowMs = opts.probeEveryMs ?? 5_000;
    this.#windowStart = opts.now();
  }

  /** Calls that may be in flight now: `max` while calls of fewer than two keys were made in the last 5 s. */
  get limit(): number {
    const now = this.opts.now();
    if (!this.#contended(now)) return this.#max;
    if (this.#probeUntil > 0 && now < this.#probeUntil) return this.#min;
    return Math.floor(this.#limit);
  }

  /**
   * Whether calls of two keys (tenants) or more were made in the last 5 s. One tenant alone
   * has nobody to make room for: its calls go at the rounds' own caps (a burst is not slowed);
   * the limit, learnt all along, applies as soon as a second one calls.
   */
  #contended(now: number): boolean {
    let n = 0;
    for (const [key, at] of this.#keys) {
      if (at < now - KEY_WINDOW_MS) this.#keys.delete(key);
      else if (++n >= 2) return true;
    }
    return false;
  }

  #note(key: string | undefined): void {
    if (key === undefined) return;
    this.#keys.delete(key); // most recent last: the stale ones are found first
    this.#keys.set(key, this.opts.now());
  }

  get inflight(): number {
    return this.#inflight;
  }

  /** A free slot: `inflight < limit`. */
  get free(): boolean {
    return this.#inflight < this.limit;
  }

  /** The least latency seen lately (ms; Infinity before the first call). */
  get baseMs(): number {
    return Math.min(this.#baseNow, this.#basePrev);
  }

  /**
   * Starts a call when a slot is free and no caller that asked before waits for one; otherwise
   * queues `wake` (once) and answers false. A freed slot goes to the caller that has waited
   * longest: it is woken, and its next `tryStart` takes the slot. Callers sharing the limit (the
   * rounds of a process) thus take slots in turn, one at a time: a busy round cannot take every
   * slot its own calls free.
   */
  tryStart(wake: () => void, key?: string): boolean {
    this.#note(key);
    if (this.#turn === wake) {
      this.#turn = undefined;
      if (this.free) return this.#take();
    }
    if (this.#waiters.has(wake)) {
      // Already waiting: it keeps its place, and takes a free slot only when it is first.
      if (!this.free || this.#waiters.values().next().value !== wake) return false;
      this.#waiters.delete(wake);
      return this.#take();
    }
    this.#wake(); // those who asked before go first
    if (this.free && this.#waiters.size === 0) return this.#take();
    this.#waiters.add(wake);
    return false;
  }

  #take(): true {
    this.#inflight++;
    return true;
  }

  /** A call (of `key`) starts whether or not a slot is free (the caller decided). */
  start(key?: string): void {
    this.#note(key);
    this.#inflight++;
  }

  /**
   * A call ended after `latencyMs`; without a latency (it failed before it reached the other
   * side) it frees its slot and teaches nothing.
   */
  done(latencyMs?: number): void {
    this.#inflight = Math.max(0, this.#inflight - 1);
    this.#learn(latencyMs);
    this.#wake();
  }

  /** Hands free slots to the waiting callers, longest waiting first, one each (not re-entered: a woken caller asking again queues). */
  #wake(): void {
    if (this.#waking) return;
    this.#waking = true;
    try {
      for (const wake of this.#waiters) {
        if (!this.free) return;
        this.#waiters.delete(wake);
        this.#turn = wake;
        wake();
        if (this.#turn === wake) this.#turn = undefined; // it wanted no slot after all (stopped, or nothing left)
      }
    } finally {
      this.#waking = false;
    }
  }

  #learn(latencyMs: number | undefined): void {
    const skip = this.#skipCuts > 0;
    if (skip) this.#skipCuts--;
    if (latencyMs === undefined || !Number.isFinite(latencyMs) || latencyMs < 0) return;
    const now = this.opts.now();
    this.#nextWindow(now);
    this.#baseNow = Math.min(this.#baseNow, latencyMs);
    if (now < this.#probeUntil) return; // probing: the latencies are the base's, not the limit's
    if (latencyMs > this.baseMs + this.#targetMs) {
      this.#queued = true;
      // In flight at the last cut, it says nothing of the cut limit; with far fewer calls out
      // than the limit, the delay is not theirs (a pause of the process, another's load).
      if (skip || this.#inflight + 1 < this.limit / 2) return;
      this.#limit = Math.max(this.#min, this.#limit * (1 - CUT));
      this.#skipCuts = this.#inflight;
      return;
    }
    this.#limit = Math.min(this.#max, this.#limit + 1 / this.#limit);
  }

  /**
   * A new window each `probeEveryMs`: the base is the least of this one and the last. After a
   * window in which calls queued, a probe: for two bases plus the target (at least 20 ms), at
   * most `min` calls in flight; the queue outside drains and the calls that come back show the
   * base again (the standing queue of a flood that never ends would otherwise pass for it).
   */
  #nextWindow(now: number): void {
    if (now - this.#windowStart < this.#windowMs) return;
    this.#basePrev = now - this.#windowStart >= 2 * this.#windowMs ? Infinity : this.#baseNow;
    if (this.#queued && Number.isFinite(this.baseMs)) {
      const ms = Math.max(20, 2 * (this.baseMs + this.#targetMs));
      this.#probeUntil = now + ms;
      this.#baseNow = Infinity; // the probe's calls set it
      this.#skipCuts = this.#inflight;
      setTimeout(() => this.#wake(), ms + 1).unref?.(); // its end frees slots with no call ending then
    } else this.#baseNow = Infinity;
    this.#queued = false;
    this.#windowStart = now;
  }
}
