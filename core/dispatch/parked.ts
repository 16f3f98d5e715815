import type { DueKey } from '../model/index.js';
import type { TenantLookup } from '../tenants/index.js';

/**
 * Rows of tenants that are not registered are parked: dispatch leaves them in the table as they
 * are (never acquired, never sent elsewhere, never deleted) until the tenant is registered again.
 * A tenant removed from its stack (its registration deleted) parks its pending jobs this way.
 *
 * Dispatch asks {@link split} which due rows it may acquire. The tenant comes from the job id in
 * the row's key (`j1.<tenant>.…`), so no extra read is needed per row. An unknown tenant is
 * remembered for `recheckMs` (its rows are skipped without asking the registry again), then
 * looked up again: a re-registered tenant's rows are dispatched within about `recheckMs`. At
 * most `maxTenants` are remembered (the oldest forgotten first), so memory stays bounded.
 *
 * @example
 * const parked = new ParkedTenants();
 * const { acquire, parked: skipped } = await parked.split(dueKeys, registry, Date.now());
 */
export class ParkedTenants {
  /** Unknown tenant → skip its rows until this time (epoch ms). Insertion order: oldest first. */
  readonly #until = new Map<string, number>();
  readonly #recheckMs: number;
  readonly #maxTenants: number;

  constructor(options: { readonly recheckMs?: number; readonly maxTenants?: number } = {}) {
    this.#recheckMs = options.recheckMs ?? 30_000;
    this.#maxTenants = options.maxTenants ?? 1_000;
  }

  /** The tenant named in a job id (`j1.<tenant>.<shard>...`), or undefined for another shape. */
  static tenantOf(jobId: string): string | undefined {
    const parts = jobId.split('.');
    return parts.length >= 3 && parts[0] === 'j1' && parts[1] ? parts[1] : undefined;
  }

  /** How long an unknown tenant's rows are skipped before the registry is asked again. */
  get recheckMs(): number {
    return this.#recheckMs;
  }

  /** Whether the row of `jobId` stays parked (its tenant is not registered). */
  async parks(jobId: string, registry: TenantLookup, nowMs: number): Promise<boolean> {
    return (await this.split([{ jobId }], registry, nowMs)).parked.length > 0;
  }

  /** Whether `tenant`'s rows stay parked: the remembered answer, or the registry's. */
  async parksTenant(tenant: string, registry: TenantLookup, nowMs: number): Promise<boolean> {
    return this.parks(`j1.${tenant}.0`, registry, nowMs);
  }

  /** Whether `tenant` was found unregistered less than `recheckMs` before `nowMs` (no lookup). */
  knownParked(tenant: string, nowMs: number): boolean {
    return (this.#until.get(tenant) ?? -Infinity) > nowMs;
  }

  /** Tenants currently parked (for logs and tests). */
  get tenants(): string[] {
    return [...this.#until.keys()];
  }

  /**
   * Splits due rows into those to acquire and those parked (their tenant is not registered). A
   * registry that fails to answer parks nothing: the row is acquired, and the release leaves it
   * for a later round if its tenant is still unknown then.
   */
  async split<K extends Pick<DueKey, 'jobId'>>(
    keys: readonly K[],
    registry: TenantLookup,
    nowMs: number,
  ): Promise<{ acquire: K[]; parked: K[] }> {
    const verdict = new Map<string, boolean>();
    const unknown = new Set<string>();
    for (const k of keys) {
      const tenant = ParkedTenants.tenantOf(k.jobId);
      if (tenant === undefined || verdict.has(tenant)) continue;
      const until = this.#until.get(tenant);
      if (until !== undefined && until > nowMs) verdict.set(tenant, true);
      else unknown.add(tenant);
    }
    await Promise.all(
      [...unknown].map(async (tenant) => {
        const record = await registry.lookup(tenant).then(
          (r) => r ?? null,
          () => undefined, // no answer: do not park on a guess
        );
        if (record === null) {
          this.#until.delete(tenant);
          this.#until.set(tenant, nowMs + this.#recheckMs);
          while (this.#until.size > this.#maxTenants) this.#until.delete(this.#until.keys().next().value as string);
          verdict.set(tenant, true);
        } else {
          this.#until.delete(tenant);
          verdict.set(tenant, false);
        }
      }),
    );
    const acquire: K[] = [];
    const parked: K[] = [];
    for (const k of keys) {
      const tenant = ParkedTenants.tenantOf(k.jobId);
      (tenant !== undefined && verdict.get(tenant) ? parked : acquire).push(k);
    }
    return { acquire, parked };
  }
}
