/**
 * The submit rate limit (`maxSubmitsPerSecond`, docs/tenant-controls.md#submit-rate-limit): jobs
 * a tenant may submit per second, over every submit instance, counted in the scheduler table.
 *
 * Each epoch second of a limited tenant has {@link slotCount} counters (`pk = rate#<tenant>#<slot>`,
 * `sk = <epoch second>`) whose allowances sum to the limit; a request adds its job count to one
 * of them with a single conditional write that keeps the count within the slot's allowance. A
 * tenant without a limit costs nothing here beyond the cached controls read.
 */
import type { ControlsCache } from '../tenants/index.js';
import { ApiError, type Clock, ThrottledError, ValidationError } from '../model/index.js';

/**
 * Most accepted writes per second one counter item takes (DynamoDB allows 1,000 write units per
 * second on a partition key): a higher limit is spread over more slots.
 */
export const MAX_COUNTS_PER_SLOT = 500;
/** How long a counter item lives after its second (DynamoDB's TTL deletes it some time later). */
export const COUNTER_TTL_MS = 60_000;

/** Counter items of a limit: one per {@link MAX_COUNTS_PER_SLOT} jobs per second. */
export function slotCount(limitPerSecond: number): number {
  return Math.max(1, Math.ceil(limitPerSecond / MAX_COUNTS_PER_SLOT));
}

/** The share of `limitPerSecond` that slot `slot` of `slots` holds: the shares sum to the limit. */
export function slotAllowance(limitPerSecond: number, slots: number, slot: number): number {
  return Math.floor(limitPerSecond / slots) + (slot < limitPerSecond % slots ? 1 : 0);
}

/** One counter: a tenant's slot in one epoch second. */
export interface RateCounterKey {
  readonly tenant: string;
  readonly slot: number;
  /** Epoch seconds. */
  readonly second: number;
}

/** Where the counters live (adapters/dynamoRateCounter.ts on DynamoDB). */
export interface RateCounterStore {
  /**
   * Adds `n` to the counter unless its count would then exceed `allowance` (one conditional
   * write); true when added. The item expires at `expiresAtMs`.
   * @throws ThrottledError when the store throttled the write
   */
  add(key: RateCounterKey, n: number, allowance: number, expiresAtMs: number): Promise<boolean>;
}

/** 429 `Throttled`: the tenant's submit rate limit is used up for this second; nothing was written. */
export class SubmitThrottledError extends ApiError {
  readonly status = 429;
  readonly code = 'Throttled';
  override readonly headers: Readonly<Record<string, string>>;
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
  ) {
    super(message);
    this.name = 'SubmitThrottledError';
    this.headers = { 'retry-after': String(retryAfterSeconds) };
  }
}

export interface SubmitRateDeps {
  readonly controls: ControlsCache;
  readonly counters: RateCounterStore;
  readonly clock: Clock;
  /** For the slot choice; Math.random by default. */
  readonly random?: () => number;
}

/**
 * Admits or refuses a request of `n` jobs against its tenant's `maxSubmitsPerSecond`. A request
 * is admitted whole or not at all (a batch counts each of its valid jobs).
 */
export class SubmitRateLimiter {
  constructor(private readonly deps: SubmitRateDeps) {}

  /**
   * Resolves when the request may go ahead.
   * @throws SubmitThrottledError (429) when this second's allowance is used up, ValidationError
   * when one request holds more jobs than a second allows
   */
  async admit(tenant: string, n: number): Promise<void> {
    const limit = (await this.deps.controls.get(tenant)).maxSubmitsPerSecond;
    if (limit === undefined || n <= 0) return; // no limit: no counter, no write
    const slots = slotCount(limit);
    const atOnce = slotAllowance(limit, slots, slots - 1); // the smallest share
    if (n > atOnce) {
      throw new ValidationError(
        `the request holds ${n} jobs, more than tenant '${tenant}' may submit at once under its limit of ${limit} jobs per second (maxSubmitsPerSecond): send at most ${atOnce} jobs per request`,
      );
    }
    const now = this.deps.clock.now();
    const second = Math.floor(now / 1000);
    const first = Math.min(slots - 1, Math.floor((this.deps.random ?? Math.random)() * slots));
    // A full slot may sit beside one with room: a second try (another write) before refusing.
    const tries = slots > 1 ? [first, (first + 1) % slots] : [first];
    try {
      for (const slot of tries) {
        const added = await this.deps.counters.add(
          { tenant, slot, second },
          n,
          slotAllowance(limit, slots, slot),
          (second + 1) * 1000 + COUNTER_TTL_MS,
        );
        if (added) return;
      }
    } catch (err) {
      if (!(err instanceof ThrottledError)) throw err;
      // The counters themselves are saturated: the tenant is far above its limit.
    }
    const retryAfterSeconds = Math.max(1, Math.ceil(((second + 1) * 1000 - this.deps.clock.now()) / 1000));
    throw new SubmitThrottledError(
      `tenant '${tenant}' is limited to ${limit} submitted jobs per second (maxSubmitsPerSecond), and this second's allowance is used: nothing was written; retry after ${retryAfterSeconds} s`,
      retryAfterSeconds,
    );
  }
}
