/**
 * The README's CDK examples, type-checked (test/client/docs.test.ts checks that each README
 * TypeScript block appears here or in client-usage.ts, line for line).
 */
import { App, Stack, type StackProps } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { Construct } from 'constructs';
import { DyneinScheduler } from '../lib/dyneinScheduler.js';
import { DyneinTenant } from '../lib/tenant.js';

const role = (scope: Construct, id: string) => new iam.Role(scope, id, { assumedBy: new iam.AccountRootPrincipal() });

/** The scheduler's own stack, with a tenant. */
export class SchedulerStack extends Stack {
  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);
    const alarmTopic = new sns.Topic(this, 'Alarms', { enforceSSL: true });
    const [billingApiRole, billingWorkerRole, opsRole] = [role(this, 'Api'), role(this, 'Worker'), role(this, 'Ops')];

    const scheduler = new DyneinScheduler(this, 'Dynein', { alarmTopic });
    const billing = scheduler.addTenant('billing', { maxReceiveCount: 5 });
    billing.grantSchedule(billingApiRole);   // execute-api:Invoke on billing's four routes ($default stage) only
    billing.grantConsume(billingWorkerRole); // sqs:ReceiveMessage, DeleteMessage, ChangeMessageVisibility on its queue only
    billing.grantRedrive(opsRole);           // move its DLQ back (StartMessageMoveTask), and send to its queue
  }
}

/** A team's own stack, attaching its tenant to a scheduler deployed elsewhere. */
export class PaymentsStack extends Stack {
  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);
    const paymentsService = { role: role(this, 'Service') };
    const paymentsWorker = { role: role(this, 'Worker') };

    const scheduler = DyneinScheduler.fromAttributes({
      tableName: 'DyneinServerless-DyneinTable465CC353-ABC123',
      tableArn: 'arn:aws:dynamodb:eu-west-1:123456789012:table/DyneinServerless-DyneinTable465CC353-ABC123',
      httpApiId: 'a1b2c3d4e5',
      senderRoleArns: ['arn:aws:iam::123456789012:role/DyneinServerless-DyneinSubmitRole', 'arn:aws:iam::123456789012:role/DyneinServerless-DyneinDispatchRole'],
    });
    const payments = new DyneinTenant(this, 'Payments', { scheduler, tenantName: 'payments' });
    payments.grantSchedule(paymentsService.role);
    payments.grantConsume(paymentsWorker.role, { deadLetter: true });
  }
}

export function buildExampleApp(): App {
  const app = new App();
  new SchedulerStack(app, 'Scheduler');
  new PaymentsStack(app, 'Payments');
  return app;
}
