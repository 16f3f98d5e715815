/**
 * Tenants' delivery rate limits in one round (docs/tenant-controls.md#delivery-rate-limit): the
 * round's share of each limited tenant's `maxDeliveriesPerSecond`, as a token bucket per tenant.
 */
import type { ControlsCache } from '../tenants/index.js';
import { TokenBucket } from './tokenBucket.js';

export class DeliveryLimits {
  readonly #buckets = new Map<string, TokenBucket>();

  /**
   * @param share this round's share of each tenant's limit (its shards over all shards: rows are
   *   spread evenly over shards, so the shares add up to the limit)
   */
  constructor(
    private readonly controls: ControlsCache | undefined,
    private readonly share: number,
  ) {}

  /** This round's delivery rate for `tenant`, or undefined when unlimited. */
  rateOf(tenant: string): number | undefined {
    const limit = this.controls?.peek(tenant).maxDeliveriesPerSecond;
    return limit === undefined ? undefined : limit * this.share;
  }

  /** `tenant`'s bucket at its current rate, or undefined when it is unlimited (its bucket, if any, forgotten). */
  bucketOf(tenant: string, now: number): TokenBucket | undefined {
    const rate = this.rateOf(tenant);
    if (rate === undefined) {
      this.#buckets.delete(tenant);
      return undefined;
    }
    let bucket = this.#buckets.get(tenant);
    if (!bucket) this.#buckets.set(tenant, (bucket = new TokenBucket(rate, now)));
    else bucket.setRate(rate, now);
    return bucket;
  }
}
