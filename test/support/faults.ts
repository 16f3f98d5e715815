/**
 * Fault injection for crash tests. A {@link SimProcess} stands for one Lambda instance: once
 * killed, every call its wrapped adapters make hangs forever and results in flight never reach
 * the caller, exactly as if the process had died at that instruction. Its signal aborts the
 * round so that its timers stop too.
 */
export class SimProcess {
  readonly #abort = new AbortController();

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  get dead(): boolean {
    return this.#abort.signal.aborted;
  }

  kill(): void {
    this.#abort.abort();
  }
}

const never = <T>() => new Promise<T>(() => {});

type Hooks<T> = { [K in keyof T]?: T[K] extends (...args: infer A) => infer R ? (orig: (...args: A) => R, ...args: A) => R : never };

/**
 * Wraps an adapter: calls go through `hooks` when given, and nothing passes once `proc` is dead.
 */
export function inProcess<T extends object>(target: T, proc: SimProcess, hooks: Hooks<T> = {}): T {
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver);
      if (typeof value !== 'function') return value;
      const orig = (value as (...a: unknown[]) => unknown).bind(obj);
      const hook = (hooks as Record<PropertyKey, ((o: unknown, ...a: unknown[]) => unknown) | undefined>)[prop];
      return async (...args: unknown[]) => {
        if (proc.dead) return never();
        const result = await (hook ? hook(orig, ...args) : orig(...args));
        if (proc.dead) return never();
        return result;
      };
    },
  });
}

export const sleepMs = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A pause point for interleaving tests: the code under test awaits `hold()`, the test awaits
 * `reached` (the code got there), checks what it wants, then calls `release()`.
 */
export function gate(): { hold(): Promise<void>; reached: Promise<void>; release(): void } {
  let arrived: () => void = () => {};
  let release: () => void = () => {};
  const reached = new Promise<void>((r) => (arrived = r));
  const released = new Promise<void>((r) => (release = r));
  return {
    reached,
    release: () => release(),
    hold: () => {
      arrived();
      return released;
    },
  };
}
