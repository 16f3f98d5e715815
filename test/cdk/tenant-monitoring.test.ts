/**
 * Per-tenant monitoring and the dead-letter grant: grantDeadLetters gives exactly the four dlq
 * routes; the dashboard has a row per tenant (scheduled, delivered, failed sends, failed jobs
 * with history, lateness, queue and DLQ) on metrics with a Tenant dimension; each tenant has its
 * alarms (DLQ, lateness p99, delivery failures, failed jobs when monitored) that a team
 * subscribes to from its own stack; cdk-nag finds nothing in such a team stack.
 */
import { type App, Duration, Stack, Validations } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as actions from 'aws-cdk-lib/aws-cloudwatch-actions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import { CDK_APP_MODE_CONTEXT, FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT } from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { DyneinTenant } from '../../lib/tenant.js';
import { allowed, fastApp, idOf, ref, render, resourcesOf, roleStatements, type Json, type Resource, synthError } from './support.js';

let stack: Stack;
let scheduler: DyneinScheduler;
let alpha: DyneinTenant;
let beta: DyneinTenant;
let t: Template;
let dlqRole: iam.Role;

beforeAll(() => {
  stack = new Stack(fastApp(), 'TenantMonitoring');
  scheduler = new DyneinScheduler(stack, 'Dynein');
  alpha = scheduler.addTenant('alpha', { latenessAlarmThreshold: Duration.millis(1500) });
  beta = scheduler.addTenant('beta', { monitorFailedJobs: true });
  dlqRole = new iam.Role(stack, 'Ops', { assumedBy: new iam.AccountRootPrincipal() });
  alpha.grantDeadLetters(dlqRole);
  t = Template.fromStack(stack);
});

interface Line {
  namespace: string;
  name: string;
  dims: Record<string, string>;
  stat?: string;
  title: string;
}

function dashboardLines(): Line[] {
  const [[, dashboard]] = resourcesOf(t, 'AWS::CloudWatch::Dashboard') as [[string, Resource]];
  const body = JSON.parse(render(dashboard.Properties.DashboardBody)) as {
    widgets: { properties: { title?: string; metrics?: Json[][] } }[];
  };
  const lines: Line[] = [];
  for (const w of body.widgets) {
    let previous: Json[] = [];
    for (const raw of w.properties.metrics ?? []) {
      const m = raw.map((x, i) => (x === '.' ? previous[i]! : x));
      previous = m;
      const opts = (typeof m[m.length - 1] === 'object' ? m[m.length - 1] : {}) as { stat?: string };
      const fields = m.filter((x) => typeof x === 'string') as string[];
      const dims: Record<string, string> = {};
      for (let i = 2; i + 1 < fields.length; i += 2) dims[fields[i]!] = fields[i + 1]!;
      lines.push({ namespace: fields[0]!, name: fields[1]!, dims, stat: opts.stat, title: w.properties.title ?? '' });
    }
  }
  return lines;
}

const tenantLine = (lines: Line[], tenant: string, name: string, service: string, stat?: string) =>
  lines.some(
    (l) =>
      l.namespace === 'DyneinServerless' &&
      l.name === name &&
      l.dims.Tenant === tenant &&
      l.dims.service === service &&
      (stat === undefined || l.stat === stat),
  );

describe('grantDeadLetters', () => {
  it('allows execute-api:Invoke on exactly the tenant’s six dlq routes', () => {
    const granted = allowed(roleStatements(t, idOf(dlqRole)));
    expect([...granted.keys()]).toEqual(['execute-api:Invoke']);
    const api = ref(scheduler.httpApi);
    const arn = (route: string) => `arn:{Ref:AWS::Partition}:execute-api:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${api}/$default/${route}`;
    expect([...granted.get('execute-api:Invoke')!].sort()).toEqual(
      [
        arn('GET/v1/tenants/alpha/dlq'),
        arn('POST/v1/tenants/alpha/dlq/redrive'),
        arn('GET/v1/tenants/alpha/dlq/redrive'),
        arn('POST/v1/tenants/alpha/dlq/delete'),
        arn('POST/v1/tenants/alpha/dlq/edit'),
        arn('GET/v1/tenants/alpha/dlq/audit'),
      ].sort(),
    );
  });
});

