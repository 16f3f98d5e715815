import { SendMessageBatchCommand, SQSClient } from '@aws-sdk/client-sqs';
import { type OutgoingMessage, type QueueSender, type SendFailure, ThrottledError } from '../core/model/index.js';

/** The {@link QueueSender} on SQS: one `SendMessageBatch` per call. */
export class SqsSender implements QueueSender {
  constructor(private readonly client: SQSClient = new SQSClient({})) {}

  async sendBatch(
    queueUrl: string,
    messages: readonly OutgoingMessage[],
    onSent?: (id: string, messageId: string) => void,
  ): Promise<SendFailure[]> {
    if (messages.length === 0) return [];
    try {
      const res = await this.client.send(
        new SendMessageBatchCommand({
          QueueUrl: queueUrl,
          Entries: messages.map((m) => ({
            Id: m.id,
            MessageBody: m.body,
            ...(m.delaySeconds !== undefined ? { DelaySeconds: m.delaySeconds } : {}),
            ...(m.attributes
              ? {
                  MessageAttributes: Object.fromEntries(
                    Object.entries(m.attributes).map(([k, v]) => [k, { DataType: 'String', StringValue: v }]),
                  ),
                }
              : {}),
          })),
        }),
      );
      if (onSent) for (const s of res.Successful ?? []) if (s.Id && s.MessageId) onSent(s.Id, s.MessageId);
      return (res.Failed ?? []).map((f) => ({
        id: f.Id ?? '',
        retryable: !f.SenderFault,
        message: `${f.Code ?? 'Failed'}: ${f.Message ?? ''}`,
      }));
    } catch (err) {
      const name = (err as Error)?.name ?? '';
      if (/Throttl|RequestThrottled|OverLimit/.test(name)) throw new ThrottledError(`SQS throttled: ${(err as Error).message}`, err);
      throw err;
    }
  }
}
