/**
 * The rows a dispatch round has read and that are not final yet: what it tracks, what it watches
 * (to look at again later), what is parked, and the lane pointers of rows that became final,
 * deleted in the background.
 */
import type { HeldPointer, LanePointers, RowKey, ShardMarks } from '../model/index.js';
import { PointerSweep } from './pointerSweep.js';
import type { RoundReport } from './roundReport.js';

/** A row the round has read and that is not final yet. */
export interface Track {
  readonly key: RowKey;
  readonly id: string;
  /** From the job id: fair share is per tenant. */
  readonly tenant: string;
  /** The job's priority (1..9), when not the default. */
  readonly priority?: number;
  /** Read by a due-range read: it holds the shard's mark back until it is final. */
  main: boolean;
  /** A late-lane pointer names it: deleted once the row is final. */
  late: boolean;
  /** Counted in its lane's `backlogOpen` while queued. */
  backlog: boolean;
  /** Last seen ACQUIRED by someone (a recovery when we acquire it). */
  wasAcquired: boolean;
  /** Its hold-lane pointer, when it has one: deleted once the row is final. */
  held?: HeldPointer;
  /** When watched: acquire again from then (the other holder's lease ends). */
  retryAt: number;
}

/** A new track of a row just read: queued for an acquire, on no lane list yet. */
export function newTrack(
  key: RowKey,
  id: string,
  tenant: string,
  fields: Partial<Pick<Track, 'priority' | 'main' | 'late' | 'held' | 'wasAcquired'>> = {},
): Track {
  return {
    key: { shard: key.shard, dueMs: key.dueMs, jobId: key.jobId },
    id,
    tenant,
    ...(fields.priority !== undefined ? { priority: fields.priority } : {}),
    main: fields.main ?? false,
    late: fields.late ?? false,
    ...(fields.held ? { held: fields.held } : {}),
    backlog: false,
    wasAcquired: fields.wasAcquired ?? false,
    retryAt: 0,
  };
}

export class RowTracker {
  readonly #tracks = new Map<string, Track>();
  /** Rows looked at again from their `retryAt`: held by another round, parked, or a hold not written yet. */
  readonly watching = new Set<Track>();
  /** Ids of parked rows' tracks: watched, never acquired, and not work (the round may go idle). */
  readonly parked = new Set<string>();
  /** Late-lane pointers of final rows, to delete; and when those deleted lately were (reads of the lane may lag). */
  readonly latePointers: PointerSweep<RowKey>;
  /** Hold-lane pointers of final rows, to delete; and when those deleted lately were. */
  readonly heldPointers: PointerSweep<HeldPointer>;
  readonly #background = new Set<Promise<void>>();

  constructor(
    store: Pick<LanePointers, 'deleteLatePointers' | 'deleteHeldPointers'>,
    private readonly report: Pick<RoundReport, 'maxTracked'>,
  ) {
    this.latePointers = new PointerSweep<RowKey>((keys) => store.deleteLatePointers(keys));
    this.heldPointers = new PointerSweep<HeldPointer>((keys) => store.deleteHeldPointers(keys));
  }

  get size(): number {
    return this.#tracks.size;
  }

  get(id: string): Track | undefined {
    return this.#tracks.get(id);
  }

  track(t: Track): void {
    this.#tracks.set(t.id, t);
    if (this.#tracks.size > this.report.maxTracked) this.report.maxTracked = this.#tracks.size;
  }

  /** Looks at `t` again from `retryAt` (when another round's lease on it ends). */
  watch(t: Track, retryAt: number, heldByOther = true): void {
    t.retryAt = retryAt;
    t.wasAcquired = heldByOther;
    this.watching.add(t);
  }

  /** Watched rows whose time to look again has come, no longer watched. */
  takeDue(now: number): Track[] {
    const due: Track[] = [];
    for (const t of this.watching) {
      if (t.retryAt <= now) {
        this.watching.delete(t);
        due.push(t);
      }
    }
    return due;
  }

  /** Forgets a row that is not final but needs this round no more (its hold pointer stays). */
  drop(t: Track): void {
    this.#tracks.delete(t.id);
    this.watching.delete(t);
    this.parked.delete(t.id);
    if (t.late) this.latePointers.add(t.id, t.key);
  }

  /** A row became final: forgotten, and its lane pointers deleted. */
  finish(id: string): void {
    const t = this.#tracks.get(id);
    if (!t) return;
    this.#tracks.delete(id);
    this.watching.delete(t);
    this.parked.delete(id);
    if (t.late) this.latePointers.add(id, t.key);
    if (t.held) this.heldPointers.add(id, t.held);
  }

  /** Deletes the pointers of final rows in the background (see {@link settled}). */
  flushPointers(now: () => number): void {
    for (const sweep of [this.latePointers, this.heldPointers]) {
      const p = sweep.flush(now);
      if (!p) continue;
      const tracked: Promise<void> = p.finally(() => this.#background.delete(tracked));
      this.#background.add(tracked);
    }
  }

  /** The pointer deletes in flight have ended. */
  async settled(): Promise<void> {
    await Promise.all(this.#background);
  }

  /** Lowers each shard's mark to the oldest row a due-range read found there that is not final. */
  holdMarksBack(marks: ShardMarks): ShardMarks {
    for (const t of this.#tracks.values()) {
      const m = marks[t.key.shard];
      if (t.main && m !== undefined && t.key.dueMs < m) marks[t.key.shard] = t.key.dueMs;
    }
    return marks;
  }
}
