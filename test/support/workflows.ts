import { DynamoHistoryStore } from '../../adapters/dynamoHistoryStore.js';
import { DynamoWaitingChildren } from '../../adapters/dynamoWaitingChildren.js';
import { DynamoWorkflowStore } from '../../adapters/dynamoWorkflowStore.js';
import { SqsSender } from '../../adapters/sqsSender.js';
import { JobIdCodec } from '../../core/model/index.js';
import type { JobsService } from '../../core/jobs/index.js';
import { type ProgressDeps, WorkflowService, type WorkflowServiceDeps } from '../../core/workflows/index.js';
import type { Emulators } from './emulators.js';
import type { TenantRecord } from '../../core/model/index.js';
import { consume, createSystem, runSystem, type TestSystem } from './system.js';

/** A test system with workflows wired over its table and queues (the real adapters, the emulators). */
export interface WorkflowSystem {
  readonly sys: TestSystem;
  readonly waiting: DynamoWaitingChildren;
  readonly store: DynamoWorkflowStore;
  readonly history: DynamoHistoryStore;
  readonly codec: JobIdCodec;
  /** What the submit and GET take. */
  readonly deps: WorkflowServiceDeps;
  /** What carrying a job's end on takes (with the outcome store: parents' results in summaries). */
  readonly progress: ProgressDeps;
  readonly service: WorkflowService;
  /** Status and cancel, workflow jobs included (the wiring's). */
  readonly jobs: JobsService;
}

/** A lookahead of 2 s, 4 shards in one group, tenant `demo` (or those named): the settings the workflow tests share. */
export async function createWorkflowSystem(em: Emulators, tenants: string[] = ['demo']): Promise<WorkflowSystem> {
  const sys = await createSystem(em, { tenants, settings: { lookaheadMs: 2_000, leaseMs: 4_000, shardCount: 4, groupCount: 1 } });
  const waiting = new DynamoWaitingChildren(em.dynamo, sys.tableName);
  const store = new DynamoWorkflowStore(em.dynamo, sys.tableName);
  const history = new DynamoHistoryStore(sys.tableName, em.dynamo);
  const codec = new JobIdCodec(sys.idKey);
  const clock = { now: () => Date.now() };
  const handOff = { sender: new SqsSender(em.sqs), inboundQueueUrl: sys.inboundUrl };
  const settings = sys.w.config.settings;
  const progress: ProgressDeps = { store, waiting, codec, settings, clock, handOff, outcomes: history };
  const jobs = sys.w.jobs;
  const deps: WorkflowServiceDeps = {
    rows: sys.w.store,
    store,
    waiting,
    codec,
    tenants: sys.w.tenants,
    settings,
    clock,
    handOff,
    outcomes: history,
    jobs,
  };
  return { sys, waiting, store, history, codec, deps, progress, jobs, service: new WorkflowService(deps) };
}

/**
 * A workflow system running as deployed: ingest and dispatch on, a consumer on tenant `demo`'s
 * queue. `stop` stops them (the emulators stay the caller's).
 */
export async function runWorkflowSystem(
  em: Emulators,
  tenants: string[] = ['demo'],
): Promise<WorkflowSystem & { tenant: TenantRecord; consumer: ReturnType<typeof consume>; stop(): Promise<void> }> {
  const ws = await createWorkflowSystem(em, tenants);
  const tenant = await ws.sys.w.tenants.require('demo');
  const consumer = consume(em.sqs, tenant.queueUrl);
  const running = runSystem(ws.sys);
  const stop = async () => {
    await running.stop();
    await consumer.stop();
  };
  return { ...ws, tenant, consumer, stop };
}
