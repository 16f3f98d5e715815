/**
 * One app, two stacks: the scheduler in one, a team's tenant (queue, DLQ, registration, grants to
 * the team's own worker Lambda and roles) in another. The tenant stack depends on the scheduler
 * stack (it reads the table, API and sender roles through exports), never the other way round:
 * the grants change only the grantees, so each stack deploys on its own, in that order.
 *
 *   npx cdk deploy --app 'node --import tsx examples/cdk-two-stacks.ts' --all
 *   (or, compiled: node dist/examples/cdk-two-stacks.js)
 */
import { App, Duration, Stack, Validations, type StackProps } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { Construct } from 'constructs';
import { DyneinScheduler, DyneinTenant, type IDyneinScheduler } from 'dynein-serverless/cdk';

/** The platform team's stack: the scheduler, its alarms, no tenant of its own. */
export class SchedulerStack extends Stack {
  readonly scheduler: DyneinScheduler;

  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);
    const alarmTopic = new sns.Topic(this, 'Alarms', { enforceSSL: true });
    Validations.of(alarmTopic).acknowledge({
      id: 'AwsSolutions-SNS2',
      reason:
        'Alarm notifications carry no job data, and CloudWatch alarms cannot publish to a topic encrypted with the AWS managed SNS key.',
    });
    this.scheduler = new DyneinScheduler(this, 'Dynein', { alarmTopic });
  }
}

export interface PaymentsStackProps extends StackProps {
  /** The scheduler: the construct of another stack of this app, or `DyneinScheduler.fromAttributes(...)`. */
  readonly scheduler: IDyneinScheduler;
  /** The export holding the scheduler's API id (how cdk-nag names it in the grant's resource). */
  readonly apiExportName: string;
}

/** The payments team's stack: its tenant, the Lambda that consumes it, the roles that schedule and redrive. */
export class PaymentsStack extends Stack {
  readonly tenant: DyneinTenant;

  constructor(scope: Construct, id: string, props: PaymentsStackProps) {
    super(scope, id, props);
    this.tenant = new DyneinTenant(this, 'Payments', { scheduler: props.scheduler, tenantName: 'payments' });

    // The service that schedules payments jobs (through the API, SigV4-signed).
    const service = new iam.Role(this, 'ServiceRole', { assumedBy: new iam.ServicePrincipal('ecs-tasks.amazonaws.com') });
    this.tenant.grantSchedule(service);

    // The worker: a Lambda consuming the tenant queue (partial batch failures).
    const workerLogs = new logs.LogGroup(this, 'WorkerLogs', { retention: logs.RetentionDays.ONE_MONTH });
    const workerRole = new iam.Role(this, 'WorkerRole', { assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com') });
    workerRole.addToPolicy(
      new iam.PolicyStatement({ actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [workerLogs.logGroupArn] }),
    );
    const worker = new lambda.Function(this, 'Worker', {
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      handler: 'index.handler',
      code: lambda.Code.fromInline('exports.handler = async (event) => ({ batchItemFailures: [] });'),
      timeout: Duration.seconds(30),
      role: workerRole,
      logGroup: workerLogs,
    });
    this.tenant.grantConsume(worker, { deadLetter: true });
    worker.addEventSource(new SqsEventSource(this.tenant.queue, { batchSize: 10, reportBatchItemFailures: true }));

    // The on-call role that moves the DLQ back once the worker is fixed.
    const ops = new iam.Role(this, 'OpsRole', { assumedBy: new iam.AccountRootPrincipal() });
    this.tenant.grantRedrive(ops);

    // cdk-nag: grantSchedule's only wildcards are the job id (GET and DELETE .../jobs/*), the
    // schedule name (PUT, GET, DELETE .../schedules/*, POST .../schedules/<name>/pause and /resume)
    // the workflow id (GET and DELETE .../workflows/*) and the operation id (GET .../operations/*).
    for (const route of [
      'GET/v1/tenants/payments/jobs/*',
      'DELETE/v1/tenants/payments/jobs/*',
      'PUT/v1/tenants/payments/schedules/*',
      'GET/v1/tenants/payments/schedules/*',
      'DELETE/v1/tenants/payments/schedules/*',
      'POST/v1/tenants/payments/schedules/*/pause',
      'POST/v1/tenants/payments/schedules/*/resume',
      'GET/v1/tenants/payments/workflows/*',
      'DELETE/v1/tenants/payments/workflows/*',
      'GET/v1/tenants/payments/operations/*',
    ]) {
      Validations.of(service).acknowledge({
        id: `AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:execute-api:<AWS::Region>:<AWS::AccountId>:${props.apiExportName}/$default/${route}]`,
        reason:
          'The job id, the schedule name, the workflow id and the operation id are the only wildcards: the service may manage any job, recurring schedule, workflow and bulk cancel of its own tenant, nothing else.',
      });
    }
  }
}

const app = new App();
const platform = new SchedulerStack(app, 'DyneinScheduler');
// The API id under a fixed export name (the other attributes are exported by CDK as they are used).
const apiExportName = 'DyneinScheduler-HttpApiId';
const httpApiId = platform.exportValue(platform.scheduler.httpApi.apiId, { name: apiExportName });
new PaymentsStack(app, 'PaymentsTeam', {
  scheduler: DyneinScheduler.fromAttributes({ ...platform.scheduler.attributes, httpApiId }),
  apiExportName,
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
