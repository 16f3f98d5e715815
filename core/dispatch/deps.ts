import type { Debounces } from '../debounce/index.js';
import { AdaptiveLimit } from './adaptiveLimit.js';
import type {
  Clock,
  GroupLeases,
  GroupResting,
  KeySlots,
  LanePointers,
  QueueSender,
  RowLeases,
  SchedulerSettings,
  ShardReads,
  SpanSink,
} from '../model/index.js';
import type { ControlsCache, TenantRegistry } from '../tenants/index.js';
import type { ParkedTenants } from './parked.js';

/** What a dispatch round and its release timer run on (kept apart so that the two do not import each other). */
export interface DispatchDeps {
  /** The table, in the roles dispatch plays: reading shards, keeping lane pointers and leases, holding groups. */
  readonly store: ShardReads & LanePointers & RowLeases & GroupLeases;
  readonly sender: QueueSender;
  readonly tenants: TenantRegistry;
  readonly clock: Clock;
  readonly settings: SchedulerSettings;
  /** Structured log of unusual events (throttling, lost leases); silent by default. */
  readonly log?: (message: string, fields?: Record<string, unknown>) => void;
  /** Tenants found unregistered, whose rows stay parked (kept across rounds). @default one per round */
  readonly parked?: ParkedTenants;
  /** Tenant controls (pause, delivery limits, weights), at most 5 s stale. Absent: none apply. */
  readonly controls?: ControlsCache;
  /**
   * Per shard, this process's last look at the hold lane (kept across rounds): rounds starting
   * within 5 s of it skip their first look; every round goes on from its cursor.
   */
  readonly holdScans?: Map<number, HoldScanMemory>;
  /**
   * The calls this process's rounds keep in flight, learnt from their latency: one set per cell,
   * shared by the cell's rounds (they meet the same table, queue service and event loop).
   * @default one per round
   */
  readonly flow?: ProcessFlow;
  /**
   * The slots of concurrency keys (docs/flow-control.md): a keyed row is sent only with one.
   * Absent: a keyed row is sent as any other (a wiring without keys, the simulation).
   */
  readonly keySlots?: KeySlots;
  /**
   * Debounced jobs' generations (docs/flow-control.md#debounce): a debounced row is sent only
   * once its generation names its version (a claim); a replaced row is deleted unsent. Absent: a
   * debounced row is sent as any other (a wiring without debounce, the simulation).
   */
  readonly debounces?: Pick<Debounces, 'claim' | 'dropAcquired'>;
  /** Where the `dynein.dispatch` spans go, one per job sent (docs/tracing.md). Absent: none are built. */
  readonly spans?: SpanSink;
  /**
   * Rests of shard groups (docs/design-dispatch.md, "Rest"): a group with nothing due soon is not
   * read until it is. Absent: groups never rest (the simulation).
   */
  readonly resting?: GroupResting;
  /** Per group, this process's knowledge of an intent to rest it (kept across steps, see core/dispatch/rest.ts). */
  readonly restIntents?: RestIntents;
  /**
   * Groups at rest past their execution's end sleep: the step gives their leases up and its
   * dispatcher ends (docs/design-dispatch.md, "Sleep"). Only where every writer of rows can start
   * a dispatcher (core/model/rest.ts). @default false
   */
  readonly groupsSleep?: boolean;
}

/** Per group, the intent to rest it this process wrote or first saw, and when (its clock; core/dispatch/rest.ts). */
export type RestIntents = Map<number, { readonly epoch: string; readonly sinceMs: number }>;

/** Acquires and sends in flight across a process's dispatch rounds (docs/tenant-controls.md, "Fair share under saturation"). */
export interface DispatchFlow {
  readonly acquires: AdaptiveLimit;
  readonly sends: AdaptiveLimit;
}

/**
 * Most acquires and sends in flight per cell of a process: those of eight groups (a round's own
 * caps, 32 acquires a group and 8 sends, bind first when it dispatches fewer). The least is one
 * acquire: when the dispatcher's CPU is what saturates, a flood's acquires are what it spends it
 * on, and with four always allowed the event loop stayed 20 ms behind (B's release timers p95
 * 60 ms late against 41 ms alone on the local stack; with one, 20 to 54 ms).
 */
const MAX_ACQUIRES = 256;
const MAX_SENDS = 64;
const MIN_ACQUIRES = 1;
const MIN_SENDS = 2;
/** Queueing allowed above the calls' base latency, ms (docs/tenant-controls.md, "Fair share under saturation"). */
const TARGET_MS = 10;

/** The limits of one cell's rounds in a process (or of one round, when the process does not share them). */
export function dispatchFlow(now: () => number): DispatchFlow {
  return {
    acquires: new AdaptiveLimit({ min: MIN_ACQUIRES, max: MAX_ACQUIRES, targetMs: TARGET_MS, now }),
    sends: new AdaptiveLimit({ min: MIN_SENDS, max: MAX_SENDS, targetMs: TARGET_MS, now }),
  };
}

/**
 * The flow limits of a process, one set per cell. A cell's dispatchers share nothing with another
 * cell's on AWS (each cell has its own state machine); where one process runs every cell (the
 * local stack), a limit shared across cells would hold one cell's calls back for another's flood.
 */
export class ProcessFlow {
  readonly #byCell = new Map<number, DispatchFlow>();
  constructor(private readonly now: () => number) {}

  /** The limits of `cell`'s rounds (made on first use). */
  of(cell: number): DispatchFlow {
    let flow = this.#byCell.get(cell);
    if (!flow) this.#byCell.set(cell, (flow = dispatchFlow(this.now)));
    return flow;
  }
}
/** What a process remembers of its last look at a shard's hold lane. */
export interface HoldScanMemory {
  /** The look is fresh until then (epoch ms). */
  readonly until: number;
  /** Tenants it found with held rows. */
  readonly tenants: string[];
  /** Where the next look goes on (past this tenant's pointers; none: the lane's start). */
  readonly cursor?: string;
  /**
   * Per tenant that may send: its first held pointer (sort key) and when this process first saw
   * that pointer first while the tenant could send (the `HeldAfterResume` age).
   */
  readonly heads?: Map<string, { readonly sk: string; readonly since: number }>;
}
