/**
 * Recurring schedules in the synthesized stack (issue #13, COORD-13.md "Contract: CDK"): the
 * EventBridge Scheduler group, its execution role (trust limited by aws:SourceAccount and
 * aws:SourceArn), the schedules function (scheduler actions on its group only, iam:PassRole only to
 * scheduler.amazonaws.com), the six routes, the firing DLQ, the inbound queue admitting the
 * execution role, the alarms and dashboard on failed firings, and the tenant grant.
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import { beforeAll, describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { DyneinStack } from '../../lib/stack.js';
import type { DyneinTenant } from '../../lib/tenant.js';
import {
  allowed,
  allPermissionStatements,
  conditionValues,
  fastApp,
  getAtt,
  idOf,
  isAnyone,
  queuePolicyStatements,
  ref,
  render,
  resource,
  resourcesOf,
  roleStatements,
  type Json,
  type Resource,
  type Statement,
} from './support.js';

const ARN = 'arn:{Ref:AWS::Partition}:scheduler:{Ref:AWS::Region}:{Ref:AWS::AccountId}';

let stack: Stack;
let topic: sns.Topic;
let scheduler: DyneinScheduler;
let alpha: DyneinTenant;
let apiRole: iam.Role;
let t: Template;

beforeAll(() => {
  stack = new Stack(fastApp(), 'Recurring');
  topic = new sns.Topic(stack, 'Alarms');
  scheduler = new DyneinScheduler(stack, 'Dynein', { alarmTopic: topic, tenantQueuePrefix: 'acme-prod' });
  alpha = scheduler.addTenant('alpha');
  scheduler.addTenant('beta');
  apiRole = new iam.Role(stack, 'AlphaApi', { assumedBy: new iam.AccountRootPrincipal() });
  alpha.grantSchedule(apiRole);
  t = Template.fromStack(stack);
});

const functionRoleId = (name: keyof DyneinScheduler['functions']) =>
  /^\{GetAtt:(.+)\.Arn\}$/.exec(render(resource(t, idOf(scheduler.functions[name])).Properties.Role))![1]!;

describe('schedule group', () => {
  it('is one group named <tenantQueuePrefix>-schedules, destroyed with the stack (its schedules only mirror the table)', () => {
    const groups = resourcesOf(t, 'AWS::Scheduler::ScheduleGroup');
    expect(groups).toHaveLength(1);
    const [id, group] = groups[0]!;
    expect(id).toBe(idOf(scheduler.scheduleGroup));
    expect(group.Properties.Name).toBe('acme-prod-schedules');
    expect(scheduler.scheduleGroupName).toBe('acme-prod-schedules');
    expect(group.DeletionPolicy).toBe('Delete');
    expect(render(stack.resolve(scheduler.scheduleGroupArn) as Json)).toBe(`${ARN}:schedule-group/acme-prod-schedules`);
  });

  it('the longest prefix still gives a valid group name (1 to 64 of [0-9A-Za-z-_.])', () => {
    const s = new DyneinScheduler(new Stack(fastApp(), 'Long'), 'Dynein', { tenantQueuePrefix: 'a'.repeat(35) });
    expect(s.scheduleGroupName).toMatch(/^[0-9A-Za-z._-]{1,64}$/);
  });

  it('the default prefix names the group after the stack and construct', () => {
    const app = fastApp();
    const s = new DyneinStack(app, 'DyneinServerless');
    expect(s.scheduler.scheduleGroupName).toBe('DyneinServerless-Dynein-schedules');
    const outputs = Template.fromStack(s).toJSON().Outputs as Record<string, { Value: Json }>;
    expect(outputs.ScheduleGroupName?.Value).toBe('DyneinServerless-Dynein-schedules');
    expect(render(outputs.SchedulerDlqUrl?.Value)).toBe(ref(s.scheduler.schedulerDeadLetterQueue));
  });
});

describe('execution role', () => {
  it('is trusted by scheduler.amazonaws.com only, for this account and this schedule group', () => {
    const role = resource(t, idOf(scheduler.schedulerRole));
    const trust = role.Properties.AssumeRolePolicyDocument as { Statement: Record<string, Json>[] };
    expect(trust.Statement).toHaveLength(1);
    const [st] = trust.Statement;
    expect(st!.Effect).toBe('Allow');
    expect(st!.Action).toBe('sts:AssumeRole');
    expect(st!.Principal).toEqual({ Service: 'scheduler.amazonaws.com' });
    const condition = st!.Condition as Record<string, Record<string, Json>>;
    expect(Object.keys(condition)).toEqual(['StringEquals']);
    expect(render(condition.StringEquals!['aws:SourceAccount'])).toBe('{Ref:AWS::AccountId}');
    // The schedule group's ARN (the EventBridge Scheduler user guide: not a schedule, not a name prefix).
    expect(render(condition.StringEquals!['aws:SourceArn'])).toBe(`${ARN}:schedule-group/acme-prod-schedules`);
    expect(role.Properties.ManagedPolicyArns ?? []).toEqual([]);
  });

  it('may send to the inbound queue and the firing DLQ, and do nothing else', () => {
    const statements = roleStatements(t, idOf(scheduler.schedulerRole));
    for (const s of statements) expect(s.Effect).toBe('Allow');
    const granted = allowed(statements);
    expect([...granted.keys()]).toEqual(['sqs:SendMessage']);
    expect([...granted.get('sqs:SendMessage')!].sort()).toEqual(
      [getAtt(scheduler.inboundQueue, 'Arn'), getAtt(scheduler.schedulerDeadLetterQueue, 'Arn')].sort(),
    );
  });

  it('is admitted by the inbound queue policy, next to submit (the deny names both)', () => {
    const deny = queuePolicyStatements(t, idOf(scheduler.inboundQueue)).find((s) => s.Sid === 'OnlySubmitSends')!;
    expect(deny.Effect).toBe('Deny');
    expect(conditionValues(deny, 'ArnNotEquals', 'aws:PrincipalArn')).toEqual(
      [
        getAtt(scheduler.functions.submit.role!.node.defaultChild!, 'Arn'),
        getAtt(scheduler.schedulerRole.node.defaultChild!, 'Arn'),
      ].sort(),
    );
  });
});

describe('schedules function', () => {
  it('has the contract environment: the common one, the id key, the group, the role, the inbound queue and the firing DLQ', () => {
    const env = (resource(t, idOf(scheduler.functions.schedules)).Properties.Environment as { Variables: Record<string, Json> }).Variables;
    const submitEnv = (resource(t, idOf(scheduler.functions.submit)).Properties.Environment as { Variables: Record<string, Json> })
      .Variables;
    for (const key of [
      'DYNEIN_TABLE',
      'DYNEIN_SHARDS',
      'DYNEIN_GROUPS',
      'DYNEIN_LOOKAHEAD_MS',
      'DYNEIN_LEASE_MS',
      'DYNEIN_MAX_PAYLOAD_BYTES',
    ])
      expect(env[key], key).toEqual(submitEnv[key]);
    expect(render(env.DYNEIN_ID_KEY_SECRET_ARN)).toBe(ref(scheduler.idKey));
    expect(env.DYNEIN_SCHEDULE_GROUP).toBe('acme-prod-schedules');
    expect(render(env.DYNEIN_SCHEDULER_ROLE_ARN)).toBe(getAtt(scheduler.schedulerRole.node.defaultChild!, 'Arn'));
    expect(render(env.DYNEIN_INBOUND_QUEUE_ARN)).toBe(getAtt(scheduler.inboundQueue, 'Arn'));
    expect(render(env.DYNEIN_SCHEDULER_DLQ_ARN)).toBe(getAtt(scheduler.schedulerDeadLetterQueue, 'Arn'));
    expect(env.DYNEIN_SCHEDULER_ENDPOINT, 'local only').toBeUndefined();
    // Within the HTTP API's 30 s integration timeout.
    expect(resource(t, idOf(scheduler.functions.schedules)).Properties.Timeout as number).toBeLessThan(30);
  });

  it('manages the schedules of its group only, with the four actions of the contract', () => {
    const statements = roleStatements(t, functionRoleId('schedules'));
    const scheduling = statements.filter((s) => s.Action.some((a) => a.startsWith('scheduler:')));
    expect(new Set(scheduling.flatMap((s) => s.Action))).toEqual(
      new Set(['scheduler:CreateSchedule', 'scheduler:UpdateSchedule', 'scheduler:DeleteSchedule', 'scheduler:GetSchedule']),
    );
    for (const s of scheduling) {
      expect(s.Resource).toEqual([`${ARN}:schedule/acme-prod-schedules/*`]);
      expect(
        s.Action.every((a) => a.startsWith('scheduler:')),
        'no other service in the statement',
      ).toBe(true);
    }
  });

  it('passes the execution role only, only to scheduler.amazonaws.com', () => {
    const statements = roleStatements(t, functionRoleId('schedules'));
    const pass = statements.filter((s) => s.Action.includes('iam:PassRole'));
    expect(pass).toHaveLength(1);
    const [st] = pass;
    expect(st!.Action).toEqual(['iam:PassRole']);
    expect(st!.Resource).toEqual([getAtt(scheduler.schedulerRole.node.defaultChild!, 'Arn')]);
    expect(Object.keys(st!.Condition)).toEqual(['StringEquals']);
    expect(conditionValues(st!, 'StringEquals', 'iam:PassedToService')).toEqual(['scheduler.amazonaws.com']);
  });

  it('reads and writes the table (no batch writes), reads the id key, and nothing more', () => {
    const granted = allowed(roleStatements(t, functionRoleId('schedules')));
    const table = [getAtt(scheduler.table, 'Arn')];
    for (const a of ['GetItem', 'PutItem', 'UpdateItem', 'DeleteItem', 'Query'])
      expect([...granted.get(`dynamodb:${a}`)!], a).toEqual(table);
    expect([...granted.keys()].filter((a) => a.startsWith('dynamodb:')).sort()).toEqual(
      ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:Query', 'dynamodb:UpdateItem'].sort(),
    );
    expect([...granted.get('secretsmanager:GetSecretValue')!]).toEqual([ref(scheduler.idKey)]);
    expect([...granted.keys()].filter((a) => a.startsWith('sqs:'))).toEqual([]);
  });

  it('no other principal of the stack may pass a role or touch EventBridge Scheduler', () => {
    const own = new Set(roleStatements(t, functionRoleId('schedules')).map((s) => s.source));
    const offenders = allPermissionStatements(t).filter(
      (s: Statement) => s.Effect === 'Allow' && !own.has(s.source) && s.Action.some((a) => /^(iam:PassRole|scheduler:)/.test(a)),
    );
    expect(offenders.map((s) => `${s.source}: ${s.Action.join(',')}`)).toEqual([]);
  });

  it('is created after the schedule group and the execution role with its policy', () => {
    const dependsOn = resource(t, idOf(scheduler.functions.schedules)).DependsOn ?? [];
    expect(dependsOn).toContain(idOf(scheduler.scheduleGroup));
    const rolePolicies = resourcesOf(t, 'AWS::IAM::Policy').filter(([, p]) =>
      JSON.stringify(p.Properties.Roles).includes(idOf(scheduler.schedulerRole)),
    );
    expect(rolePolicies).toHaveLength(1);
    expect(dependsOn).toContain(rolePolicies[0]![0]);
  });

  it('ingest may also update items (a firing advances its schedule and writes tombstones)', () => {
    const granted = allowed(roleStatements(t, functionRoleId('ingest')));
    expect([...granted.get('dynamodb:UpdateItem')!]).toEqual([getAtt(scheduler.table, 'Arn')]);
    expect([...granted.keys()].filter((a) => a.startsWith('scheduler:') || a === 'iam:PassRole')).toEqual([]);
  });
});

describe('HTTP API', () => {
  const SCHEDULE_ROUTES = [
    'GET /v1/tenants/{tenant}/schedules',
    'PUT /v1/tenants/{tenant}/schedules/{name}',
    'GET /v1/tenants/{tenant}/schedules/{name}',
    'DELETE /v1/tenants/{tenant}/schedules/{name}',
    'POST /v1/tenants/{tenant}/schedules/{name}/pause',
    'POST /v1/tenants/{tenant}/schedules/{name}/resume',
  ];

  it('routes the six schedule route keys, IAM-authorized, to the schedules function', () => {
    const routes = resourcesOf(t, 'AWS::ApiGatewayV2::Route').filter(([, r]) => String(r.Properties.RouteKey).includes('/schedules'));
    expect(routes.map(([, r]) => r.Properties.RouteKey).sort()).toEqual([...SCHEDULE_ROUTES].sort());
    for (const [id, r] of routes) {
      expect(r.Properties.AuthorizationType, id).toBe('AWS_IAM');
      const integrationId = /^integrations\/\{Ref:(.+)\}$/.exec(render(r.Properties.Target))![1]!;
      expect(render(resource(t, integrationId).Properties.IntegrationUri), id).toBe(getAtt(scheduler.functions.schedules, 'Arn'));
    }
  });

  it('API Gateway may invoke the schedules function for each of those routes', () => {
    // (EventBridge may invoke it too, for the never-fired check: monitoring.test.ts.)
    const permissions = resourcesOf(t, 'AWS::Lambda::Permission').filter(
      ([, p]) =>
        render(p.Properties.FunctionName as Json) === getAtt(scheduler.functions.schedules, 'Arn') &&
        p.Properties.Principal !== 'events.amazonaws.com',
    );
    expect(permissions.length).toBe(SCHEDULE_ROUTES.length);
    for (const [id, p] of permissions) {
      expect(p.Properties.Principal, id).toBe('apigateway.amazonaws.com');
      expect(render(p.Properties.SourceArn as Json), id).toContain('/schedules');
    }
  });
});

describe('firing DLQ', () => {
  const dlq = (): Resource => resource(t, idOf(scheduler.schedulerDeadLetterQueue));

  it('is encrypted (SQS-managed keys) and keeps messages 14 days', () => {
    expect(dlq().Properties.SqsManagedSseEnabled).toBe(true);
    expect(dlq().Properties.MessageRetentionPeriod).toBe(14 * 86_400);
    expect(dlq().Properties.RedrivePolicy).toBeUndefined();
  });

  it('denies every action without TLS', () => {
    const id = idOf(scheduler.schedulerDeadLetterQueue);
    const tls = queuePolicyStatements(t, id).filter(
      (s) =>
        s.Effect === 'Deny' &&
        isAnyone(s.Principal) &&
        s.Action.includes('sqs:*') &&
        s.Resource.includes(getAtt(id, 'Arn')) &&
        String((s.Condition.Bool as Record<string, Json> | undefined)?.['aws:SecureTransport']) === 'false',
    );
    expect(tls).toHaveLength(1);
  });

  it('is no SQS queue’s DLQ (EventBridge Scheduler sends to it): only the execution role may send to it', () => {
    for (const [id, q] of resourcesOf(t, 'AWS::SQS::Queue'))
      expect(JSON.stringify(q.Properties.RedrivePolicy ?? {}), id).not.toContain(idOf(scheduler.schedulerDeadLetterQueue));
    const senders = allPermissionStatements(t).filter(
      (s) =>
        s.Effect === 'Allow' &&
        s.Action.includes('sqs:SendMessage') &&
        s.Resource.includes(getAtt(scheduler.schedulerDeadLetterQueue, 'Arn')),
    );
    expect(new Set(senders.map((s) => s.source)).size).toBe(1);
    expect(roleStatements(t, idOf(scheduler.schedulerRole)).map((s) => s.source)).toContain(senders[0]!.source);
  });
});

describe('alarms and dashboard', () => {
  const alarms = () => resourcesOf(t, 'AWS::CloudWatch::Alarm');
  /** The AWS/Scheduler metrics of an alarm (direct or in its math expression), with their ScheduleGroup dimension. */
  const schedulerMetrics = (a: Resource): { name: string; group: string; stat: string }[] => {
    const metrics = (a.Properties.Metrics ?? []) as {
      MetricStat?: { Metric: { Namespace: string; MetricName: string; Dimensions?: { Name: string; Value: Json }[] }; Stat: string };
    }[];
    return metrics
      .filter((m) => m.MetricStat?.Metric.Namespace === 'AWS/Scheduler')
      .map((m) => ({
        name: m.MetricStat!.Metric.MetricName,
        group: render(m.MetricStat!.Metric.Dimensions?.find((d) => d.Name === 'ScheduleGroup')?.Value),
        stat: m.MetricStat!.Stat,
      }));
  };
  const named = (fragment: string) => alarms().filter(([id]) => id.includes(fragment));

  it('alarm on the first message in the firing DLQ, to the alarm topic', () => {
    const [a] = named('SchedulerDlqNotEmpty');
    expect(a).toBeDefined();
    const p = a![1].Properties;
    expect(p.MetricName).toBe('ApproximateNumberOfMessagesVisible');
    expect(render((p.Dimensions as { Value: Json }[])[0]!.Value)).toBe(getAtt(scheduler.schedulerDeadLetterQueue, 'QueueName'));
    expect(p.Threshold).toBe(0);
    expect(p.ComparisonOperator).toBe('GreaterThanThreshold');
    expect(p.EvaluationPeriods).toBe(1);
    expect((p.AlarmActions as Json[]).map((x) => render(x))).toEqual([ref(topic)]);
  });

  it('alarm on firings given up (dropped, or not even sent to the DLQ), from the group’s AWS/Scheduler metrics', () => {
    const [a] = named('SchedulerFiringsFailed');
    expect(a).toBeDefined();
    const metrics = schedulerMetrics(a![1]);
    expect(metrics.map((m) => m.name).sort()).toEqual(['InvocationDroppedCount', 'InvocationsFailedToBeSentToDeadLetterCount']);
    for (const m of metrics) expect([m.group, m.stat]).toEqual(['acme-prod-schedules', 'Sum']);
    expect(a![1].Properties.Threshold).toBe(0);
    expect(a![1].Properties.TreatMissingData).toBe('notBreaching');
    expect((a![1].Properties.AlarmActions as Json[]).map((x) => render(x))).toEqual([ref(topic)]);
  });

  it('alarm on firings the inbound queue keeps refusing or that are throttled (3 of 5 minutes)', () => {
    const [a] = named('SchedulerFiringErrors');
    expect(a).toBeDefined();
    const metrics = schedulerMetrics(a![1]);
    expect(metrics.map((m) => m.name).sort()).toEqual(['InvocationThrottleCount', 'TargetErrorCount', 'TargetErrorThrottledCount']);
    for (const m of metrics) expect(m.group).toBe('acme-prod-schedules');
    expect([a![1].Properties.EvaluationPeriods, a![1].Properties.DatapointsToAlarm]).toEqual([5, 3]);
    expect(scheduler.monitoring.alarms.length).toBe(alarms().length);
  });

  it('the dashboard shows attempts, errors, throttles and dead letters of the group, and the firing DLQ depth', () => {
    const body = render(resourcesOf(t, 'AWS::CloudWatch::Dashboard')[0]![1].Properties.DashboardBody);
    const widgets = (JSON.parse(body) as { widgets: { properties: { title?: string; metrics?: Json[][] } }[] }).widgets;
    const lines = widgets.flatMap((w) => w.properties.metrics ?? []).map((m) => m.filter((x) => typeof x === 'string') as string[]);
    const schedulerLines = lines.filter((l) => l[0] === 'AWS/Scheduler');
    for (const name of [
      'InvocationAttemptCount',
      'TargetErrorCount',
      'TargetErrorThrottledCount',
      'InvocationThrottleCount',
      'InvocationsSentToDeadLetterCount',
      'InvocationsFailedToBeSentToDeadLetterCount',
      'InvocationDroppedCount',
    ])
      expect(
        schedulerLines.some((l) => l[1] === name && l[2] === 'ScheduleGroup' && l[3] === 'acme-prod-schedules'),
        name,
      ).toBe(true);
    expect(
      lines.some(
        (l) =>
          l[0] === 'AWS/SQS' &&
          l[1] === 'ApproximateNumberOfMessagesVisible' &&
          l[3] === getAtt(scheduler.schedulerDeadLetterQueue, 'QueueName'),
      ),
      'firing DLQ depth',
    ).toBe(true);
    expect(widgets.map((w) => w.properties.title)).toContain('Recurring schedule firings (EventBridge Scheduler)');
  });

  it('metricFirings gives the group’s metric, Sum per minute', () => {
    const m = scheduler.metricFirings('InvocationAttemptCount');
    expect([m.namespace, m.metricName, m.statistic, m.period.toSeconds()]).toEqual(['AWS/Scheduler', 'InvocationAttemptCount', 'Sum', 60]);
    expect(m.dimensions).toEqual({ ScheduleGroup: 'acme-prod-schedules' });
  });
});

