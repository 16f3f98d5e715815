/**
 * Concurrency by key (docs/flow-control.md) in a releaser: a row with a `concurrencyKey` is sent
 * only once it holds one of its key's slots (a conditional write on the key's item, so rounds and
 * dispatchers never give out more than the limit between them). The rows of a key whose slots are
 * all held wait, in due order then priority, still acquired (not renewed meanwhile: see
 * LeaseKeeper); the first of them asks again when the key's oldest slot should free, and takes
 * over a slot whose lease ran out without an outcome or a heartbeat.
 *
 * The waits are shared by every gate of a process over the same key slots (the rounds of the
 * groups one dispatcher runs): a key is asked by one timer, not one per group, and a slot that
 * frees goes to the earliest waiting row of the key whichever round holds it.
 */
import { type AcquiredRow, DEFAULT_KEY_LEASE_SECONDS, DEFAULT_PRIORITY, type KeyFull, type KeySlots } from '../model/index.js';
import { Heap } from '../util/index.js';
import type { KeyTally } from './keyTally.js';

/** A row as the gate sees it: `slot` once it holds its key's slot. */
export interface Gated {
  readonly row: AcquiredRow;
  slot?: boolean;
  /** In the gate, waiting for a slot (its lease is not renewed meanwhile: see LeaseKeeper). */
  waiting?: boolean;
  /** The slot lease this row's take wrote: giving the slot back unsent is conditional on it. */
  slotUntil?: number;
}

/**
 * Asks for a key whose slot time is not known yet: the first 10 ms after a failed take, each next
 * one half as long again, 250 ms apart at most.
 */
const FIRST_PROBE_MS = 10;
const PROBE_GROWTH = 1.5;
const MAX_PROBE_MS = 250;
/**
 * Once slots of a key have freed, the waits know how long one stays held (from its take until it
 * freed: its job's send, run and outcome report; a moving average per key): the first ask comes
 * when the oldest slot taken should free, and asks after a refusal an eighth of that time apart,
 * growing by half, half of it apart at most (never more than 5 s). A key whose jobs hold their
 * slot 300 ms is asked about once or twice per job, and a refusal costs the slot ~40 ms at most.
 */
const LEARNT_WEIGHT = 0.3;
const MAX_LEARNT_PROBE_MS = 5_000;
/** Keys whose slot takes are remembered (the oldest forgotten first). */
const MAX_KEYS_REMEMBERED = 10_000;

export interface KeyGateDeps {
  readonly slots: Pick<KeySlots, 'take' | 'evict'>;
  readonly clock: { now(): number };
  /** The tenant's `keyLeaseSeconds` (absent: the default). */
  keyLeaseSeconds(tenant: string): number | undefined;
  readonly log?: (msg: string, fields?: Record<string, unknown>) => void;
  /** Where the per-key metrics are counted (the round's report). */
  readonly tally?: () => KeyTally;
}

/** A waiting row and the gate (round) it belongs to. */
interface Entry<G extends Gated> {
  readonly h: G;
  readonly gate: KeyGate<G>;
}

interface Waiting<G extends Gated> {
  readonly tenant: string;
  readonly key: string;
  readonly rows: Heap<Entry<G>>;
  attempt: number;
  /** When this wait began (the first refusal). */
  readonly since: number;
  /** The latest refused ask (a slot that then frees freed after it). */
  refusedAt: number;
  /**
   * Who held the key's slots at the latest refusal, each with when it took its slot (its lease's
   * end less the key lease): whichever dispatcher took it.
   */
  holders?: Map<string, number>;
  timer?: NodeJS.Timeout;
  probing: boolean;
}

/** The gates of a process over one key slots store share one {@link KeyWaits}. */
const shared = new WeakMap<object, KeyWaits>();

export class KeyGate<G extends Gated> {
  readonly #waits: KeyWaits<G>;
  #stopped = false;
  /** Rows of this gate waiting for a slot. */
  size = 0;
  /** Slots taken (rows let through), and failed takes (rows that waited), for the round's report. */
  taken = 0;
  refused = 0;

