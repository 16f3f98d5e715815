import {
  type Clock,
  systemClock,
  TENANT_PATTERN,
  TenantNotFoundError,
  type TenantRecord,
  type TenantStore,
  ValidationError,
} from '../model/index.js';
import { foreignQueues, type TenantQueueUrls } from './registration.js';

/**
 * The registry's read (a role port): a tenant's record, or undefined while it is not registered.
 * What dispatch's parking asks ({@link TenantRegistry} is one).
 */
export interface TenantLookup {
  lookup(name: string): Promise<TenantRecord | undefined>;
}

/**
 * The tenant registry read through a short cache: a Lambda reads each tenant at most once per
 * `ttlMs` (unknown tenants are cached for a shorter time, so a new tenant appears quickly).
 *
 * With `queues` (every deployment sets it), a registry item whose queue or DLQ URL is not the
 * tenant's own ({@link foreignQueues}: another tenant's queue, another account's or region's) is
 * not used: the tenant counts as not registered (its rows stay parked, its requests answer
 * 404), and `onRefused` says why each time the item is read.
 */
export class TenantRegistry implements TenantLookup {
  /** Tenants whose registration was last refused (cached as long as a record, so not logged at every look). */
  readonly #refused = new Set<string>();
  readonly #cache = new Map<string, { record: TenantRecord | undefined; until: number; pending?: Promise<TenantRecord | undefined> }>();

  constructor(
    private readonly store: TenantStore,
    private readonly options: {
      ttlMs?: number;
      negativeTtlMs?: number;
      clock?: Clock;
      /** The deployment's tenant queue URLs: a registration naming others is refused. */
      queues?: TenantQueueUrls;
      /** Told of each refused registration (a log line and a metric). */
      onRefused?: (tenant: string, reason: string) => void;
    } = {},
  ) {}

  /** The tenant's record; throws {@link ValidationError} for a bad name, {@link TenantNotFoundError} for an unknown one. */
  async require(name: string): Promise<TenantRecord> {
    assertTenantName(name);
    const record = await this.lookup(name);
    if (!record) throw new TenantNotFoundError(name);
    return record;
  }

  /**
   * The tenant's record or undefined, through the cache. A record past half its life is read
   * again in the background while it is still served: a tenant in use never waits for a read.
   */
  async lookup(name: string): Promise<TenantRecord | undefined> {
    const clock = this.options.clock ?? systemClock;
    const now = clock.now();
    const hit = this.#cache.get(name);
    if (hit && hit.until > now) {
      const ttl = this.options.ttlMs ?? 30_000;
      if (hit.record && !hit.pending && hit.until - now < ttl / 2) void this.#read(name, hit).catch(() => {});
      return hit.record;
    }
    if (hit?.pending) return hit.pending;
    return this.#read(name, hit);
  }

  async #read(name: string, hit: { record?: TenantRecord; until: number } | undefined): Promise<TenantRecord | undefined> {
    const clock = this.options.clock ?? systemClock;
    const pending = this.store.getTenant(name).then((record) => this.#own(name, record));
    // A copy still valid stays valid while the read runs.
    this.#cache.set(name, { record: hit?.record, until: hit && hit.until > clock.now() ? hit.until : 0, pending });
    try {
      const record = await pending;
      const ttl = record || this.#refused.has(name) ? (this.options.ttlMs ?? 30_000) : (this.options.negativeTtlMs ?? 2_000);
      this.#cache.set(name, { record, until: clock.now() + ttl });
      return record;
    } catch (err) {
      if (hit?.record && hit.until > clock.now()) this.#cache.set(name, { record: hit.record, until: hit.until });
      else this.#cache.delete(name);
      throw err;
    }
  }

  /** The record, unless it names queues that are not the tenant's own. */
  #own(name: string, record: TenantRecord | undefined): TenantRecord | undefined {
    const queues = this.options.queues;
    const reason = record && queues ? foreignQueues(queues, name, record) : undefined;
    if (reason === undefined) {
      this.#refused.delete(name);
      return record;
    }
    this.#refused.add(name);
    this.options.onRefused?.(name, reason);
    return undefined;
  }
}

export function assertTenantName(name: unknown): asserts name is string {
  if (typeof name !== 'string' || !TENANT_PATTERN.test(name)) {
    throw new ValidationError(
      `tenant name ${JSON.stringify(name)} is invalid: use 1 to 40 lowercase letters, digits or '-', starting with a letter or digit`,
    );
  }
}
