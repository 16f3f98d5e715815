/**
 * The README's CDK examples as consumer code (test/client/docs.test.ts checks that each README
 * TypeScript block appears in examples/, line for line), in a runnable app:
 *
 *   npx tsc && node dist/examples/cdk-usage.js     (or: node --import tsx examples/cdk-usage.ts)
 *
 * The scheduler stack with a tenant of its own, and a team's stack attaching its tenant to a
 * scheduler deployed elsewhere (from that deployment's outputs).
 */
import { App, Stack, Validations, type CfnElement, type StackProps } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { Construct } from 'constructs';
import { DyneinScheduler, DyneinTenant } from 'dynein-serverless/cdk';

const role = (scope: Construct, id: string) => new iam.Role(scope, id, { assumedBy: new iam.AccountRootPrincipal() });

/**
 * cdk-nag: grantSchedule's only wildcards are the job id (`GET` and `DELETE .../jobs/*`), the
 * schedule name (`PUT`, `GET`, `DELETE .../schedules/*`, `POST .../schedules/<name>/pause|resume`)
 * the workflow id (`GET` and `DELETE .../workflows/*`) and the operation id (`GET .../operations/*`);
 * `api` as cdk-nag prints it.
 */
function acknowledgeJobIdWildcard(grantee: iam.IRole, api: string, tenant: string): void {
  const routes = [
    'GET/v1/tenants/TENANT/jobs/*',
    'DELETE/v1/tenants/TENANT/jobs/*',
    'PUT/v1/tenants/TENANT/schedules/*',
    'GET/v1/tenants/TENANT/schedules/*',
    'DELETE/v1/tenants/TENANT/schedules/*',
    'POST/v1/tenants/TENANT/schedules/*/pause',
    'POST/v1/tenants/TENANT/schedules/*/resume',
    'GET/v1/tenants/TENANT/workflows/*',
    'DELETE/v1/tenants/TENANT/workflows/*',
    'GET/v1/tenants/TENANT/operations/*',
  ];
  for (const route of routes) {
    Validations.of(grantee).acknowledge({
      id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:${api}/$default/${route.replace('TENANT', tenant)}]`,
      reason:
        'The job id, the schedule name, the workflow id and the operation id are the only wildcards: the role may manage any job, recurring schedule, workflow and bulk cancel of its own tenant, nothing else.',
    });
  }
}

/** The scheduler's own stack, with a tenant. */
export class SchedulerStack extends Stack {
  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);
    const alarmTopic = new sns.Topic(this, 'Alarms', { enforceSSL: true });
    Validations.of(alarmTopic).acknowledge({
      id: 'AwsSolutions-SNS2',
      reason:
        'Alarm notifications carry no job data, and CloudWatch alarms cannot publish to a topic encrypted with the AWS managed SNS key.',
    });
    const [billingApiRole, billingWorkerRole, opsRole] = [role(this, 'Api'), role(this, 'Worker'), role(this, 'Ops')];

    const scheduler = new DyneinScheduler(this, 'Dynein', { alarmTopic });
    const billing = scheduler.addTenant('billing', { maxReceiveCount: 5 });
    billing.grantSchedule(billingApiRole); // execute-api:Invoke on billing's job and schedule routes ($default stage) only
    billing.grantConsume(billingWorkerRole); // sqs:ReceiveMessage, DeleteMessage, ChangeMessageVisibility, GetQueueAttributes on its queue only
    billing.grantRedrive(opsRole); // move its DLQ back (StartMessageMoveTask), and send to its queue
    scheduler.grantInboundRedrive(opsRole); // move the inbound DLQ back after a fix
    acknowledgeJobIdWildcard(billingApiRole, `<${this.getLogicalId(scheduler.httpApi.node.defaultChild as CfnElement)}>`, 'billing');
  }
}

/** A team's own stack, attaching its tenant to a scheduler deployed elsewhere. */
export class PaymentsStack extends Stack {
  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);
    const paymentsService = { role: role(this, 'Service') };
    const paymentsWorker = { role: role(this, 'Worker') };

    // The scheduler stack's outputs (TableName, TableArn, HttpApiId, SenderRoleArns, TenantQueuePrefix, RegistrationServiceToken):
    const scheduler = DyneinScheduler.fromAttributes({
      tableName: 'DyneinServerless-DyneinTable465CC353-ABC123',
      tableArn: 'arn:aws:dynamodb:eu-west-1:123456789012:table/DyneinServerless-DyneinTable465CC353-ABC123',
      httpApiId: 'a1b2c3d4e5',
      senderRoleArns: [
        'arn:aws:iam::123456789012:role/DyneinServerless-DyneinSubmitRole',
        'arn:aws:iam::123456789012:role/DyneinServerless-DyneinDispatchRole',
      ],
      tenantQueuePrefix: 'DyneinServerless-Dynein',
      registrationServiceToken: 'arn:aws:lambda:eu-west-1:123456789012:function:DyneinServerless-DyneinRegister',
    });
    const payments = new DyneinTenant(this, 'Payments', { scheduler, tenantName: 'payments' });
    payments.grantSchedule(paymentsService.role);
    payments.grantConsume(paymentsWorker.role, { deadLetter: true });
    acknowledgeJobIdWildcard(paymentsService.role, 'a1b2c3d4e5', 'payments');
  }
}

const app = new App();
new SchedulerStack(app, 'Scheduler');
new PaymentsStack(app, 'Payments');
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
