import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DynamoWaitingChildren } from '../../adapters/dynamoWaitingChildren.js';
import type { TenantRecord } from '../../core/model/index.js';
import { limiter } from '../../core/util/index.js';
import { jobEnded, keyOfId, type ProgressDeps, type WorkflowService } from '../../core/workflows/index.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import type { consume } from '../support/system.js';
import { runWorkflowSystem } from '../support/workflows.js';

/**
 * A workflow job's end carried to its descendants (issue #25), on the emulators through the real
 * SDK with ingest and dispatch running: a fan-out releases every child once, never before the
 * parent ended; a fan-in of parents reported concurrently, some twice, releases its child once at
 * its delay after the last end; a failed parent cancels the children that cancel on failure, and
 * those cancel theirs, while a child that runs on failure runs, told which parent failed.
 */
let em: Emulators;
let deps: ProgressDeps;
let service: WorkflowService;
let waiting: DynamoWaitingChildren;
let tenant: TenantRecord;
let consumer: ReturnType<typeof consume>;
let stopAll: () => Promise<void>;
const HOUR = 3_600_000;

beforeAll(async () => {
  em = await startEmulators();
  ({ progress: deps, service, waiting, tenant, consumer, stop: stopAll } = await runWorkflowSystem(em));
});
afterAll(async () => {
  await stopAll?.();
  await em?.stop();
});

/** Submits a workflow whose roots are due in an hour (so only the reports below move it). */
async function submit(jobs: object[]): Promise<Record<string, string>> {
  const { reply } = await service.submit('demo', JSON.stringify({ jobs }));
  return reply.jobs;
}

const deliveriesOf = (ids: Iterable<string>) => {
  const want = new Set(ids);
  return consumer.deliveries.filter((d) => want.has(d.jobId));
};

