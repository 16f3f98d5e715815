import type { SpanRecord, SpanSink } from '../core/model/index.js';

/**
 * The last `capacity` spans in memory (the local stack keeps 10,000: `dynein show --trace`, the
 * job browser's waterfall; docs/tracing.md), oldest dropped first.
 */
export class MemorySpanSink implements SpanSink {
  readonly #spans: SpanRecord[] = [];
  #next = 0;

  constructor(readonly capacity = 10_000) {}

  record(span: SpanRecord): void {
    if (this.#spans.length < this.capacity) this.#spans.push(span);
    else this.#spans[this.#next] = span;
    this.#next = (this.#next + 1) % this.capacity;
  }

  async flush(): Promise<void> {}

  /** The spans of `traceId` kept, by start time. */
  trace(traceId: string): SpanRecord[] {
    return this.#spans.filter((s) => s.traceId === traceId).sort((a, b) => a.startMs - b.startMs);
  }

  get size(): number {
    return this.#spans.length;
  }
}

/** Every span to each of `sinks`. */
export function fanOut(sinks: readonly SpanSink[]): SpanSink {
  return {
    record: (span) => {
      for (const s of sinks) s.record(span);
    },
    flush: async () => {
      await Promise.all(sinks.map((s) => s.flush()));
    },
  };
}
