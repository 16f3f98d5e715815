import { closeSync, existsSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { SendMessageCommand, type MessageAttributeValue, type SQSClient } from '@aws-sdk/client-sqs';

/**
 * Makes the local stack's inbound queue (and its DLQ) survive a SIGKILL of the whole stack, as
 * SQS keeps what it acknowledged: fauxqs holds queues in memory only, so the services process
 * journals every message those queues accept and every message they let go (deleted, or moved
 * to the DLQ), and a start re-sends what the journal still holds.
 *
 * The journal is written synchronously inside fauxqs's own handling of the request (its message
 * spy is called before the reply goes out), so a SendMessage that was answered is on disk: a
 * SIGKILL at any instant loses nothing acknowledged (an OS crash could lose the page cache; no
 * fsync). What a restart does not keep: message ids and receipt handles (new ones), receive
 * counts (start again at 0), visibility (in-flight messages are visible at once, as after their
 * timeout) and delays (none on the inbound queue). Ingest is idempotent, so a message replayed
 * after its jobs were stored writes nothing new.
 */
export interface JournaledQueues {
  /** Queue name → its URL in the running fauxqs. */
  readonly [name: string]: string;
}

/** The event fauxqs's message spy records (fauxqs's `SqsSpyMessage`, SQS part). */
interface SpyEvent {
  readonly service: string;
  readonly queueName?: string;
  readonly messageId?: string;
  readonly body?: string;
  readonly messageAttributes?: Record<string, { DataType: string; StringValue?: string; BinaryValue?: string }>;
  readonly status?: string;
}

/** The writable side of fauxqs's message spy: `addMessage` is called synchronously by its queues. */
interface Spy {
  addMessage(event: SpyEvent): void;
}

interface Entry {
  readonly op: 'put' | 'del';
  readonly q: string;
  readonly id: string;
  readonly body?: string;
  readonly attrs?: SpyEvent['messageAttributes'];
}

/** Past this many bytes written, the journal is rewritten with only the messages it still holds. */
const COMPACT_AFTER_BYTES = 64 * 1024 * 1024;

/**
 * Re-sends what `file` still holds into the (new, empty) queues, then journals from then on.
 * Call it after the queues exist and before anything else sends to them.
 *
 * @returns how many messages were restored
 */
export async function restoreInboundJournal(opts: {
  file: string;
  /** fauxqs's `server.spy` (started with `messageSpies`). */
  spy: unknown;
  queues: JournaledQueues;
  sqs: SQSClient;
  /** @default 64 MiB */
  compactAfterBytes?: number;
}): Promise<number> {
  const pending = liveEntries(opts.file);
  const journal = new Journal(`${opts.file}.next`, Object.keys(opts.queues), opts.compactAfterBytes ?? COMPACT_AFTER_BYTES);
  journal.attach(opts.spy as Spy);
  // The re-sends are journaled into the new file; the old one stays whole until they all are,
  // so a crash during the restore restores again next time (a duplicate at worst).
  for (const e of pending) {
    const url = opts.queues[e.q];
    if (!url || e.body === undefined) continue;
    await opts.sqs.send(
      new SendMessageCommand({
        QueueUrl: url,
        MessageBody: e.body,
        ...(e.attrs && Object.keys(e.attrs).length > 0 ? { MessageAttributes: toSdkAttributes(e.attrs) } : {}),
      }),
    );
  }
  journal.moveTo(opts.file);
  return pending.length;
}

/** The `put`s of a journal file not followed by their `del`, in order. A torn last line (a crash mid-write) is skipped. */
function liveEntries(file: string): Entry[] {
  if (!existsSync(file)) return [];
  const live = new Map<string, Entry>();
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    if (!line) continue;
    let e: Entry;
    try {
      e = JSON.parse(line) as Entry;
    } catch {
      continue;
    }
    const key = `${e.q}/${e.id}`;
    if (e.op === 'put') live.set(key, e);
    else live.delete(key);
  }
  return [...live.values()];
}

class Journal {
  #file: string;
  #fd: number;
  #written = 0;
  readonly #queues: ReadonlySet<string>;
  readonly #live = new Map<string, string>();
  readonly #compactAfter: number;

  constructor(file: string, queues: readonly string[], compactAfterBytes: number) {
    this.#file = file;
    this.#compactAfter = compactAfterBytes;
    this.#queues = new Set(queues);
    rmSync(file, { force: true });
    this.#fd = openSync(file, 'a', 0o600);
  }

  attach(spy: Spy): void {
    const record = spy.addMessage.bind(spy);
    spy.addMessage = (event: SpyEvent) => {
      this.#observe(event);
      record(event);
    };
  }

  /** Renames the journal into place (the open descriptor follows the file). */
  moveTo(file: string): void {
    renameSync(this.#file, file);
    this.#file = file;
  }

  #observe(event: SpyEvent): void {
    if (event.service !== 'sqs' || !event.queueName || !event.messageId || !this.#queues.has(event.queueName)) return;
    const key = `${event.queueName}/${event.messageId}`;
    if (event.status === 'published') {
      const line = `${JSON.stringify({ op: 'put', q: event.queueName, id: event.messageId, body: event.body, attrs: event.messageAttributes } satisfies Entry)}\n`;
      this.#live.set(key, line);
      this.#append(line);
    } else if ((event.status === 'consumed' || event.status === 'dlq') && this.#live.delete(key)) {
      // 'dlq': moved to the DLQ, whose own 'published' event follows.
      this.#append(`${JSON.stringify({ op: 'del', q: event.queueName, id: event.messageId } satisfies Entry)}\n`);
    }
    if (this.#written > this.#compactAfter) this.#compact();
  }

  #append(line: string): void {
    this.#written += writeSync(this.#fd, line);
  }

  /** Rewrites the journal with the messages it still holds: a temporary file, then a rename. */
  #compact(): void {
    const tmp = `${this.#file}.compact`;
    const fd = openSync(tmp, 'w', 0o600);
    let written = 0;
    for (const line of this.#live.values()) written += writeSync(fd, line);
    renameSync(tmp, this.#file);
    closeSync(this.#fd);
    this.#fd = fd;
    this.#written = written;
  }
}

function toSdkAttributes(attrs: NonNullable<SpyEvent['messageAttributes']>): Record<string, MessageAttributeValue> {
  return Object.fromEntries(
    Object.entries(attrs).map(([k, v]) => [
      k,
      {
        DataType: v.DataType,
        ...(v.StringValue !== undefined ? { StringValue: v.StringValue } : {}),
        ...(v.BinaryValue !== undefined ? { BinaryValue: Buffer.from(v.BinaryValue, 'base64') } : {}),
      },
    ]),
  );
}
