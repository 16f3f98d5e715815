/**
 * Concurrency by key at the end of a job (docs/flow-control.md): the worker's outcome report and
 * its heartbeats name the job's key (the delivered message's `concurrencyKey` attribute). A final
 * outcome frees the job's slot of its key; `FAILED` (to be retried) and a heartbeat move the
 * slot's lease on. A key that is not the job's frees nothing: slots are held by job id.
 */
import { DEFAULT_KEY_LEASE_SECONDS, type KeySlots, parseConcurrency, ValidationError } from '../model/index.js';
import type { ControlsCache } from '../tenants/index.js';
import { limiter } from '../util/index.js';

export interface KeyedDeps {
  readonly keySlots: Pick<KeySlots, 'release' | 'extend'>;
  /** The tenants' `keyLeaseSeconds`. Absent: the default. */
  readonly controls?: Pick<ControlsCache, 'get'>;
  readonly clock: { now(): number };
}

/** A keyed job's end or beat, as a report or a heartbeat names it. */
export interface KeyedEnd {
  readonly jobId: string;
  readonly key: string;
  /** `release`: its final outcome; `extend`: `FAILED` or a heartbeat. */
  readonly action: 'release' | 'extend';
}

/** Slot writes in flight per request. */
const IN_FLIGHT = 16;

/**
 * An outcome entry's or heartbeat's `concurrencyKey`: undefined when absent.
 * @throws ValidationError when it is not a key a job could have been submitted with
 */
export function concurrencyKeyOf(value: unknown, where = 'concurrencyKey'): string | undefined {
  if (value === undefined) return undefined;
  try {
    return parseConcurrency(value, undefined)!.key;
  } catch (err) {
    if (err instanceof ValidationError) throw new ValidationError(err.message.replace(/^concurrencyKey/, where));
    throw err;
  }
}

/** Frees or renews the slots of `ends` (one tenant's): answers the job ids whose write failed (to report again). */
export async function settleKeys(deps: KeyedDeps, tenant: string, ends: readonly KeyedEnd[]): Promise<Set<string>> {
  const failed = new Set<string>();
  if (ends.length === 0) return failed;
  const seconds = deps.controls
    ? ((await deps.controls.get(tenant)).keyLeaseSeconds ?? DEFAULT_KEY_LEASE_SECONDS)
    : DEFAULT_KEY_LEASE_SECONDS;
  const until = deps.clock.now() + seconds * 1000;
  const limit = limiter(IN_FLIGHT);
  await Promise.all(
    ends.map((e) =>
      limit(async () => {
        try {
          if (e.action === 'release') await deps.keySlots.release(tenant, e.key, e.jobId);
          else await deps.keySlots.extend(tenant, e.key, e.jobId, until);
        } catch {
          failed.add(e.jobId);
        }
      }),
    ),
  );
  return failed;
}
