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
}
