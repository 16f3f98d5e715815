import { Duration } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import type * as sns from 'aws-cdk-lib/aws-sns';
import { Construct } from 'constructs';
import type * as lambda from 'aws-cdk-lib/aws-lambda';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import type * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { METRICS_NAMESPACE, metricService } from '../core/model/index.js';
import type { DyneinTenant } from './tenant.js';

/**
 * The EventBridge Scheduler metrics of a schedule group (namespace `AWS/Scheduler`, dimension
 * `ScheduleGroup`; EventBridge Scheduler user guide, "Monitoring ... with Amazon CloudWatch"):
 * - `InvocationAttemptCount`: every attempt to deliver a firing to its target (the inbound queue);
 * - `TargetErrorCount`: attempts the target refused (SQS errors: a denied send, a missing queue), retried;
 * - `TargetErrorThrottledCount`: attempts the target throttled, retried;
 * - `InvocationThrottleCount`: attempts EventBridge Scheduler throttled (the account's invocation quota), retried;
 * - `InvocationDroppedCount`: firings given up once the retry policy was exhausted (final drops);
 * - `InvocationsSentToDeadLetterCount`: firings given up and sent to the DLQ;
 * - `InvocationsFailedToBeSentToDeadLetterCount`: firings given up that could not be sent to the DLQ either;
 * - `InvocationsSentToDeadLetterCount_Truncated_MessageSizeExceeded`: DLQ messages truncated to SQS's size limit.
 */
export type SchedulerFiringMetric =
  | 'InvocationAttemptCount'
  | 'TargetErrorCount'
  | 'TargetErrorThrottledCount'
  | 'InvocationThrottleCount'
  | 'InvocationDroppedCount'
  | 'InvocationsSentToDeadLetterCount'
  | 'InvocationsFailedToBeSentToDeadLetterCount'
  | 'InvocationsSentToDeadLetterCount_Truncated_MessageSizeExceeded';

/** The parts of a scheduler its monitoring reads; `DyneinScheduler` implements it. */
export interface MonitoredScheduler {
  readonly functions: Readonly<
    Record<'submit' | 'ingest' | 'tick' | 'dispatch' | 'cancel' | 'status' | 'schedules' | 'dlq' | 'admin' | 'workflows', lambda.IFunction>
  >;
  readonly inboundQueue: sqs.IQueue;
  readonly inboundDeadLetterQueue: sqs.IQueue;
  /** Where EventBridge Scheduler puts the firings it could not deliver. */
  readonly schedulerDeadLetterQueue: sqs.IQueue;
  /** EventBridge Scheduler's metrics of the deployment's schedule group, `Sum` per minute. */
  metricFirings(metricName: SchedulerFiringMetric, props?: cloudwatch.MetricOptions): cloudwatch.Metric;
  readonly stateMachine: sfn.IStateMachine;
  /** The tick state machine of every cell (cell 0's is {@link stateMachine}); absent: that one only. */
  readonly stateMachines?: readonly sfn.IStateMachine[];
  metricJobsSubmitted(props?: cloudwatch.MetricOptions): cloudwatch.Metric;
  metricJobsIngested(props?: cloudwatch.MetricOptions): cloudwatch.Metric;
  metricJobsDispatched(props?: cloudwatch.MetricOptions): cloudwatch.Metric;
  metricLateness(props?: cloudwatch.MetricOptions): cloudwatch.Metric;
  metricDispatchers(props?: cloudwatch.MetricOptions): cloudwatch.Metric;
  metricParkedJobs(props?: cloudwatch.MetricOptions): cloudwatch.Metric;
  metricHeldAfterResume(props?: cloudwatch.MetricOptions): cloudwatch.Metric;
  metricMissedOccurrences(props?: cloudwatch.MetricOptions): cloudwatch.Metric;
}

export interface SchedulerMonitoringProps {
  /** What the dashboard and alarms watch: a `DyneinScheduler` (an interface, so the two files do not import each other). */
  readonly scheduler: MonitoredScheduler;
  readonly alarmTopic?: sns.ITopic;
  readonly latenessAlarmThreshold: Duration;
  readonly inboundAgeAlarmThreshold: Duration;
  /** Parked rows (of unregistered tenants) for this many consecutive minutes raise the ParkedJobs alarm. */
  readonly parkedJobsAlarmMinutes: number;
  /** A tenant that may send (not paused, registered) whose first held row waited this long in a hold lane raises the HeldAfterResume alarm. */
  readonly heldAfterResumeAlarmThreshold: Duration;
  /** Minutes in a row with workflow jobs' ends not carried on to their children that raise the WorkflowChildrenWaiting alarm. */
  readonly workflowChildrenWaitingAlarmMinutes: number;
}

