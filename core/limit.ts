/** Runs a task under a concurrency limit. */
export type Limit = <T>(task: () => Promise<T>) => Promise<T>;

/** A limit of `max` tasks running at once; the rest wait in arrival order. */
export function limiter(max: number): Limit {
  if (!Number.isInteger(max) || max < 1) throw new RangeError(`max must be a positive integer, got ${max}`);
  let running = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (running >= max) await new Promise<void>((r) => waiting.push(r));
    running++;
    try {
      return await task();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

/** No limit. */
export const unlimited: Limit = (task) => task();
