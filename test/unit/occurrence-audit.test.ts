import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { JobIdCodec, jobTrace, type RowKey, type StoredRow } from '../../core/model/index.js';
import {
  auditOccurrences,
  MAX_AUDIT_WINDOW_MS,
  MISSED_OCCURRENCE_GRACE_MS,
  occurrenceJob,
  OCCURRENCE_AUDIT_EVERY_MS,
  type OccurrenceAuditDeps,
  REVISION_SETTLE_MS,
  type ScheduleRecord,
} from '../../core/recurring/index.js';

/**
 * The never-fired check (docs/tracing.md#never-fired) over fakes of its ports: which expected
 * occurrences it judges missed and why, the window it covers (tiling time from one check to the
 * next, bounded after a long gap), and what it leaves out (paused tenants and schedules, the
 * minute around a change).
 */
const MIN = 60_000;
const T0 = Date.parse('2030-03-01T12:00:00.000Z');
const codec = new JobIdCodec(randomBytes(32));

function schedule(over: Partial<ScheduleRecord> = {}): ScheduleRecord {
  return {
    tenant: 'alpha',
    name: 'every-minute',
    expression: 'rate(1 minute)',
    timezone: 'UTC',
    payload: '{}',
    state: 'ENABLED',
    rev: 'r1',
    shardCount: 8,
    anchorMs: T0 - 60 * MIN,
    createdAtMs: T0 - 60 * MIN,
    updatedAtMs: T0 - 60 * MIN,
    throughMs: T0 + 10 * MIN,
    pending: [],
    ...over,
  };
}

function fakes(records: ScheduleRecord[], opts: { nowMs: number; through?: number; paused?: string[] }) {
  const rows = new Map<string, StoredRow>();
  const audits = { tenants: [...new Set(records.map((r) => r.tenant))], through: opts.through };
  const lookups: RowKey[] = [];
  const deps: OccurrenceAuditDeps = {
    schedules: {
      listSchedules: async (tenant, limit, after) => {
        const mine = records.filter((r) => r.tenant === tenant).sort((a, b) => a.name.localeCompare(b.name));
        const from = after === undefined ? 0 : mine.findIndex((r) => r.name === after) + 1;
        return { records: mine.slice(from, from + limit), more: from + limit < mine.length };
      },
    },
    audits: {
      scheduleTenants: async () => audits.tenants,
      auditedThrough: async () => audits.through,
      markAudited: async (t) => void (audits.through = Math.max(audits.through ?? 0, t)),
    },
    rows: {
      getRow: async (key) => {
        lookups.push(key);
        return rows.get(key.jobId);
      },
    },
    codec,
    clock: { now: () => opts.nowMs },
    paused: async (tenant) => (opts.paused ?? []).includes(tenant),
  };
  const row = (r: ScheduleRecord, dueMs: number, state: StoredRow['state']) =>
    rows.set(occurrenceJob({ codec }, r, dueMs).jobId, { state, tenant: r.tenant, leaseUntil: 0 });
  return { deps, audits, row, lookups };
}

