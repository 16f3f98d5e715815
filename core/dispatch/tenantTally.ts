/**
 * What one dispatch invocation did per tenant, for the per-tenant metrics (a `Tenant` dimension):
 * jobs sent, sends that failed, and a uniform sample of at most {@link LATENESS_SAMPLE} lateness
 * values (reservoir sampling), so that an invocation emits one metrics line per tenant however
 * many jobs it sent, and percentiles over the samples stay unbiased.
 */
export const LATENESS_SAMPLE = 100;

export interface TenantDispatch {
  /** Jobs sent to the tenant's queue. */
  sent: number;
  /** Send attempts the tenant's queue refused or that failed (retried: a job may count more than once). */
  failedSends: number;
  /** A uniform sample of the sent jobs' lateness, ms (due time to send acknowledged). */
  readonly latenessSampleMs: number[];
  /** Jobs put in the hold lane because the tenant was paused. */
  held: number;
  /** Sends put off by the tenant's delivery rate limit (a job counts each time it waits). */
  deferred: number;
}

export class TenantTally {
  readonly tenants = new Map<string, TenantDispatch>();

  constructor(private readonly random: () => number = Math.random) {}

  /** A job of `tenant` was sent, `latenessMs` after its due time. */
  sent(tenant: string, latenessMs: number): void {
    const t = this.#of(tenant);
    t.sent++;
    if (t.latenessSampleMs.length < LATENESS_SAMPLE) t.latenessSampleMs.push(latenessMs);
    else {
      // Algorithm R: the n-th value replaces a random slot with probability SAMPLE / n.
      const slot = Math.floor(this.random() * t.sent);
      if (slot < LATENESS_SAMPLE) t.latenessSampleMs[slot] = latenessMs;
    }
  }

  /** `n` sends to `tenant`'s queue failed. */
  failed(tenant: string, n = 1): void {
    this.#of(tenant).failedSends += n;
  }

  /** `n` jobs of `tenant` were held (it is paused). */
  held(tenant: string, n = 1): void {
    this.#of(tenant).held += n;
  }

  /** `n` sends to `tenant`'s queue waited for its delivery rate limit. */
  deferred(tenant: string, n = 1): void {
    this.#of(tenant).deferred += n;
  }

  #of(tenant: string): TenantDispatch {
    let t = this.tenants.get(tenant);
    if (!t) this.tenants.set(tenant, (t = { sent: 0, failedSends: 0, latenessSampleMs: [], held: 0, deferred: 0 }));
    return t;
  }
}
