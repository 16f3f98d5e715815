import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import type { OutgoingMessage, QueueSender, SendFailure } from '../../core/model/ports.js';
import { sendParcels, type Parcel } from '../../core/submit/sendParcels.js';

/** A parcel whose message body lists its jobs: `jobs:3,4,5`. */
const parcel = (jobs: number[], queueUrl = 'q'): Parcel => ({ queueUrl, jobs, build: (js) => ({ body: `jobs:${js.join(',')}` }) });
const jobsOf = (m: OutgoingMessage) => m.body.slice(5).split(',').map(Number);
const noWait = { backoff: { baseMs: 0, capMs: 0 } };

/**
 * A fake SQS: refuses (sender fault) every message holding a poisoned job, fails on its side
 * (or throws) as `flaky` says, call by call, and records what it accepted.
 */
function fakeSqs(poison: ReadonlySet<number>, flaky: () => 'ok' | 'fail' | 'throw' = () => 'ok') {
  const accepted: number[][] = [];
  const calls: OutgoingMessage[][] = [];
  const sender: QueueSender = {
    async sendBatch(_url, messages) {
      calls.push([...messages]);
      expect(messages.length).toBeLessThanOrEqual(10);
      expect(new Set(messages.map((m) => m.id)).size).toBe(messages.length);
      const mood = flaky();
      if (mood === 'throw') throw new Error('socket hang up');
      const failures: SendFailure[] = [];
      for (const m of messages) {
        if (jobsOf(m).some((j) => poison.has(j))) failures.push({ id: m.id, retryable: false, message: 'InvalidMessageContents' });
        else if (mood === 'fail') failures.push({ id: m.id, retryable: true, message: 'InternalError' });
        else accepted.push(jobsOf(m));
      }
      return failures;
    },
  };
  return { sender, accepted, calls };
}

describe('sendParcels', () => {
  it('hands every job over exactly once except the refused ones, however the jobs are packed (property)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 12 }),
        fc.array(fc.nat(), { maxLength: 5 }),
        fc.array(fc.constantFrom<'ok' | 'fail' | 'throw'>('ok', 'ok', 'fail', 'throw'), { maxLength: 4 }),
        async (sizes, poisonPicks, moods) => {
          let next = 0;
          const parcels = sizes.map((n) => parcel(Array.from({ length: n }, () => next++)));
          const total = next;
          const poison = new Set(poisonPicks.map((p) => p % total));
          let call = 0;
          // Flaky for the first calls only, so that the 3 attempts are enough.
          const sqs = fakeSqs(poison, () => (call < moods.length ? moods[call++]! : 'ok'));
          const problems = await sendParcels(sqs.sender, parcels, { ...noWait, attempts: moods.length + 1 });
          expect([...problems.keys()].sort((a, b) => a - b)).toEqual([...poison].sort((a, b) => a - b));
          for (const p of problems.values()) expect(p).toEqual({ refused: true, message: 'InvalidMessageContents' });
          const delivered = sqs.accepted.flat().sort((a, b) => a - b);
          expect(delivered).toEqual(Array.from({ length: total }, (_, i) => i).filter((i) => !poison.has(i)));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('splits a refused message in halves down to the refused job alone', async () => {
    const sqs = fakeSqs(new Set([5]));
    const problems = await sendParcels(sqs.sender, [parcel([0, 1, 2, 3, 4, 5, 6, 7])], noWait);
    expect([...problems]).toEqual([[5, { refused: true, message: 'InvalidMessageContents' }]]);
    expect(sqs.calls.map((c) => c.map((m) => m.body))).toEqual([
      ['jobs:0,1,2,3,4,5,6,7'],
      ['jobs:0,1,2,3', 'jobs:4,5,6,7'],
      ['jobs:4,5', 'jobs:6,7'],
      ['jobs:4', 'jobs:5'],
    ]);
  });

  it('gives up after `attempts` on failures that are SQS side, reporting them retryable (not refused)', async () => {
    const sqs = fakeSqs(new Set(), () => 'fail');
    const problems = await sendParcels(sqs.sender, [parcel([0, 1]), parcel([2])], { ...noWait, attempts: 3 });
    expect(sqs.calls).toHaveLength(3);
    expect([...problems.keys()]).toEqual([0, 1, 2]);
    for (const p of problems.values()) expect(p).toEqual({ refused: false, message: 'InternalError' });
    const thrown = await sendParcels(fakeSqs(new Set(), () => 'throw').sender, [parcel([0])], { ...noWait, attempts: 2 });
    expect([...thrown]).toEqual([[0, { refused: false, message: 'socket hang up' }]]);
  });

  it('sends each queue its own messages, at most 10 to a call', async () => {
    const calls: [string, number][] = [];
    const sender: QueueSender = {
      async sendBatch(url, messages) {
        calls.push([url, messages.length]);
        return [];
      },
    };
    const parcels = [...Array.from({ length: 12 }, (_, i) => parcel([i], 'direct')), parcel([12, 13], 'inbound')];
    expect((await sendParcels(sender, parcels, noWait)).size).toBe(0);
    expect(calls.sort()).toEqual([
      ['direct', 10],
      ['direct', 2],
      ['inbound', 1],
    ]);
  });
});
