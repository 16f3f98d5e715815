/**
 * The deploy defects of issue #11 §3, each checked on the synthesized template of the deployable
 * stack (lib/stack.ts with tenants) and, where a prop changes it, of a second configuration.
 * Runtime halves are tested elsewhere: parked rows in test/integration/parked-jobs.test.ts, the
 * registration's condition in test/integration/tenant-registration.test.ts, the bounded error path
 * in test/integration/tick-definition.test.ts, the 413 in test/integration/api-body-limit.test.ts.
 */
import { RemovalPolicy, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { INGEST_BATCHING_WINDOW_MS, METRICS_NAMESPACE } from '../../core/model/schema.js';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { DyneinStack } from '../../lib/stack.js';
import { fastApp, getAtt, idOf, ref, render, resource, resourcesOf, roleStatements, allowed, type Json } from './support.js';

let stack: DyneinStack;
let t: Template;
let other: DyneinScheduler;
let otherT: Template;

beforeAll(() => {
  const app = fastApp();
  stack = new DyneinStack(app, 'Deployable', { demoTenant: true, tenants: ['billing'] });
  const s2 = new Stack(app, 'Configured');
  other = new DyneinScheduler(s2, 'Dynein', {
    dispatchReservedConcurrency: 20,
    removalPolicy: RemovalPolicy.DESTROY,
    logLevel: 'INFO',
    apiName: 'jobs-api',
  });
  t = Template.fromStack(stack);
  otherT = Template.fromStack(s2);
});

const functionsOf = (tpl: Template) => resourcesOf(tpl, 'AWS::Lambda::Function');
const alarmNamed = (tpl: Template, id: string) => resourcesOf(tpl, 'AWS::CloudWatch::Alarm').find(([logical]) => logical.includes(id))?.[1];

describe('reserved concurrency on the dispatcher is opt-in', () => {
  it('no function reserves concurrency by default; the prop reserves it on dispatch only', () => {
    for (const [id, f] of functionsOf(t)) expect(f.Properties.ReservedConcurrentExecutions, id).toBeUndefined();
    const reserved = functionsOf(otherT).filter(([, f]) => f.Properties.ReservedConcurrentExecutions !== undefined);
    expect(reserved.map(([id]) => id)).toEqual([idOf(other.functions.dispatch)]);
    expect(reserved[0]![1].Properties.ReservedConcurrentExecutions).toBe(20);
  });
});

describe('tenant registration is conditional; removed tenants’ jobs are parked, with a metric and an alarm', () => {
  it('each tenant registers through the registration function (conditional put), not an unconditional SDK call', () => {
    expect(resourcesOf(t, 'Custom::AWS')).toEqual([]);
    const regs = resourcesOf(t, 'Custom::DyneinTenantRegistration');
    expect(regs.map(([, r]) => r.Properties.TenantName).sort()).toEqual(['billing', 'demo']);
    const fn = /^\{GetAtt:(.+)\.Arn\}$/.exec(render(regs[0]![1].Properties.ServiceToken as Json))![1]!;
    for (const [, r] of regs) expect(render(r.Properties.ServiceToken as Json)).toBe(getAtt(fn, 'Arn'));
    // The function's code is the register bundle: its conditional put names the owner.
    expect(resource(t, fn).Properties.Handler).toBe('index.handler');
  });

  it('the ParkedJobs alarm watches the dispatch function’s ParkedJobs metric and says what to do', () => {
    const alarm = alarmNamed(t, 'ParkedJobs');
    expect(alarm).toBeDefined();
    expect(alarm!.Properties).toMatchObject({
      Namespace: METRICS_NAMESPACE,
      MetricName: 'ParkedJobs',
      Statistic: 'Maximum',
      Threshold: 0,
      ComparisonOperator: 'GreaterThanThreshold',
    });
    expect(alarm!.Properties.Dimensions).toEqual([{ Name: 'service', Value: 'dynein-dispatch' }]);
    expect(String(alarm!.Properties.AlarmDescription)).toMatch(/Register the tenant again/);
  });
});

describe('oversized bodies: 413 rather than an opaque error', () => {
  it('the routes use payload format 2.0 (JSON bodies arrive as text), and the access log records integration errors', () => {
    for (const [id, i] of resourcesOf(t, 'AWS::ApiGatewayV2::Integration')) expect(i.Properties.PayloadFormatVersion, id).toBe('2.0');
    const [, stage] = resourcesOf(t, 'AWS::ApiGatewayV2::Stage')[0]!;
    const format = (stage.Properties.AccessLogSettings as { Format: string }).Format;
    for (const v of ['$context.integrationErrorMessage', '$context.integrationStatus', '$context.error.responseType', '$context.status'])
      expect(format).toContain(v);
  });
});

describe('the job id key is retained with the table', () => {
  it('both are retained by default, and removalPolicy moves both', () => {
    const pair = (tpl: Template, s: DyneinScheduler) =>
      [resource(tpl, idOf(s.table)), resource(tpl, idOf(s.idKey))].map((r) => [r.DeletionPolicy, r.UpdateReplacePolicy]);
    expect(pair(t, stack.scheduler)).toEqual([
      ['Retain', 'Retain'],
      ['Retain', 'Retain'],
    ]);
    expect(pair(otherT, other)).toEqual([
      ['Delete', 'Delete'],
      ['Delete', 'Delete'],
    ]);
  });
});

describe('the dispatcher’s error path is bounded, and alarms fire', () => {
  it('the dispatch task retries with backoff and a cap, counts caught failures, waits before re-entering, and gives up', () => {
    const sm = resource(t, idOf(stack.scheduler.stateMachine));
    const def = JSON.parse(render(sm.Properties.DefinitionString as Json)) as {
      States: { Groups: { ItemProcessor: { States: Record<string, Record<string, Json>> } } };
    };
    const states = def.States.Groups.ItemProcessor.States;
    const retry = states.Dispatch!.Retry as { ErrorEquals: string[]; MaxAttempts: number; BackoffRate: number; IntervalSeconds: number }[];
    expect(retry.length).toBeGreaterThan(0);
    for (const r of retry) {
      expect(r.MaxAttempts).toBeLessThanOrEqual(6);
      expect(r.BackoffRate).toBeGreaterThan(1);
      expect(r.IntervalSeconds).toBeGreaterThanOrEqual(1);
    }
    expect(states.Dispatch!.Catch).toEqual([{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'CountError' }]);
    expect(states.TooManyErrors!.Choices).toEqual([{ Variable: '$.failures', NumericGreaterThanEquals: 4, Next: 'GaveUp' }]);
    expect(states.AfterError).toMatchObject({ Type: 'Wait', SecondsPath: '$.backoffSeconds', Next: 'Dispatch' });
    expect(String((states.CountError!.Parameters as Record<string, Json>)['backoffSeconds.$'])).toContain('States.Array(5, 10, 20, 40)');
  });

  it('DispatchErrors and DispatchThrottles alarm on the dispatch function', () => {
    for (const [name, metric] of [
      ['DispatchErrors', 'Errors'],
      ['DispatchThrottles', 'Throttles'],
    ]) {
      const alarm = alarmNamed(t, name!);
      expect(alarm, name).toBeDefined();
      expect(alarm!.Properties).toMatchObject({ Namespace: 'AWS/Lambda', MetricName: metric, Threshold: 0 });
      expect(render((alarm!.Properties.Dimensions as { Value: Json }[])[0]!.Value)).toBe(ref(stack.scheduler.functions.dispatch));
    }
  });
});

describe('sends to tenant queues are allowed by the senders’ own IAM policy', () => {
  it('submit and dispatch may sqs:SendMessage to <prefix>-t-*, and every tenant queue is named so', () => {
    const s = stack.scheduler;
    const pattern = `arn:{Ref:AWS::Partition}:sqs:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${s.tenantQueuePrefix}-t-*`;
    for (const f of [s.functions.submit, s.functions.dispatch]) {
      const roleId = /^\{GetAtt:(.+)\.Arn\}$/.exec(render(resource(t, idOf(f)).Properties.Role))![1]!;
      expect([...(allowed(roleStatements(t, roleId)).get('sqs:SendMessage') ?? [])]).toContain(pattern);
    }
    for (const tenant of s.tenants) {
      expect(resource(t, idOf(tenant.queue)).Properties.QueueName).toBe(`${s.tenantQueuePrefix}-t-${tenant.tenantName}`);
      expect(resource(t, idOf(tenant.deadLetterQueue)).Properties.QueueName).toBe(`${s.tenantQueuePrefix}-d-${tenant.tenantName}`);
    }
  });
});

describe('the inbound queue’s visibility timeout', () => {
  it('is at least six times the ingest timeout plus the batching window', () => {
    const s = stack.scheduler;
    const timeout = resource(t, idOf(s.functions.ingest)).Properties.Timeout as number;
    expect(resource(t, idOf(s.inboundQueue)).Properties.VisibilityTimeout as number).toBeGreaterThanOrEqual(
      6 * timeout + INGEST_BATCHING_WINDOW_MS / 1000,
    );
  });
});

describe('logs and names', () => {
  it('every function logs to a log group created in the stack, with retention; no implicit log groups', () => {
    const groups = new Map(resourcesOf(t, 'AWS::Logs::LogGroup'));
    expect(resourcesOf(t, 'Custom::LogRetention')).toEqual([]);
    for (const [id, f] of functionsOf(t)) {
      const lg = /^\{Ref:(.+)\}$/.exec(render((f.Properties.LoggingConfig as { LogGroup?: Json }).LogGroup))?.[1];
      expect(groups.get(lg ?? '')?.Properties.RetentionInDays, id).toBeGreaterThan(0);
    }
    // The API's access logs and the state machine's logs too.
    expect(groups.size).toBe(functionsOf(t).length + 2);
    for (const [id, g] of groups) expect(g.Properties.RetentionInDays, id).toBeGreaterThan(0);
  });

  it('steady state logs no line per request: platform logs at WARN, Powertools at WARN, the tick logs errors only', () => {
    for (const [id, f] of functionsOf(t)) {
      expect(f.Properties.LoggingConfig, id).toMatchObject({ LogFormat: 'JSON', SystemLogLevel: 'WARN' });
    }
    for (const n of ['submit', 'dispatch'] as const) {
      const env = (resource(t, idOf(stack.scheduler.functions[n])).Properties.Environment as { Variables: Record<string, string> })
        .Variables;
      expect(env.POWERTOOLS_LOG_LEVEL).toBe('WARN');
      // Metrics (EMF lines, which carry no level) pass Lambda's application filter at INFO.
      expect(
        (resource(t, idOf(stack.scheduler.functions[n])).Properties.LoggingConfig as { ApplicationLogLevel: string }).ApplicationLogLevel,
      ).toBe('INFO');
    }
    expect((resource(t, idOf(stack.scheduler.stateMachine)).Properties.LoggingConfiguration as { Level: string }).Level).toBe('ERROR');
    // logLevel INFO turns the platform lines and every tick transition back on.
    for (const [id, f] of functionsOf(otherT))
      expect((f.Properties.LoggingConfig as { SystemLogLevel: string }).SystemLogLevel, id).toBe('INFO');
    expect((resource(otherT, idOf(other.stateMachine)).Properties.LoggingConfiguration as { Level: string }).Level).toBe('ALL');
  });

  it('the API is named after its stack (or apiName)', () => {
    expect(resource(t, idOf(stack.scheduler.httpApi)).Properties.Name).toBe('Deployable-dynein-api');
    expect(resource(otherT, idOf(other.httpApi)).Properties.Name).toBe('jobs-api');
  });
});
