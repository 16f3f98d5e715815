/**
 * Virtual time for the simulation (docs/capacity.md, "Simulation").
 *
 * The dispatch code reads the time from `deps.clock.now()` but waits with the global
 * `setTimeout`/`setInterval` (core/util/backoff.ts `sleep`, core/dispatch/releaser.ts's timers). While a
 * simulation runs, {@link VirtualTime.install} replaces those globals with a timer heap in virtual
 * milliseconds; {@link VirtualTime.run} then fires the timers in time order and, after each
 * virtual millisecond's timers, lets every promise continuation settle (one real `setImmediate`:
 * the microtask queue is always empty when it fires) before looking at the next timer. Nothing in
 * the simulated code path does real I/O, so the virtual clock only moves when every simulated
 * actor is waiting for a timer.
 *
 * Own scheduler rather than `@sinonjs/fake-timers`: fake-timers finds the next timer by a linear
 * scan and settles microtasks per timer, which is quadratic with the thousands of timers in flight
 * at 20,000 jobs/s (every simulated request is a timer); a heap and one settle per virtual
 * millisecond keep the cost per job constant.
 */
import { Heap } from '../../core/util/heap.js';

const real = {
  setTimeout: globalThis.setTimeout,
  clearTimeout: globalThis.clearTimeout,
  setInterval: globalThis.setInterval,
  clearInterval: globalThis.clearInterval,
  setImmediate: globalThis.setImmediate,
  random: Math.random,
};

interface Timer {
  id: number;
  at: number;
  seq: number;
  fn: () => void;
  /** Repeat interval (setInterval), or undefined. */
  every?: number;
  cancelled: boolean;
}

/** What `setTimeout` returns while installed: enough of Node's `Timeout` for the core (clear, unref). */
class VirtualHandle {
  constructor(readonly timer: Timer) {}
  unref(): this {
    return this;
  }
  ref(): this {
    return this;
  }
  hasRef(): boolean {
    return true;
  }
  [Symbol.toPrimitive](): number {
    return this.timer.id;
  }
}

const before = (a: Timer, b: Timer) => a.at < b.at || (a.at === b.at && a.seq < b.seq);

export class VirtualTime {
  #now: number;
  #seq = 0;
  readonly #heap = new Heap<Timer>(before);
  #installed = false;
  /** Timers fired so far (a measure of the simulation's work). */
  fired = 0;

  constructor(startMs: number) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  /** Schedules `fn` at virtual time `at` (never before now). */
  at(at: number, fn: () => void): Timer {
    const t: Timer = { id: ++this.#seq, at: Math.max(this.#now, at), seq: this.#seq, fn, cancelled: false };
    this.#heap.push(t);
    return t;
  }

  /** Resolves after `ms` of virtual time. */
  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.at(this.#now + Math.max(0, ms), resolve));
  }

  /**
   * Installs the virtual timers; with `random`, `Math.random` draws from it too while installed
   * (the dispatch code's jitter, such as the key gate's asks: a run is then the same for a seed).
   */
  install(random?: () => number): void {
    if (this.#installed) return;
    this.#installed = true;
    if (random) Math.random = random;
    const g = globalThis as unknown as Record<string, unknown>;
    g.setTimeout = (fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) =>
      new VirtualHandle(this.at(this.#now + Math.max(0, Number(ms) || 0), () => fn(...args)));
    g.setInterval = (fn: (...a: unknown[]) => void, ms?: number, ...args: unknown[]) => {
      const every = Math.max(1, Number(ms) || 0);
      const t = this.at(this.#now + every, () => fn(...args));
      t.every = every;
      return new VirtualHandle(t);
    };
    const clear = (h: unknown) => {
      if (h instanceof VirtualHandle) h.timer.cancelled = true;
      else if (h !== undefined && h !== null) real.clearTimeout(h as NodeJS.Timeout);
    };
    g.clearTimeout = clear;
    g.clearInterval = clear;
  }

  uninstall(): void {
    if (!this.#installed) return;
    this.#installed = false;
    Math.random = real.random;
    Object.assign(globalThis, {
      setTimeout: real.setTimeout,
      clearTimeout: real.clearTimeout,
      setInterval: real.setInterval,
      clearInterval: real.clearInterval,
    });
  }

  /**
   * Fires timers in virtual-time order until `untilMs` or until `done()` says so; between virtual
   * milliseconds every pending promise continuation runs. Returns the virtual time reached.
   */
  async run(untilMs: number, done: () => boolean = () => false): Promise<number> {
    await settle();
    while (!done()) {
      const next = this.#peek();
      if (!next || next.at > untilMs) {
        this.#now = Math.max(this.#now, untilMs);
        break;
      }
      this.#now = next.at;
      // Every timer of this millisecond, including those their callbacks add for it.
      for (let t = this.#peek(); t && t.at <= this.#now; t = this.#peek()) {
        this.#heap.pop();
        if (t.cancelled) continue;
        if (t.every !== undefined) {
          t.at = this.#now + t.every;
          t.seq = ++this.#seq;
          this.#heap.push(t);
        }
        this.fired++;
        t.fn();
      }
      await settle();
    }
    return this.#now;
  }

  /** Timers waiting (cancelled ones not yet discarded included). */
  get pending(): number {
    return this.#heap.size;
  }

  #peek(): Timer | undefined {
    while (this.#heap.peek()?.cancelled) this.#heap.pop();
    return this.#heap.peek();
  }
}

/** Lets every queued promise continuation run (a real macrotask runs only once the microtask queue is empty). */
function settle(): Promise<void> {
  return new Promise((r) => real.setImmediate(r));
}

export { seededRandom } from '../../local/faults.js';
