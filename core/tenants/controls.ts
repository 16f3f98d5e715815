/**
 * Tenant controls (docs/tenant-controls.md): what an operator sets on a tenant through
 * the admin API, apart from the tenant's registration (which its stack owns and rewrites on
 * deploy): paused or not, delivery and submit rate limits, its weight in fair share, and how long a
 * concurrency key's slot outlives a silent worker.
 *
 * Stored in the scheduler table at `pk = tenant#<name>`, `sk = controls`; read by dispatch, submit
 * and cancel through a {@link ControlsCache} whose staleness is bounded by its TTL (5 s).
 */
import { systemClock, type Clock } from '../model/index.js';

/** The limits, weight and key lease an operator sets (`PUT /v1/admin/tenants/{tenant}/settings`). */
export interface TenantSettings {
  /** Most deliveries per second to the tenant's queue, over all dispatchers. Absent: no limit. */
  readonly maxDeliveriesPerSecond?: number;
  /** Most jobs submitted per second (a batch counts each job). Absent: no limit. */
  readonly maxSubmitsPerSecond?: number;
  /** Share of dispatch when more is due than it can send at once, relative to other tenants'. */
  readonly weight: number;
  /**
   * Seconds a concurrency key's slot stays held after the job's send or its last heartbeat or
   * `FAILED` report, with no final outcome (docs/flow-control.md, "Concurrency by key"); then the
   * next job of the key takes it over. Absent: the default,
   * `DEFAULT_KEY_LEASE_SECONDS` (900, core/model).
   */
  readonly keyLeaseSeconds?: number;
}

/** One change, as kept in the controls item's audit trail (the latest {@link MAX_AUDIT} changes). */
export interface ControlChange {
  /** Epoch ms. */
  readonly at: number;
  /** The caller: the IAM principal ARN on AWS, the access key id locally. */
  readonly by: string;
  readonly action: 'pause' | 'resume' | 'settings';
  /** For `settings`: the settings after the change. */
  readonly settings?: TenantSettings;
}

/** A tenant's controls: its settings and whether it is paused. */
export interface TenantControls extends TenantSettings {
  readonly paused: boolean;
  /** When the current pause began, epoch ms. */
  readonly pausedAtMs?: number;
  /** Bumped by every change: writes are conditional on it. 0 when never set. */
  readonly rev: number;
  readonly changes: readonly ControlChange[];
}

/** Weight of a tenant nobody set one for. */
export const DEFAULT_WEIGHT = 1;
export const MAX_WEIGHT = 1_000;
/** Largest rate limit accepted (jobs per second). */
export const MAX_RATE_LIMIT = 100_000;
/** Shortest and longest key lease accepted (`keyLeaseSeconds`, in seconds). */
export const MIN_KEY_LEASE_SECONDS = 10;
export const MAX_KEY_LEASE_SECONDS = 86_400;
/** Changes kept in the audit trail. */
export const MAX_AUDIT = 20;
/** How stale dispatch, submit and cancel may see a tenant's controls (the cache's TTL), counted from the read's start. */
export const CONTROLS_TTL_MS = 5_000;
/**
 * While reads fail, a process keeps serving the copy it has for at most this long after that
 * copy's read began; past it (or with no copy at all) the tenant's controls are
 * {@link UNKNOWN_CONTROLS}: its rows are held until a read succeeds.
 */
export const CONTROLS_MAX_STALE_MS = 30_000;
/** While reads fail, a tenant's controls are read again at most this often per process. */
export const CONTROLS_RETRY_MS = 1_000;

/** A tenant nobody set controls for: not paused, no limits, weight 1, the default key lease. */
export const DEFAULT_CONTROLS: TenantControls = Object.freeze({ paused: false, weight: DEFAULT_WEIGHT, rev: 0, changes: [] });

/**
 * What a process answers for a tenant whose controls it cannot read and has no usable copy of
 * (fail closed): held as if paused (`paused: true`), no limits, the default weight. Tell it
 * from a real pause with {@link isUnknown}. Never stored.
 */
