import { DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { SchedulerClient } from '@aws-sdk/client-scheduler';
import { SQSClient } from '@aws-sdk/client-sqs';
import { describe, expect, it } from 'vitest';
import { withoutSdkLogger } from '../../adapters/sdkClients.js';

const hasLogger = (c: { middlewareStack: { identify(): string[] } }) =>
  c.middlewareStack.identify().some((m) => m.startsWith('loggerMiddleware'));
const config = { region: 'us-east-1', credentials: { accessKeyId: 'x', secretAccessKey: 'x' } };

describe('withoutSdkLogger', () => {
  it.each([
    ['DynamoDB', () => new DynamoDBClient(config)],
    ['SQS', () => new SQSClient(config)],
    ['EventBridge Scheduler', () => new SchedulerClient(config)],
  ])('takes the logger middleware (which filters every input and output) out of a %s client', (_name, make) => {
    // The SDK still names it so: were it renamed, the removal would silently do nothing.
    expect(hasLogger(make())).toBe(true);
    const lean = withoutSdkLogger(make());
    expect(hasLogger(lean)).toBe(false);
    expect(lean.middlewareStack.identify().length).toBe(make().middlewareStack.identify().length - 1);
  });
});
