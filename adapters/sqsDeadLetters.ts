import {
  ChangeMessageVisibilityBatchCommand,
  DeleteMessageBatchCommand,
  GetQueueAttributesCommand,
  ListMessageMoveTasksCommand,
  ReceiveMessageCommand,
  SendMessageBatchCommand,
  SQSClient,
  StartMessageMoveTaskCommand,
  type MessageAttributeValue,
} from '@aws-sdk/client-sqs';
import {
  packDeadLetters,
  type DeadLetterQueues,
  type DlqAttribute,
  type DlqCopy,
  type DlqMessage,
  type MoveTask,
} from '../core/deadLetters/index.js';

/** Errors SQS (or a stand-in) answers for an action it does not implement. */
const UNSUPPORTED = /InvalidAction|UnsupportedOperation|UnknownOperation|NotImplemented/;

/** {@link DeadLetterQueues} on SQS. */
export class SqsDeadLetters implements DeadLetterQueues {
  readonly #arns = new Map<string, Promise<string>>();

  constructor(private readonly client: SQSClient = new SQSClient({})) {}

  async receive(queueUrl: string, max: number, visibilitySeconds: number, waitSeconds: number): Promise<DlqMessage[]> {
    const res = await this.client.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: max,
        VisibilityTimeout: visibilitySeconds,
        WaitTimeSeconds: waitSeconds,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['ApproximateReceiveCount', 'SentTimestamp', 'ApproximateFirstReceiveTimestamp'],
      }),
    );
    return (res.Messages ?? []).map((m) => {
      const num = (k: 'SentTimestamp' | 'ApproximateFirstReceiveTimestamp') =>
        m.Attributes?.[k] !== undefined ? { [k === 'SentTimestamp' ? 'sentAtMs' : 'firstReceivedAtMs']: Number(m.Attributes[k]) } : {};
      return {
        messageId: m.MessageId ?? '',
        receiptHandle: m.ReceiptHandle ?? '',
        body: m.Body ?? '',
        attributes: Object.fromEntries(Object.entries(m.MessageAttributes ?? {}).map(([k, v]) => [k, fromSqs(v)])),
        receiveCount: Number(m.Attributes?.ApproximateReceiveCount ?? 0),
        ...num('SentTimestamp'),
        ...num('ApproximateFirstReceiveTimestamp'),
      };
    });
  }

  async release(queueUrl: string, receiptHandles: readonly string[]): Promise<void> {
    for (const chunk of chunks(receiptHandles, 10)) {
      await this.client.send(
        new ChangeMessageVisibilityBatchCommand({
          QueueUrl: queueUrl,
          Entries: chunk.map((h, i) => ({ Id: String(i), ReceiptHandle: h, VisibilityTimeout: 0 })),
        }),
      );
    }
  }

  /**
   * One `SendMessageBatch` per pack of at most 10 entries and 256 KiB; a call that throws fails
   * its own entries only (those of the other calls stay sent, so their messages can be deleted).
   */
  async send(queueUrl: string, messages: readonly DlqCopy[]): Promise<string[]> {
    const failed: string[] = [];
    for (const batch of packDeadLetters(messages)) {
      try {
        const res = await this.client.send(
          new SendMessageBatchCommand({
            QueueUrl: queueUrl,
            Entries: batch.map((m) => ({
              Id: m.id,
              MessageBody: m.body,
              ...(Object.keys(m.attributes).length > 0
                ? { MessageAttributes: Object.fromEntries(Object.entries(m.attributes).map(([k, a]) => [k, toSqs(a)])) }
                : {}),
            })),
          }),
        );
        failed.push(...(res.Failed ?? []).map((f) => f.Id ?? ''));
      } catch {
        failed.push(...batch.map((m) => m.id));
      }
    }
    return failed;
  }

  /** A call that throws fails its own receipt handles only. */
  async delete(queueUrl: string, receiptHandles: readonly string[]): Promise<string[]> {
    const failed: string[] = [];
    for (const chunk of chunks(receiptHandles, 10)) {
      try {
        const res = await this.client.send(
          new DeleteMessageBatchCommand({ QueueUrl: queueUrl, Entries: chunk.map((h, i) => ({ Id: String(i), ReceiptHandle: h })) }),
        );
        failed.push(...(res.Failed ?? []).map((f) => chunk[Number(f.Id)]!));
      } catch {
        failed.push(...chunk);
      }
    }
    return failed;
  }

  async startMove(dlqUrl: string, queueUrl: string): Promise<{ taskHandle: string } | undefined> {
    const [source, destination] = await Promise.all([this.#arn(dlqUrl), this.#arn(queueUrl)]);
    try {
      const res = await this.client.send(new StartMessageMoveTaskCommand({ SourceArn: source, DestinationArn: destination }));
      return { taskHandle: res.TaskHandle ?? '' };
    } catch (err) {
      if (UNSUPPORTED.test((err as Error).name ?? '')) return undefined;
      throw err;
    }
  }

  async moveTasks(dlqUrl: string): Promise<MoveTask[]> {
    const source = await this.#arn(dlqUrl);
    try {
      const res = await this.client.send(new ListMessageMoveTasksCommand({ SourceArn: source, MaxResults: 10 }));
      return (res.Results ?? []).map((t) => ({
        ...(t.TaskHandle ? { taskHandle: t.TaskHandle } : {}),
        status: (t.Status ?? 'FAILED') as MoveTask['status'],
        moved: t.ApproximateNumberOfMessagesMoved ?? 0,
        ...(t.ApproximateNumberOfMessagesToMove !== undefined ? { toMove: t.ApproximateNumberOfMessagesToMove } : {}),
        startedAt: new Date(t.StartedTimestamp ?? 0).toISOString(),
        ...(t.FailureReason ? { failureReason: t.FailureReason } : {}),
      }));
    } catch (err) {
      if (UNSUPPORTED.test((err as Error).name ?? '')) return [];
      throw err;
    }
  }

  async depth(queueUrl: string): Promise<number> {
    const res = await this.client.send(
      new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['ApproximateNumberOfMessages'] }),
    );
    return Number(res.Attributes?.ApproximateNumberOfMessages ?? 0);
  }

  #arn(url: string): Promise<string> {
    let arn = this.#arns.get(url);
    if (!arn) {
      arn = this.client
        .send(new GetQueueAttributesCommand({ QueueUrl: url, AttributeNames: ['QueueArn'] }))
        .then((r) => r.Attributes?.QueueArn ?? '');
      arn.catch(() => this.#arns.delete(url));
      this.#arns.set(url, arn);
    }
    return arn;
  }
}

function fromSqs(v: MessageAttributeValue): DlqAttribute {
  const dataType = v.DataType ?? 'String';
  return dataType.startsWith('Binary')
    ? { dataType, value: Buffer.from(v.BinaryValue ?? new Uint8Array()).toString('base64') }
    : { dataType, value: v.StringValue ?? '' };
}

function toSqs(a: DlqAttribute): MessageAttributeValue {
  return a.dataType.startsWith('Binary')
    ? { DataType: a.dataType, BinaryValue: Buffer.from(a.value, 'base64') }
    : { DataType: a.dataType, StringValue: a.value };
}

function chunks<T>(items: readonly T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}
