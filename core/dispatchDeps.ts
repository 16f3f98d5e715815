import type { SchedulerSettings } from './config.js';
import type { ControlsCache } from './controls.js';
import type { ParkedTenants } from './parked.js';
import type { Clock, JobStore, QueueSender } from './ports.js';
import type { TenantRegistry } from './tenants.js';

/** What a dispatch round and its release timer run on (kept apart so that the two do not import each other). */
export interface DispatchDeps {
  readonly store: JobStore;
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
   * Per shard, this process's last scan of the hold lane (valid until `until`, epoch ms) and the
   * tenants it found: rounds starting within 5 s of it skip their first scan. Kept across rounds.
   */
  readonly holdScans?: Map<number, { until: number; tenants: string[] }>;
}
