/**
 * Shard groups at rest (docs/design-dispatch.md, "Rest"): a group whose shards hold nothing due
 * soon is not read until its first row is; every writer of a row makes sure the row's group is
 * awake by the row's due time. This is the writers' side; the dispatcher's is in
 * core/dispatch/rest.ts.
 */
import type { DispatchStarter, GroupRest, GroupWakes } from './ports.js';
import type { SchedulerSettings } from './config.js';

/**
 * How long a writer of rows may trust what it last read of a group's rest, and how long a
 * dispatcher's intent to rest a group stands before its confirming reads begin: a row written on
 * the strength of a read older than the intent was written before those reads, so they see it.
 */
export const REST_NOTICE_MS = 1_000;

/**
 * A row due this soon (less the lookahead) in a sleeping group is too soon for the tick's next
 * execution (the rule fires once a minute, up to a few seconds late): its writer starts one at
 * once. A row due later is the tick's to plan for (docs/design-dispatch.md, "Sleep").
 */
export const WAKE_WINDOW_MS = 75_000;

/** The group a shard belongs to. */
export const groupOfShard = (shard: number, settings: Pick<SchedulerSettings, 'groupCount'>): number => shard % settings.groupCount;

/**
 * The writers' side: after a row is written (acknowledged), {@link RowWakes.written} brings its
 * group's wake-up forward to the row's due time when the group rests (or is about to). What it
 * read of a group is trusted for less than {@link REST_NOTICE_MS} (measured from before the read
 * was sent, on a monotonic clock), so at steady load a writer reads each group's rest about once
 * a second and writes nothing more.
 *
 * @example
 * await store.putJob(row);
 * await wakes.written(row.shard, row.dueMs);
 */
export class RowWakes {
  readonly #known = new Map<number, { readonly rest: GroupRest | undefined; readonly readAt: number }>();
  readonly #reading = new Map<number, { readonly rest: Promise<GroupRest | undefined>; readonly readAt: number }>();

  /**
   * `starter` starts a dispatcher for a sleeping group (without one, groups never sleep: a
   * dispatcher only lets them sleep when writers can start one); `now` is the wall clock the due
   * times are on; `monotonic` times the trust in reads.
   */
  constructor(
    private readonly groups: GroupWakes,
    private readonly settings: Pick<SchedulerSettings, 'groupCount'> & Partial<Pick<SchedulerSettings, 'cells' | 'lookaheadMs'>>,
    private readonly monotonic: () => number = () => performance.now(),
    private readonly sleepers?: {
      readonly starter: DispatchStarter;
      readonly now: () => number;
      readonly log?: (message: string, fields?: Record<string, unknown>) => void;
    },
  ) {}

  /** A row due at `dueMs` was written to `shard`: its group will be awake by then. */
  async written(shard: number, dueMs: number): Promise<void> {
    const group = groupOfShard(shard, this.settings);
    const rest = await this.#rest(group);
    if (rest === undefined || (rest.wakeAtMs !== undefined && rest.wakeAtMs <= dueMs)) return;
    const sentAt = this.monotonic();
    const woken = await this.groups.wakeBy(group, dueMs);
    if (woken.asleep) await this.#rouse(group, dueMs);
    // Whatever it did (brought forward, or found the group waking by then or awake), the group
    // wakes by `dueMs` as of this call, as a read sent now would have found.
    const last = this.#known.get(group);
    if (!last || last.readAt <= sentAt) this.#known.set(group, { rest: { ...rest, wakeAtMs: dueMs }, readAt: sentAt });
  }

  /**
   * The group sleeps, its wake-up now `dueMs`: too soon for the tick, this writer ends the sleep
   * and starts a dispatcher (only the writer that ends it: one start for a burst of rows). A start
   * that fails (after the starter's own retries) is logged, not thrown: the group no longer
   * sleeping, the tick's next execution (within a minute) plans a dispatcher for it.
   */
  async #rouse(group: number, dueMs: number): Promise<void> {
    const sleepers = this.sleepers;
    if (!sleepers) return;
    if (dueMs - (this.settings.lookaheadMs ?? 0) - sleepers.now() >= WAKE_WINDOW_MS) return;
    if (!(await this.groups.rouse(group))) return;
    const cell = group % (this.settings.cells ?? 1);
    await sleepers.starter.start(cell).catch((err: unknown) =>
      sleepers.log?.('could not start a dispatcher for a sleeping group: the next tick plans one', {
        group,
        cell,
        error: (err as Error).message,
      }),
    );
  }

  /**
   * The group's rest as a read sent less than the notice before this call found it (the row was
   * written before the call): the last one, one in flight, or a new one.
   */
  async #rest(group: number): Promise<GroupRest | undefined> {
    const calledAt = this.monotonic();
    const fresh = (r: { readonly readAt: number } | undefined) => r !== undefined && calledAt - r.readAt < REST_NOTICE_MS;
    const known = this.#known.get(group);
    if (fresh(known)) return known!.rest;
    const inFlight = this.#reading.get(group);
    if (fresh(inFlight)) return inFlight!.rest;
    const readAt = this.monotonic();
    const rest = this.groups.readRest(group).then((r) => {
      const last = this.#known.get(group);
      if (!last || last.readAt < readAt) this.#known.set(group, { rest: r, readAt });
      return r;
    });
    const reading = { rest, readAt };
    this.#reading.set(group, reading);
    void rest.then(
      () => this.#reading.get(group) === reading && this.#reading.delete(group),
      () => this.#reading.get(group) === reading && this.#reading.delete(group),
    );
    return rest;
  }
}
