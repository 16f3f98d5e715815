import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';

export interface SecureQueueProps {
  /** Visibility timeout of the main queue. @default Duration.seconds(30) */
  readonly visibilityTimeout?: Duration;
  /** Receives before a message moves to the DLQ. @default 5 */
  readonly maxReceiveCount?: number;
  /** Retention of both queues. @default Duration.days(14) */
  readonly retentionPeriod?: Duration;
}

/**
 * A queue with its DLQ, both secure by default: SSE (SQS-managed keys), a policy that denies
 * non-TLS access, redrive after `maxReceiveCount` receives, 14 days' retention.
 */
export function secureQueue(scope: Construct, id: string, props: SecureQueueProps = {}): { queue: sqs.Queue; deadLetterQueue: sqs.Queue } {
  const retentionPeriod = props.retentionPeriod ?? Duration.days(14);
  const deadLetterQueue = new sqs.Queue(scope, `${id}Dlq`, {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod,
    removalPolicy: RemovalPolicy.DESTROY,
  });
  const queue = new sqs.Queue(scope, id, {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod,
    visibilityTimeout: props.visibilityTimeout ?? Duration.seconds(30),
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: props.maxReceiveCount ?? 5 },
    removalPolicy: RemovalPolicy.DESTROY,
  });
  return { queue, deadLetterQueue };
}
