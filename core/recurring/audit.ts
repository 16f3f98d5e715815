/**
 * The never-fired check (docs/tracing.md#never-fired, docs/schedules.md): every few minutes, each
 * enabled schedule's occurrences due in the window since the last check, less a grace period, are
 * looked up, and each one not delivered is reported: never written into the table (its clock did
 * not fire: the watermark is behind it), or written and still not sent (or dead-lettered). The
 * expected times come from the expression itself, never from what was written, so a clock that
 * stopped firing is found as surely as a dispatch that stopped sending.
 */
import { type Clock, type JobIdCodec, type JobLookups, jobTraceId } from '../model/index.js';
import { limiter } from '../util/index.js';
import { occurrenceJob } from './materialise.js';
import { occurrencesOf, type ScheduleRecord } from './model.js';
import type { OccurrenceAudits, ScheduleStore } from './ports.js';

/** An occurrence not delivered this long after its time is missed. */
export const MISSED_OCCURRENCE_GRACE_MS = 5 * 60_000;
/** How often the check runs (the rule on AWS, a timer locally). */
export const OCCURRENCE_AUDIT_EVERY_MS = 5 * 60_000;
/** The longest window one check covers: after a longer gap (the check itself was down) it looks back this far only. */
export const MAX_AUDIT_WINDOW_MS = 24 * 3_600_000;
/**
 * Occurrences due this soon after a schedule's change are left out: around a change the old
 * revision keeps the occurrences a dispatcher already held, under ids the current one does not
 * derive.
 */
export const REVISION_SETTLE_MS = 60_000;
/** Most occurrences checked per schedule and check (a schedule every second, over a 24 h gap, has 86,400). */
export const MAX_CHECKED_PER_SCHEDULE = 1_000;
/** Row lookups one check keeps in flight. */
const LOOKUPS_IN_FLIGHT = 16;
/** Schedules read per page. */
const PAGE = 100;

export type MissedReason =
  /** No job was written for it: the schedule's clock did not fire (its watermark is behind it). */
  | 'not-materialised'
  /** Its job is in the table, still scheduled (or held by a dispatcher) past the grace period. */
  | 'not-delivered'
  /** Its job was written and then not found: neither delivered nor cancelled. */
  | 'missing'
  /** Its job was dead-lettered: every send failed. */
  | 'dead';

export interface MissedOccurrence {
  readonly tenant: string;
  readonly schedule: string;
  readonly dueMs: number;
  readonly jobId: string;
  readonly traceId: string;
  readonly reason: MissedReason;
}

export interface AuditReport {
  /** The window checked: occurrences due after `fromMs`, up to `throughMs` (inclusive). Empty when `fromMs >= throughMs`. */
  readonly fromMs: number;
  readonly throughMs: number;
  /** Enabled schedules checked, and occurrences looked at. */
  readonly schedules: number;
  readonly occurrences: number;
  readonly missed: readonly MissedOccurrence[];
}

export interface OccurrenceAuditDeps {
  readonly schedules: Pick<ScheduleStore, 'listSchedules'>;
  readonly audits: Pick<OccurrenceAudits, 'scheduleTenants' | 'auditedThrough' | 'markAudited'>;
  readonly rows: Pick<JobLookups, 'getRow'>;
  readonly codec: JobIdCodec;
  readonly clock: Clock;
  /** Whether a tenant is paused now: its occurrences are held on purpose (the PausedTooLong alarm watches that). */
  readonly paused?: (tenant: string) => Promise<boolean>;
  /** @default MISSED_OCCURRENCE_GRACE_MS */
  readonly graceMs?: number;
}

/**
 * One check: the occurrences due since the last check (at most {@link MAX_AUDIT_WINDOW_MS} back;
 * the first check looks back one period) up to now less the grace period; then the mark moves to
 * the window's end, so consecutive checks tile time and each occurrence is judged once.
 */
export async function auditOccurrences(deps: OccurrenceAuditDeps): Promise<AuditReport> {
  const graceMs = deps.graceMs ?? MISSED_OCCURRENCE_GRACE_MS;
  const throughMs = deps.clock.now() - graceMs;
  const mark = await deps.audits.auditedThrough();
  const fromMs = Math.max(mark ?? throughMs - OCCURRENCE_AUDIT_EVERY_MS, throughMs - MAX_AUDIT_WINDOW_MS);
  if (fromMs >= throughMs) return { fromMs, throughMs, schedules: 0, occurrences: 0, missed: [] };
  const limit = limiter(LOOKUPS_IN_FLIGHT);
  const missed: MissedOccurrence[] = [];
  let schedules = 0;
  let occurrences = 0;
  for (const tenant of await deps.audits.scheduleTenants()) {
    if (await deps.paused?.(tenant)) continue;
    for (let after: string | undefined, more = true; more;) {
      const page = await deps.schedules.listSchedules(tenant, PAGE, after);
      more = page.more && page.records.length > 0;
      after = page.records.at(-1)?.name;
      for (const record of page.records) {
        if (record.state !== 'ENABLED' || record.deleting || record.deleted) continue;
        schedules++;
        const due = occurrencesOf(
          record,
          Math.max(fromMs, record.updatedAtMs + REVISION_SETTLE_MS) + 1,
          MAX_CHECKED_PER_SCHEDULE,
          throughMs + 1,
        );
        occurrences += due.length;
        const judged = await Promise.all(due.map((dueMs) => limit(() => judge(deps, record, dueMs))));
        for (const m of judged) if (m) missed.push(m);
      }
    }
  }
  await deps.audits.markAudited(throughMs);
  return { fromMs, throughMs, schedules, occurrences, missed };
}

/** One expected occurrence: undefined when it was delivered (or cancelled), else why it was missed. */
async function judge(deps: OccurrenceAuditDeps, record: ScheduleRecord, dueMs: number): Promise<MissedOccurrence | undefined> {
  const { jobId, shard } = occurrenceJob(deps, record, dueMs);
  const base = { tenant: record.tenant, schedule: record.name, dueMs, jobId };
  if (dueMs > record.throughMs) return { ...base, traceId: jobTraceId({ jobId }), reason: 'not-materialised' };
  const row = await deps.rows.getRow({ shard, dueMs, jobId });
  const traceId = jobTraceId({ jobId, trace: row?.trace });
  if (!row) return { ...base, traceId, reason: 'missing' };
  if (row.state === 'QUEUED' || row.state === 'CANCELLED') return undefined;
  return { ...base, traceId, reason: row.state === 'DEAD' ? 'dead' : 'not-delivered' };
}
