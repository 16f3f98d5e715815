import { backoffMs, sleep } from '../util/index.js';
import { type OutgoingMessage, packBatches, type QueueSender } from '../model/index.js';

/**
 * One message submit sends: a direct job to its tenant queue, or the table-path jobs of a
 * request packed into an inbound message. `build` makes the message for any subset of its jobs,
 * so that a message SQS refuses can be split and its jobs sent in smaller messages.
 */
export interface Parcel {
  readonly queueUrl: string;
  /** Indexes (into the request's jobs) of the jobs it carries. */
  readonly jobs: readonly number[];
  build(jobs: readonly number[]): Omit<OutgoingMessage, 'id'>;
}

/** Why a job could not be handed to SQS. */
export interface SendProblem {
  /** SQS refused the job itself (a sender fault on a message holding it alone): sending it again cannot help. */
  readonly refused: boolean;
  readonly message: string;
}

export interface SendOptions {
  /** Attempts per message for failures that are SQS's (or the network's), the first included. @default 3 */
  readonly attempts?: number;
  /** Backoff between rounds of retries (full jitter). @default { baseMs: 25, capMs: 250 } */
  readonly backoff?: { readonly baseMs: number; readonly capMs: number };
  readonly random?: () => number;
  /** Hears each message SQS accepted: the jobs it carries and its message id. */
  readonly onSent?: (jobs: readonly number[], messageId: string) => void;
}

/**
 * Sends parcels with `SendMessageBatch` (10 entries and 256 KiB a call), each entry succeeding or
 * failing on its own, and makes sure one job's trouble never keeps another job out:
 *
 * - an entry SQS failed on its side (or a call that threw: throttling, network) is sent again,
 *   up to `attempts` times, after a short jittered backoff;
 * - an entry SQS refused (a sender fault) that carries several jobs is split in two halves, each
 *   sent as its own message (no attempt counted), down to single jobs, so that the jobs beside a
 *   refused one get through; a single job refused is refused for good.
 *
 * Returns the problem of every job that was not handed over. A call that threw may still have
 * delivered its messages: such jobs are reported not `refused` (retrying them is safe).
 */
export async function sendParcels(
  sender: QueueSender,
  parcels: readonly Parcel[],
  opts: SendOptions = {},
): Promise<Map<number, SendProblem>> {
  const attempts = opts.attempts ?? 3;
  const backoff = opts.backoff ?? { baseMs: 25, capMs: 250 };
  const problems = new Map<number, SendProblem>();
  let pending = parcels.map((p) => ({ parcel: p, jobs: p.jobs, tries: 1 }));
  for (let round = 0; pending.length > 0; round++) {
    const next: typeof pending = [];
    let retrying = false;
    const current = pending;
    const fail = (k: number, retryable: boolean, message: string) => {
      const item = current[k];
      if (!item) return;
      if (!retryable && item.jobs.length > 1) {
        const half = Math.ceil(item.jobs.length / 2);
        next.push({ ...item, jobs: item.jobs.slice(0, half) }, { ...item, jobs: item.jobs.slice(half) });
      } else if (retryable && item.tries < attempts) {
        next.push({ ...item, tries: item.tries + 1 });
        retrying = true;
      } else {
        for (const j of item.jobs) problems.set(j, { refused: !retryable, message });
      }
    };
    const byUrl = new Map<string, OutgoingMessage[]>();
    current.forEach((item, k) => {
      const list = byUrl.get(item.parcel.queueUrl) ?? [];
      list.push({ ...item.parcel.build(item.jobs), id: String(k) });
      byUrl.set(item.parcel.queueUrl, list);
    });
    await Promise.all(
      [...byUrl].flatMap(([url, messages]) =>
        packBatches(messages).map(async (batch) => {
          try {
            const onSent = opts.onSent && ((id: string, messageId: string) => opts.onSent!(current[Number(id)]!.jobs, messageId));
            for (const f of await sender.sendBatch(url, batch, onSent)) fail(Number(f.id), f.retryable, f.message);
          } catch (err) {
            for (const m of batch) fail(Number(m.id), true, (err as Error)?.message ?? String(err));
          }
        }),
      ),
    );
    if (retrying) await sleep(backoffMs(round, backoff, opts.random));
    pending = next;
  }
  return problems;
}
