import { CfnOutput, Stack, type StackProps } from 'aws-cdk-lib';
import type { Construct } from 'constructs';
import { DyneinScheduler, type DyneinSchedulerProps } from './dyneinScheduler.js';

export interface DyneinStackProps extends StackProps {
  readonly scheduler?: DyneinSchedulerProps;
  /** Tenants to create with the scheduler. @default ['demo', 'billing'] */
  readonly tenants?: readonly string[];
}

/** The deployable app's stack: a scheduler and its example tenants, with the outputs clients need. */
export class DyneinStack extends Stack {
  readonly scheduler: DyneinScheduler;

  constructor(scope: Construct, id: string, props: DyneinStackProps = {}) {
    super(scope, id, props);
    this.scheduler = new DyneinScheduler(this, 'Dynein', props.scheduler);
    for (const name of props.tenants ?? ['demo', 'billing']) {
      const tenant = this.scheduler.addTenant(name);
      new CfnOutput(this, `Tenant-${name}-QueueUrl`, { value: tenant.queue.queueUrl, description: `Queue of tenant ${name}` });
      new CfnOutput(this, `Tenant-${name}-DlqUrl`, { value: tenant.deadLetterQueue.queueUrl, description: `DLQ of tenant ${name}` });
    }
    new CfnOutput(this, 'ApiUrl', { value: this.scheduler.url, description: 'Dynein API endpoint (SigV4, service execute-api)' });
    new CfnOutput(this, 'TableName', { value: this.scheduler.table.tableName });
    new CfnOutput(this, 'TableArn', { value: this.scheduler.table.tableArn });
    new CfnOutput(this, 'HttpApiId', { value: this.scheduler.httpApi.apiId });
    new CfnOutput(this, 'SenderRoleArns', { value: this.scheduler.attributes.senderRoleArns.join(','), description: 'For DyneinScheduler.fromAttributes in tenant stacks' });
    new CfnOutput(this, 'DashboardName', { value: this.scheduler.monitoring.dashboard.dashboardName });
  }
}
