/**
 * Phase 6: the peer. BullMQ delayed jobs on a local Redis under the same steady load (same rate,
 * duration, due times and payloads as phase 1), lateness measured at the worker as the time its
 * processor starts minus the job's due time. Skipped (and said so) when `redis-server` is not
 * installed.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { freePort } from '../test/support/localStack.js';
import {
  load,
  progress,
  realisticPayload,
  sleep,
  steadyLoad,
  summarize,
  type LoadReport,
  type LoadShape,
  type Summary,
} from './support.js';

export const BULLMQ_SKIP_MESSAGE =
  'BullMQ peer skipped: install redis-server (apt-get install redis-server) and the client (npm i --no-save bullmq@6 ioredis@5)';

/* eslint-disable @typescript-eslint/no-explicit-any -- bullmq and ioredis are optional: loaded at run time, untyped here. */
type RedisLike = any;
// Not dependencies of the project: the registry some machines use lacks bullmq's optional
// native parts for other platforms, which would break `npm ci`. Installed on demand (above).
const optional = (name: string): Promise<any> => import(name);

export interface BullmqResult extends Summary {
  early: number;
  delivered: number;
  expected: number;
  redisVersion: string;
  bullmqVersion: string;
  workerConcurrency: number;
  load: LoadShape & { payloadBytes: number; report: LoadReport };
  loadAvg: { before: [number, number, number]; after: [number, number, number] };
}

export function redisServerAvailable(): boolean {
  if (spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).status !== 0) return false;
  try {
    const req = createRequire(import.meta.url);
    req.resolve('bullmq');
    req.resolve('ioredis');
    return true;
  } catch {
    return false;
  }
}

async function startRedis(Redis: RedisLike): Promise<{ port: number; proc: ChildProcess; version: string }> {
  const port = await freePort();
  const version = /v=(\S+)/.exec(spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).stdout)?.[1] ?? 'unknown';
  // In memory only: no RDB snapshots, no AOF.
  const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  const until = Date.now() + 10_000;
  for (;;) {
    const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    probe.on('error', () => {}); // not listening yet: retried below
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      return { port, proc, version };
    } catch {
      probe.disconnect();
      if (Date.now() > until || proc.exitCode !== null) throw new Error(`redis-server did not start on port ${port}`);
      await sleep(100);
    }
  }
}

export async function runBullmq(shape: LoadShape): Promise<BullmqResult> {
  const loadBefore = load();
  const { Queue, Worker } = await optional('bullmq');
  const { Redis } = await optional('ioredis');
  const redis = await startRedis(Redis);
  const connection = () => new Redis({ port: redis.port, host: '127.0.0.1', maxRetriesPerRequest: null });
  const producer = connection();
  const workerConn = connection();
  const queue = new Queue('bench', { connection: producer });
  const due = new Map<string, number>();
  const lateness = new Map<string, number>();
  let early = 0;
  const workerConcurrency = 50;
  const worker = new Worker(
    'bench',
    async (job: { id?: string; data: unknown }) => {
      const at = Date.now();
      const dueMs = (job.data as { dueMs: number }).dueMs;
      if (!lateness.has(job.id!)) lateness.set(job.id!, at - dueMs);
      if (at < dueMs) early++;
    },
    { connection: workerConn, concurrency: workerConcurrency },
  );
  const bullmqVersion = (createRequire(import.meta.url)('bullmq/package.json') as { version: string }).version;
  try {
    await worker.waitUntilReady();
    const payloads = Array.from({ length: 100 }, (_, i) => realisticPayload(i));
    const payloadBytes = JSON.stringify(payloads[0]).length;
    progress(
      `bullmq: redis ${redis.version}, bullmq ${bullmqVersion}, worker concurrency ${workerConcurrency}; the same load: ${shape.rate} jobs/s for ${shape.durationMs / 1000} s`,
    );
    const report = await steadyLoad(
      shape,
      async (i, dueMs) => {
        const now = Date.now();
        // BullMQ's due time is the job's timestamp plus its delay: give both, so it is dueMs exactly.
        const job = await queue.add(
          'job',
          { payload: payloads[i % payloads.length], dueMs },
          { timestamp: now, delay: dueMs - now, removeOnComplete: true },
        );
        due.set(job.id!, dueMs);
      },
      'bullmq',
    );
    const lastDue = Math.max(0, ...due.values());
    const until = lastDue + 20_000;
    while (lateness.size < due.size && Date.now() < until) await sleep(100);
    await sleep(500);
    const s = summarize([...lateness.values()]);
    progress(
      `bullmq: ${lateness.size}/${due.size} processed, p50 ${s.p50Ms} ms, p95 ${s.p95Ms} ms, p99 ${s.p99Ms} ms, max ${s.maxMs} ms, early ${early}`,
    );
    return {
      ...s,
      early,
      delivered: lateness.size,
      expected: due.size,
      redisVersion: redis.version,
      bullmqVersion,
      workerConcurrency,
      load: { ...shape, payloadBytes, report },
      loadAvg: { before: loadBefore, after: load() },
    };
  } finally {
    await worker.close();
    await queue.close();
    producer.disconnect();
    workerConn.disconnect();
    redis.proc.kill('SIGTERM');
    await new Promise((r) => (redis.proc.exitCode !== null ? r(undefined) : redis.proc.once('exit', r)));
  }
}
