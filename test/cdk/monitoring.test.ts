/**
 * The scheduler's dashboard and alarms (DESIGN.md: lateness, inbound backlog, tenant queues,
 * Lambda health, tick failures), with an alarm topic and two tenants.
 */
import { Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { fastApp, getAtt, ref, render, resourcesOf, type Json, type Resource } from './support.js';

const TENANTS = ['alpha', 'beta'];
/**
 * InboundBacklog, InboundDlqNotEmpty, LatenessP99, TickFailures, DispatchErrors, DispatchThrottles,
 * SchedulerDlqNotEmpty, SchedulerFiringsFailed, SchedulerFiringErrors, ParkedJobs, ControlReadFailures,
 * HeldAfterResume, WorkflowChildrenWaiting, MissedOccurrences.
 */
const SCHEDULER_ALARMS = 14;

let stack: Stack;
let scheduler: DyneinScheduler;
let topic: sns.Topic;
let t: Template;
let quietT: Template;
let quiet: DyneinScheduler;

beforeAll(() => {
  const app = fastApp();
  stack = new Stack(app, 'Monitored');
  topic = new sns.Topic(stack, 'Alarms');
  scheduler = new DyneinScheduler(stack, 'Dynein', { alarmTopic: topic });
  for (const name of TENANTS) scheduler.addTenant(name);
  const quietStack = new Stack(app, 'Quiet');
  quiet = new DyneinScheduler(quietStack, 'Dynein');
  quiet.addTenant('gamma');
  t = Template.fromStack(stack);
  quietT = Template.fromStack(quietStack);
});

/** A dashboard metric line: namespace, name, dimensions and options (stat, label, ...). */
interface Line {
  namespace: string;
  name: string;
  dims: Record<string, string>;
  stat?: string;
}

/** The dashboard's metric lines, with tokens rendered as `{Ref:X}` / `{GetAtt:X.Attr}`. */
function dashboardLines(template: Template): { lines: Line[]; titles: string[] } {
  const dashboards = resourcesOf(template, 'AWS::CloudWatch::Dashboard');
  expect(dashboards).toHaveLength(1);
  const body = JSON.parse(render(dashboards[0]![1].Properties.DashboardBody)) as {
    widgets: { properties: { title?: string; metrics?: Json[][] } }[];
  };
  const lines: Line[] = [];
  const titles: string[] = [];
  for (const w of body.widgets) {
    if (w.properties.title) titles.push(w.properties.title);
    let previous: Json[] = [];
    for (const raw of w.properties.metrics ?? []) {
      // CloudWatch's shorthand: "." repeats the value of the line above at that position.
      const m = raw.map((x, i) => (x === '.' ? previous[i]! : x));
      previous = m;
      const opts = (typeof m[m.length - 1] === 'object' ? m[m.length - 1] : {}) as { stat?: string; expression?: string };
      if (opts.expression !== undefined) continue;
      const fields = m.filter((x) => typeof x === 'string') as string[];
      const dims: Record<string, string> = {};
      for (let i = 2; i + 1 < fields.length; i += 2) dims[fields[i]!] = fields[i + 1]!;
      lines.push({ namespace: fields[0]!, name: fields[1]!, dims, stat: opts.stat });
    }
  }
  return { lines, titles };
}

const has = (lines: Line[], namespace: string, name: string, dim: [string, string], stat?: string) =>
  lines.some((l) => l.namespace === namespace && l.name === name && l.dims[dim[0]] === dim[1] && (stat === undefined || l.stat === stat));

/** An alarm's single metric, or the metrics of its math expression. */
interface AlarmMetric {
  namespace: string;
  name: string;
  dims: Record<string, string>;
  stat?: string;
}
function alarmMetrics(a: Resource): AlarmMetric[] {
  const dims = (d: Json | undefined) =>
    Object.fromEntries(((d ?? []) as { Name: string; Value: Json }[]).map((x) => [x.Name, render(x.Value)]));
  const p = a.Properties;
  if (typeof p.MetricName === 'string')
    return [
      { namespace: String(p.Namespace), name: p.MetricName, dims: dims(p.Dimensions), stat: String(p.ExtendedStatistic ?? p.Statistic) },
    ];
  return ((p.Metrics ?? []) as { MetricStat?: { Metric: { Namespace: string; MetricName: string; Dimensions?: Json }; Stat: string } }[])
    .filter((m) => m.MetricStat)
    .map((m) => ({
      namespace: m.MetricStat!.Metric.Namespace,
      name: m.MetricStat!.Metric.MetricName,
      dims: dims(m.MetricStat!.Metric.Dimensions),
      stat: m.MetricStat!.Stat,
    }));
}

const queueName = (q: IConstruct) => getAtt(q, 'QueueName');

describe('dashboard', () => {
  it('shows lateness p50/p95/p99, inbound depth and oldest age, and every tenant queue', () => {
    const { lines } = dashboardLines(t);
    const lateness = scheduler.metricLateness();
    for (const p of ['p50', 'p95', 'p99']) {
      expect(
        lines.some((l) => l.namespace === lateness.namespace && l.name === lateness.metricName && l.stat === p),
        `lateness ${p}`,
      ).toBe(true);
    }
    expect(
      has(lines, 'AWS/SQS', 'ApproximateNumberOfMessagesVisible', ['QueueName', queueName(scheduler.inboundQueue)]),
      'inbound depth',
    ).toBe(true);
    expect(has(lines, 'AWS/SQS', 'ApproximateAgeOfOldestMessage', ['QueueName', queueName(scheduler.inboundQueue)]), 'inbound age').toBe(
      true,
    );
    expect(scheduler.tenants.map((x) => x.tenantName)).toEqual(TENANTS);
    for (const tenant of scheduler.tenants) {
      expect(
        has(lines, 'AWS/SQS', 'ApproximateNumberOfMessagesVisible', ['QueueName', queueName(tenant.queue)]),
        `${tenant.tenantName} depth`,
      ).toBe(true);
      expect(
        has(lines, 'AWS/SQS', 'ApproximateAgeOfOldestMessage', ['QueueName', queueName(tenant.queue)]),
        `${tenant.tenantName} age`,
      ).toBe(true);
      expect(
        has(lines, 'AWS/SQS', 'ApproximateNumberOfMessagesVisible', ['QueueName', queueName(tenant.deadLetterQueue)]),
        `${tenant.tenantName} DLQ`,
      ).toBe(true);
    }
  });

  it('shows errors, throttles and duration of all ten functions, tick failures and the dispatchers planned', () => {
    const { lines } = dashboardLines(t);
    const fns = Object.entries(scheduler.functions);
    expect(fns).toHaveLength(10);
    for (const [n, f] of fns) {
      for (const metric of ['Errors', 'Throttles', 'Duration']) {
        expect(has(lines, 'AWS/Lambda', metric, ['FunctionName', ref(f)]), `${n} ${metric}`).toBe(true);
      }
    }
    expect(has(lines, 'AWS/States', 'ExecutionsFailed', ['StateMachineArn', ref(scheduler.stateMachine)]), 'tick failures').toBe(true);
    const planned = scheduler.metricDispatchers();
    expect(
      lines.some((l) => l.namespace === planned.namespace && l.name === 'Dispatchers' && l.stat === 'Maximum'),
      'dispatchers planned',
    ).toBe(true);
  });
});

describe('alarms', () => {
  const alarms = () => resourcesOf(t, 'AWS::CloudWatch::Alarm');
  const find = (pred: (m: AlarmMetric) => boolean) => alarms().filter(([, a]) => alarmMetrics(a).some(pred));
  const sqs = (name: string, q: IConstruct) => (m: AlarmMetric) =>
    m.namespace === 'AWS/SQS' && m.name === name && m.dims.QueueName === queueName(q);
  /** Fires on the first message: threshold 0, "greater than". */
  const onAny = (a: Resource) => a.Properties.Threshold === 0 && a.Properties.ComparisonOperator === 'GreaterThanThreshold';

  it('cover inbound oldest age, inbound DLQ, each tenant DLQ, lateness p99, tick failures and dispatch errors', () => {
    expect(find(sqs('ApproximateAgeOfOldestMessage', scheduler.inboundQueue)), 'inbound oldest age').toHaveLength(1);
    const inboundDlq = find(sqs('ApproximateNumberOfMessagesVisible', scheduler.inboundDeadLetterQueue));
    expect(inboundDlq, 'inbound DLQ').toHaveLength(1);
    expect(onAny(inboundDlq[0]![1])).toBe(true);
    for (const tenant of scheduler.tenants) {
      const dlq = find(sqs('ApproximateNumberOfMessagesVisible', tenant.deadLetterQueue));
      expect(dlq, `${tenant.tenantName} DLQ`).toHaveLength(1);
      expect(onAny(dlq[0]![1])).toBe(true);
    }
    const lateness = scheduler.metricLateness();
    expect(
      find((m) => m.namespace === lateness.namespace && m.name === lateness.metricName && m.stat === 'p99' && m.dims.Tenant === undefined),
      'lateness p99',
    ).toHaveLength(1);
    expect(
      find((m) => m.namespace === 'AWS/States' && m.name === 'ExecutionsFailed' && m.dims.StateMachineArn === ref(scheduler.stateMachine)),
      'tick failures',
    ).toHaveLength(1);
    expect(
      find((m) => m.namespace === 'AWS/Lambda' && m.name === 'Errors' && m.dims.FunctionName === ref(scheduler.functions.dispatch)),
      'dispatch errors',
    ).toHaveLength(1);
  });

  it('cover failed reads of tenant controls, by submit and by dispatch (their rows are held meanwhile)', () => {
    const failures = (fn: string) => (m: AlarmMetric) =>
      m.name === 'ControlReadFailures' && m.dims.service === `dynein-${fn}` && m.namespace === scheduler.metricJobsSubmitted().namespace;
    const submit = find(failures('submit'));
    expect(submit, 'ControlReadFailures alarm').toHaveLength(1);
    expect(find(failures('dispatch'))).toEqual(submit);
    expect(onAny(submit[0]![1])).toBe(true);
  });

  it("HeldAfterResume: the dispatch function's HeldAfterResumeMs (Maximum) above 5 minutes, shown on the dashboard; the threshold is a prop, checked", () => {
    const held = alarms().filter(([id]) => id.includes('HeldAfterResume'));
    expect(held).toHaveLength(1);
    const metric = scheduler.metricHeldAfterResume();
    expect(held[0]![1].Properties).toMatchObject({
      Namespace: metric.namespace,
      MetricName: 'HeldAfterResumeMs',
      Statistic: 'Maximum',
      Threshold: 300_000,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    });
    expect(held[0]![1].Properties.Dimensions).toEqual([{ Name: 'service', Value: 'dynein-dispatch' }]);
    expect(dashboardLines(t).lines.some((l) => l.name === 'HeldAfterResumeMs' && l.stat === 'Maximum')).toBe(true);

    const app = fastApp();
    const custom = new Stack(app, 'HeldCustom');
    new DyneinScheduler(custom, 'Dynein', { heldAfterResumeAlarmThreshold: Duration.minutes(15) });
    const customAlarms = resourcesOf(Template.fromStack(custom), 'AWS::CloudWatch::Alarm').filter(([id]) => id.includes('HeldAfterResume'));
    expect(customAlarms.map(([, a]) => a.Properties.Threshold)).toEqual([900_000]);
    for (const bad of [Duration.seconds(30), Duration.days(2)])
      expect(() => new DyneinScheduler(new Stack(app, `Bad${bad.toSeconds()}`), 'Dynein', { heldAfterResumeAlarmThreshold: bad })).toThrow(
        /heldAfterResumeAlarmThreshold must be from 1 minute to 1 day/,
      );
  });

  it('MissedOccurrences: the never-fired check every 5 minutes (a rule running the schedules function), its Sum above 0 alarms, on the dashboard', () => {
    const missed = alarms().filter(([id]) => id.includes('MissedOccurrences'));
    expect(missed).toHaveLength(1);
    expect(missed[0]![1].Properties).toMatchObject({
      MetricName: 'MissedOccurrences',
      Statistic: 'Sum',
      Period: 300,
      Threshold: 0,
      EvaluationPeriods: 1,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    });
    expect(missed[0]![1].Properties.Dimensions).toEqual([{ Name: 'service', Value: 'dynein-schedules' }]);
    expect(dashboardLines(t).lines.some((l) => l.name === 'MissedOccurrences' && l.stat === 'Sum')).toBe(true);
    const rule = resourcesOf(t, 'AWS::Events::Rule').find(([id]) => id.includes('OccurrenceAudit'));
    expect(rule?.[1].Properties.ScheduleExpression).toBe('rate(5 minutes)');
    const [target] = rule![1].Properties.Targets as { Arn: Json; Input: string }[];
    expect(render(target!.Arn)).toBe(getAtt(scheduler.functions.schedules, 'Arn'));
    expect(JSON.parse(target!.Input)).toEqual({ audit: 'occurrences' });
    // EventBridge may invoke the schedules function, from this rule only.
    const invokes = resourcesOf(t, 'AWS::Lambda::Permission').filter(([, p]) => p.Properties.Principal === 'events.amazonaws.com');
    expect(invokes.map(([, p]) => render(p.Properties.SourceArn))).toEqual([getAtt(scheduler.occurrenceAuditRule, 'Arn')]);
  });

  it('WorkflowChildrenWaiting: the workflows function’s WorkflowCarryOnFailures (Sum) above 0 for 5 minutes in a row; the minutes are a prop, checked', () => {
    const waiting = alarms().filter(([id]) => id.includes('WorkflowChildrenWaiting'));
    expect(waiting).toHaveLength(1);
    expect(waiting[0]![1].Properties).toMatchObject({
      Namespace: scheduler.metricJobsSubmitted().namespace,
      MetricName: 'WorkflowCarryOnFailures',
      Statistic: 'Sum',
      Threshold: 0,
      EvaluationPeriods: 5,
      ComparisonOperator: 'GreaterThanThreshold',
      TreatMissingData: 'notBreaching',
    });
    expect(waiting[0]![1].Properties.Dimensions).toEqual([{ Name: 'service', Value: 'dynein-workflows' }]);
    const app = fastApp();
    const custom = new Stack(app, 'WaitingCustom');
    new DyneinScheduler(custom, 'Dynein', { workflowChildrenWaitingAlarmMinutes: 15 });
    const customAlarms = resourcesOf(Template.fromStack(custom), 'AWS::CloudWatch::Alarm').filter(([id]) =>
      id.includes('WorkflowChildrenWaiting'),
    );
    expect(customAlarms.map(([, a]) => a.Properties.EvaluationPeriods)).toEqual([15]);
    for (const bad of [0, 1.5, 1441])
      expect(
        () =>
          new DyneinScheduler(new Stack(app, `BadWaiting${String(bad).replace('.', 'x')}`), 'Dynein', {
            workflowChildrenWaitingAlarmMinutes: bad,
          }),
      ).toThrow(/workflowChildrenWaitingAlarmMinutes must be an integer from 1 to 1440/);
  });

  it('every alarm notifies the alarmTopic', () => {
    // The scheduler's alarms and one DLQ alarm per tenant at least.
    expect(alarms().length).toBeGreaterThanOrEqual(SCHEDULER_ALARMS + TENANTS.length);
    for (const [id, a] of alarms())
      expect(
        (a.Properties.AlarmActions as Json[] | undefined)?.map((x) => render(x)),
        id,
      ).toContain(ref(topic));
  });

  it('without an alarmTopic the same alarms exist, with no actions', () => {
    const quietAlarms = resourcesOf(quietT, 'AWS::CloudWatch::Alarm');
    // Per tenant: DLQ not empty, lateness p99, delivery failures, paused too long, held backlog growing.
    expect(quietAlarms.length).toBe(SCHEDULER_ALARMS + 5 * quiet.tenants.length);
    for (const [id, a] of quietAlarms) expect(a.Properties.AlarmActions ?? [], id).toEqual([]);
  });
});
