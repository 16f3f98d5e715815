import { ArnFormat, Duration, Lazy, Stack, Validations } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import * as cr from 'aws-cdk-lib/custom-resources';
import { Construct } from 'constructs';
import { keys } from '../adapters/dynamoJobStore.js';
import { TENANT_PATTERN } from '../core/jobId.js';
import { secureQueue } from './queues.js';

/**
 * What a tenant needs to know of its scheduler, to attach from another stack of the same account
 * and region (queue policies, registration and grants assume one account).
 */
export interface SchedulerAttributes {
  /** The scheduler table (the tenant registry lives in it). */
  readonly tableName: string;
  readonly tableArn: string;
  /** The HTTP API's id, for `execute-api:Invoke` grants. */
  readonly httpApiId: string;
  /** Roles of the functions that send to tenant queues (submit and dispatch); nobody else may. */
  readonly senderRoleArns: readonly string[];
  /** Topic for the tenant's DLQ alarm. @default - no alarm action */
  readonly alarmTopicArn?: string;
}

/** A scheduler a tenant can attach to: a `DyneinScheduler`, or one imported by its attributes. */
export interface IDyneinScheduler {
  readonly attributes: SchedulerAttributes;
}

export interface DyneinTenantProps {
  /** The scheduler the tenant's jobs go through. */
  readonly scheduler: IDyneinScheduler;
  /** Tenant name: 1 to 40 lowercase letters, digits or '-', starting with a letter or digit. */
  readonly tenantName: string;
  /** Receives before a job message moves to the DLQ. @default 5 */
  readonly maxReceiveCount?: number;
  /** Visibility timeout of the tenant queue (workers extend it while they run). @default Duration.seconds(30) */
  readonly visibilityTimeout?: Duration;
  /** Retention of the queue and DLQ. @default Duration.days(14) */
  readonly retentionPeriod?: Duration;
}

/**
 * A team's destination queue and DLQ (SSE, TLS only, redrive after 5 receives), registered
 * with the scheduler, with grants to schedule and consume and an alarm on a non-empty DLQ.
 * Only the scheduler's functions (and principals given {@link grantRedrive}) may send to the
 * queue: its policy denies `sqs:SendMessage` to everyone else.
 *
 * @example
 * // In the team's own stack, against a scheduler deployed elsewhere:
 * const scheduler = DyneinScheduler.fromAttributes({ tableName, tableArn, httpApiId, senderRoleArns });
 * const payments = new DyneinTenant(this, 'Payments', { scheduler, tenantName: 'payments' });
 * payments.grantSchedule(apiRole);
 * payments.grantConsume(workerRole);
 */
export class DyneinTenant extends Construct {
  readonly tenantName: string;
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly dlqAlarm: cloudwatch.Alarm;
  readonly #senders: string[];
  readonly #scheduler: IDyneinScheduler;

