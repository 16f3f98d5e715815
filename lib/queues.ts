import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import type { Construct } from 'constructs';
import { QUEUE_SETTINGS } from '../adapters/resources.js';

export interface SecureQueueProps {
  /** Visibility timeout of the main queue. @default Duration.seconds(30) */
  readonly visibilityTimeout?: Duration;
  /** Receives before a message moves to the DLQ. @default 5 */
  readonly maxReceiveCount?: number;
  /** Retention of the main queue. The DLQ keeps 14 days (the maximum): SQS keeps a message's
   * original timestamp when it moves to the DLQ, so the DLQ must keep longer. @default Duration.days(7) */
  readonly retentionPeriod?: Duration;
}

/**
 * A queue with its DLQ, both secure by default: SSE (SQS-managed keys), a policy that denies
 * non-TLS access, redrive after `maxReceiveCount` receives, 7 days' retention (14 in the DLQ).
 */
export function secureQueue(scope: Construct, id: string, props: SecureQueueProps = {}): { queue: sqs.Queue; deadLetterQueue: sqs.Queue } {
  const retentionPeriod = props.retentionPeriod ?? Duration.seconds(QUEUE_SETTINGS.tenant.retentionSeconds);
  const deadLetterQueue = new sqs.Queue(scope, `${id}Dlq`, {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod: Duration.seconds(QUEUE_SETTINGS.dlqRetentionSeconds),
    removalPolicy: RemovalPolicy.DESTROY,
  });
  const queue = new sqs.Queue(scope, id, {
    encryption: sqs.QueueEncryption.SQS_MANAGED,
    enforceSSL: true,
    retentionPeriod,
    visibilityTimeout: props.visibilityTimeout ?? Duration.seconds(QUEUE_SETTINGS.tenant.visibilityTimeoutSeconds),
    deadLetterQueue: { queue: deadLetterQueue, maxReceiveCount: props.maxReceiveCount ?? QUEUE_SETTINGS.tenant.maxReceiveCount },
    removalPolicy: RemovalPolicy.DESTROY,
  });
  return { queue, deadLetterQueue };
}
