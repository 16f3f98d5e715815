/**
 * One emulator in a process of its own, so that the storage (dynalite) and the queue service
 * (fauxqs) do not share a core with the dispatcher under test, as on AWS. Started by
 * `startRemoteEmulators()` (bench/support.ts) with `fork`; reports its port over IPC.
 *
 *   node --import tsx bench/emulator.ts dynalite|fauxqs
 */
import type { AddressInfo } from 'node:net';
import dynalite from 'dynalite';
import { startFauxqs } from 'fauxqs';

const kind = process.argv[2];
let port: number;
let close: () => Promise<void>;
if (kind === 'dynalite') {
  const server = dynalite({ createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  // Idle keep-alive connections held longer than the clients keep them: Node's default of 5 s
  // closes one as a client reuses it, which the client sees as "socket hang up" (a CI smoke run
  // ended on one under load).
  server.keepAliveTimeout = 65_000;
  server.headersTimeout = 66_000;
  port = (server.address() as AddressInfo).port;
  close = () => new Promise((r) => server.close(() => r()));
} else if (kind === 'fauxqs') {
  const server = await startFauxqs({ port: 0, host: '127.0.0.1', logger: false, defaultRegion: 'us-east-1' });
  port = server.port;
  close = () => server.stop();
} else {
  console.error(`usage: bench/emulator.ts dynalite|fauxqs (got ${kind})`);
  process.exit(2);
}

process.send?.({ port });
const stop = () => void close().finally(() => process.exit(0));
process.on('SIGTERM', stop);
process.on('disconnect', stop);
