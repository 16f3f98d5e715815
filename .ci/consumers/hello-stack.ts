// The stack of a `cdk init app --language typescript` project with Dynein added (.ci/consumer-check.sh, project (e)).
import * as cdk from 'aws-cdk-lib/core';
import * as iam from 'aws-cdk-lib/aws-iam';
import { Construct } from 'constructs';
import { DyneinScheduler, DyneinTenant } from 'dynein-serverless/cdk';

export class HelloStack extends cdk.Stack {
  constructor(scope: Construct, id: string, props?: cdk.StackProps) {
    super(scope, id, props);
    const scheduler = new DyneinScheduler(this, 'Dynein');
    const tenant = new DyneinTenant(this, 'Billing', { scheduler, tenantName: 'billing' });
    const service = new iam.Role(this, 'ServiceRole', { assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com') });
    tenant.grantSchedule(service);
  }
}