describe('dashboard', () => {
  it('has a row per tenant: scheduled, delivered, failed sends, lateness p50/p95/p99, queue and DLQ depth', () => {
    const lines = dashboardLines();
    for (const tenant of ['alpha', 'beta']) {
      expect(tenantLine(lines, tenant, 'JobsSubmitted', 'dynein-submit', 'Sum'), `${tenant} scheduled`).toBe(true);
      expect(tenantLine(lines, tenant, 'JobsDispatched', 'dynein-dispatch', 'Sum'), `${tenant} delivered`).toBe(true);
      expect(tenantLine(lines, tenant, 'DeliveryFailures', 'dynein-dispatch', 'Sum'), `${tenant} failed sends`).toBe(true);
      for (const p of ['p50', 'p95', 'p99'])
        expect(tenantLine(lines, tenant, 'LatenessMs', 'dynein-dispatch', p), `${tenant} ${p}`).toBe(true);
      expect(
        lines.some((l) => l.namespace === 'AWS/SQS' && l.name === 'ApproximateNumberOfMessagesVisible' && l.title.includes(tenant)),
      ).toBe(true);
    }
  });

  it('shows failed jobs (JobsFailed with a Tenant dimension) for a tenant with monitorFailedJobs only', () => {
    const lines = dashboardLines();
    expect(tenantLine(lines, 'beta', 'JobsFailed', 'dynein-status', 'Sum')).toBe(true);
    expect(lines.some((l) => l.name === 'JobsFailed' && l.dims.Tenant === 'alpha')).toBe(false);
  });
});

