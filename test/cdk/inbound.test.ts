import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { beforeAll, describe, expect, it } from 'vitest';
import { INBOUND_MESSAGE_LIFETIME_MS } from '../../core/model/tombstones.js';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { fastApp, getAtt, idOf, render, type Json } from './support.js';

type Resource = { Type: string; Properties: Record<string, Json> };

let t: Template;
let scheduler: DyneinScheduler;
let ops: iam.Role;

beforeAll(() => {
  const stack = new Stack(fastApp(), 'Inbound');
  scheduler = new DyneinScheduler(stack, 'Dynein');
  scheduler.addTenant('alpha');
  ops = new iam.Role(stack, 'Ops', { assumedBy: new iam.AccountRootPrincipal() });
  scheduler.grantInboundRedrive(ops);
  t = Template.fromStack(stack);
});

const resources = () => Object.entries(t.toJSON().Resources as Record<string, Resource>);

describe('inbound queue', () => {
  it('denies sqs:SendMessage to everyone but submit, the EventBridge Scheduler execution role and principals tagged by grantInboundRedrive', () => {
    const policy = resources().find(
      ([, r]) => r.Type === 'AWS::SQS::QueuePolicy' && render(r.Properties.Queues).includes(idOf(scheduler.inboundQueue)),
    );
    expect(policy).toBeDefined();
    const statements = (policy![1].Properties.PolicyDocument as { Statement: Record<string, Json>[] }).Statement;
    const deny = statements.filter((s) => s.Effect === 'Deny' && s.Sid === 'OnlySubmitSends');
    expect(deny).toHaveLength(1);
    expect(deny[0]!.Action).toBe('sqs:SendMessage');
    const condition = deny[0]!.Condition as Record<string, Record<string, Json>>;
    expect(Object.keys(condition).sort()).toEqual(['ArnNotEquals', 'StringNotEquals']);
    const principals = [condition.ArnNotEquals!['aws:PrincipalArn']].flat().map((v) => render(v as Json));
    expect(principals).toEqual([
      getAtt(scheduler.functions.submit.role!.node.defaultChild as never, 'Arn'),
      getAtt(scheduler.schedulerRole.node.defaultChild as never, 'Arn'),
    ]);
    expect(condition.StringNotEquals).toEqual({ [`aws:PrincipalTag/${scheduler.inboundSenderTagKey}`]: 'true' });
    // The redrive role carries the tag; the scheduler's stack names no ARN of it.
    const opsRole = resources().find(([id]) => id === idOf(ops))![1];
    expect(opsRole.Properties.Tags).toEqual([{ Key: scheduler.inboundSenderTagKey, Value: 'true' }]);
  });

  it('keeps DLQ messages longer than their source queues', () => {
    const queues = resources().filter(([, r]) => r.Type === 'AWS::SQS::Queue');
    const byId = new Map(queues);
    let pairs = 0;
    for (const [, q] of queues) {
      const redrive = q.Properties.RedrivePolicy as { deadLetterTargetArn: Json } | undefined;
      if (!redrive) continue;
      const dlqId = render(redrive.deadLetterTargetArn).replace(/^\{GetAtt:|\.Arn\}$/g, '');
      const dlq = byId.get(dlqId)!;
      expect(Number(dlq.Properties.MessageRetentionPeriod)).toBeGreaterThan(Number(q.Properties.MessageRetentionPeriod));
      pairs++;
    }
    expect(pairs).toBe(2); // inbound and the tenant
  });

  it("keeps an inbound message no longer than a tombstone lasts: the queue's and its DLQ's retention are the core's", () => {
    const queues = new Map(resources().filter(([, r]) => r.Type === 'AWS::SQS::Queue'));
    const inbound = queues.get(idOf(scheduler.inboundQueue))!;
    const dlq = queues.get(idOf(scheduler.inboundDeadLetterQueue))!;
    const retentionMs = (r: Resource) => Number(r.Properties.MessageRetentionPeriod) * 1000;
    expect(retentionMs(inbound) + retentionMs(dlq)).toBe(INBOUND_MESSAGE_LIFETIME_MS);
  });
});