  /** @param admit called with rows that took a slot while they waited: they go to be sent. */
  constructor(
    readonly deps: KeyGateDeps,
    readonly admit: (rows: G[]) => void,
  ) {
    let waits = shared.get(deps.slots);
    if (!waits) shared.set(deps.slots, (waits = new KeyWaits(deps)));
    this.#waits = waits as unknown as KeyWaits<G>;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /**
   * The rows of `list` that may be sent now: those without a key, those holding their slot, and
   * those that take one now. The others wait (and come back through `admit`).
   */
  async pass(list: readonly G[]): Promise<G[]> {
    const out: G[] = [];
    const byKey = new Map<string, G[]>();
    for (const h of list) {
      const c = h.row.concurrency;
      if (!c || h.slot) out.push(h);
      else {
        const id = keyId(h.row.tenant, c.key);
        const rows = byKey.get(id);
        if (rows) rows.push(h);
        else byKey.set(id, [h]);
      }
    }
    await Promise.all(
      [...byKey].map(async ([id, rows]) => {
        rows.sort((a, b) => (before(a, b) ? -1 : 1));
        // Rows of a key that already waits queue behind it: due order holds within the round. A
        // row the refusal names as a holder (its take written before: a dispatcher that died
        // before the send) takes its slot again now rather than wait for it.
        let i = 0;
        let full: KeyFull | undefined;
        if (!this.#waits.waits(id))
          for (; i < rows.length; i++) {
            const got = await this.#waits.take(this, rows[i]!);
            if (got !== true) {
              full = got;
              break;
            }
            this.#passed(rows[i]!, out);
          }
        for (const h of rows.slice(i))
          if (full && h !== rows[i] && full.holders.has(h.row.jobId) && (await this.#waits.take(this, h)) === true) this.#passed(h, out);
          else this.#waits.wait(this, h, full);
      }),
    );
    return out;
  }

  #passed(h: G, out: G[]): void {
    this.#waits.took(h);
    out.push(h);
    this.deps.tally?.().started(h.row.tenant, h.row.concurrency!.key);
  }

  /** Forgets a waiting row (its lease was lost, or the round let it go). */
  drop(h: G): void {
    this.#waits.drop(this, h);
  }

  /** Takes this gate's waiting rows out of the waits: the round gives them back as it ends. */
  takeWaiting(): G[] {
    return this.#waits.takeAll(this);
  }

  /** Forgets this gate's waiting rows (the round ends: their leases run out). */
  stop(): void {
    this.#stopped = true;
    this.#waits.takeAll(this);
  }
}

/** The rows waiting for their keys' slots, of every gate over one key slots store, and the asks for them. */
class KeyWaits<G extends Gated = Gated> {
  readonly #waiting = new Map<string, Waiting<G>>();
  /** Per key, how long a slot stays held from its take until it frees (a moving average, ms). */
  readonly #heldMs = new Map<string, number>();
  /** Per key, when the slots still counted as held were taken here (oldest first, `limit` at most). */
  readonly #takenAt = new Map<string, number[]>();

  constructor(private readonly deps: Omit<KeyGateDeps, 'tally'>) {}

  waits(id: string): boolean {
    return this.#waiting.has(id);
  }

  /** `h` waits for a slot of its key; `full` is what its refused take said (absent: it did not ask). */
  wait(gate: KeyGate<G>, h: G, full?: KeyFull): void {
    const c = h.row.concurrency!;
    const id = keyId(h.row.tenant, c.key);
    let w = this.#waiting.get(id);
    if (!w) {
      const now = this.deps.clock.now();
      w = {
        tenant: h.row.tenant,
        key: c.key,
        rows: new Heap<Entry<G>>((a, b) => before(a.h, b.h)),
        attempt: 0,
        since: now,
        refusedAt: now,
        probing: false,
      };
      this.#waiting.set(id, w);
    }
    if (full) this.#refused(w, full);
    h.waiting = true;
    w.rows.push({ h, gate });
    gate.size++;
    gate.refused++;
    gate.deps.tally?.().refused(w.tenant, w.key, w.rows.size);
    this.#arm(w);
  }

  drop(gate: KeyGate<G>, h: G): void {
    const c = h.row.concurrency;
    if (!c) return;
    const w = this.#waiting.get(keyId(h.row.tenant, c.key));
    if (!w) return;
    this.#remove(w, (e) => e.h === h && e.gate === gate);
  }

  takeAll(gate: KeyGate<G>): G[] {
    const out: G[] = [];
    for (const w of [...this.#waiting.values()]) out.push(...this.#remove(w, (e) => e.gate === gate));
    return out;
  }

  /** Takes the entries `which` out of `w` (their gates' counts with them). */
  #extract(w: Waiting<G>, which: (e: Entry<G>) => boolean): Entry<G>[] {
    const kept: Entry<G>[] = [];
    const out: Entry<G>[] = [];
    for (let e = w.rows.pop(); e; e = w.rows.pop())
      if (which(e)) {
        e.gate.size--;
        out.push(e);
      } else kept.push(e);
    for (const e of kept) w.rows.push(e);
    return out;
  }

  /** Takes the entries `which` out of `w` (their gates' counts with them): their rows. */
  #remove(w: Waiting<G>, which: (e: Entry<G>) => boolean): G[] {
    const out = this.#extract(w, which).map((e) => {
      e.h.waiting = false;
      return e.h;
    });
    if (w.rows.size === 0 && !w.probing) this.#forget(w);
    return out;
  }

  #arm(w: Waiting<G>): void {
    if (w.timer || w.probing) return;
    const delay = this.#nextAsk(w);
    w.timer = setTimeout(() => void this.#probe(w), Math.round(delay * (0.75 + Math.random() / 2)));
  }

  /** How long until the key's next ask (see FIRST_PROBE_MS and LEARNT_WEIGHT). */
  #nextAsk(w: Waiting<G>): number {
    const id = keyId(w.tenant, w.key);
    const held = this.#heldMs.get(id);
    if (held === undefined) return Math.min(MAX_PROBE_MS, FIRST_PROBE_MS * PROBE_GROWTH ** w.attempt);
    // The oldest holder the latest refusal named (another dispatcher's take too), else the oldest
    // take seen here, else the wait's start.
    const named = w.holders && w.holders.size > 0 ? Math.min(...w.holders.values()) : undefined;
    if (w.attempt === 0) {
      const oldest = named ?? this.#takenAt.get(id)?.[0] ?? w.since;
      return Math.min(MAX_LEARNT_PROBE_MS, Math.max(FIRST_PROBE_MS, oldest + held - this.deps.clock.now()));
    }
    const cap = Math.min(MAX_LEARNT_PROBE_MS, Math.max(MAX_PROBE_MS, held / 2));
    // Refused: the next ask when the oldest holder should free, while that is still ahead.
    const ahead = named !== undefined ? named + held - this.deps.clock.now() : 0;
    if (ahead >= FIRST_PROBE_MS) return Math.min(cap, ahead);
    return Math.min(cap, Math.max(FIRST_PROBE_MS, held / 8) * PROBE_GROWTH ** (w.attempt - 1));
  }