describe('the never-fired check', () => {
  it('judges each expected occurrence of the window: delivered or cancelled pass; still scheduled, dead, gone or never written are missed', async () => {
    const r = schedule({ throughMs: T0 - 2 * MIN });
    // The window: (T0 - 10 min, T0 - 5 min]: occurrences at -9, -8, -7, -6, -5 minutes.
    const f = fakes([r], { nowMs: T0, through: T0 - 10 * MIN });
    f.row(r, T0 - 9 * MIN, 'QUEUED');
    f.row(r, T0 - 8 * MIN, 'CANCELLED');
    f.row(r, T0 - 7 * MIN, 'SCHEDULED');
    f.row(r, T0 - 6 * MIN, 'DEAD');
    const report = await auditOccurrences(f.deps);
    expect([report.fromMs, report.throughMs]).toEqual([T0 - 10 * MIN, T0 - MISSED_OCCURRENCE_GRACE_MS]);
    expect([report.schedules, report.occurrences]).toEqual([1, 5]);
    expect(report.missed.map((m) => [(m.dueMs - T0) / MIN, m.reason])).toEqual([
      [-7, 'not-delivered'],
      [-6, 'dead'],
      [-5, 'missing'],
    ]);
    const [first] = report.missed;
    expect(first).toMatchObject({ tenant: 'alpha', schedule: 'every-minute', jobId: occurrenceJob({ codec }, r, T0 - 7 * MIN).jobId });
    expect(first!.traceId).toBe(jobTrace(first!.jobId).traceId);
    // The mark moved to the window's end: the next check starts there.
    expect(f.audits.through).toBe(T0 - MISSED_OCCURRENCE_GRACE_MS);
  });

  it('finds the occurrences a stopped clock never wrote (past the watermark) without reading the table for them', async () => {
    // The clock last fired 20 minutes ago: the watermark stopped then.
    const r = schedule({ throughMs: T0 - 20 * MIN });
    const f = fakes([r], { nowMs: T0, through: T0 - 8 * MIN });
    const report = await auditOccurrences(f.deps);
    expect(report.missed.map((m) => [(m.dueMs - T0) / MIN, m.reason])).toEqual([
      [-7, 'not-materialised'],
      [-6, 'not-materialised'],
      [-5, 'not-materialised'],
    ]);
    expect(f.lookups).toEqual([]);
  });

  it('tiles time: a second check right after covers nothing; after a long gap it looks back a day at most; the first one period', async () => {
    const r = schedule({
      expression: 'rate(1 hour)',
      anchorMs: T0 - 48 * 60 * MIN,
      updatedAtMs: T0 - 48 * 60 * MIN,
      throughMs: T0 + 60 * MIN,
    });
    const f = fakes([r], { nowMs: T0, through: T0 - 5 * MIN - MIN });
    await auditOccurrences(f.deps);
    const again = await auditOccurrences(f.deps);
    expect([again.schedules, again.occurrences, again.missed]).toEqual([0, 0, []]);

    const gap = await auditOccurrences(fakes([r], { nowMs: T0, through: T0 - 10 * MAX_AUDIT_WINDOW_MS }).deps);
    expect(gap.fromMs).toBe(gap.throughMs - MAX_AUDIT_WINDOW_MS);
    expect(gap.occurrences).toBe(24);
    const first = await auditOccurrences(fakes([r], { nowMs: T0 }).deps);
    expect(first.throughMs - first.fromMs).toBe(OCCURRENCE_AUDIT_EVERY_MS);
  });

  it('leaves out paused tenants, disabled and deleted schedules, and the minute after a change', async () => {
    const window = { nowMs: T0, through: T0 - 15 * MIN };
    const records = [
      schedule({ tenant: 'paused', throughMs: T0 - 60 * MIN }),
      schedule({ name: 'disabled', state: 'DISABLED', throughMs: T0 - 60 * MIN }),
      schedule({ name: 'deleting', deleting: true, throughMs: T0 - 60 * MIN }),
      // Changed 8 minutes ago: its occurrences due more than a minute after that are its own.
      schedule({ name: 'changed', updatedAtMs: T0 - 8 * MIN, throughMs: T0 - 60 * MIN }),
    ];
    const report = await auditOccurrences(fakes(records, { ...window, paused: ['paused'] }).deps);
    expect(report.schedules).toBe(1);
    expect(report.missed.every((m) => m.schedule === 'changed')).toBe(true);
    expect(report.missed.map((m) => m.dueMs)).toEqual([T0 - 6 * MIN, T0 - 5 * MIN]);
    expect(report.missed.every((m) => m.dueMs > T0 - 8 * MIN + REVISION_SETTLE_MS)).toBe(true);
  });

  it('pages through a tenant with many schedules', async () => {
    const records = Array.from({ length: 250 }, (_, i) => schedule({ name: `s${String(i).padStart(3, '0')}`, throughMs: T0 - 60 * MIN }));
    const report = await auditOccurrences(fakes(records, { nowMs: T0, through: T0 - 6 * MIN }).deps);
    expect(report.schedules).toBe(250);
    expect(new Set(report.missed.map((m) => m.schedule)).size).toBe(250);
  });
});
