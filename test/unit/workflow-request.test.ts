import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseJsonBody, PayloadTooLargeError, resolveSettings, ValidationError } from '../../core/model/index.js';
import { validateWorkflow, WORKFLOW_PAYLOADS, type WorkflowRequest } from '../../core/workflows/index.js';

/** A workflow's submit request (issue #25), read and checked: what is accepted, and each refusal naming the job and the field. */
const settings = resolveSettings();
const NOW = Date.parse('2030-01-01T00:00:00Z');

const fromBody = (body: string): WorkflowRequest =>
  validateWorkflow(parseJsonBody(body, settings.maxBatchBytes, WORKFLOW_PAYLOADS), settings, NOW, body);
const refused = (body: unknown): string => {
  try {
    validateWorkflow(body, settings, NOW);
  } catch (err) {
    expect(err).toBeInstanceOf(ValidationError);
    return (err as Error).message;
  }
  throw new Error(`accepted: ${JSON.stringify(body)}`);
};
const root = (key: string, extra: object = {}) => ({ key, payload: {}, delaySeconds: 60, ...extra });

describe('a workflow request', () => {
  it('accepts the issue’s example: parents first, each job’s timing, payloads byte for byte', () => {
    const body = `{"idempotencyKey": "nightly-2030-01-31",
      "jobs": [
        {"key": "report", "payload": {}, "after": ["load-eu", "load-us"], "onParentFailure": "run"},
        {"key": "extract", "payload": {"day": "2030-01-31", "n": 1.50}, "runAt": "2030-02-01T02:00:00Z"},
        {"key": "transform", "payload": {}, "after": ["extract"]},
        {"key": "load-eu", "payload": {}, "after": ["transform"], "delaySeconds": 60},
        {"key": "load-us", "payload": {}, "after": ["transform"], "priority": 9, "cancellable": false}]}`;
    const wf = fromBody(body);
    expect(wf.idempotencyKey).toBe('nightly-2030-01-31');
    expect(wf.jobs.map((j) => j.key)).toEqual(['extract', 'transform', 'load-eu', 'load-us', 'report']);
    const byKey = Object.fromEntries(wf.jobs.map((j) => [j.key, j]));
    expect(byKey.extract).toMatchObject({
      after: [],
      timing: { kind: 'at', atMs: Date.parse('2030-02-01T02:00:00Z') },
      payloadText: '{"day": "2030-01-31", "n": 1.50}',
      onParentFailure: 'cancel',
    });
    expect(byKey.transform!.timing).toEqual({ kind: 'now' });
    expect(byKey['load-eu']!.timing).toEqual({ kind: 'delay', delayMs: 60_000 });
    expect(byKey['load-us']).toMatchObject({ priority: 9, cancellable: false });
    expect(byKey.report).toMatchObject({ after: ['load-eu', 'load-us'], onParentFailure: 'run', priority: 5, cancellable: true });
  });

  it('gives a root job its due time as a one-off job has it; a child’s runAt is the earliest it may run', () => {
    const wf = validateWorkflow(
      { jobs: [root('a', { delaySeconds: 1.0001 }), { key: 'b', after: ['a'], runAt: '2030-01-02T00:00:00.0001Z' }] },
      settings,
      NOW,
    );
    expect(wf.jobs[0]!.timing).toEqual({ kind: 'at', atMs: NOW + 1_001 });
    expect(wf.jobs[1]!.timing).toEqual({ kind: 'at', atMs: Date.parse('2030-01-02T00:00:00.001Z') });
    expect(wf.jobs[1]!.payloadText).toBe('null');
  });

  it.each([
    ['not an object', [], /a workflow must be a JSON object/],
    ['an unknown top-level field', { jobs: [root('a')], name: 'x' }, /the workflow has the unknown field 'name'/],
    ['no jobs', { jobs: [] }, /jobs must be an array of 1 to 1000 jobs/],
    ['1,001 jobs', { jobs: Array.from({ length: 1_001 }, (_, i) => root(`j${i}`)) }, /jobs must be an array of 1 to 1000/],
    ['a bad idempotency key', { idempotencyKey: '', jobs: [root('a')] }, /idempotencyKey must be a string of 1 to 128/],
    ['a job that is no object', { jobs: [root('a'), 'b'] }, /^jobs\[1\]: must be a JSON object/],
    ['a key with a space', { jobs: [root('a b')] }, /^jobs\[0\]: key must be 1 to 64 characters/],
    ['a key of 65 characters', { jobs: [root('k'.repeat(65))] }, /^jobs\[0\]: key must be 1 to 64/],
    ['a missing key', { jobs: [{ payload: 1, delaySeconds: 1 }] }, /^jobs\[0\]: key must be/],
    [
      'an unknown job field',
      { jobs: [root('a', { idempotencyKey: 'k' })] },
      /^jobs\[0\] \(key 'a'\): it has the unknown field 'idempotencyKey'/,
    ],
    ['a repeated key', { jobs: [root('a'), root('b'), root('a')] }, /^jobs\[2\] has the key 'a' of jobs\[0\]/],
    [
      'a parent that is not a key',
      { jobs: [root('a'), { key: 'b', after: ['c'] }] },
      /^jobs\[1\] \(key 'b'\): after names 'c', which is no job of this workflow/,
    ],
    ['a job after itself', { jobs: [root('a'), { key: 'b', after: ['a', 'b'] }] }, /^jobs\[1\] \(key 'b'\): after names the job itself/],
    [
      'a parent named twice',
      { jobs: [root('a'), { key: 'b', after: ['a', 'a'] }] },
      /^jobs\[1\] \(key 'b'\): after names 'a' more than once/,
    ],
    [
      'an empty after',
      { jobs: [{ key: 'b', after: [], delaySeconds: 1 }] },
      /^jobs\[0\] \(key 'b'\): after must be an array of 1 to 1000 keys/,
    ],
    ['after as a string', { jobs: [root('a'), { key: 'b', after: 'a' }] }, /^jobs\[1\] \(key 'b'\): after must be an array/],
    [
      'a root without a time',
      { jobs: [{ key: 'a', payload: 1 }] },
      /^jobs\[0\] \(key 'a'\): a job without after needs exactly one of runAt/,
    ],
    [
      'runAt and delaySeconds',
      { jobs: [root('a'), { key: 'b', after: ['a'], runAt: '2030-01-01T00:00:00Z', delaySeconds: 1 }] },
      /^jobs\[1\] \(key 'b'\): give either runAt or delaySeconds, not both/,
    ],
    [
      'a negative delay',
      { jobs: [root('a', { delaySeconds: -1 })] },
      /^jobs\[0\] \(key 'a'\): delaySeconds must be a number of seconds ≥ 0/,
    ],
    [
      'beyond the horizon',
      { jobs: [root('a'), { key: 'b', after: ['a'], delaySeconds: 11 * 365 * 86_400 }] },
      /^jobs\[1\] \(key 'b'\): the job is due .* beyond the horizon/,
    ],
    [
      'a bad onParentFailure',
      { jobs: [root('a'), { key: 'b', after: ['a'], onParentFailure: 'skip' }] },
      /^jobs\[1\] \(key 'b'\): onParentFailure must be "cancel" \(the default\) or "run"/,
    ],
    [
      'onParentFailure on a root',
      { jobs: [root('a', { onParentFailure: 'run' })] },
      /^jobs\[0\] \(key 'a'\): onParentFailure applies to a job with after/,
    ],
    ['a bad priority', { jobs: [root('a', { priority: 10 })] }, /^jobs\[0\] \(key 'a'\): priority must be a whole number from 1/],
    ['a bad cancellable', { jobs: [root('a', { cancellable: 'no' })] }, /^jobs\[0\] \(key 'a'\): cancellable must be true or false/],
  ])('refuses %s, naming the job and the field', (_, body, message) => {
    expect(refused(body)).toMatch(message);
  });

  it('refuses a repeated field in a job or at the top, as the body has it', () => {
    expect(() => fromBody('{"jobs": [{"key": "a", "delaySeconds": 1, "key": "b"}]}')).toThrow(
      /^jobs\[0\].*has the field 'key' more than once/,
    );
    expect(() => fromBody('{"jobs": [{"key": "a", "delaySeconds": 1}], "jobs": []}')).toThrow(
      /the workflow has the field 'jobs' more than once/,
    );
  });

  it('takes a fan-in of 1,000 and a fan-out of 1,000 in one workflow, and refuses more than 20,000 parent links in all', () => {
    const roots = Array.from({ length: 500 }, (_, i) => root(`r${i}`));
    const fanIn = { key: 'sink', after: roots.map((r) => r.key) };
    const fanOut = Array.from({ length: 499 }, (_, i) => ({ key: `c${i}`, after: ['sink'] }));
    expect(validateWorkflow({ jobs: [...roots, fanIn, ...fanOut] }, settings, NOW).jobs).toHaveLength(1_000);
    // 500 roots and 500 jobs each after 41 of them: 20,500 links.
    const dense = Array.from({ length: 500 }, (_, i) => ({ key: `d${i}`, after: roots.slice(0, 41).map((r) => r.key) }));
    expect(refused({ jobs: [...roots, ...dense] })).toMatch(/name 20500 parents in all, above the 20000 a workflow may have/);
  });

  it('refuses a cycle, naming the keys that wait for each other', () => {
    const msg = refused({
      jobs: [
        root('a'),
        { key: 'b', after: ['a', 'd'] },
        { key: 'c', after: ['b'] },
        { key: 'd', after: ['c'] },
        { key: 'e', after: ['d'] },
      ],
    });
    expect(msg).toMatch(/^the jobs '(b|c|d)' → '(b|c|d)' → '(b|c|d)' → '\1' wait for each other in a cycle \(after\)/);
    expect(new Set(/'(\w)' → '(\w)' → '(\w)'/.exec(msg)!.slice(1))).toEqual(new Set(['b', 'c', 'd']));
    expect(
      refused({
        jobs: [
          { key: 'x', after: ['y'] },
          { key: 'y', after: ['x'] },
        ],
      }),
    ).toMatch(/'(x|y)' → '(x|y)' → '\1' wait for each other/);
  });

  it('names the job whose payload is too large, with the 413 a one-off job gets', () => {
    const big = { jobs: [root('a'), root('big', { payload: 'x'.repeat(settings.maxPayloadBytes) })] };
    expect(() => validateWorkflow(big, settings, NOW)).toThrow(PayloadTooLargeError);
    expect(() => validateWorkflow(big, settings, NOW)).toThrow(/^jobs\[1\] \(key 'big'\): payload is \d+ bytes/);
  });

  it('orders any acyclic request parents first and refuses it once an edge closes a loop', () => {
    const dag = fc
      .integer({ min: 1, max: 40 })
      .chain((n) =>
        fc.tuple(
          fc.constant(n),
          fc.array(fc.tuple(fc.nat(n - 1), fc.nat(n - 1)), { maxLength: 3 * n }),
          fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }),
        ),
      );
    fc.assert(
      fc.property(dag, ([n, pairs, order]) => {
        // Edges go from a lower number to a higher one: no cycle. The request lists the jobs shuffled.
        const parents = Array.from({ length: n }, () => new Set<number>());
        for (const [x, y] of pairs) if (x !== y) parents[Math.max(x, y)]!.add(Math.min(x, y));
        const job = (i: number) => (parents[i]!.size > 0 ? { key: `k${i}`, after: [...parents[i]!].map((p) => `k${p}`) } : root(`k${i}`));
        const wf = validateWorkflow({ jobs: order.map(job) }, settings, NOW);
        const position = new Map(wf.jobs.map((j, at) => [j.key, at]));
        expect(position.size).toBe(n);
        for (const j of wf.jobs) for (const p of j.after) expect(position.get(p)!).toBeLessThan(position.get(j.key)!);
        // A path from the lowest parent to the highest child, closed by an edge back: refused.
        const edge = pairs.find(([x, y]) => x !== y);
        if (edge) {
          const [lo, hi] = [Math.min(...edge), Math.max(...edge)];
          const looped = order.map((i) =>
            i === lo ? { key: `k${lo}`, after: [`k${hi}`, ...[...parents[lo]!].map((p) => `k${p}`)] } : job(i),
          );
          expect(() => validateWorkflow({ jobs: looped }, settings, NOW)).toThrow(/wait for each other in a cycle/);
        }
      }),
      { numRuns: 200 },
    );
  });
});