describe('tenant grant', () => {
  /** execute-api ARN patterns match like IAM: `*` any characters (including `/`), `?` one. */
  const arnMatches = (pattern: string, arn: string) =>
    new RegExp(
      `^${pattern
        .replace(/[.+^${}()|[\]\\]/g, '\\$&')
        .replace(/\*/g, '.*')
        .replace(/\?/g, '.')}$`,
    ).test(arn);
  const request = (method: string, path: string) =>
    `arn:{Ref:AWS::Partition}:execute-api:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${ref(scheduler.httpApi)}/$default/${method}${path}`;
  const patterns = () => [...(allowed(roleStatements(t, idOf(apiRole))).get('execute-api:Invoke') ?? [])];
  const can = (method: string, path: string) => patterns().some((p) => arnMatches(p, request(method, path)));

  it('covers every schedule route of its tenant', () => {
    for (const [method, path] of [
      ['GET', '/v1/tenants/alpha/schedules'],
      ['PUT', '/v1/tenants/alpha/schedules/nightly.report_v2'],
      ['GET', '/v1/tenants/alpha/schedules/nightly.report_v2'],
      ['DELETE', '/v1/tenants/alpha/schedules/nightly.report_v2'],
      ['POST', '/v1/tenants/alpha/schedules/nightly.report_v2/pause'],
      ['POST', '/v1/tenants/alpha/schedules/nightly.report_v2/resume'],
    ])
      expect(can(method!, path!), `${method} ${path}`).toBe(true);
  });

  it('covers nothing of another tenant, nor other methods or paths', () => {
    for (const [method, path] of [
      ['GET', '/v1/tenants/beta/schedules'],
      ['PUT', '/v1/tenants/beta/schedules/x'],
      ['POST', '/v1/tenants/beta/schedules/x/pause'],
      ['GET', '/v1/tenants/alphabet/schedules'],
      ['PUT', '/v1/tenants/alphabet/schedules/x'],
      ['POST', '/v1/tenants/alpha/schedules'],
      ['PUT', '/v1/tenants/alpha/schedules'],
      ['DELETE', '/v1/tenants/alpha/schedules'],
      ['PATCH', '/v1/tenants/alpha/schedules/x'],
      ['POST', '/v1/tenants/alpha/schedules/x'],
      ['GET', '/v1/tenants/alpha'],
    ])
      expect(can(method!, path!), `${method} ${path}`).toBe(false);
  });

  it('has no wildcard but the job id, the schedule name, the workflow id and the operation id', () => {
    for (const p of patterns()) {
      const path = p.slice(p.indexOf('/$default/') + '/$default/'.length);
      expect(path.replace(/\/(jobs|schedules|workflows|operations)\/\*/, '/$1/<id>'), p).not.toMatch(/[*?]/);
    }
  });
});
