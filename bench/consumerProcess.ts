/**
 * A tenant's worker in a process of its own (`consumeQueueInProcess`): another team's workers do
 * not share an event loop with this team's. In one loop, tenant A's flood (hundreds of receives
 * and deletes a second) delayed the callbacks that time tenant B's receives, and B's measured
 * lateness included A's worker's work. The child long-polls with `consumeQueue` and hands its
 * records over when stopped.
 */
import { fork } from 'node:child_process';
import { setPriority } from 'node:os';
import { fileURLToPath } from 'node:url';
import { SQSClient } from '@aws-sdk/client-sqs';
import { consumeQueue, type Received } from './support.js';

interface Start {
  readonly endpoint: string;
  readonly region: string;
  readonly queueUrl: string;
  readonly pollers: number;
}

type FromThread = { type: 'distinct'; n: number } | { type: 'done'; received: Received[] };

export function consumeQueueInProcess(
  endpoint: string,
  region: string,
  queueUrl: string,
  opts: { pollers?: number; nice?: number } = {},
): { received: Received[]; stop(): Promise<void>; waitFor(n: number, timeoutMs: number): Promise<boolean> } {
  const start: Start = { endpoint, region, queueUrl, pollers: opts.pollers ?? 3 };
  const worker = fork(fileURLToPath(import.meta.url), [JSON.stringify(start)], { execArgv: ['--import', 'tsx'], stdio: 'inherit' });
  if (opts.nice !== undefined && worker.pid !== undefined) setPriority(worker.pid, opts.nice);
  const received: Received[] = [];
  let distinct = 0;
  let failure: Error | undefined;
  const done = new Promise<void>((resolve) => {
    worker.on('message', (raw) => {
      const m = raw as FromThread;
      if (m.type === 'distinct') distinct = m.n;
      else {
        received.push(...m.received);
        resolve();
      }
    });
    worker.once('error', (err) => {
      failure = err;
      resolve();
    });
    worker.once('exit', () => resolve());
  });
  return {
    received,
    async stop() {
      worker.send('stop');
      await done;
      worker.kill();
      if (failure) throw failure;
    },
    async waitFor(n, timeoutMs) {
      const until = Date.now() + timeoutMs;
      while (distinct < n) {
        if (failure || Date.now() > until) return false;
        await new Promise((r) => setTimeout(r, 100));
      }
      return true;
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url) && process.send) {
  const port = { postMessage: (m: FromThread) => process.send!(m) };
  const s = JSON.parse(process.argv[2]!) as Start;
  const sqs = new SQSClient({ endpoint: s.endpoint, region: s.region, credentials: { accessKeyId: 'local', secretAccessKey: 'local' } });
  const consumer = consumeQueue(sqs, s.queueUrl, { pollers: s.pollers });
  const ids = new Set<string>();
  let seen = 0;
  const report = setInterval(() => {
    for (; seen < consumer.received.length; seen++) ids.add(consumer.received[seen]!.jobId);
    port.postMessage({ type: 'distinct', n: ids.size } satisfies FromThread);
  }, 100);
  process.once('message', () => {
    clearInterval(report);
    void consumer.stop().then(() => {
      process.send!({ type: 'done', received: consumer.received } satisfies FromThread, () => {
        sqs.destroy();
        process.disconnect();
      });
    });
  });
  process.once('disconnect', () => process.exit(0));
}