describe("a workflow job's end", () => {
  it("a fan-in's parent whose report handed nothing over leaves no note, and its repeat, a minute on, never sends the child its sibling's report did", async () => {
    const runAt = new Date(Date.now() + HOUR).toISOString();
    const ids = await submit([
      { key: 'a', payload: null, runAt },
      { key: 'b', payload: null, runAt },
      { key: 'sink', payload: 1, after: ['a', 'b'] },
    ]);
    await jobEnded(deps, tenant, ids.a!, { outcome: 'SUCCEEDED', atMs: Date.now() });
    // The sink waits for b: a's report handed nothing over and wrote no note.
    expect((await waiting.get(keyOfId(deps.codec, ids.a!)))?.childrenTold).toBeUndefined();
    await jobEnded(deps, tenant, ids.b!, { outcome: 'SUCCEEDED', atMs: Date.now() });
    expect(await waiting.get(keyOfId(deps.codec, ids.sink!))).toMatchObject({ state: 'QUEUING', releasedBy: 1 });
    expect((await waiting.get(keyOfId(deps.codec, ids.b!)))?.childrenTold).toBe(true);
    await consumer.waitFor(() => deliveriesOf([ids.sink!]).length === 1, 10_000);
    // a's report again, once b's hand-over is past stale (as after a lost answer, retried late).
    const later = { ...deps, clock: { now: () => Date.now() + 61_000 } };
    await jobEnded(later, tenant, ids.a!, { outcome: 'SUCCEEDED', atMs: Date.now() });
    await new Promise((r) => setTimeout(r, 1_500));
    expect(deliveriesOf([ids.sink!])).toHaveLength(1);
  });

  it('a fan-out of 250 children: each delivered once, none before its parent ended, with the parent in its summary', async () => {
    const runAt = new Date(Date.now() + HOUR).toISOString();
    const children = Array.from({ length: 250 }, (_, i) => ({ key: `c${i}`, payload: { i }, after: ['root'] }));
    const ids = await submit([{ key: 'root', payload: null, runAt }, ...children]);
    const childIds = children.map((c) => ids[c.key]!);
    const endedAt = Date.now();
    await jobEnded(deps, tenant, ids.root!, { outcome: 'SUCCEEDED', atMs: endedAt });
    // Its children each released by one write of their record, due when the first report said.
    const released = await waiting.getMany(childIds.map((id) => keyOfId(deps.codec, id)));
    expect(new Set([...released.values()].map((r) => `${r.state} ${r.dueMs} ${[...r.succeeded]}`))).toEqual(
      new Set([`QUEUING ${endedAt} 0`]),
    );
    expect((await waiting.get(keyOfId(deps.codec, ids.root!)))?.childrenTold).toBe(true);
    await jobEnded(deps, tenant, ids.root!, { outcome: 'SUCCEEDED', atMs: endedAt + 5_000 }); // a repeated report
    await consumer.waitFor(() => new Set(deliveriesOf(childIds).map((d) => d.jobId)).size === 250, 20_000);
    await new Promise((r) => setTimeout(r, 1_000));
    const got = deliveriesOf(childIds);
    expect(got.length).toBe(250);
    expect(new Set(got.map((d) => d.jobId)).size).toBe(250);
    for (const d of got) {
      expect(d.receivedAt).toBeGreaterThanOrEqual(endedAt);
      expect(JSON.parse(d.body).parents).toEqual([{ key: 'root', jobId: ids.root, outcome: 'SUCCEEDED' }]);
      expect(d.attributes.workflow).toBeDefined();
    }
  }, 60_000);

  it('a fan-in of 100 parents reported 16 at a time, 30 of them twice, in random order: its child once, 5 s after the last end', async () => {
    const runAt = new Date(Date.now() + HOUR).toISOString();
    const parents = Array.from({ length: 100 }, (_, i) => ({ key: `p${i}`, payload: null, runAt }));
    const ids = await submit([...parents, { key: 'sink', payload: { all: true }, after: parents.map((p) => p.key), delaySeconds: 5 }]);
    const reports = [...parents.keys(), ...[...parents.keys()].filter((i) => i % 10 < 3)];
    for (let i = reports.length - 1; i > 0; i--) {
      const j = Math.floor(Math.random() * (i + 1));
      [reports[i], reports[j]] = [reports[j]!, reports[i]!];
    }
    const limit = limiter(16);
    let lastEnd = 0;
    await Promise.all(
      reports.map((p) =>
        limit(async () => {
          const at = Date.now();
          lastEnd = Math.max(lastEnd, at);
          await jobEnded(deps, tenant, ids[`p${p}`]!, { outcome: 'SUCCEEDED', atMs: at });
        }),
      ),
    );
    const sink = keyOfId(deps.codec, ids.sink!);
    const record = await waiting.get(sink);
    // 5 s ahead, beyond the 2 s lookahead however long the last reports took on a busy machine: through the table.
    expect(record?.state).toBe('RELEASING');
    // Due 5 s after the last parent's end as recorded (each parent's first report stands).
    const ends = await waiting.getMany(parents.map((p) => keyOfId(deps.codec, ids[p.key]!)));
    expect(ends.size).toBe(100);
    const recordedLast = Math.max(...[...ends.values()].map((r) => r.end!.atMs));
    expect(recordedLast).toBeLessThanOrEqual(lastEnd);
    expect(record!.dueMs).toBe(recordedLast + 5_000);
    await consumer.waitFor(() => deliveriesOf([ids.sink!]).length > 0, 20_000);
    await new Promise((r) => setTimeout(r, 1_500));
    const got = deliveriesOf([ids.sink!]);
    expect(got.length).toBe(1);
    expect(got[0]!.firstReceiveAt).toBeGreaterThanOrEqual(record!.dueMs!);
    expect(JSON.parse(got[0]!.body).parents).toHaveLength(100);
    // GET: the parents ended, the child handed to the table and delivered from its row.
    const workflowId = JSON.parse(got[0]!.body).workflow as string;
    const view = (await service.get('demo', workflowId))!;
    expect(view.state).toBe('RUNNING');
    expect(view.jobs.filter((j) => j.state === 'SUCCEEDED')).toHaveLength(100);
    expect(view.jobs.at(-1)).toMatchObject({ key: 'sink', state: 'QUEUED', runAt: new Date(record!.dueMs!).toISOString() });
    await jobEnded(deps, tenant, ids.sink!, { outcome: 'SUCCEEDED', atMs: Date.now() });
    expect((await service.get('demo', workflowId))?.state).toBe('SUCCEEDED');
  }, 60_000);

  it('a failed parent cancels the children that cancel on failure, and theirs; a child that runs on failure runs', async () => {
    const runAt = new Date(Date.now() + HOUR).toISOString();
    const ids = await submit([
      { key: 'a', payload: null, runAt },
      { key: 'b', payload: null, after: ['a'] },
      { key: 'c', payload: null, after: ['b'] },
      { key: 'd', payload: { cleanup: true }, after: ['b'], onParentFailure: 'run' },
      { key: 'e', payload: null, after: ['c', 'd'], onParentFailure: 'run' },
    ]);
    await jobEnded(deps, tenant, ids.a!, { outcome: 'DEAD', atMs: Date.now() });
    const rec = async (k: string) => waiting.get(keyOfId(deps.codec, ids[k]!));
    expect(await rec('b')).toMatchObject({ state: 'CANCELLED', message: expect.stringContaining("parent 'a' failed (DEAD)") });
    expect(await rec('c')).toMatchObject({ state: 'CANCELLED', message: expect.stringContaining("parent 'b' was cancelled") });
    expect((await rec('d'))?.state).toBe('QUEUING');
    // e waits for d, which has not ended; c's cancel is recorded as one of its two parents' ends.
    expect(await rec('e')).toMatchObject({ state: 'WAITING', failed: new Set([0]) });
    await consumer.waitFor(() => deliveriesOf([ids.d!]).length > 0, 10_000);
    expect(JSON.parse(deliveriesOf([ids.d!])[0]!.body).parents).toEqual([{ key: 'b', jobId: ids.b, outcome: 'CANCELLED' }]);
    // A retried report of a's failure changes nothing and sends nothing again.
    await jobEnded(deps, tenant, ids.a!, { outcome: 'DEAD', atMs: Date.now() });
    await jobEnded(deps, tenant, ids.d!, { outcome: 'SUCCEEDED', atMs: Date.now() });
    await consumer.waitFor(() => deliveriesOf([ids.e!]).length > 0, 10_000);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(deliveriesOf([ids.d!, ids.e!]).map((d) => d.jobId)).toEqual([ids.d, ids.e]);
    expect(deliveriesOf([ids.b!, ids.c!])).toEqual([]);
    const workflowId = JSON.parse(deliveriesOf([ids.e!])[0]!.body).workflow as string;
    const view = (await service.get('demo', workflowId))!;
    expect(view.jobs.map((j) => [j.key, j.state, j.after])).toEqual([
      ['a', 'DEAD', undefined],
      ['b', 'CANCELLED', ['a']],
      ['c', 'CANCELLED', ['b']],
      ['d', 'SUCCEEDED', ['b']],
      ['e', 'QUEUED', ['c', 'd']],
    ]);
    expect(view.state).toBe('RUNNING');
    await jobEnded(deps, tenant, ids.e!, { outcome: 'SUCCEEDED', atMs: Date.now() });
    expect((await service.get('demo', workflowId))?.state).toBe('FAILED');
  }, 60_000);

  it("knows no workflow of another tenant's id, a forged one or an unknown one (the route's 404)", async () => {
    const other = deps.codec.workflowId('beta', Date.now());
    const unknown = deps.codec.workflowId('demo', Date.now());
    for (const id of [other, `${unknown.slice(0, -2)}AA`, unknown, 'wf1.demo']) expect(await service.get('demo', id)).toBeUndefined();
  });
});
