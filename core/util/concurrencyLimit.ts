/** Runs a task under a concurrency limit. */
export type Limit = <T>(task: () => Promise<T>) => Promise<T>;

/**
 * A limit of `max` tasks running at once; the rest wait in arrival order. A finishing task hands
 * its slot straight to the first waiter (the count of running tasks does not drop), so a caller
 * arriving between the hand-over and the waiter's start never slips past the limit or the queue.
 *
 * @example
 * const limit = limiter(4);
 * await Promise.all(keys.map((k) => limit(() => store.get(k)))); // at most 4 reads in flight
 */
export function limiter(max: number): Limit {
  if (!Number.isInteger(max) || max < 1) throw new RangeError(`max must be a positive integer, got ${max}`);
  let running = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    // Either a free slot now, or the slot of a task that finishes (handed over, already counted).
    if (running < max) running++;
    else await new Promise<void>((r) => waiting.push(r));
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

/** No limit. */
export const unlimited: Limit = (task) => task();
