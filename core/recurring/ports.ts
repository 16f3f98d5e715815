import type { ScheduleRecord, Timing } from './model.js';

/** The schedule items of the scheduler table (`pk = sched#<tenant>`, `sk = <name>`), one conditional write each. */
export interface ScheduleStore {
  /** The item, strongly consistent (including one whose delete is in progress). */
  getSchedule(tenant: string, name: string): Promise<ScheduleRecord | undefined>;
  /** Writes `record` whole if the stored item's revision is `expectedRev` (undefined: no item). False when it is not. */
  putSchedule(record: ScheduleRecord, expectedRev: string | undefined): Promise<boolean>;
  /** Moves the revision's watermark forward to `throughMs` (never back). False when the revision changed. */
  advanceThrough(tenant: string, name: string, rev: string, throughMs: number): Promise<boolean>;
  /** Drops the pending cancels of `revs` while the item is still at revision `rev`. */
  clearPending(tenant: string, name: string, rev: string, revs: readonly string[]): Promise<boolean>;
  /** Deletes the item if it is still at revision `rev`. */
  deleteSchedule(tenant: string, name: string, rev: string): Promise<boolean>;
  /** One page of a tenant's items in name order, after `afterName`. */
  listSchedules(tenant: string, limit: number, afterName?: string): Promise<{ records: ScheduleRecord[]; more: boolean }>;
}

/**
 * What the never-fired check keeps (core/recurring/audit.ts): the tenants that have schedules (a
 * tenant is noted by each change of one of its schedules; never forgotten: a tenant whose
 * schedules are gone costs one empty read a check), and how far the last check got.
 */
export interface OccurrenceAudits {
  noteScheduleTenant(tenant: string): Promise<void>;
  scheduleTenants(): Promise<string[]>;
  /** The end of the last check's window (epoch ms); undefined before the first. */
  auditedThrough(): Promise<number | undefined>;
  /** Moves it to `throughMs`, never back. */
  markAudited(throughMs: number): Promise<void>;
}

/** Names a schedule's clock. */
export interface ScheduleRef {
  readonly tenant: string;
  readonly name: string;
}

/**
 * The clock of the recurring schedules: Amazon EventBridge Scheduler (or its local stand-in), which
 * fires each `cron()`/`rate()` schedule into the inbound queue at its occurrences; each firing
 * materialises the occurrences ahead.
 */
export interface ScheduleTrigger {
  /** Creates or replaces the schedule's clock (same expression, zone, start and end). */
  upsert(ref: ScheduleRef, timing: Timing, enabled: boolean): Promise<void>;
  /** Removes the schedule's clock; nothing when there is none. */
  remove(ref: ScheduleRef): Promise<void>;
}

/** The inbound message a firing sends: `{"v":3,"firing":{"tenant":"...","schedule":"..."}}`. */
export function firingBody(ref: ScheduleRef): string {
  return JSON.stringify({ v: 3, firing: { tenant: ref.tenant, schedule: ref.name } });
}

/** The schedule a firing names, or undefined when `body` is not a firing. */
export function parseFiring(body: string): ScheduleRef | undefined {
  if (!body.startsWith('{"v":3')) return undefined;
  try {
    const m = JSON.parse(body) as { v?: unknown; firing?: { tenant?: unknown; schedule?: unknown } };
    if (m.v !== 3 || typeof m.firing?.tenant !== 'string' || typeof m.firing.schedule !== 'string') return undefined;
    return { tenant: m.firing.tenant, name: m.firing.schedule };
  } catch {
    return undefined;
  }
}