  constructor(scope: Construct, id: string, props: DyneinTenantProps) {
    super(scope, id);
    const problems: string[] = [];
    if (!TENANT_PATTERN.test(props.tenantName)) problems.push(`tenantName '${props.tenantName}' must match ${TENANT_PATTERN}`);
    const mrc = props.maxReceiveCount ?? 5;
    if (!Number.isInteger(mrc) || mrc < 1 || mrc > 1000) problems.push(`maxReceiveCount must be an integer from 1 to 1000, got ${mrc}`);
    if (props.scheduler.attributes.senderRoleArns.length === 0) problems.push('scheduler.attributes.senderRoleArns must name the submit and dispatch roles');
    if (problems.length > 0) throw new Error(`invalid DyneinTenant '${id}':\n- ${problems.join('\n- ')}`);

    this.tenantName = props.tenantName;
    this.#scheduler = props.scheduler;
    this.#senders = [...props.scheduler.attributes.senderRoleArns];
    ({ queue: this.queue, deadLetterQueue: this.deadLetterQueue } = secureQueue(this, 'Queue', {
      maxReceiveCount: mrc,
      visibilityTimeout: props.visibilityTimeout,
      retentionPeriod: props.retentionPeriod,
    }));

    // Only the scheduler's functions send: allow them, deny every other principal.
    this.queue.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'SchedulerSends',
        actions: ['sqs:SendMessage'],
        principals: [new iam.AnyPrincipal()],
        resources: [this.queue.queueArn],
        conditions: { ArnEquals: { 'aws:PrincipalArn': Lazy.list({ produce: () => this.#senders }) } },
      }),
    );
    this.queue.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'OnlySchedulerSends',
        effect: iam.Effect.DENY,
        actions: ['sqs:SendMessage'],
        principals: [new iam.AnyPrincipal()],
        resources: [this.queue.queueArn],
        conditions: { ArnNotEquals: { 'aws:PrincipalArn': Lazy.list({ produce: () => this.#senders }) } },
      }),
    );

    // Register the tenant in the scheduler's registry (one item in the scheduler table).
    const key = keys.tenant(props.tenantName);
    const item = { ...key, queueUrl: { S: this.queue.queueUrl }, dlqUrl: { S: this.deadLetterQueue.queueUrl } };
    const tableName = props.scheduler.attributes.tableName;
    new cr.AwsCustomResource(this, 'Registration', {
      onCreate: { service: 'DynamoDB', action: 'putItem', parameters: { TableName: tableName, Item: item }, physicalResourceId: cr.PhysicalResourceId.of(`dynein-tenant-${props.tenantName}`) },
      onUpdate: { service: 'DynamoDB', action: 'putItem', parameters: { TableName: tableName, Item: item }, physicalResourceId: cr.PhysicalResourceId.of(`dynein-tenant-${props.tenantName}`) },
      onDelete: { service: 'DynamoDB', action: 'deleteItem', parameters: { TableName: tableName, Key: key } },
      policy: cr.AwsCustomResourcePolicy.fromStatements([
        new iam.PolicyStatement({ actions: ['dynamodb:PutItem', 'dynamodb:DeleteItem'], resources: [props.scheduler.attributes.tableArn] }),
      ]),
      installLatestAwsSdk: false,
    });
    acknowledgeCustomResourceProvider(Stack.of(this));

    this.dlqAlarm = new cloudwatch.Alarm(this, 'DlqNotEmpty', {
      alarmDescription: `Dynein tenant '${props.tenantName}': jobs failed ${mrc} times and wait in the DLQ. Fix the worker, then redrive (dynein redrive --tenant ${props.tenantName}).`,
      metric: this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum' }),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (props.scheduler.attributes.alarmTopicArn) {
      this.dlqAlarm.addAlarmAction(new actions.SnsAction(sns.Topic.fromTopicArn(this, 'AlarmTopic', props.scheduler.attributes.alarmTopicArn)));
    }
  }

  /**
   * Lets `grantee` schedule, read and cancel this tenant's jobs: `execute-api:Invoke` on exactly
   * its four routes of the `$default` stage (`POST /v1/tenants/<name>/jobs`, `POST .../jobs/batch`,
   * `GET` and `DELETE .../jobs/*`), nothing else. The only wildcard is the job id; teams running
   * cdk-nag acknowledge `AwsSolutions-IAM5` for it on the grantee.
   */
  grantSchedule(grantee: iam.IGrantable): iam.Grant {
    const stack = Stack.of(this);
    const base = `/v1/tenants/${this.tenantName}/jobs`;
    const arn = (method: string, path: string) =>
      stack.formatArn({ service: 'execute-api', resource: this.#scheduler.attributes.httpApiId, resourceName: `$default/${method}${path}`, arnFormat: ArnFormat.SLASH_RESOURCE_NAME });
    return iam.Grant.addToPrincipal({
      grantee,
      actions: ['execute-api:Invoke'],
      resourceArns: [arn('POST', base), arn('POST', `${base}/batch`), arn('GET', `${base}/*`), arn('DELETE', `${base}/*`)],
    });
  }

  /**
   * Lets `grantee` consume the tenant queue: `sqs:ReceiveMessage`, `sqs:DeleteMessage`,
   * `sqs:ChangeMessageVisibility` on it only. With `deadLetter`, also `sqs:SendMessage` on the
   * DLQ, so a Worker can send a job that failed with `UnrecoverableError` there at once.
   */
  grantConsume(grantee: iam.IGrantable, opts: { readonly deadLetter?: boolean } = {}): iam.Grant {
    if (opts.deadLetter) this.deadLetterQueue.grant(grantee, 'sqs:SendMessage');
    return this.queue.grant(grantee, 'sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility');
  }

  /**
   * Lets `role` move DLQ messages back to the queue (`dynein redrive`): `sqs:StartMessageMoveTask`,
   * `sqs:ListMessageMoveTasks`, receive and delete on the DLQ, send on the queue (the queue policy
   * admits it as a sender).
   */
  grantRedrive(role: iam.IRole): iam.Grant {
    this.#senders.push(role.roleArn);
    this.deadLetterQueue.grant(role, 'sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:StartMessageMoveTask', 'sqs:ListMessageMoveTasks', 'sqs:GetQueueAttributes');
    return this.queue.grant(role, 'sqs:SendMessage', 'sqs:GetQueueAttributes');
  }

  /** Messages waiting in the tenant queue. */
  metricDepth(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.queue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum', ...props });
  }

  /** Age of the oldest message in the tenant queue (a slow or stopped worker). */
  metricOldestAge(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.queue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1), statistic: 'Maximum', ...props });
  }

  /** Messages in the tenant DLQ. */
  metricDlqDepth(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum', ...props });
  }
}

const acknowledged = new WeakSet<Stack>();

/** The AwsCustomResource provider is one function per stack; acknowledge its findings once there. */
function acknowledgeCustomResourceProvider(stack: Stack): void {
  const provider = stack.node.tryFindChild(`AWS${cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace(/-/g, '')}`);
  if (!provider || acknowledged.has(stack)) return;
  acknowledged.add(stack);
  Validations.of(provider).acknowledge({
    id: 'AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]',
    reason: 'The AwsCustomResource provider that writes tenant registrations uses AWSLambdaBasicExecutionRole for its own logs; its data access is one inline statement (PutItem/DeleteItem on the scheduler table).',
  });
  Validations.of(provider).acknowledge({
    id: 'AwsSolutions-L1',
    reason: 'The AwsCustomResource provider runtime is chosen by aws-cdk-lib and runs only at deploy time.',
  });
}
