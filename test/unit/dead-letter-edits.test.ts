import { describe, expect, it } from 'vitest';
import { withPayload } from '../../core/deadLetters/index.js';
import { timelineOf, type OutcomeRecord } from '../../core/jobs/index.js';
import { deliveryMessage } from '../../core/model/index.js';

describe('withPayload: a delivery body with another payload', () => {
  const body = (payload: string, extra: { schedule?: string; workflow?: string; parents?: string } = {}) =>
    deliveryMessage('0', { jobId: 'j1.t.0.1.t.x.y', tenant: 't', dueMs: 1_800_000_000_000, payload, ...extra }).body;

  it.each([
    ['an object', '{"a":1}', '{ "b" : [1.50, "é", "\\u00e9"] }'],
    ['a payload holding a "payload" member', '{"payload":{"payload":1}}', '{"payload":2}'],
    ['a string ending in }', '"x}"', 'null'],
    ['a number', '1', '{"deep":[[[[]]]]}'],
  ])('%s: every byte but the payload kept, the new one spliced in as given', (_, old, next) => {
    for (const extra of [{}, { schedule: 'nightly' }, { workflow: 'wf1.t.1.a.b', parents: '[{"key":"p","outcome":"SUCCEEDED"}]' }]) {
      const edited = withPayload(body(old, extra), next);
      expect(edited).toEqual({ body: body(next, extra), oldPayload: old });
    }
  });

  it('is undefined for a body that is not a delivery', () => {
    for (const b of ['not json', '[]', '{"jobId":"x"}', '{"payload":1,"jobId":"x"}', 'null', '{"payload":1} '])
      expect(withPayload(b, '2'), b).toBeUndefined();
  });
});

describe('a timeline with edits', () => {
  const record = (attempt: number, outcome: OutcomeRecord['outcome'], receivedAtMs: number): OutcomeRecord => ({
    shard: 0,
    dueMs: 1_000,
    jobId: 'j',
    tenant: 't',
    outcome,
    attempt,
    receivedAtMs,
    durationMs: 10,
    reportedAtMs: receivedAtMs + 10,
    expiresAtMs: 1e15,
  });
  const edit = (atMs: number) => ({ atMs, by: 'arn:ops', oldPayloadSha256: 'a'.repeat(64), newPayloadSha256: 'b'.repeat(64) });

  it('puts each edit among the attempts by time, never before SCHEDULED, and keeps the outcomes in their order', () => {
    // An edit ordered before runAt (a clock apart) still follows SCHEDULED; the retry after the later edit succeeded.
    const events = timelineOf(1_000, undefined, record(2, 'SUCCEEDED', 9_000), [record(1, 'FAILED', 2_000)], [edit(500), edit(5_000)]);
    expect(events.map((e) => e.event)).toEqual(['SCHEDULED', 'EDITED', 'DELIVERED', 'FAILED', 'EDITED', 'SUCCEEDED']);
    expect(events[1]).toMatchObject({ event: 'EDITED', by: 'arn:ops', oldPayloadSha256: 'a'.repeat(64) });
    expect(timelineOf(1_000, undefined, undefined, [], [])).toEqual([{ at: new Date(1_000).toISOString(), event: 'SCHEDULED' }]);
  });
});