describe('per-tenant alarms', () => {
  const alarmOf = (a: { node: { defaultChild?: unknown } }) => {
    const id = idOf(a as never);
    return resourcesOf(t, 'AWS::CloudWatch::Alarm').find(([k]) => k === id)![1];
  };
  const dims = (r: Resource) =>
    Object.fromEntries(((r.Properties.Dimensions ?? []) as { Name: string; Value: Json }[]).map((d) => [d.Name, render(d.Value)]));

  it('lateness p99 above the tenant’s threshold and delivery failures, on its own Tenant metrics', () => {
    const lateness = alarmOf(alpha.latenessAlarm);
    expect(lateness.Properties).toMatchObject({
      MetricName: 'LatenessMs',
      ExtendedStatistic: 'p99',
      Threshold: 1500,
      EvaluationPeriods: 3,
    });
    expect(dims(lateness)).toEqual({ service: 'dynein-dispatch', Tenant: 'alpha' });
    expect(alarmOf(beta.latenessAlarm).Properties.Threshold).toBe(2000);
    const failures = alarmOf(alpha.deliveryFailureAlarm);
    expect(failures.Properties).toMatchObject({ MetricName: 'DeliveryFailures', Statistic: 'Sum', Threshold: 0 });
    expect(dims(failures)).toEqual({ service: 'dynein-dispatch', Tenant: 'alpha' });
    expect(alpha.alarms).toHaveLength(5);
    expect(alpha.failedJobsAlarm).toBeUndefined();
    expect(beta.alarms).toHaveLength(6);
    expect(dims(alarmOf(beta.failedJobsAlarm!))).toEqual({ service: 'dynein-status', Tenant: 'beta' });
    // The scheduler's alarm list holds every tenant's.
    for (const a of [...alpha.alarms, ...beta.alarms]) expect(scheduler.monitoring.alarms).toContain(a);
  });

  it('paused too long (TenantPaused for pausedAlarmAfter minutes) and held backlog growing (JobsHeld 15 minutes), per tenant', () => {
    const paused = alarmOf(alpha.pausedAlarm);
    expect(paused.Properties).toMatchObject({
      MetricName: 'TenantPaused',
      Statistic: 'Maximum',
      Threshold: 1,
      ComparisonOperator: 'GreaterThanOrEqualToThreshold',
      EvaluationPeriods: 60,
      TreatMissingData: 'notBreaching',
    });
    expect(dims(paused)).toEqual({ service: 'dynein-dispatch', Tenant: 'alpha' });
    const held = alarmOf(beta.heldBacklogAlarm);
    expect(held.Properties).toMatchObject({ MetricName: 'JobsHeld', Statistic: 'Sum', Threshold: 0, EvaluationPeriods: 15 });
    expect(dims(held)).toEqual({ service: 'dynein-dispatch', Tenant: 'beta' });
    const lines = dashboardLines();
    for (const [name, fn] of [
      ['JobsHeld', 'dynein-dispatch'],
      ['DeliveriesDeferred', 'dynein-dispatch'],
      ['SubmitsThrottled', 'dynein-submit'],
    ])
      expect(tenantLine(lines, 'alpha', name!, fn!, 'Sum'), name).toBe(true);
    expect(tenantLine(lines, 'alpha', 'TenantPaused', 'dynein-dispatch', 'Maximum')).toBe(true);
  });

  it('refuses a pausedAlarmAfter that is not whole minutes from 1 minute to 1 day', () => {
    const app = fastApp({ [CDK_APP_MODE_CONTEXT]: 'inmemory' }) as App;
    const stack = new Stack(app, 'Bad');
    const imported = DyneinScheduler.fromAttributes({
      tableName: 'dynein-table',
      tableArn: 'arn:aws:dynamodb:eu-west-1:111122223333:table/dynein-table',
      httpApiId: 'abc123',
      senderRoleArns: ['arn:aws:iam::111122223333:role/submit'],
      tenantQueuePrefix: 'dynein',
      registrationServiceToken: 'arn:aws:lambda:eu-west-1:111122223333:function:dynein-register',
    });
    expect(() => new DyneinTenant(stack, 'T', { scheduler: imported, tenantName: 'x', pausedAlarmAfter: Duration.days(2) })).toThrow(
      /pausedAlarmAfter must be whole minutes from 1 minute to 1 day, got 2880 minutes/,
    );
  });

  it('a team subscribes its own topic to all its tenant’s alarms from its own stack, and cdk-nag finds nothing there', () => {
    const app = fastApp({ [CDK_APP_MODE_CONTEXT]: 'inmemory', [FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT]: true }) as App;
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    const team = new Stack(app, 'Team');
    const imported = DyneinScheduler.fromAttributes({
      tableName: 'dynein-table',
      tableArn: 'arn:aws:dynamodb:eu-west-1:111122223333:table/dynein-table',
      httpApiId: 'abc123',
      senderRoleArns: [
        'arn:aws:iam::111122223333:role/submit',
        'arn:aws:iam::111122223333:role/dispatch',
        'arn:aws:iam::111122223333:role/dlq',
      ],
      tenantQueuePrefix: 'dynein',
      registrationServiceToken: 'arn:aws:lambda:eu-west-1:111122223333:function:dynein-register',
    });
    const payments = new DyneinTenant(team, 'Payments', { scheduler: imported, tenantName: 'payments', monitorFailedJobs: true });
    const topic = new sns.Topic(team, 'Pager', { enforceSSL: true });
    payments.addAlarmAction(new actions.SnsAction(topic));
    payments.grantDeadLetters(new iam.Role(team, 'Ops', { assumedBy: new iam.AccountRootPrincipal() }));
    expect(synthError(app)).toBeUndefined();
    const teamT = Template.fromStack(team);
    const alarms = resourcesOf(teamT, 'AWS::CloudWatch::Alarm');
    expect(alarms).toHaveLength(6);
    for (const [id, a] of alarms)
      expect(
        (a.Properties.AlarmActions as Json[]).map((x) => render(x)),
        id,
      ).toEqual([ref(topic)]);
  });
});
