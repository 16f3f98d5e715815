import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { Construct } from 'constructs';
import { DyneinScheduler, type DyneinSchedulerProps } from './dyneinScheduler.js';

export interface DyneinStackProps extends StackProps {
  /** Props of the scheduler. @default - the DyneinScheduler defaults */
  readonly scheduler?: DyneinSchedulerProps;
  /** Tenants created with the scheduler (each its queue, DLQ, registration and DLQ alarm). @default - none */
  readonly tenants?: readonly string[];
  /** Adds the `demo` tenant (for trying the stack out). @default false */
  readonly demoTenant?: boolean;
  /** SNS topic for every alarm, by ARN (when `scheduler.alarmTopic` is not given). @default - alarms without actions */
  readonly alarmTopicArn?: string;
}

/**
 * The deployable app's stack (bin/app.ts): a scheduler, the tenants it is given, and the outputs
 * clients and tenant stacks need. With no tenant it still deploys: teams add theirs from their own
 * stacks with `DyneinTenant` and the `SchedulerAttributes` outputs.
 */
export class DyneinStack extends Stack {
  readonly scheduler: DyneinScheduler;

  constructor(scope: Construct, id: string, props: DyneinStackProps = {}) {
    super(scope, id, props);
    const alarmTopic =
      props.scheduler?.alarmTopic ?? (props.alarmTopicArn ? sns.Topic.fromTopicArn(this, 'AlarmTopic', props.alarmTopicArn) : undefined);
    this.scheduler = new DyneinScheduler(this, 'Dynein', { ...props.scheduler, ...(alarmTopic ? { alarmTopic } : {}) });
    const names = [...(props.demoTenant ? ['demo'] : []), ...(props.tenants ?? []).filter((n) => !(props.demoTenant && n === 'demo'))];
    for (const name of names) {
      const tenant = this.scheduler.addTenant(name);
      new CfnOutput(this, `Tenant-${name}-QueueUrl`, { value: tenant.queue.queueUrl, description: `Queue of tenant ${name}` });
      new CfnOutput(this, `Tenant-${name}-DlqUrl`, { value: tenant.deadLetterQueue.queueUrl, description: `DLQ of tenant ${name}` });
    }
    const a = this.scheduler.attributes;
    new CfnOutput(this, 'ApiUrl', { value: this.scheduler.url, description: 'Dynein API endpoint (SigV4, service execute-api)' });
    new CfnOutput(this, 'TableName', { value: a.tableName, description: 'For DyneinScheduler.fromAttributes in tenant stacks' });
    new CfnOutput(this, 'TableArn', { value: a.tableArn, description: 'For DyneinScheduler.fromAttributes in tenant stacks' });
    new CfnOutput(this, 'HttpApiId', { value: a.httpApiId, description: 'For DyneinScheduler.fromAttributes in tenant stacks' });
    new CfnOutput(this, 'SenderRoleArns', {
      value: a.senderRoleArns.join(','),
      description: 'For DyneinScheduler.fromAttributes in tenant stacks (comma-separated)',
    });
    new CfnOutput(this, 'TenantQueuePrefix', {
      value: a.tenantQueuePrefix,
      description: 'For DyneinScheduler.fromAttributes in tenant stacks',
    });
    new CfnOutput(this, 'RegistrationServiceToken', {
      value: a.registrationServiceToken,
      description: 'For DyneinScheduler.fromAttributes in tenant stacks (the registration function)',
    });
    new CfnOutput(this, 'DashboardName', { value: this.scheduler.monitoring.dashboard.dashboardName });
    new CfnOutput(this, 'ScheduleGroupName', {
      value: this.scheduler.scheduleGroupName,
      description: 'EventBridge Scheduler group holding the clocks of the recurring schedules',
    });
    new CfnOutput(this, 'SchedulerDlqUrl', {
      value: this.scheduler.schedulerDeadLetterQueue.queueUrl,
      description: 'Firings EventBridge Scheduler could not deliver (docs/operating.md, "Failed firings")',
    });
  }
}
