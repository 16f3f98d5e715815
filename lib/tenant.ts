import { ArnFormat, CustomResource, Duration, Lazy, RemovalPolicy, Stack, Tags, Token } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import type * as logs from 'aws-cdk-lib/aws-logs';
import * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import { Construct } from 'constructs';
import { METRICS_NAMESPACE, metricService, TENANT_METRICS, TENANT_PATTERN } from '../core/model/index.js';
import type { RegistrationProperties } from '../core/tenants/index.js';
import { DLQ_REDRIVE_ACTIONS, secureQueue } from './queues.js';
import { deadLetterQueueName, senderTagKey, tenantQueueName, validatePrefix } from './naming.js';

/**
 * What a tenant needs to know of its scheduler, to attach from another stack of the same account
 * and region (queue names, registration and grants assume one account). Every value points from
 * the tenant's stack to the scheduler's: nothing the tenant does changes the scheduler's stack.
 */
export interface SchedulerAttributes {
  /** The scheduler table (the tenant registry lives in it). */
  readonly tableName: string;
  readonly tableArn: string;
  /** The HTTP API's id, for `execute-api:Invoke` grants. */
  readonly httpApiId: string;
  /**
   * Roles of the functions that send to tenant queues (submit, dispatch, and dlq for redriven
   * messages); the queue policy denies every other sender.
   */
  readonly senderRoleArns: readonly string[];
  /**
   * Tenant queues are named `<prefix>-t-<tenant>` (DLQs `<prefix>-d-<tenant>`): the scheduler's
   * submit and dispatch roles may send to `<prefix>-t-*` by their own IAM policy.
   */
  readonly tenantQueuePrefix: string;
  /**
   * The scheduler's registration function (its ARN): the service token of every tenant's
   * registration custom resource. It writes only registry items naming the tenant's own queues;
   * the tenant's stack holds no principal that may write the scheduler table.
   */
  readonly registrationServiceToken: string;
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
  /** Tenant name: 1 to 40 lowercase letters, digits or '-', starting with a letter or digit. It belongs to one stack. */
  readonly tenantName: string;
  /** Receives before a job message moves to the DLQ (1 to 1000). @default 5 */
  readonly maxReceiveCount?: number;
  /** Visibility timeout of the tenant queue (workers extend it while they run). @default Duration.seconds(30) */
  readonly visibilityTimeout?: Duration;
  /** Retention of the queue (the DLQ keeps 14 days, the maximum). @default Duration.days(7) */
  readonly retentionPeriod?: Duration;
  /**
   * @deprecated Has no effect: the registration runs in the scheduler's registration function,
   * whose logs keep the scheduler's `logRetention`.
   */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Job history (docs/history.md): deliveries carry the `dynein-history` attribute, workers given
   * a client report outcomes, and each job keeps its latest outcome for `retention` (1 to 365 days).
   * @default - history off
   */
  readonly history?: { readonly retention?: Duration };
  /** The tenant's lateness p99 above this for 3 minutes raises its lateness alarm. @default Duration.seconds(2) */
  readonly latenessAlarmThreshold?: Duration;
  /**
   * The tenant keeps history (its workers report outcomes): the dashboard shows its failed jobs
   * (`JobsFailed`) and {@link DyneinTenant.failedJobsAlarm} is created. @default - true with `history`, else false
   */
  readonly monitorFailedJobs?: boolean;
  /**
   * The tenant paused with jobs held for this long raises {@link DyneinTenant.pausedAlarm}
   * (1 minute to 1 day). @default Duration.hours(1)
   */
  readonly pausedAlarmAfter?: Duration;
}

