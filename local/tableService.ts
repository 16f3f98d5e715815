/**
 * The local stack's table process: DynamoDB (dynalite, data under the data directory), forked by
 * the services process. On AWS, DynamoDB and SQS are separate services: a table busy with one
 * tenant's flood does not slow another tenant's sends. Run in its own process, dynalite's work
 * does not queue fauxqs's answers behind it either (they used to share one event loop).
 *
 * Tells its parent `{type: 'ready', port}`; stops on SIGTERM or when its parent goes away (the IPC
 * channel closes, even on a SIGKILL of the parent), after the requests it is answering.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import dynalite from 'dynalite';
import { stopRequests } from './stopRequests.js';

const requests = stopRequests();

const dir = process.env.DYNEIN_DYNAMODB_DIR;
if (!dir) {
  console.error('dynein table: DYNEIN_DYNAMODB_DIR is not set');
  process.exit(2);
}
const db = dynalite({ path: dir, createTableMs: 0, deleteTableMs: 0, updateTableMs: 0 });
// Requests dynalite is still answering (until it ends the response, even to a client gone
// away): on stop, the database closes only once they are done.
let answering = 0;
db.prependListener('request', (_req: IncomingMessage, res: ServerResponse) => {
  answering++;
  const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse;
  let ended = false;
  res.end = ((...args: unknown[]) => {
    if (!ended) {
      ended = true;
      answering--;
    }
    return end(...args);
  }) as ServerResponse['end'];
});
await new Promise<void>((resolve, reject) => {
  db.once('error', reject);
  db.listen(Number(process.env.DYNEIN_DYNAMODB_PORT ?? 0), '127.0.0.1', () => resolve());
});

let stopping: Promise<void> | undefined;
requests.onStop(
  () =>
    (stopping ??= (async () => {
      // A request whose client died keeps running inside dynalite: let it finish before the
      // database closes under it (it would throw "Database is not open"), for up to 5 s.
      for (const until = Date.now() + 5_000; answering > 0 && Date.now() < until;) await new Promise((r) => setTimeout(r, 10));
      await new Promise<void>((r) => db.close(() => r()));
      process.exit(0);
    })()),
);
if (process.send) process.send({ type: 'ready', port: (db.address() as AddressInfo).port });