export const UNKNOWN_CONTROLS: TenantControls = Object.freeze({ paused: true, weight: DEFAULT_WEIGHT, rev: -1, changes: [] });

/** Whether `controls` are {@link UNKNOWN_CONTROLS} (a failed read, not a pause). */
export function isUnknown(controls: TenantControls): boolean {
  return controls === UNKNOWN_CONTROLS;
}

/** Reads a tenant's controls (implemented on DynamoDB by adapters/dynamoControlsStore.ts). */
export interface ControlsReader {
  /** The stored controls, or undefined when none were ever set. Strongly consistent. */
  getControls(tenant: string): Promise<TenantControls | undefined>;
}

interface Entry {
  readonly controls: TenantControls;
  /** When the read this copy came from began (-Infinity: no copy yet). */
  readonly readAt: number;
  /** Served without a read until then. */
  readonly until: number;
  /** A lookup from then on starts a read in the background (while the copy is still served). */
  readonly refreshAt: number;
  readonly pending?: Promise<TenantControls>;
}

/**
 * The controls through a cache: each tenant is read at most once per `ttlMs` (5 s) per process,
 * concurrent lookups share one read, and a copy is never served more than `ttlMs` after its read
 * began (so a change made before that read began is seen).
 *
 * A failed read fails closed: a process keeps the copy it has for at most `maxStaleMs` (30 s)
 * after that copy's read began, and otherwise answers {@link UNKNOWN_CONTROLS} (held, like a
 * pause); either way it reads again after `retryMs` (1 s) and counts the failure
 * ({@link takeReadFailures}).
 *
 * @example
 * const controls = new ControlsCache(store);
 * if ((await controls.get('billing')).paused) holdRows(); // a pause, or controls that cannot be read
 */
export class ControlsCache {
  readonly #cache = new Map<string, Entry>();
  readonly #ttlMs: number;
  readonly #maxStaleMs: number;
  readonly #retryMs: number;
  readonly #clock: Clock;
  readonly #maxTenants: number;
  #failures = 0;

  constructor(
    private readonly reader: ControlsReader,
    options: { ttlMs?: number; maxStaleMs?: number; retryMs?: number; clock?: Clock; maxTenants?: number } = {},
  ) {
    this.#ttlMs = options.ttlMs ?? CONTROLS_TTL_MS;
    this.#maxStaleMs = Math.max(this.#ttlMs, options.maxStaleMs ?? CONTROLS_MAX_STALE_MS);
    this.#retryMs = options.retryMs ?? CONTROLS_RETRY_MS;
    this.#clock = options.clock ?? systemClock;
    this.#maxTenants = options.maxTenants ?? 10_000;
  }

  /**
   * The tenant's controls, at most `ttlMs` old (the defaults for a tenant without any;
   * {@link UNKNOWN_CONTROLS} when they cannot be read). A copy past half its life is read again
   * in the background while it is still served, so a tenant in use never waits for a read
   * (under load a read can take far longer than a send).
   */
  async get(tenant: string): Promise<TenantControls> {
    const now = this.#clock.now();
    const hit = this.#cache.get(tenant);
    if (hit && hit.until > now) {
      if (!hit.pending && now >= hit.refreshAt) void this.#read(tenant);
      return hit.controls;
    }
    if (hit?.pending) return hit.pending;
    return this.#read(tenant);
  }

  /**
   * A read that begins now, whatever is cached (it refreshes the cache): the controls as they
   * are once every change already acknowledged, for a decision that a copy even seconds old
   * must not make (submit's direct path). One strongly consistent `GetItem`.
   * {@link UNKNOWN_CONTROLS} when the read fails (counted).
   */
  async fresh(tenant: string): Promise<TenantControls> {
    const readAt = this.#clock.now();
    try {
      const c = (await this.reader.getControls(tenant)) ?? DEFAULT_CONTROLS;
      this.#landed(tenant, c, readAt);
      return c;
    } catch {
      this.#failed(tenant);
      return UNKNOWN_CONTROLS;
    }
  }