const minute = Duration.minutes(1);
/** Functions that count their failed reads of tenant controls (`ControlReadFailures`). */
const CONTROL_READERS = ['submit', 'dispatch'] as const;
/** Cells per TickFailures alarm (two metrics each; an alarm's metric math holds at most 10). */
const TICK_ALARM_CELLS = 5;

/**
 * The scheduler's dashboard and alarms. Dashboard: jobs submitted, ingested, dispatched;
 * lateness p50/p95/p99; inbound depth and oldest age; per tenant queue depth, oldest age and DLQ
 * depth; Lambda errors, throttles and duration; tick failures; parked rows; recurring-schedule
 * firings (attempts, errors, throttles, dead letters) and the firing DLQ; failed reads of
 * tenant controls. Alarms: inbound oldest age, any DLQ not empty, lateness p99, failed tick
 * executions, dispatch errors and throttles, parked rows of unregistered tenants, failed or
 * failing firings, the firing DLQ, tenant controls that cannot be read.
 */
export class SchedulerMonitoring extends Construct {
  readonly dashboard: cloudwatch.Dashboard;
  readonly alarms: cloudwatch.Alarm[] = [];
  #tenants = 0;

  constructor(
    scope: Construct,
    id: string,
    private readonly props: SchedulerMonitoringProps,
  ) {
    super(scope, id);
    const s = props.scheduler;
    const fns = Object.entries(s.functions);
    const machines = s.stateMachines ?? [s.stateMachine];
    // Labels and metric ids name the cell only when there are several (one cell: as before cells).
    const cellLabel = (c: number) => (machines.length > 1 ? ` (cell ${c})` : '');
    this.dashboard = new cloudwatch.Dashboard(this, 'Dashboard', { defaultInterval: Duration.hours(3) });
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Jobs per minute',
        left: [
          s.metricJobsSubmitted({ label: 'submitted' }),
          s.metricJobsIngested({ label: 'ingested' }),
          s.metricJobsDispatched({ label: 'dispatched' }),
        ],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Lateness (ms, due time to send)',
        left: ['p50', 'p95', 'p99'].map((p) => s.metricLateness({ statistic: p, label: p })),
        leftAnnotations: [{ value: props.latenessAlarmThreshold.toMilliseconds(), label: 'p99 alarm' }],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Inbound queue',
        left: [s.inboundQueue.metricApproximateNumberOfMessagesVisible({ period: minute, statistic: 'Maximum', label: 'depth' })],
        right: [s.inboundQueue.metricApproximateAgeOfOldestMessage({ period: minute, statistic: 'Maximum', label: 'oldest age (s)' })],
        width: 8,
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Lambda errors',
        left: fns.map(([n, f]) => f.metricErrors({ period: minute, statistic: 'Sum', label: n })),
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Lambda throttles',
        left: fns.map(([n, f]) => f.metricThrottles({ period: minute, statistic: 'Sum', label: n })),
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: 'Lambda duration p95 (ms)',
        left: fns.map(([n, f]) => f.metricDuration({ period: minute, statistic: 'p95', label: n })),
        width: 8,
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Tick executions',
        left: machines.flatMap((m, c) => [
          m.metricStarted({ period: minute, statistic: 'Sum', label: `started${cellLabel(c)}` }),
          m.metricFailed({ period: minute, statistic: 'Sum', label: `failed${cellLabel(c)}` }),
          m.metricTimedOut({ period: minute, statistic: 'Sum', label: `timed out${cellLabel(c)}` }),
        ]),
        right: [s.metricDispatchers({ label: 'dispatchers planned' })],
        width: 12,
      }),
      new cloudwatch.GraphWidget({
        title: 'Parked jobs (tenant not registered)',
        left: [s.metricParkedJobs({ label: 'parked rows (max per dispatch step)' })],
        width: 6,
      }),
      new cloudwatch.GraphWidget({
        title: 'Failed reads of tenant controls (rows held meanwhile)',
        left: CONTROL_READERS.map((fn) => controlReadFailures(fn, fn)),
        width: 6,
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Held rows not read back (tenant may send)',
        left: [s.metricHeldAfterResume({ label: 'longest wait of a first held row (ms)' })],
        leftAnnotations: [{ value: props.heldAfterResumeAlarmThreshold.toMilliseconds(), label: 'alarm' }],
        width: 12,
      }),
      new cloudwatch.GraphWidget({
        title: 'Recurring occurrences never fired (checked every 5 minutes)',
        left: [s.metricMissedOccurrences({ label: 'missed occurrences' })],
        width: 12,
      }),
    );
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: 'Recurring schedule firings (EventBridge Scheduler)',
        left: [
          s.metricFirings('InvocationAttemptCount', { label: 'attempts' }),
          s.metricFirings('TargetErrorCount', { label: 'target errors (retried)' }),
          s.metricFirings('TargetErrorThrottledCount', { label: 'target throttled (retried)' }),
          s.metricFirings('InvocationThrottleCount', { label: 'throttled by the quota (retried)' }),
        ],
        width: 12,
      }),
      new cloudwatch.GraphWidget({
        title: 'Failed firings',
        left: [
          s.metricFirings('InvocationsSentToDeadLetterCount', { label: 'sent to the firing DLQ' }),
          s.metricFirings('InvocationsFailedToBeSentToDeadLetterCount', { label: 'failed to reach the firing DLQ' }),
          s.metricFirings('InvocationDroppedCount', { label: 'dropped' }),
        ],
        right: [
          s.schedulerDeadLetterQueue.metricApproximateNumberOfMessagesVisible({
            period: minute,
            statistic: 'Maximum',
            label: 'firing DLQ depth',
          }),
        ],
        width: 12,
      }),
    );

    this.#alarm('InboundBacklog', {
      alarmDescription: `Jobs wait in the inbound queue longer than ${props.inboundAgeAlarmThreshold.toHumanString()}: ingest is failing or throttled (see its errors and the inbound DLQ).`,
      metric: s.inboundQueue.metricApproximateAgeOfOldestMessage({ period: minute, statistic: 'Maximum' }),
      threshold: props.inboundAgeAlarmThreshold.toSeconds(),
      evaluationPeriods: 3,
    });
    this.#alarm('InboundDlqNotEmpty', {
      alarmDescription:
        'Inbound messages failed ingest 5 times (malformed, or a persistent error): inspect the inbound DLQ, fix, then redrive it.',
      metric: s.inboundDeadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: minute, statistic: 'Maximum' }),
      threshold: 0,
      evaluationPeriods: 1,
    });
    this.#alarm('LatenessP99', {
      alarmDescription: `Dispatch lateness p99 above ${props.latenessAlarmThreshold.toMilliseconds()} ms: rounds are throttled, slow or missing (see dispatch duration, throttles and tick failures).`,
      metric: s.metricLateness({ statistic: 'p99' }),
      threshold: props.latenessAlarmThreshold.toMilliseconds(),
      evaluationPeriods: 3,
    });
    // Every cell's state machine: an alarm's metric math holds at most 10 metrics, so five cells
    // (failed + timed out each) per alarm: TickFailures (cells 0-4), TickFailures2 (5-9), ...
    for (let first = 0; first < machines.length; first += TICK_ALARM_CELLS) {
      const usingMetrics: Record<string, cloudwatch.IMetric> = {};
      machines.slice(first, first + TICK_ALARM_CELLS).forEach((m, i) => {
        const suffix = first + i === 0 ? '' : String(first + i);
        usingMetrics[`failed${suffix}`] = m.metricFailed({ period: minute, statistic: 'Sum' });
        usingMetrics[`timedout${suffix}`] = m.metricTimedOut({ period: minute, statistic: 'Sum' });
      });
      const cells = machines.length === 1 ? '' : ` of cells ${first} to ${Math.min(machines.length, first + TICK_ALARM_CELLS) - 1}`;
      this.#alarm(first === 0 ? 'TickFailures' : `TickFailures${first / TICK_ALARM_CELLS + 1}`, {
        alarmDescription: `Tick executions${cells} failed or timed out: groups may go undispatched until the next execution (see the tick log group).`,
        metric: new cloudwatch.MathExpression({ expression: Object.keys(usingMetrics).join(' + '), usingMetrics, period: minute }),
        threshold: 0,
        evaluationPeriods: 2,
      });
    }
    this.#alarm('DispatchErrors', {
      alarmDescription:
        'The dispatch function failed in two consecutive minutes: each dispatcher retries with backoff and stops after dispatchMaxConsecutiveFailures (default 4) failures in a row until the next tick execution; held rows are retried after their lease, lateness grows (see the dispatch log group).',
      metric: s.functions.dispatch.metricErrors({ period: minute, statistic: 'Sum' }),
      threshold: 0,
      evaluationPeriods: 2,
    });
    this.#alarm('DispatchThrottles', {
      alarmDescription:
        'Dispatch invocations were throttled in two consecutive minutes: the account (or the reserved concurrency) has too little Lambda concurrency for the tick; dispatchers back off and lateness grows.',
      metric: s.functions.dispatch.metricThrottles({ period: minute, statistic: 'Sum' }),
      threshold: 0,
      evaluationPeriods: 2,
    });
    this.#alarm('SchedulerDlqNotEmpty', {
      alarmDescription:
        "EventBridge Scheduler gave up delivering a recurring schedule's firing to the inbound queue and put it in the firing DLQ: the schedule's next firing delivers the occurrences missed meanwhile (late, once each). Read the message's error, fix the cause (docs/operating.md, \"Failed firings\").",
      metric: s.schedulerDeadLetterQueue.metricApproximateNumberOfMessagesVisible({ period: minute, statistic: 'Maximum' }),
      threshold: 0,
      evaluationPeriods: 1,
    });
    this.#alarm('SchedulerFiringsFailed', {
      alarmDescription:
        'EventBridge Scheduler gave up firings of recurring schedules after their retries (InvocationDroppedCount) or could not put them in the firing DLQ (InvocationsFailedToBeSentToDeadLetterCount). With the firing DLQ empty, check the execution role and the DLQ (docs/operating.md, "Failed firings").',
      metric: new cloudwatch.MathExpression({
        expression: 'FILL(failedToDlq, 0) + FILL(dropped, 0)',
        usingMetrics: {
          failedToDlq: s.metricFirings('InvocationsFailedToBeSentToDeadLetterCount'),
          dropped: s.metricFirings('InvocationDroppedCount'),
        },
        period: minute,
      }),
      threshold: 0,
      evaluationPeriods: 1,
    });
    this.#alarm('SchedulerFiringErrors', {
      alarmDescription:
        'Firings of recurring schedules failed to reach the inbound queue in 3 of the last 5 minutes (target errors or throttling; EventBridge Scheduler retries them): a denied send, a deleted queue, or the invocation quota. Occurrences are late meanwhile (docs/operating.md, "Failed firings").',
      metric: new cloudwatch.MathExpression({
        expression: 'FILL(targetErrors, 0) + FILL(targetThrottled, 0) + FILL(throttled, 0)',
        usingMetrics: {
          targetErrors: s.metricFirings('TargetErrorCount'),
          targetThrottled: s.metricFirings('TargetErrorThrottledCount'),
          throttled: s.metricFirings('InvocationThrottleCount'),
        },
        period: minute,
      }),
      threshold: 0,
      evaluationPeriods: 5,
      datapointsToAlarm: 3,
    });
    this.#alarm('ParkedJobs', {
      alarmDescription: `Jobs of a tenant that is not registered (removed from its stack) wait parked in the table for ${props.parkedJobsAlarmMinutes} minutes: they are kept, not delivered. Register the tenant again to deliver them, or delete them (docs/operating.md, "Parked jobs").`,
      metric: s.metricParkedJobs(),
      threshold: 0,
      evaluationPeriods: props.parkedJobsAlarmMinutes,
    });
    this.#alarm('ControlReadFailures', {
      alarmDescription:
        "Reads of tenants' controls (the scheduler table's tenant#<name>/controls items) failed in 3 consecutive minutes: a process that cannot read a tenant's controls holds its jobs (fail closed) after 30 s, so deliveries may be late. See the submit and dispatch log groups and the table's throttling (docs/tenant-controls.md).",
      metric: new cloudwatch.MathExpression({
        expression: CONTROL_READERS.map((fn) => `FILL(${fn}, 0)`).join(' + '),
        usingMetrics: Object.fromEntries(CONTROL_READERS.map((fn) => [fn, controlReadFailures(fn)])),
        period: minute,
      }),
      threshold: 0,
      evaluationPeriods: 3,
    });
    this.#alarm('WorkflowChildrenWaiting', {
      alarmDescription: `Reports of workflow jobs' ends were stored but not carried on to their children in ${props.workflowChildrenWaitingAlarmMinutes} consecutive minutes: those children wait past their parents' end until the reports come again (the Worker and dyneinLambdaHandler retry them). See the workflows log group and the table's throttling (docs/operating.md, "Workflow children waiting").`,
      metric: new cloudwatch.Metric({
        namespace: METRICS_NAMESPACE,
        metricName: 'WorkflowCarryOnFailures',
        dimensionsMap: { service: metricService('workflows') },
        period: minute,
        statistic: 'Sum',
      }),
      threshold: 0,
      evaluationPeriods: props.workflowChildrenWaitingAlarmMinutes,
    });
    this.#alarm('MissedOccurrences', {
      alarmDescription:
        'A recurring schedule\'s occurrence was not delivered 5 minutes after its time (the never-fired check). The schedules log group names each one, its reason (not-materialised: its clock did not fire; not-delivered, missing, dead), its job and its trace (docs/operating.md, "Missed occurrences").',
      metric: s.metricMissedOccurrences(),
      threshold: 0,
      evaluationPeriods: 1,
    });
    this.#alarm('HeldAfterResume', {
      alarmDescription: `A tenant that may send (not paused, registered) has had the same first job in a hold lane for more than ${props.heldAfterResumeAlarmThreshold.toHumanString()}: its held jobs are not being read back. The dispatch log group names the tenants (docs/operating.md, "Held jobs not read back").`,
      metric: s.metricHeldAfterResume(),
      threshold: props.heldAfterResumeAlarmThreshold.toMilliseconds(),
      evaluationPeriods: 1,
    });
  }

  /**
   * Adds a tenant's row to the dashboard (its queue; jobs scheduled, delivered, failing to be
   * delivered and, with `monitorFailedJobs`, failed by its workers; lateness p50/p95/p99; DLQ depth)
   * and its alarms to the alarm list.
   */
  addTenant(tenant: DyneinTenant): void {
    if (this.#tenants++ === 0) this.dashboard.addWidgets(new cloudwatch.TextWidget({ markdown: '### Tenants', width: 24, height: 1 }));
    const name = tenant.tenantName;
    this.dashboard.addWidgets(
      new cloudwatch.GraphWidget({
        title: `Tenant ${name}: jobs per minute`,
        left: [
          tenant.metricJobsScheduled({ label: 'scheduled' }),
          tenant.metricJobsDelivered({ label: 'delivered (dispatched)' }),
          tenant.metricDeliveryFailures({ label: 'failed sends (retried)' }),
          ...(tenant.monitorsFailedJobs ? [tenant.metricJobsFailed({ label: 'failed (worker outcomes)' })] : []),
          tenant.metricJobsHeld({ label: 'held (paused)' }),
          tenant.metricDeliveriesDeferred({ label: 'sends deferred (delivery limit)' }),
          tenant.metricSubmitsThrottled({ label: 'submits throttled (429)' }),
        ],
        right: [tenant.metricPaused({ label: 'paused (1)' })],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: `Tenant ${name}: lateness (ms)`,
        left: ['p50', 'p95', 'p99'].map((p) => tenant.metricLateness({ statistic: p, label: p })),
        leftAnnotations: [{ value: tenant.latenessAlarmThreshold.toMilliseconds(), label: 'p99 alarm' }],
        width: 8,
      }),
      new cloudwatch.GraphWidget({
        title: `Tenant ${name}: queue and DLQ`,
        left: [tenant.metricDepth({ label: 'depth' }), tenant.metricDlqDepth({ label: 'DLQ depth' })],
        right: [tenant.metricOldestAge({ label: 'oldest age (s)' })],
        width: 8,
      }),
    );
    this.alarms.push(...tenant.alarms);
  }

  #alarm(id: string, props: Omit<cloudwatch.AlarmProps, 'comparisonOperator' | 'treatMissingData'>): void {
    const alarm = new cloudwatch.Alarm(this, id, {
      ...props,
      comparisonOperator: cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
      treatMissingData: cloudwatch.TreatMissingData.NOT_BREACHING,
    });
    if (this.props.alarmTopic) alarm.addAlarmAction(new actions.SnsAction(this.props.alarmTopic));
    this.alarms.push(alarm);
  }
}

/** Failed reads of tenant controls in one function's processes, `Sum` per minute. */
function controlReadFailures(fn: (typeof CONTROL_READERS)[number], label?: string): cloudwatch.Metric {
  return new cloudwatch.Metric({
    namespace: METRICS_NAMESPACE,
    metricName: 'ControlReadFailures',
    dimensionsMap: { service: metricService(fn) },
    period: minute,
    statistic: 'Sum',
    ...(label ? { label } : {}),
  });
}
