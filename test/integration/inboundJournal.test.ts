import { appendFileSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CreateQueueCommand,
  DeleteMessageCommand,
  GetQueueAttributesCommand,
  ReceiveMessageCommand,
  SendMessageCommand,
  SQSClient,
  type Message,
} from '@aws-sdk/client-sqs';
import { startFauxqs, type FauxqsServer } from 'fauxqs';
import { afterEach, describe, expect, it } from 'vitest';
import { restoreInboundJournal } from '../../local/inboundJournal.js';

/**
 * The inbound journal against fauxqs with real SQS clients: what it restores after the process
 * that held the queues is gone (here: its fauxqs stopped, a new one started), messages deleted
 * or moved to the DLQ, a torn last line, and compaction.
 */
const credentials = { accessKeyId: 'test', secretAccessKey: 'test' };
const servers: { fauxqs: FauxqsServer; sqs: SQSClient }[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.sqs.destroy();
    await s.fauxqs.stop();
  }
});

/** A fauxqs with the inbound queue and its DLQ (redrive after one receive), journaled in `file`. */
async function journaled(file: string, compactAfterBytes?: number) {
  const fauxqs = await startFauxqs({ port: 0, host: '127.0.0.1', logger: false, messageSpies: { bufferSize: 1 } });
  const sqs = new SQSClient({ endpoint: `http://127.0.0.1:${fauxqs.port}`, region: 'us-east-1', credentials });
  servers.push({ fauxqs, sqs });
  const dlqUrl = (await sqs.send(new CreateQueueCommand({ QueueName: 'in-dlq' }))).QueueUrl!;
  const dlqArn = (await sqs.send(new GetQueueAttributesCommand({ QueueUrl: dlqUrl, AttributeNames: ['QueueArn'] }))).Attributes!.QueueArn!;
  const url = (
    await sqs.send(
      new CreateQueueCommand({
        QueueName: 'in',
        Attributes: { RedrivePolicy: JSON.stringify({ deadLetterTargetArn: dlqArn, maxReceiveCount: 1 }) },
      }),
    )
  ).QueueUrl!;
  const restored = await restoreInboundJournal({ file, spy: fauxqs.spy, queues: { in: url, 'in-dlq': dlqUrl }, sqs, compactAfterBytes });
  return { sqs, url, dlqUrl, restored };
}

async function receive(sqs: SQSClient, url: string, max = 10): Promise<Message[]> {
  return (
    (
      await sqs.send(
        new ReceiveMessageCommand({
          QueueUrl: url,
          MaxNumberOfMessages: max,
          WaitTimeSeconds: 0,
          VisibilityTimeout: 0,
          MessageAttributeNames: ['All'],
        }),
      )
    ).Messages ?? []
  );
}

describe('restoreInboundJournal', () => {
  it("restores what was accepted and not let go, byte for byte with its attributes; not what was deleted; the DLQ's into the DLQ", async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'dynein-journal-')), 'inbound.journal');
    const a = await journaled(file);
    expect(a.restored).toBe(0);
    const send = (body: string, attrs?: Record<string, { DataType: string; StringValue: string }>) =>
      a.sqs.send(new SendMessageCommand({ QueueUrl: a.url, MessageBody: body, MessageAttributes: attrs }));
    const receiveOne = async (visibility: number) =>
      (await a.sqs.send(new ReceiveMessageCommand({ QueueUrl: a.url, MaxNumberOfMessages: 1, VisibilityTimeout: visibility })))
        .Messages?.[0];
    // One message at a time is visible, so each step acts on the message it means.
    await send('{"to-dlq":3}');
    expect((await receiveOne(0))?.Body).toBe('{"to-dlq":3}');
    expect(await receiveOne(0)).toBeUndefined(); // the second receive moved it to the DLQ (maxReceiveCount 1)
    await send('{"deleted":2}');
    const deleted = await receiveOne(60);
    expect(deleted?.Body).toBe('{"deleted":2}');
    await a.sqs.send(new DeleteMessageCommand({ QueueUrl: a.url, ReceiptHandle: deleted!.ReceiptHandle }));
    await send('{"in-flight":4}');
    expect((await receiveOne(600))?.Body).toBe('{"in-flight":4}'); // in flight, never deleted
    await send('{"kept":1, "raw": 9007199254740993}', { kind: { DataType: 'String', StringValue: 'é 😀' } });
    appendFileSync(file, '{"op":"put","q":"in","id":"torn","bo'); // a crash in the middle of a line

    // The process holding the queues is gone; a new one starts empty and restores.
    const [first] = servers.splice(0);
    first!.sqs.destroy();
    await first!.fauxqs.stop();
    const b = await journaled(file);
    const main = await receive(b.sqs, b.url);
    const dlq = await receive(b.sqs, b.dlqUrl);
    expect(main.map((m) => m.Body).sort()).toEqual(['{"in-flight":4}', '{"kept":1, "raw": 9007199254740993}']);
    expect(main.find((m) => m.Body!.includes('kept'))!.MessageAttributes?.kind?.StringValue).toBe('é 😀');
    expect(dlq.map((m) => m.Body)).toEqual(['{"to-dlq":3}']);
    expect(b.restored).toBe(3);
  });

  it('compacts the journal past its size limit, keeping exactly what the queues hold', async () => {
    const file = join(mkdtempSync(join(tmpdir(), 'dynein-journal-')), 'inbound.journal');
    const a = await journaled(file, 4_096);
    const body = 'x'.repeat(500);
    for (let i = 0; i < 40; i++) {
      await a.sqs.send(new SendMessageCommand({ QueueUrl: a.url, MessageBody: `${i}:${body}` }));
      const m = (await a.sqs.send(new ReceiveMessageCommand({ QueueUrl: a.url, MaxNumberOfMessages: 1, VisibilityTimeout: 60 })))
        .Messages?.[0];
      expect(m?.Body?.startsWith(`${i}:`)).toBe(true); // the others are deleted, or kept in flight
      if (i % 10 === 9) continue; // every tenth message stays (in flight)
      await a.sqs.send(new DeleteMessageCommand({ QueueUrl: a.url, ReceiptHandle: m!.ReceiptHandle }));
    }
    // 40 sends of ~500 bytes: far past 4 KiB written, yet the file holds little more than the 4 kept.
    expect(statSync(file).size).toBeLessThan(4_096 + 4 * 600);
    const kept = readFileSync(file, 'utf8');
    const [first] = servers.splice(0);
    first!.sqs.destroy();
    await first!.fauxqs.stop();
    const b = await journaled(file);
    expect(b.restored).toBe(4);
    expect(kept.length).toBeGreaterThan(0);
    const restored = await receive(b.sqs, b.url);
    expect(restored.map((m) => m.Body!.split(':')[0]).sort()).toEqual(['19', '29', '39', '9']);
  });
});