  /**
   * What a refused take said of `w`'s key: who holds its slots, since when. A holder gone since the
   * refusal before, its slot taken by a new one, held it about from its take to the new one's (the
   * new holder asked for it meanwhile): learnt as the key's hold time, from every dispatcher's takes,
   * not only this one's.
   */
  #refused(w: Waiting<G>, full: KeyFull): void {
    const leaseMs = (this.deps.keyLeaseSeconds(w.tenant) ?? DEFAULT_KEY_LEASE_SECONDS) * 1000;
    const now = new Map([...full.holders].map(([jobId, until]) => [jobId, until - leaseMs] as const));
    const before = w.holders;
    w.holders = now;
    if (!before) return;
    // Only holders taken about while this key waited here: a take time read from a lease end is
    // wrong for a lease of another length (a tenant's setting changed since) or one a heartbeat
    // moved, and the older the take, the further off a hold time learnt from it.
    const gone = [...before].filter(([j, t]) => !now.has(j) && t >= w.since - MAX_LEARNT_PROBE_MS).map(([, t]) => t);
    const came = [...now].filter(([j]) => !before.has(j)).map(([, t]) => t);
    gone.sort((a, b) => a - b);
    came.sort((a, b) => a - b);
    const id = keyId(w.tenant, w.key);
    for (let i = 0; i < Math.min(gone.length, came.length); i++) {
      const seen = came[i]! - gone[i]!;
      if (seen <= 0) continue;
      const held = this.#heldMs.get(id);
      this.#heldMs.set(id, held === undefined ? seen : held + LEARNT_WEIGHT * (seen - held));
    }
  }

  /** The first waiting row asks for a slot; while it gets one, the next asks too. */
  async #probe(w: Waiting<G>): Promise<void> {
    w.timer = undefined;
    w.probing = true;
    const refusedAt = w.refusedAt; // the refusal before this ask (its own next rows' refusals come after the slots freed)
    const admitted = new Map<KeyGate<G>, G[]>();
    const all: G[] = [];
    let holders: ReadonlyMap<string, number> | undefined;
    try {
      for (let e = w.rows.pop(); e; e = w.rows.pop()) {
        e.gate.size--;
        if (e.gate.stopped) continue;
        let got: true | KeyFull = { holders: new Map(), limit: 0 };
        try {
          got = await this.take(e.gate, e.h);
        } finally {
          if (got !== true) {
            w.rows.push(e);
            e.gate.size++;
          }
        }
        if (got !== true) {
          w.refusedAt = this.deps.clock.now();
          e.gate.deps.tally?.().refused(w.tenant, w.key, w.rows.size);
          holders = got.holders;
          this.#refused(w, got);
          break;
        }
        e.gate.deps.tally?.().started(w.tenant, w.key, Math.max(0, this.deps.clock.now() - e.h.row.dueMs));
        e.h.waiting = false;
        admitted.set(e.gate, [...(admitted.get(e.gate) ?? []), e.h]);
        all.push(e.h);
      }
      // A waiting row that holds one of the slots already (its take written by a dispatcher
      // that died before the send, or by a round that let the row go) takes it again at once:
      // behind the key's earlier rows it would wait for its own slot until that slot's lease ends.
      const holding = holders ? this.#extract(w, (x) => holders!.has(x.h.row.jobId)) : [];
      for (const e of holding) {
        let got: true | KeyFull = { holders: new Map(), limit: 0 };
        try {
          if (!e.gate.stopped) got = await this.take(e.gate, e.h);
        } finally {
          if (got !== true && !e.gate.stopped) {
            w.rows.push(e);
            e.gate.size++;
          }
        }
        if (got !== true) continue;
        e.gate.deps.tally?.().started(w.tenant, w.key, Math.max(0, this.deps.clock.now() - e.h.row.dueMs));
        e.h.waiting = false;
        admitted.set(e.gate, [...(admitted.get(e.gate) ?? []), e.h]);
        this.took(e.h); // (no slot freed for it: nothing to learn of the key's hold time)
      }
    } catch (err) {
      this.deps.log?.('key slot take failed', { tenant: w.tenant, error: (err as Error).message });
    } finally {
      w.probing = false;
    }
    if (all.length > 0) this.#learn(w, all, refusedAt);
    w.attempt = all.length > 0 ? 0 : w.attempt + 1;
    for (const [gate, rows] of admitted) if (!gate.stopped) gate.admit(rows);
    if (w.rows.size === 0) this.#forget(w);
    else this.#arm(w);
  }

  /** One take for `h`; a slot whose lease ran out is taken over (its holder evicted as read). */
  async take(gate: KeyGate<G>, h: G): Promise<true | KeyFull> {
    const { slots, clock } = this.deps;
    const { tenant, jobId, concurrency } = h.row;
    const c = concurrency!;
    const leaseMs = (this.deps.keyLeaseSeconds(tenant) ?? DEFAULT_KEY_LEASE_SECONDS) * 1000;
    let now = clock.now();
    let until = now + leaseMs;
    let got = await slots.take(tenant, c.key, jobId, until, c.limit, now);
    if (got !== true) {
      const expired = new Map([...got.holders].filter(([, held]) => held < now));
      if (expired.size > 0 && (await slots.evict(tenant, c.key, expired)) > 0) {
        now = clock.now();
        until = now + leaseMs;
        got = await slots.take(tenant, c.key, jobId, until, c.limit, now);
      }
    }
    if (got === true) {
      h.slot = true;
      h.slotUntil = until;
      gate.taken++;
    }
    return got;
  }

  /**
   * `admitted` took slots that freed since their oldest counted take (the wait's start stands for
   * a take not seen here: another dispatcher's, or one before the wait). A slot found free after a
   * refusal freed between that refusal and now: about halfway, which counts in the average. One
   * found free at the first ask freed some time before it: the time held is taken as half of what
   * it seemed, at once, so that a key asked too late (the average too long, learnt while the
   * table was busy) is asked in time again within a few jobs.
   */
  #learn(w: Waiting<G>, admitted: readonly G[], refusedAt: number): void {
    const now = this.deps.clock.now();
    const id = keyId(w.tenant, w.key);
    const taken = this.#takenAt.get(id) ?? [];
    for (const h of admitted) {
      const from = taken.shift() ?? w.since;
      const refused = refusedAt > from;
      const seen = Math.max(0, ((refused ? refusedAt : from) + now) / 2 - from);
      const before = this.#heldMs.get(id);
      this.#heldMs.set(id, before === undefined || !refused ? seen : before + LEARNT_WEIGHT * (seen - before));
      this.took(h);
    }
  }

  /** Counts `h`'s slot as taken now (the key's latest `limit` takes are kept). */
  took(h: G): void {
    const { tenant, concurrency } = h.row;
    const id = keyId(tenant, concurrency!.key);
    let taken = this.#takenAt.get(id);
    if (!taken) {
      if (this.#takenAt.size >= MAX_KEYS_REMEMBERED) {
        const oldest = this.#takenAt.keys().next().value!;
        this.#takenAt.delete(oldest);
        this.#heldMs.delete(oldest);
      }
      this.#takenAt.set(id, (taken = []));
    }
    taken.push(this.deps.clock.now());
    while (taken.length > concurrency!.limit) taken.shift();
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
