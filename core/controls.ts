/**
 * Tenant controls (issue #15, docs/tenant-controls.md): what an operator sets on a tenant through
 * the admin API, apart from the tenant's registration (which its stack owns and rewrites on
 * deploy): paused or not, delivery and submit rate limits, and its weight in fair share.
 *
 * Stored in the scheduler table at `pk = tenant#<name>`, `sk = controls`; read by dispatch, submit
 * and cancel through a {@link ControlsCache} whose staleness is bounded by its TTL (5 s).
 */
import { systemClock, type Clock } from './ports.js';

/** The limits and weight an operator sets (`PUT /v1/admin/tenants/{tenant}/settings`). */
export interface TenantSettings {
  /** Most deliveries per second to the tenant's queue, over all dispatchers. Absent: no limit. */
  readonly maxDeliveriesPerSecond?: number;
  /** Most jobs submitted per second (a batch counts each job). Absent: no limit. */
  readonly maxSubmitsPerSecond?: number;
  /** Share of dispatch when more is due than it can send at once, relative to other tenants'. */
  readonly weight: number;
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
/** Changes kept in the audit trail. */
export const MAX_AUDIT = 20;
/** How stale dispatch, submit and cancel may see a tenant's controls (the cache's TTL). */
export const CONTROLS_TTL_MS = 5_000;

/** A tenant nobody set controls for: not paused, no limits, weight 1. */
export const DEFAULT_CONTROLS: TenantControls = Object.freeze({ paused: false, weight: DEFAULT_WEIGHT, rev: 0, changes: [] });

/** Reads a tenant's controls (implemented on DynamoDB by adapters/dynamoControlsStore.ts). */
export interface ControlsReader {
  /** The stored controls, or undefined when none were ever set. Strongly consistent. */
  getControls(tenant: string): Promise<TenantControls | undefined>;
}

/**
 * The controls through a cache: each tenant is read at most once per `ttlMs` (5 s) per process,
 * concurrent lookups share one read, and a failed read answers the last known controls (or the
 * defaults) so that a storage hiccup neither pauses nor unpauses anyone; it is retried at the
 * next lookup.
 *
 * @example
 * const controls = new ControlsCache(store);
 * if ((await controls.get('billing')).paused) holdRows();
 */
export class ControlsCache {
  readonly #cache = new Map<string, { controls: TenantControls; until: number; pending?: Promise<TenantControls> }>();
  readonly #ttlMs: number;
  readonly #clock: Clock;
  readonly #maxTenants: number;

  constructor(
    private readonly reader: ControlsReader,
    options: { ttlMs?: number; clock?: Clock; maxTenants?: number } = {},
  ) {
    this.#ttlMs = options.ttlMs ?? CONTROLS_TTL_MS;
    this.#clock = options.clock ?? systemClock;
    this.#maxTenants = options.maxTenants ?? 10_000;
  }

  /**
   * The tenant's controls, at most `ttlMs` old (the defaults for a tenant without any). A copy
   * past half its life is read again in the background while it is still served, so a tenant in
   * use never waits for a read (under load a read can take far longer than a send).
   */
  async get(tenant: string): Promise<TenantControls> {
    const now = this.#clock.now();
    const hit = this.#cache.get(tenant);
    if (hit && hit.until > now) {
      if (!hit.pending && hit.until - now < this.#ttlMs / 2) void this.#read(tenant, hit.controls, hit.until);
      return hit.controls;
    }
    if (hit?.pending) return hit.pending;
    return this.#read(tenant, hit?.controls, 0);
  }

  /** Reads the tenant's controls; meanwhile the entry keeps `known` as valid until `validUntil`. */
  #read(tenant: string, known: TenantControls | undefined, validUntil: number): Promise<TenantControls> {
    const pending = this.reader.getControls(tenant).then(
      (c) => {
        this.#set(tenant, c ?? DEFAULT_CONTROLS, this.#clock.now() + this.#ttlMs);
        return c ?? DEFAULT_CONTROLS;
      },
      () => {
        // Keep what was known (valid as long as it was), and ask again at the next lookup.
        this.#set(tenant, known ?? DEFAULT_CONTROLS, validUntil);
        return known ?? DEFAULT_CONTROLS;
      },
    );
    this.#cache.set(tenant, { controls: known ?? DEFAULT_CONTROLS, until: validUntil, pending });
    return pending;
  }

  /** The cached controls without a read (the defaults when not cached): for hot paths that must not wait. */
  peek(tenant: string): TenantControls {
    return this.#cache.get(tenant)?.controls ?? DEFAULT_CONTROLS;
  }

  /** Whether the tenant's controls were read at least once (a copy, fresh or not, is cached). */
  has(tenant: string): boolean {
    const hit = this.#cache.get(tenant);
    return hit !== undefined && (hit.until > 0 || !hit.pending);
  }

  /** Forgets a tenant (after this process changed its controls). */
  invalidate(tenant: string): void {
    this.#cache.delete(tenant);
  }

  #set(tenant: string, controls: TenantControls, until: number): void {
    this.#cache.delete(tenant);
    this.#cache.set(tenant, { controls, until });
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