/**
 * A team's destination queue and DLQ (SSE, TLS only, redrive after 5 receives), registered with
 * the scheduler, with grants to schedule, consume and redrive, and an alarm on a non-empty DLQ.
 *
 * Only the scheduler's submit and dispatch roles send to the queue, allowed by their own IAM
 * policy (on the queue-name prefix), so a queue policy the team adds does not stop them; the
 * tenant's queue policy denies `sqs:SendMessage` to every other principal except those given
 * {@link grantRedrive} (tagged for it). Grants change only the grantee: a tenant in a team's stack
 * never makes the scheduler's stack depend on it.
 *
 * @example
 * // In the team's own stack, against a scheduler deployed elsewhere:
 * const scheduler = DyneinScheduler.fromAttributes({ tableName, tableArn, httpApiId, senderRoleArns, tenantQueuePrefix, registrationServiceToken });
 * const payments = new DyneinTenant(this, 'Payments', { scheduler, tenantName: 'payments' });
 * payments.grantSchedule(apiRole);
 * payments.grantConsume(workerRole);
 */
export class DyneinTenant extends Construct {
  readonly tenantName: string;
  readonly queue: sqs.Queue;
  readonly deadLetterQueue: sqs.Queue;
  readonly dlqAlarm: cloudwatch.Alarm;
  /** The tenant's dispatch lateness p99 above its threshold for 3 minutes (its jobs are sent late). */
  readonly latenessAlarm: cloudwatch.Alarm;
  /** The dispatcher could not send the tenant's jobs to its queue in 2 consecutive minutes (a denied send, a deleted queue, a KMS key). */
  readonly deliveryFailureAlarm: cloudwatch.Alarm;
  /** Jobs whose worker reported a failure, in 2 consecutive minutes (only with `monitorFailedJobs`). */
  readonly failedJobsAlarm?: cloudwatch.Alarm;
  /** Paused with jobs held (`TenantPaused`) for `pausedAlarmAfter` (an operator may have forgotten to resume it). */
  readonly pausedAlarm: cloudwatch.Alarm;
  /** Jobs put on hold (`JobsHeld`) in each of 15 consecutive minutes: the held backlog keeps growing. */
  readonly heldBacklogAlarm: cloudwatch.Alarm;
  /** Lateness p99 above this raises {@link latenessAlarm}. */
  readonly latenessAlarmThreshold: Duration;
  /** Whether the dashboard shows failed jobs (`monitorFailedJobs`). */
  readonly monitorsFailedJobs: boolean;
  /** The IAM principal tag ({@link grantRedrive} sets it to `true`) that lets a principal send to the queue. */
  readonly senderTagKey: string;
  readonly #scheduler: IDyneinScheduler;
  /** Imported roles given grantRedrive (no tag possible): listed in the queue policy by ARN. */
  readonly #extraSenders: string[] = [];
  readonly #queueName: string;
  readonly #dlqName: string;

