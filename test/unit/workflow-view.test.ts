import { describe, expect, it } from 'vitest';
import { type WaitingRecord, workflowView, type WorkflowRecord } from '../../core/workflows/index.js';

/** What GET of a workflow shows (issue #25): each job's state from its waiting record, the workflow's from its jobs'. */
const T0 = Date.parse('2030-01-31T02:00:00Z');
const workflow: WorkflowRecord = {
  workflowId: 'wf1.demo.1',
  tenant: 'demo',
  createdMs: T0,
  jobs: new Map([
    ['extract', 'j-e'],
    ['transform', 'j-t'],
    ['load', 'j-l'],
  ]),
};

function record(jobId: string, extra: Partial<WaitingRecord> = {}): WaitingRecord {
  return {
    key: { shard: 0, dueMs: T0, jobId },
    tenant: 'demo',
    state: 'WAITING',
    parents: 1,
    succeeded: new Set(),
    failed: new Set(),
    lastEndMs: 0,
    timing: { kind: 'now' },
    onParentFailure: 'cancel',
    ...extra,
  };
}
const records = (...list: WaitingRecord[]) => new Map(list.map((r) => [r.key.jobId, r]));
const states = (v: ReturnType<typeof workflowView>) => v.jobs.map((j) => j.state);

describe('workflowView', () => {
  it("shows each job in the request's order: waiting, scheduled in the table, queued, then its own end", () => {
    const view = workflowView(
      workflow,
      records(
        record('j-e', { state: 'RELEASING', dueMs: T0, parents: 0 }),
        record('j-t', { state: 'WAITING' }),
        record('j-l', { state: 'QUEUED', dueMs: T0 + 5_000 }),
      ),
    );
    expect(view).toMatchObject({ workflowId: 'wf1.demo.1', tenant: 'demo', state: 'RUNNING', createdAt: '2030-01-31T02:00:00.000Z' });
    expect(view.jobs).toEqual([
      { key: 'extract', jobId: 'j-e', state: 'SCHEDULED', runAt: '2030-01-31T02:00:00.000Z' },
      { key: 'transform', jobId: 'j-t', state: 'WAITING' },
      { key: 'load', jobId: 'j-l', state: 'QUEUED', runAt: '2030-01-31T02:00:05.000Z' },
    ]);
    // A table-path job whose row was delivered shows QUEUED; a job not yet recorded shows WAITING.
    expect(states(workflowView(workflow, records(record('j-e', { state: 'RELEASING', dueMs: T0 })), new Set(['j-e'])))).toEqual([
      'QUEUED',
      'WAITING',
      'WAITING',
    ]);
  });

  it('is SUCCEEDED when every job succeeded, RUNNING while one may still run or report', () => {
    const done = (jobId: string) => record(jobId, { state: 'QUEUED', end: { outcome: 'SUCCEEDED', atMs: T0 } });
    expect(workflowView(workflow, records(done('j-e'), done('j-t'), done('j-l'))).state).toBe('SUCCEEDED');
    expect(workflowView(workflow, records(done('j-e'), done('j-t'), record('j-l', { state: 'QUEUED' }))).state).toBe('RUNNING');
  });

  it('is FAILED when a job died, once nothing is left; CANCELLED when cancels ended it, a cancelled parent’s end recorded on its children or not', () => {
    const dead = record('j-e', { state: 'QUEUED', end: { outcome: 'DEAD', atMs: T0 } });
    const cancelledByParent = (jobId: string) =>
      record(jobId, {
        state: 'CANCELLED',
        failed: new Set([0]),
        end: { outcome: 'CANCELLED', atMs: T0 },
        message: "cancelled: its parent 'extract' failed (DEAD)",
      });
    const view = workflowView(workflow, records(dead, cancelledByParent('j-t'), cancelledByParent('j-l')));
    expect(view.state).toBe('FAILED');
    expect(view.jobs[1]).toEqual({
      key: 'transform',
      jobId: 'j-t',
      state: 'CANCELLED',
      message: "cancelled: its parent 'extract' failed (DEAD)",
    });
    expect(workflowView(workflow, records(dead, record('j-t'), record('j-l'))).state).toBe('RUNNING');
    const cancelled = (jobId: string) =>
      record(jobId, { state: 'CANCELLED', end: { outcome: 'CANCELLED', atMs: T0 }, message: 'cancelled' });
    const ok = record('j-e', { state: 'QUEUED', end: { outcome: 'SUCCEEDED', atMs: T0 } });
    const shown = workflowView(workflow, records(ok, cancelled('j-t'), cancelled('j-l')));
    expect(shown.state).toBe('CANCELLED');
    // The reported outcome shows beside an end a worker reported; a cancel has none.
    expect(shown.jobs.map((j) => [j.state, j.outcome])).toEqual([
      ['SUCCEEDED', 'SUCCEEDED'],
      ['CANCELLED', undefined],
      ['CANCELLED', undefined],
    ]);
    // A workflow's cancel: every job cancelled, each cancelled parent's end then told to its children.
    const told = (jobId: string) => record(jobId, { state: 'CANCELLED', failed: new Set([0]), end: { outcome: 'CANCELLED', atMs: T0 } });
    expect(workflowView(workflow, records(cancelled('j-e'), told('j-t'), told('j-l'))).state).toBe('CANCELLED');
  });
});
