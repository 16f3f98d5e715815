/**
 * An AWS SDK v3 middleware that counts requests by service and operation (each HTTP attempt,
 * retries included), so tests, the local stack and the benchmark can say what a job costs.
 *
 * @example
 * const counter = new RequestCounter();
 * counter.attach(dynamoClient);
 * // ... later
 * counter.snapshot(); // { 'DynamoDB.PutItem': 3, 'SQS.SendMessageBatch': 1 }
 */
export class RequestCounter {
  readonly #counts = new Map<string, number>();

  /** Adds the counting middleware to a client (once per client). */
  attach<C extends { middlewareStack: { add: (mw: never, opts: never) => void } }>(client: C): C {
    const mw =
      (next: (args: unknown) => Promise<unknown>, context: { clientName?: string; commandName?: string }) => async (args: unknown) => {
        this.add(serviceName(context.clientName), (context.commandName ?? 'Unknown').replace(/Command$/, ''));
        return next(args);
      };
    // 'deserialize' is the innermost step: it runs once per HTTP attempt, after retries' decision.
    (client.middlewareStack.add as (mw: unknown, opts: unknown) => void)(mw, {
      step: 'deserialize',
      name: 'dyneinRequestCounter',
      override: true,
    });
    return client;
  }

  add(service: string, operation: string, n = 1): void {
    const key = `${service}.${operation}`;
    this.#counts.set(key, (this.#counts.get(key) ?? 0) + n);
  }

  /** Counts by `Service.Operation`, sorted by key. */
  snapshot(): Record<string, number> {
    return Object.fromEntries([...this.#counts].sort(([a], [b]) => a.localeCompare(b)));
  }

  /** Total for a service, or for one `Service.Operation`. */
  total(prefix: string): number {
    let n = 0;
    for (const [k, v] of this.#counts) if (k === prefix || k.startsWith(`${prefix}.`)) n += v;
    return n;
  }

  reset(): void {
    this.#counts.clear();
  }
}

function serviceName(clientName: string | undefined): string {
  const name = (clientName ?? 'Unknown').replace(/Client$/, '');
  return name;
}
