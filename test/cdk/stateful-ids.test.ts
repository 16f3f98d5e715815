/**
 * The logical ids of every stateful resource: a refactoring that moves one of these constructs
 * (another id or parent) makes CloudFormation replace it on the next deploy, which deletes the
 * table's jobs, a queue's messages or the job-id key. Each list here is exhaustive: a new stateful
 * resource must be added, and a changed id fails until it is put back (or the change is a
 * migration documented in CHANGELOG.md).
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { DyneinStack } from '../../lib/stack.js';
import { DyneinTenant } from '../../lib/tenant.js';
import { fastApp } from './support.js';

/** Resource types that hold data a replacement would lose (or, for the schedule group, the schedules in it). */
const STATEFUL = new Set([
  'AWS::DynamoDB::GlobalTable',
  'AWS::DynamoDB::Table',
  'AWS::SQS::Queue',
  'AWS::SecretsManager::Secret',
  'AWS::Scheduler::ScheduleGroup',
  'AWS::KMS::Key',
  'AWS::S3::Bucket',
]);

/** lib/stack.ts's, with the demo tenant. */
const APP_IDS = {
  DyneinInboundDlq60F81B04: 'AWS::SQS::Queue',
  DyneinInboundE4056B4B: 'AWS::SQS::Queue',
  DyneinJobIdKey703FAC97: 'AWS::SecretsManager::Secret',
  DyneinScheduleGroup7A096536: 'AWS::Scheduler::ScheduleGroup',
  DyneinSchedulerDlqB45E1D12: 'AWS::SQS::Queue',
  DyneinTable465CC353: 'AWS::DynamoDB::GlobalTable',
  DyneinTenantdemoQueue54E137BC: 'AWS::SQS::Queue',
  DyneinTenantdemoQueueDlqF919881C: 'AWS::SQS::Queue',
};

function statefulIds(stack: Stack): Record<string, string> {
  const resources = Template.fromStack(stack).toJSON().Resources as Record<string, { Type: string }>;
  return Object.fromEntries(
    Object.entries(resources)
      .filter(([, r]) => STATEFUL.has(r.Type))
      .map(([id, r]) => [id, r.Type] as const)
      .sort(([a], [b]) => a.localeCompare(b)),
  );
}

describe('stateful resources keep their logical ids', () => {
  it('in the deployable app (lib/stack.ts) with a tenant', () => {
    const stack = new DyneinStack(fastApp(), 'Dynein', { demoTenant: true });
    expect(statefulIds(stack)).toEqual(APP_IDS);
  });

  it('whatever the props: cells, groups, shards, throttles and history change none of them', () => {
    const stack = new DyneinStack(fastApp(), 'Dynein', {
      demoTenant: true,
      scheduler: { cells: 3, groupCount: 6, shardCount: 96, throttle: { rateLimit: 50, burstLimit: 120 } },
    });
    stack.scheduler.addTenant('billing', { history: {}, maxReceiveCount: 3 });
    expect(statefulIds(stack)).toEqual({
      ...APP_IDS,
      DyneinTenantbillingQueue82A0AE36: 'AWS::SQS::Queue',
      DyneinTenantbillingQueueDlqA0F82768: 'AWS::SQS::Queue',
    });
  });

  it('for a tenant provisioned from its own stack', () => {
    const app = fastApp();
    const scheduler = new DyneinScheduler(new Stack(app, 'Platform'), 'Dynein');
    const team = new Stack(app, 'Team');
    new DyneinTenant(team, 'Payments', { scheduler: DyneinScheduler.fromAttributes(scheduler.attributes), tenantName: 'payments' });
    expect(statefulIds(team)).toEqual({
      PaymentsQueueC485226B: 'AWS::SQS::Queue',
      PaymentsQueueDlq29F8E192: 'AWS::SQS::Queue',
    });
  });
});
