/**
 * The acquire queue of a dispatch round: conditional acquires run continuously, at most
 * `concurrency` at a time, fresh rows first (in due order), then the backlog (the oldest row of
 * any shard first). The round's reads fill it; it never waits for them, and they never wait for
 * it. A row that falls due during an outage drain takes the next free slot, ahead of every
 * backlog row still queued: it waits for one of the acquires in flight to end, not for the backlog.
 */
export interface AcquireItem {
  readonly key: { readonly shard: number; readonly dueMs: number };
}

export interface AcquirerOptions<T> {
  readonly concurrency: number;
  /** False while the round holds as much as it may (the held-rows and bytes caps). */
  readonly canStart: () => boolean;
  /** Runs one acquire; rejections are the caller's to handle inside. */
  readonly run: (item: T) => Promise<void>;
  readonly now: () => number;
}

export class Acquirer<T extends AcquireItem> {
  /** Fresh rows and retries, by due time. */
  #fresh: T[] = [];
  /** Backlog rows per shard, each oldest first. */
  readonly #backlog = new Map<number, T[]>();
  #backlogSize = 0;
  #inflight = 0;
  #pausedUntil = 0;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;
  readonly #running = new Set<Promise<void>>();

  constructor(private readonly opts: AcquirerOptions<T>) {}

  /** Rows waiting for an acquire. */
  get queued(): number {
    return this.#fresh.length + this.#backlogSize;
  }

  get inflight(): number {
    return this.#inflight;
  }

  /** Queues a fresh row (or a retry) in due order. */
  pushFresh(item: T): void {
    // Binary insertion keeps due order; ties keep arrival order.
    let lo = 0;
    let hi = this.#fresh.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.#fresh[mid]!.key.dueMs <= item.key.dueMs) lo = mid + 1;
      else hi = mid;
    }
    this.#fresh.splice(lo, 0, item);
  }

  /** Queues a backlog row of its shard (rows of a shard arrive oldest first). */
  pushBacklog(item: T): void {
    const list = this.#backlog.get(item.key.shard) ?? [];
    list.push(item);
    this.#backlog.set(item.key.shard, list);
    this.#backlogSize++;
  }

  /** A pause is running. */
  get paused(): boolean {
    return this.opts.now() < this.#pausedUntil;
  }

  /** No acquire starts before `ms` from now (after throttling). */
  pause(ms: number): void {
    this.#pausedUntil = Math.max(this.#pausedUntil, this.opts.now() + ms);
  }

  /** Starts what may start now; arms a timer to go on after a pause. */
  kick(): void {
    if (this.#stopped) return;
    const now = this.opts.now();
    if (now < this.#pausedUntil) {
      if (!this.#timer) this.#timer = setTimeout(() => ((this.#timer = undefined), this.kick()), this.#pausedUntil - now);
      return;
    }
    while (this.#inflight < this.opts.concurrency && this.queued > 0 && this.opts.canStart() && !this.#stopped) {
      const item = this.#next();
      if (!item) break;
      this.#inflight++;
      const p: Promise<void> = this.opts
        .run(item)
        .catch(() => undefined)
        .finally(() => {
          this.#inflight--;
          this.#running.delete(p);
          this.kick();
        });
      this.#running.add(p);
    }
  }

  /** Starts nothing more; what is queued stays unacquired. Resolves once the acquires in flight ended. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }

  #next(): T | undefined {
    if (this.#fresh.length > 0) return this.#fresh.shift();
    let best: T[] | undefined;
    let bestShard = -1;
    for (const [shard, list] of this.#backlog) {
      if (list.length > 0 && (!best || list[0]!.key.dueMs < best[0]!.key.dueMs)) {
        best = list;
        bestShard = shard;
      }
    }
    if (!best) return undefined;
    const item = best.shift();
    this.#backlogSize--;
    if (best.length === 0) this.#backlog.delete(bestShard);
    return item;
  }
}
