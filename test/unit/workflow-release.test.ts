import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decideChild, type WaitingChild, type WorkflowTiming } from '../../core/workflows/index.js';

/** When a job waiting for parents becomes due (issue #25), whatever order and repetition its parents' reports come in. */
const T0 = Date.parse('2030-01-01T00:00:00Z');

/** A parent's report: its index, how it ended, and when the report was accepted. */
interface Report {
  readonly parent: number;
  readonly ok: boolean;
  readonly atMs: number;
}

/** The waiting record after `reports`, applied as the store applies them: a parent counts once. */
function after(parents: number, reports: readonly Report[], timing: WorkflowTiming, policy: 'cancel' | 'run'): WaitingChild {
  const succeeded = new Set<number>();
  const failed = new Set<number>();
  let lastEndMs = 0;
  for (const r of reports) {
    if (succeeded.has(r.parent) || failed.has(r.parent)) continue;
    (r.ok ? succeeded : failed).add(r.parent);
    lastEndMs = Math.max(lastEndMs, r.atMs);
  }
  return { parents, succeeded, failed, lastEndMs, timing, onParentFailure: policy };
}

const timing = fc.oneof(
  fc.constant<WorkflowTiming>({ kind: 'now' }),
  fc.integer({ min: 0, max: 3_600_000 }).map((delayMs): WorkflowTiming => ({ kind: 'delay', delayMs })),
  fc.integer({ min: 0, max: 7_200_000 }).map((ms): WorkflowTiming => ({ kind: 'at', atMs: T0 + ms })),
);
const scenario = fc.integer({ min: 1, max: 30 }).chain((parents) =>
  fc.record({
    parents: fc.constant(parents),
    reports: fc.array(fc.record({ parent: fc.nat(parents - 1), ok: fc.boolean(), atMs: fc.integer({ min: T0, max: T0 + 3_600_000 }) }), {
      maxLength: 3 * parents,
    }),
    timing,
    policy: fc.constantFrom<'cancel' | 'run'>('cancel', 'run'),
  }),
);

describe('a job waiting for parents', () => {
  it('waits for every parent, then is due at the latest of its runAt, the last success and the last success plus its delay', () => {
    const base = { parents: 2, failed: new Set<number>(), onParentFailure: 'cancel' as const };
    const end = T0 + 5_000;
    expect(decideChild({ ...base, succeeded: new Set([1]), lastEndMs: end, timing: { kind: 'now' } })).toEqual({
      kind: 'wait',
      remaining: 1,
    });
    expect(decideChild({ ...base, succeeded: new Set([0, 1]), lastEndMs: end, timing: { kind: 'now' } })).toEqual({
      kind: 'due',
      dueMs: end,
    });
    expect(decideChild({ ...base, succeeded: new Set([0, 1]), lastEndMs: end, timing: { kind: 'delay', delayMs: 60_000 } })).toEqual({
      kind: 'due',
      dueMs: end + 60_000,
    });
    expect(decideChild({ ...base, succeeded: new Set([0, 1]), lastEndMs: end, timing: { kind: 'at', atMs: T0 + 3_600_000 } })).toEqual({
      kind: 'due',
      dueMs: T0 + 3_600_000,
    });
    expect(decideChild({ ...base, succeeded: new Set([0, 1]), lastEndMs: end, timing: { kind: 'at', atMs: T0 } })).toEqual({
      kind: 'due',
      dueMs: end,
    });
  });

  it('is cancelled by its first failed parent under "cancel", and runs after every parent ended under "run"', () => {
    const base = { parents: 3, succeeded: new Set([0]), lastEndMs: T0, timing: { kind: 'now' } as const };
    expect(decideChild({ ...base, failed: new Set([2, 1]), onParentFailure: 'cancel' })).toEqual({ kind: 'cancel', failedParent: 1 });
    expect(decideChild({ ...base, failed: new Set([2]), onParentFailure: 'run' })).toEqual({ kind: 'wait', remaining: 1 });
    expect(decideChild({ ...base, failed: new Set([1, 2]), onParentFailure: 'run' })).toEqual({ kind: 'due', dueMs: T0 });
  });

  it('reaches the same decision for any order and repetition of the same reports, and is never due before its last parent ended', () => {
    fc.assert(
      fc.property(scenario, fc.infiniteStream(fc.nat()), ({ parents, reports, timing: t, policy }, seeds) => {
        const decided = decideChild(after(parents, reports, t, policy));
        // Retried reports come again: each report once more, in a shuffled order, after the first ones.
        const again = [...reports].sort(() => (seeds.next().value % 3) - 1);
        const firstSeen = new Map<number, Report>();
        for (const r of reports) if (!firstSeen.has(r.parent)) firstSeen.set(r.parent, r);
        const replayed = decideChild(after(parents, [...firstSeen.values(), ...again], t, policy));
        expect(replayed).toEqual(decided);
        const ends = [...firstSeen.values()];
        if (decided.kind === 'due') {
          expect(firstSeen.size).toBe(parents);
          if (policy === 'cancel') expect(ends.every((r) => r.ok)).toBe(true);
          expect(decided.dueMs).toBeGreaterThanOrEqual(Math.max(...ends.map((r) => r.atMs)));
          if (t.kind === 'at') expect(decided.dueMs).toBeGreaterThanOrEqual(t.atMs);
        }
        if (decided.kind === 'cancel')
          expect(policy === 'cancel' && ends.some((r) => !r.ok && r.parent === decided.failedParent)).toBe(true);
        if (decided.kind === 'wait') expect(decided.remaining).toBe(parents - firstSeen.size);
      }),
      { numRuns: 500 },
    );
  });
});
