import { createHash } from 'node:crypto';
import { type Stack, Token } from 'aws-cdk-lib';

/**
 * Physical names that tie a scheduler to its tenants in other stacks without references back:
 * tenant queues are `<prefix>-t-<tenant>` (the scheduler's senders may send to `<prefix>-t-*` by
 * their own IAM policy), DLQs `<prefix>-d-<tenant>`, and principals admitted as senders carry the
 * tag `dynein:<prefix>:sender:<tenant>` (`dynein:<prefix>:inbound-sender` for the inbound queue).
 */

/** Longest prefix: `<prefix>-d-<40-char tenant>` stays within SQS's 80 characters. */
export const MAX_PREFIX_LENGTH = 35;
const PREFIX = /^[A-Za-z0-9][A-Za-z0-9-]*$/;

/** Problems with a tenant queue prefix (none: a valid one). */
export function validatePrefix(prefix: string): string[] {
  if (Token.isUnresolved(prefix)) return ['must be a literal string (it names queues and IAM tags), not a token'];
  if (prefix.length > MAX_PREFIX_LENGTH || !PREFIX.test(prefix))
    return [`'${prefix}' must be 1 to ${MAX_PREFIX_LENGTH} letters, digits or '-', starting with a letter or digit`];
  return [];
}

/** The default prefix: `<stack name>-<construct id>`, shortened with a hash when too long. */
export function defaultPrefix(stackName: string, id: string): string {
  const full = `${stackName}-${id}`.replace(/[^A-Za-z0-9-]/g, '-').replace(/^-+/, '');
  if (full.length <= MAX_PREFIX_LENGTH && full.length > 0) return full;
  const hash = createHash('sha256').update(`${stackName}/${id}`).digest('hex').slice(0, 6);
  return `${full.slice(0, MAX_PREFIX_LENGTH - 7).replace(/-+$/, '')}-${hash}`;
}

export const tenantQueueName = (prefix: string, tenant: string) => `${prefix}-t-${tenant}`;
export const deadLetterQueueName = (prefix: string, tenant: string) => `${prefix}-d-${tenant}`;
/** The queue-name pattern the scheduler's senders may send to. */
export const tenantQueuePattern = (prefix: string) => `${prefix}-t-*`;
/** The DLQ-name pattern the scheduler's dlq function may read, redrive and delete in. */
export const deadLetterQueuePattern = (prefix: string) => `${prefix}-d-*`;
export const senderTagKey = (prefix: string, tenant: string) => `dynein:${prefix}:sender:${tenant}`;
export const inboundSenderTagKey = (prefix: string) => `dynein:${prefix}:inbound-sender`;
/**
 * The URL of the queue `name` in the stack's account and region, as CloudFormation gives a queue's
 * URL (`https://sqs.<region>.<domain>/<account>/<name>`); `name` may hold `{tenant}`.
 */
export const tenantQueueUrlTemplate = (stack: Stack, name: string) =>
  `https://sqs.${stack.region}.${stack.urlSuffix}/${stack.account}/${name}`;