  /** Starts a read shared by the lookups that come meanwhile. */
  #read(tenant: string): Promise<TenantControls> {
    const readAt = this.#clock.now();
    const pending: Promise<TenantControls> = this.reader.getControls(tenant).then(
      (c): TenantControls => this.#landed(tenant, c ?? DEFAULT_CONTROLS, readAt, pending),
      (): TenantControls => this.#failed(tenant, pending),
    );
    const hit = this.#cache.get(tenant);
    this.#cache.set(tenant, hit ? { ...hit, pending } : { controls: DEFAULT_CONTROLS, readAt: -Infinity, until: 0, refreshAt: 0, pending });
    return pending;
  }

  /** A read that began at `readAt` answered `c`: kept unless a read that began later landed first. */
  #landed(tenant: string, c: TenantControls, readAt: number, pending?: Promise<TenantControls>): TenantControls {
    const hit = this.#cache.get(tenant);
    const rest = hit?.pending && hit.pending !== pending ? { pending: hit.pending } : {};
    if (hit && hit.readAt > readAt) {
      const { controls, until, refreshAt } = hit;
      this.#put(tenant, { controls, readAt: hit.readAt, until, refreshAt, ...rest });
      return controls;
    }
    this.#put(tenant, { controls: c, readAt, until: readAt + this.#ttlMs, refreshAt: readAt + this.#ttlMs / 2, ...rest });
    return c;
  }

  /** A read failed: the copy if still young enough, else {@link UNKNOWN_CONTROLS}; read again after `retryMs`. */
  #failed(tenant: string, pending?: Promise<TenantControls>): TenantControls {
    this.#failures++;
    const now = this.#clock.now();
    const hit = this.#cache.get(tenant);
    const rest = hit?.pending && hit.pending !== pending ? { pending: hit.pending } : {};
    const keep = hit !== undefined && !isUnknown(hit.controls) && now < hit.readAt + this.#maxStaleMs;
    this.#put(tenant, {
      controls: keep ? hit.controls : UNKNOWN_CONTROLS,
      readAt: hit?.readAt ?? -Infinity,
      until: keep ? hit.readAt + this.#maxStaleMs : now + this.#maxStaleMs,
      refreshAt: now + this.#retryMs,
      ...rest,
    });
    return keep ? hit.controls : UNKNOWN_CONTROLS;
  }

  /** The cached controls without a read (the defaults when not cached): for hot paths that must not wait. */
  peek(tenant: string): TenantControls {
    return this.#cache.get(tenant)?.controls ?? DEFAULT_CONTROLS;
  }

  /** Whether the tenant's controls were looked up at least once (a copy, or {@link UNKNOWN_CONTROLS}, is cached). */
  has(tenant: string): boolean {
    const hit = this.#cache.get(tenant);
    return hit !== undefined && (hit.until > 0 || !hit.pending);
  }

  /** Failed reads since the last call (the `ControlReadFailures` metric), and starts counting again. */
  takeReadFailures(): number {
    const n = this.#failures;
    this.#failures = 0;
    return n;
  }

  /** Forgets a tenant (after this process changed its controls). */
  invalidate(tenant: string): void {
    this.#cache.delete(tenant);
  }

  #put(tenant: string, entry: Entry): void {
    this.#cache.delete(tenant);
    this.#cache.set(tenant, entry);
    while (this.#cache.size > this.#maxTenants) this.#cache.delete(this.#cache.keys().next().value as string);
  }
}

/** Reads and writes a tenant's controls (adapters/dynamoControlsStore.ts; the admin API writes them). */
export interface ControlsStore extends ControlsReader {
  /**
   * Writes the tenant's controls whole, only if the stored `rev` is still `expectedRev` (0: none
   * stored, or stored without a revision). Answers false, writing nothing, when another write came first.
   */
  putControls(tenant: string, controls: TenantControls, expectedRev: number): Promise<boolean>;
}