  constructor(scope: Construct, id: string, props: DyneinTenantProps) {
    super(scope, id);
    const a = props.scheduler.attributes;
    const problems: string[] = [];
    if (!TENANT_PATTERN.test(props.tenantName)) problems.push(`tenantName '${props.tenantName}' must match ${TENANT_PATTERN}`);
    const mrc = props.maxReceiveCount ?? 5;
    if (!Number.isInteger(mrc) || mrc < 1 || mrc > 1000) problems.push(`maxReceiveCount must be an integer from 1 to 1000, got ${mrc}`);
    const historyMs = props.history ? (props.history.retention ?? Duration.days(7)).toMilliseconds() : undefined;
    if (historyMs !== undefined && (historyMs < 86_400_000 || historyMs > 365 * 86_400_000))
      problems.push(`history.retention must be from 1 to 365 days, got ${historyMs / 86_400_000} days`);
    const lat = props.latenessAlarmThreshold;
    if (lat !== undefined && !Token.isUnresolved(lat.toString()) && !(lat.toMilliseconds() > 0))
      problems.push('latenessAlarmThreshold must be positive');
    const pausedAfter = props.pausedAlarmAfter ?? Duration.hours(1);
    const pausedMinutes = Token.isUnresolved(pausedAfter.toString()) ? 60 : pausedAfter.toMinutes({ integral: false });
    if (!Number.isInteger(pausedMinutes) || pausedMinutes < 1 || pausedMinutes > 1440)
      problems.push(`pausedAlarmAfter must be whole minutes from 1 minute to 1 day, got ${pausedMinutes} minutes`);
    if (a.senderRoleArns.length === 0) problems.push('scheduler.attributes.senderRoleArns must name the submit and dispatch roles');
    if (!a.registrationServiceToken)
      problems.push(
        "scheduler.attributes.registrationServiceToken must be the scheduler's registration function ARN (output RegistrationServiceToken)",
      );
    problems.push(...validatePrefix(a.tenantQueuePrefix).map((p) => `scheduler.attributes.tenantQueuePrefix ${p}`));
    if (problems.length === 0) problems.push(...claimName(this, a.tableName, props.tenantName));
    if (problems.length > 0) throw new Error(`invalid DyneinTenant '${id}':\n- ${problems.join('\n- ')}`);

    this.tenantName = props.tenantName;
    this.#scheduler = props.scheduler;
    this.senderTagKey = senderTagKey(a.tenantQueuePrefix, props.tenantName);
    this.#queueName = tenantQueueName(a.tenantQueuePrefix, props.tenantName);
    this.#dlqName = deadLetterQueueName(a.tenantQueuePrefix, props.tenantName);
    ({ queue: this.queue, deadLetterQueue: this.deadLetterQueue } = secureQueue(this, 'Queue', {
      queueName: this.#queueName,
      deadLetterQueueName: this.#dlqName,
      maxReceiveCount: mrc,
      visibilityTimeout: props.visibilityTimeout,
      retentionPeriod: props.retentionPeriod,
    }));

    // Everyone but the scheduler's senders and principals tagged by grantRedrive is denied sending.
    // (Both conditions must hold for the deny: a missing tag counts as "not equal".)
    this.queue.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'OnlySchedulerSends',
        effect: iam.Effect.DENY,
        actions: ['sqs:SendMessage'],
        principals: [new iam.AnyPrincipal()],
        resources: [this.queue.queueArn],
        conditions: {
          ArnNotEquals: { 'aws:PrincipalArn': Lazy.list({ produce: () => [...a.senderRoleArns, ...this.#extraSenders] }) },
          StringNotEquals: { [`aws:PrincipalTag/${this.senderTagKey}`]: 'true' },
        },
      }),
    );

    // The registry item in the scheduler table, written by the scheduler's registration function,
    // which refuses a name another stack registered and queues that are not the tenant's own
    // (lambdas/register.ts). The tenant's stack holds no principal that may write the table.
    const properties: RegistrationProperties = {
      TableName: a.tableName,
      TenantName: props.tenantName,
      QueueUrl: this.queue.queueUrl,
      DlqUrl: this.deadLetterQueue.queueUrl,
      ...(historyMs !== undefined ? { HistoryTtlMs: String(historyMs) } : {}),
    };
    // A new logical id for the scheduler's service token (CloudFormation refuses a changed token):
    // a stack that registered through a function of its own writes the item anew, and the old
    // resource's removal leaves it in place (it removes only the item it wrote).
    new CustomResource(this, 'SchedulerRegistration', {
      serviceToken: a.registrationServiceToken,
      resourceType: 'Custom::DyneinTenantRegistration',
      properties,
      removalPolicy: RemovalPolicy.DESTROY,
    });

    this.dlqAlarm = new cloudwatch.Alarm(this, 'DlqNotEmpty', {
      alarmDescription: `Dynein tenant '${props.tenantName}': jobs failed ${mrc} times and wait in the DLQ. Fix the worker, then redrive (dynein redrive --tenant ${props.tenantName}).`,
      metric: this.metricDlqDepth(),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 1,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    const lateness = (this.latenessAlarmThreshold = props.latenessAlarmThreshold ?? Duration.seconds(2));
    this.latenessAlarm = new cloudwatch.Alarm(this, 'LatenessP99', {
      alarmDescription: `Dynein tenant '${props.tenantName}': dispatch lateness p99 above ${lateness.toMilliseconds()} ms for 3 minutes: its jobs reach the queue late (see the scheduler's dispatch alarms and docs/operating.md).`,
      metric: this.metricLateness({ statistic: 'p99' }),
      threshold: lateness.toMilliseconds(),
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 3,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    this.deliveryFailureAlarm = new cloudwatch.Alarm(this, 'DeliveryFailures', {
      alarmDescription: `Dynein tenant '${props.tenantName}': the dispatcher could not send jobs to the tenant queue in 2 consecutive minutes (retried: they stay in the table): a denied send (queue policy), a deleted queue, or its KMS key (docs/operating.md).`,
      metric: this.metricDeliveryFailures(),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 2,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    this.monitorsFailedJobs = props.monitorFailedJobs ?? props.history !== undefined;
    if (this.monitorsFailedJobs)
      this.failedJobsAlarm = new cloudwatch.Alarm(this, 'FailedJobs', {
        alarmDescription: `Dynein tenant '${props.tenantName}': workers reported failed jobs in 2 consecutive minutes (dynein list --state FAILED; docs/history.md).`,
        metric: this.metricJobsFailed(),
        threshold: 0,
        comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
        evaluationPeriods: 2,
        treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
      });
    // Tenant controls (docs/tenant-controls.md): dispatch writes TenantPaused each step while the
    // tenant is paused with jobs held, and JobsHeld as it holds them.
    this.pausedAlarm = new cloudwatch.Alarm(this, 'PausedTooLong', {
      alarmDescription: `Dynein tenant '${props.tenantName}': paused with jobs held for ${pausedMinutes} minutes: resume it when its consumer is fixed (dynein tenant resume ${props.tenantName}; docs/tenant-controls.md).`,
      metric: this.metricPaused(),
      threshold: 1,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
      evaluationPeriods: Math.min(1440, Math.max(1, Math.round(pausedMinutes))),
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    this.heldBacklogAlarm = new cloudwatch.Alarm(this, 'HeldBacklogGrowing', {
      alarmDescription: `Dynein tenant '${props.tenantName}': paused, and jobs falling due are held in each of 15 consecutive minutes: its held backlog keeps growing (dynein tenant show ${props.tenantName}; docs/tenant-controls.md).`,
      metric: this.metricJobsHeld(),
      threshold: 0,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      evaluationPeriods: 15,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (a.alarmTopicArn) this.addAlarmAction(new actions.SnsAction(sns.Topic.fromTopicArn(this, 'AlarmTopic', a.alarmTopicArn)));
  }

  /** The tenant's alarms: DLQ not empty, lateness p99, delivery failures, paused too long, held backlog growing, and failed jobs with `monitorFailedJobs`. */
  get alarms(): cloudwatch.Alarm[] {
    return [
      this.dlqAlarm,
      this.latenessAlarm,
      this.deliveryFailureAlarm,
      this.pausedAlarm,
      this.heldBacklogAlarm,
      ...(this.failedJobsAlarm ? [this.failedJobsAlarm] : []),
    ];
  }

  /**
   * Sends every alarm of the tenant ({@link alarms}) to `action`, e.g. the team's own topic:
   * `tenant.addAlarmAction(new SnsAction(topic))`. Only the tenant's stack changes.
   */
  addAlarmAction(...action: cloudwatch.IAlarmAction[]): void {
    for (const alarm of this.alarms) alarm.addAlarmAction(...action);
  }

  /**
   * Lets `grantee` look at and act on this tenant's dead-letter queue through the API:
   * `execute-api:Invoke` on exactly `GET /v1/tenants/<name>/dlq` (peek),
   * `POST /v1/tenants/<name>/dlq/redrive`, `GET /v1/tenants/<name>/dlq/redrive` (the move tasks'
   * progress), `POST /v1/tenants/<name>/dlq/delete`, `POST /v1/tenants/<name>/dlq/edit` (a dead
   * letter back with a new payload) and `GET /v1/tenants/<name>/dlq/audit` (the edits) of the
   * `$default` stage, nothing else (no wildcard). The scheduler's dlq function does the SQS work;
   * for direct SQS access use {@link grantRedrive}.
   */
  grantDeadLetters(grantee: iam.IGrantable): iam.Grant {
    const dlq = `/v1/tenants/${this.tenantName}/dlq`;
    return iam.Grant.addToPrincipal({
      grantee,
      actions: ['execute-api:Invoke'],
      resourceArns: [
        this.#routeArn('GET', dlq),
        this.#routeArn('POST', `${dlq}/redrive`),
        this.#routeArn('GET', `${dlq}/redrive`),
        this.#routeArn('POST', `${dlq}/delete`),
        this.#routeArn('POST', `${dlq}/edit`),
        this.#routeArn('GET', `${dlq}/audit`),
      ],
    });
  }

  #routeArn(method: string, path: string): string {
    return Stack.of(this).formatArn({
      service: 'execute-api',
      resource: this.#scheduler.attributes.httpApiId,
      resourceName: `$default/${method}${path}`,
      arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
    });
  }

  /** Jobs of this tenant accepted by submit (`Sum` per minute). */
  metricJobsScheduled(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#tenantMetric(TENANT_METRICS.scheduled, { statistic: 'Sum', ...props });
  }

  /** Jobs of this tenant sent to its queue by the dispatcher (`Sum` per minute); jobs due within the lookahead go straight from submit and are not counted. */
  metricJobsDelivered(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#tenantMetric(TENANT_METRICS.delivered, { statistic: 'Sum', ...props });
  }

  /** Lateness of this tenant's dispatched jobs, ms (due time to send; a sample of at most 100 per dispatch invocation); pass `statistic: 'p99'` etc. */
  metricLateness(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#tenantMetric(TENANT_METRICS.lateness, { statistic: 'p95', ...props });
  }

  /** Sends of this tenant's jobs to its queue that failed (retried), `Sum` per minute. */
  metricDeliveryFailures(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#tenantMetric(TENANT_METRICS.deliveryFailures, { statistic: 'Sum', ...props });
  }

  /** Jobs whose worker reported a failure (history on: docs/history.md), `Sum` per minute. */
  metricJobsFailed(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#tenantMetric(TENANT_METRICS.failed, { statistic: 'Sum', ...props });
  }

  /** Jobs of this tenant put in the hold lane because it was paused (`Sum` per minute). */
  metricJobsHeld(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#tenantMetric(TENANT_METRICS.held, { statistic: 'Sum', ...props });
  }

  /** Sends of this tenant's jobs put off by its `maxDeliveriesPerSecond` (`Sum` per minute; a job counts each time it waits). */
  metricDeliveriesDeferred(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#tenantMetric(TENANT_METRICS.deferred, { statistic: 'Sum', ...props });
  }

  /** 1 while the tenant is paused with jobs held (`Maximum` per minute; no data otherwise). */
  metricPaused(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#tenantMetric(TENANT_METRICS.paused, { statistic: 'Maximum', ...props });
  }

  /** Submit requests of this tenant refused by its `maxSubmitsPerSecond` (429 `Throttled`; `Sum` per minute). */
  metricSubmitsThrottled(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#tenantMetric(TENANT_METRICS.throttled, { statistic: 'Sum', ...props });
  }

  #tenantMetric(m: { readonly fn: string; readonly name: string }, props: cloudwatch.MetricOptions): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: METRICS_NAMESPACE,
      metricName: m.name,
      dimensionsMap: { service: metricService(m.fn), Tenant: this.tenantName },
      period: Duration.minutes(1),
      ...props,
    });
  }

  /**
   * Lets `grantee` schedule, read and cancel this tenant's jobs and manage its recurring schedules:
   * `execute-api:Invoke` on exactly its routes of the `$default` stage, nothing else. Jobs:
   * `POST /v1/tenants/<name>/jobs`, `GET .../jobs` (list), `POST .../jobs/batch`, `GET` and `DELETE .../jobs/*`,
   * `POST .../jobs/outcomes` and `.../jobs/heartbeats` (outcome reports and workers' heartbeats:
   * docs/history.md, docs/flow-control.md), `POST .../jobs/cancel`
   * and `GET .../operations/*` (bulk cancel: docs/flow-control.md).
   * Recurring schedules: `GET .../schedules` (list), `PUT`, `GET` and `DELETE .../schedules/*`,
   * `POST .../schedules/<schedule>/pause` and `.../resume` (the schedule name a wildcard).
   * Workflows: `POST .../workflows`, `GET` and `DELETE .../workflows/*` (docs/workflows.md). The only
   * wildcards are the job id, the schedule name, the workflow id and the operation id; teams running cdk-nag acknowledge `AwsSolutions-IAM5` for them on the grantee.
   */
  grantSchedule(grantee: iam.IGrantable): iam.Grant {
    const stack = Stack.of(this);
    const jobs = `/v1/tenants/${this.tenantName}/jobs`;
    const schedules = `/v1/tenants/${this.tenantName}/schedules`;
    const workflows = `/v1/tenants/${this.tenantName}/workflows`;
    const arn = (method: string, path: string) =>
      stack.formatArn({
        service: 'execute-api',
        resource: this.#scheduler.attributes.httpApiId,
        resourceName: `$default/${method}${path}`,
        arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
      });
    return iam.Grant.addToPrincipal({
      grantee,
      actions: ['execute-api:Invoke'],
      resourceArns: [
        arn('POST', jobs),
        arn('GET', jobs),
        arn('POST', `${jobs}/batch`),
        arn('POST', `${jobs}/outcomes`),
        arn('POST', `${jobs}/heartbeats`),
        arn('GET', `${jobs}/*`),
        arn('DELETE', `${jobs}/*`),
        arn('POST', `${jobs}/cancel`),
        arn('GET', `/v1/tenants/${this.tenantName}/operations/*`),
        arn('GET', schedules),
        arn('PUT', `${schedules}/*`),
        arn('GET', `${schedules}/*`),
        arn('DELETE', `${schedules}/*`),
        arn('POST', `${schedules}/*/pause`),
        arn('POST', `${schedules}/*/resume`),
        arn('POST', workflows),
        arn('GET', `${workflows}/*`),
        arn('DELETE', `${workflows}/*`),
      ],
    });
  }

  /**
   * Lets `grantee` report job outcomes (a Worker's or Lambda consumer's role, history on:
   * docs/history.md) and send heartbeats (a running job's stop requested: docs/flow-control.md):
   * `execute-api:Invoke` on `POST /v1/tenants/<name>/jobs/outcomes` and `.../jobs/heartbeats` only.
   */
  grantReportOutcomes(grantee: iam.IGrantable): iam.Grant {
    const stack = Stack.of(this);
    return iam.Grant.addToPrincipal({
      grantee,
      actions: ['execute-api:Invoke'],
      resourceArns: ['outcomes', 'heartbeats'].map((route) =>
        stack.formatArn({
          service: 'execute-api',
          resource: this.#scheduler.attributes.httpApiId,
          resourceName: `$default/POST/v1/tenants/${this.tenantName}/jobs/${route}`,
          arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
        }),
      ),
    });
  }

  /**
   * Lets `grantee` consume the tenant queue: `sqs:ReceiveMessage`, `sqs:DeleteMessage`,
   * `sqs:ChangeMessageVisibility`, `sqs:GetQueueAttributes` on it. With `deadLetter`, also
   * `sqs:SendMessage` on the DLQ, so a Worker can send a job that failed with
   * `UnrecoverableError` there at once. One grant covering both queues.
   */
  grantConsume(grantee: iam.IGrantable, opts: { readonly deadLetter?: boolean } = {}): iam.Grant {
    const grant = this.#grant(
      this.queue,
      grantee,
      'sqs:ReceiveMessage',
      'sqs:DeleteMessage',
      'sqs:ChangeMessageVisibility',
      'sqs:GetQueueAttributes',
    );
    return opts.deadLetter ? grant.combine(this.#grant(this.deadLetterQueue, grantee, 'sqs:SendMessage')) : grant;
  }

  /**
   * Lets `grantee` move DLQ messages back to the queue (`dynein redrive`, console "Start DLQ
   * redrive"): `sqs:StartMessageMoveTask`, `sqs:ListMessageMoveTasks`, `sqs:CancelMessageMoveTask`,
   * `sqs:ReceiveMessage`, `sqs:DeleteMessage`, `sqs:ChangeMessageVisibility`,
   * `sqs:GetQueueAttributes` on the DLQ; `sqs:SendMessage`, `sqs:GetQueueAttributes` on the queue.
   * One grant covering both queues.
   *
   * The queue policy admits the grantee as a sender by its principal tag {@link senderTagKey} =
   * `true`, which this sets on a role defined in the app (`iam.Role`, a function's role): nothing
   * in the tenant's stack refers to the grantee's. An imported role is listed in the queue policy
   * by ARN instead.
   */
  grantRedrive(grantee: iam.IGrantable): iam.Grant {
    admitSender(grantee, this.senderTagKey, this.#extraSenders, this.queue, 'grantRedrive');
    const dlq = this.#grant(this.deadLetterQueue, grantee, ...DLQ_REDRIVE_ACTIONS);
    return dlq.combine(this.#grant(this.queue, grantee, 'sqs:SendMessage', 'sqs:GetQueueAttributes'));
  }

  /**
   * `queue.grant`, except for a grantee of another stack: its policy then names the queue by its
   * ARN built from the queue's fixed name (and the deploying account and region), so the grantee's
   * stack refers to no value of the tenant's stack, whichever way the stacks depend on each other.
   */
  #grant(queue: sqs.Queue, grantee: iam.IGrantable, ...actions: string[]): iam.Grant {
    const principal = grantee.grantPrincipal;
    if (!Construct.isConstruct(principal) || Stack.of(principal) === Stack.of(queue)) return queue.grant(grantee, ...actions);
    const arn = Stack.of(principal).formatArn({
      service: 'sqs',
      resource: queue === this.queue ? this.#queueName : this.#dlqName,
      arnFormat: ArnFormat.NO_RESOURCE_NAME,
    });
    return iam.Grant.addToPrincipal({ grantee, actions, resourceArns: [arn] });
  }

  /** Messages waiting in the tenant queue (`Maximum` per minute). */
  metricDepth(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.queue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum', ...props });
  }

  /** Age of the oldest message in the tenant queue, seconds (a slow or stopped worker). */
  metricOldestAge(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.queue.metricApproximateAgeOfOldestMessage({ period: Duration.minutes(1), statistic: 'Maximum', ...props });
  }

  /** Messages in the tenant DLQ (`Maximum` per minute). */
  metricDlqDepth(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.deadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: Duration.minutes(1), statistic: 'Maximum', ...props });
  }
}

/**
 * Lets the grantee's principal pass a queue policy's sender deny: tags a role defined in the app
 * with `tagKey = true` (the grant then lives entirely in the grantee's stack), or lists an
 * imported role's ARN in `extraSenders` when that adds no reference to another stack.
 */
export function admitSender(grantee: iam.IGrantable, tagKey: string, extraSenders: string[], queue: sqs.IQueue, method: string): void {
  const principal = grantee.grantPrincipal;
  if (iam.Role.isRole(principal)) {
    Tags.of(principal).add(tagKey, 'true');
    return;
  }
  const arn = (principal as Partial<iam.IRole>).roleArn;
  if (arn !== undefined && (!Token.isUnresolved(arn) || (Construct.isConstruct(principal) && Stack.of(principal) === Stack.of(queue)))) {
    extraSenders.push(arn);
    return;
  }
  throw new Error(
    `${method}: ${principal.toString()} is not an iam.Role of this app; tag the principal with '${tagKey}' = 'true' yourself and grant it the actions, or pass the role (iam.Role, or Role.fromRoleArn with a literal ARN).`,
  );
}

/** Tenant names registered per scheduler table within one stack: a name may appear once. */
const claimed = new WeakMap<Stack, Set<string>>();

function claimName(scope: Construct, tableName: string, tenantName: string): string[] {
  const stack = Stack.of(scope);
  const names = claimed.get(stack) ?? new Set<string>();
  claimed.set(stack, names);
  const key = `${tableName}\u0000${tenantName}`;
  if (names.has(key))
    return [
      `tenant '${tenantName}' is already defined in stack ${stack.stackName} for this scheduler: a tenant name belongs to one construct`,
    ];
  names.add(key);
  return [];
}
