/**
 * DyneinTenant: the queue policy that lets only the scheduler send, the schedule / consume /
 * redrive grants, and a tenant added from a team's own stack against an imported scheduler.
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { keys } from '../../adapters/dynamoJobStore.js';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { DyneinTenant } from '../../lib/tenant.js';
import {
  allowed,
  conditionValues,
  exportsOf,
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
} from './support.js';

/** IAM's wildcard match of an ARN pattern (`*` any run of characters, `?` one). */
function arnMatches(pattern: string, arn: string): boolean {
  const re = pattern.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${re}$`).test(arn);
}

/** The `execute-api` ARN API Gateway authorizes a request against. */
const requestArn = (api: string, method: string, path: string) => `arn:{Ref:AWS::Partition}:execute-api:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${api}/$default/${method}${path}`;

/** Requests of DESIGN.md's four routes for `tenant`. */
const requests = (tenant: string): [string, string][] => [
  ['POST', `/v1/tenants/${tenant}/jobs`],
  ['POST', `/v1/tenants/${tenant}/jobs/batch`],
  ['GET', `/v1/tenants/${tenant}/jobs/job-123`],
  ['DELETE', `/v1/tenants/${tenant}/jobs/job-123`],
];

const roleArn = (r: iam.IRole | undefined) => getAtt(r as unknown as IConstruct, 'Arn');
const PRINCIPAL = 'aws:PrincipalArn';

describe('tenant in the scheduler stack', () => {
  let stack: Stack;
  let scheduler: DyneinScheduler;
  let alpha: DyneinTenant;
  let beta: DyneinTenant;
  let scheduleRole: iam.Role;
  let consumeRole: iam.Role;
  let redriveRole: iam.Role;
  let t: Template;

  beforeAll(() => {
    const app = fastApp();
    stack = new Stack(app, 'Tenants');
    scheduler = new DyneinScheduler(stack, 'Dynein');
    alpha = scheduler.addTenant('alpha');
    beta = scheduler.addTenant('beta');
    const role = (id: string) => new iam.Role(stack, id, { assumedBy: new iam.AccountRootPrincipal() });
    scheduleRole = role('ScheduleRole');
    consumeRole = role('ConsumeRole');
    redriveRole = role('RedriveRole');
    alpha.grantSchedule(scheduleRole);
    alpha.grantConsume(consumeRole);
    alpha.grantRedrive(redriveRole);
    t = Template.fromStack(stack);
  });

  /** Allowed and denied senders of a tenant queue, as the queue policy says. */
  function senders(tenant: DyneinTenant) {
    const statements = queuePolicyStatements(t, idOf(tenant.queue));
    const queueArn = getAtt(tenant.queue, 'Arn');
    const allows = statements.filter((s) => s.Effect === 'Allow');
    const denies = statements.filter((s) => s.Effect === 'Deny' && (s.Action.includes('sqs:SendMessage') || s.Action.includes('sqs:*')) && conditionValues(s, 'ArnNotEquals', PRINCIPAL) !== undefined);
    return { allows, denies, queueArn };
  }

  it('the queue policy allows sqs:SendMessage to the submit and dispatch roles only and denies it to everyone else', () => {
    const expected = [roleArn(scheduler.functions.submit.role), roleArn(scheduler.functions.dispatch.role)].sort();
    const { allows, denies, queueArn } = senders(beta);
    // The only Allow: SendMessage, conditioned on the caller being one of the scheduler's senders.
    expect(allows).toHaveLength(1);
    const allow = allows[0]!;
    expect(allow.Action).toEqual(['sqs:SendMessage']);
    expect(allow.Resource).toEqual([queueArn]);
    expect(conditionValues(allow, 'ArnEquals', PRINCIPAL)).toEqual(expected);
    expect(denies).toHaveLength(1);
    const deny = denies[0]!;
    expect(isAnyone(deny.Principal)).toBe(true);
    expect(deny.Resource).toEqual([queueArn]);
    expect(conditionValues(deny, 'ArnNotEquals', PRINCIPAL)).toEqual(expected);
    // The deny has no other condition that could narrow it.
    expect(Object.keys(deny.Condition)).toEqual(['ArnNotEquals']);
  });

  it('grantSchedule allows execute-api:Invoke on this tenant’s routes only', () => {
    const statements = roleStatements(t, idOf(scheduleRole));
    const granted = allowed(statements);
    expect([...granted.keys()]).toEqual(['execute-api:Invoke']);
    const patterns = [...granted.get('execute-api:Invoke')!];
    expect(patterns).toHaveLength(4);
    const api = ref(scheduler.httpApi);
    for (const p of patterns) {
      expect(p).toMatch(/^arn:\{Ref:AWS::Partition\}:execute-api:\{Ref:AWS::Region\}:\{Ref:AWS::AccountId\}:/);
      expect(p.startsWith(`arn:{Ref:AWS::Partition}:execute-api:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${api}/`), p).toBe(true);
    }
    // Exactly the four routes, on the $default stage, each with its own method.
    expect(patterns.map((p) => p.slice(p.indexOf('/$default/'))).sort()).toEqual([
      '/$default/DELETE/v1/tenants/alpha/jobs/*',
      '/$default/GET/v1/tenants/alpha/jobs/*',
      '/$default/POST/v1/tenants/alpha/jobs',
      '/$default/POST/v1/tenants/alpha/jobs/batch',
    ]);
    for (const [method, path] of [['POST', '/v1/tenants/alpha/jobs/x'], ['PUT', '/v1/tenants/alpha/jobs/x'], ['GET', '/v1/tenants/alpha/jobs']] as [string, string][]) {
      expect(patterns.some((p) => arnMatches(p, requestArn(api, method, path))), `${method} ${path}`).toBe(false);
    }
    // Every route of alpha is allowed; no route of beta is; nor is a route outside /v1/tenants.
    for (const [method, path] of requests('alpha')) expect(patterns.some((p) => arnMatches(p, requestArn(api, method, path))), `${method} ${path}`).toBe(true);
    for (const [method, path] of [...requests('beta'), ...requests('alphabet'), ['GET', '/v1/tenants/alpha'] as [string, string]]) {
      expect(patterns.some((p) => arnMatches(p, requestArn(api, method, path))), `${method} ${path}`).toBe(false);
    }
  });

  it('grantConsume allows exactly receive, delete and change-visibility on this tenant’s queue', () => {
    const granted = allowed(roleStatements(t, idOf(consumeRole)));
    expect([...granted.keys()].sort()).toEqual(['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:ReceiveMessage']);
    for (const [a, resources] of granted) expect([...resources], a).toEqual([getAtt(alpha.queue, 'Arn')]);
  });

  it('grantRedrive adds the role to the allowed senders of this tenant’s queue only', () => {
    const expected = [roleArn(scheduler.functions.submit.role), roleArn(scheduler.functions.dispatch.role), roleArn(redriveRole)].sort();
    const { allows, denies } = senders(alpha);
    expect(allows).toHaveLength(1);
    expect(conditionValues(allows[0]!, 'ArnEquals', PRINCIPAL)).toEqual(expected);
    expect(denies).toHaveLength(1);
    expect(conditionValues(denies[0]!, 'ArnNotEquals', PRINCIPAL)).toEqual(expected);
    // beta's queue is untouched.
    expect(conditionValues(senders(beta).allows[0]!, 'ArnEquals', PRINCIPAL)).not.toContain(roleArn(redriveRole));
    const granted = allowed(roleStatements(t, idOf(redriveRole)));
    expect([...granted.get('sqs:SendMessage')!]).toEqual([getAtt(alpha.queue, 'Arn')]);
    expect([...granted.get('sqs:StartMessageMoveTask')!]).toEqual([getAtt(alpha.deadLetterQueue, 'Arn')]);
  });

  it('the scheduler roles get no identity grant on tenant queues (the queue policy is the only way in)', () => {
    for (const f of [scheduler.functions.submit, scheduler.functions.dispatch]) {
      for (const s of roleStatements(t, idOf(f.role as unknown as IConstruct))) {
        for (const tenant of [alpha, beta]) expect(s.Resource, s.source).not.toContain(getAtt(tenant.queue, 'Arn'));
      }
    }
  });
});

describe('tenant from a team’s own stack', () => {
  const TENANT = 'payments';
  let schedulerStack: Stack;
  let teamStack: Stack;
  let scheduler: DyneinScheduler;
  let topic: sns.Topic;
  let payments: DyneinTenant;
  let apiRole: iam.Role;
  let workerRole: iam.Role;
  let synthError: unknown;
  let schedT: Template;
  let teamT: Template;
  let imports: Map<string, string>;

  beforeAll(() => {
    const app = fastApp();
    schedulerStack = new Stack(app, 'SchedulerStack');
    topic = new sns.Topic(schedulerStack, 'Alarms', { enforceSSL: true });
    scheduler = new DyneinScheduler(schedulerStack, 'Dynein', { alarmTopic: topic });
    teamStack = new Stack(app, 'TeamStack');
    payments = new DyneinTenant(teamStack, 'Payments', { scheduler: DyneinScheduler.fromAttributes(scheduler.attributes), tenantName: TENANT });
    apiRole = new iam.Role(teamStack, 'ApiRole', { assumedBy: new iam.AccountRootPrincipal() });
    workerRole = new iam.Role(teamStack, 'WorkerRole', { assumedBy: new iam.AccountRootPrincipal() });
    payments.grantSchedule(apiRole);
    payments.grantConsume(workerRole);
    try {
      app.synth();
    } catch (err) {
      synthError = err;
      return;
    }
    // Templates come from the assembly just synthesized.
    schedT = Template.fromStack(schedulerStack);
    teamT = Template.fromStack(teamStack);
    imports = exportsOf('SchedulerStack', schedT);
  });

  const fromScheduler = (x: string) => `SchedulerStack!${x}`;

  it('the app with both stacks synthesizes', () => {
    expect(synthError).toBeUndefined();
    // The team stack reads the scheduler's values through exports.
    expect(imports.size).toBeGreaterThanOrEqual(4);
  });

  it('creates the tenant queue and its DLQ in the team stack', () => {
    const queues = resourcesOf(teamT, 'AWS::SQS::Queue');
    expect(queues.map(([id]) => id).sort()).toEqual([idOf(payments.queue), idOf(payments.deadLetterQueue)].sort());
    const q = resource(teamT, idOf(payments.queue));
    expect(q.Properties.RedrivePolicy).toEqual({ deadLetterTargetArn: { 'Fn::GetAtt': [idOf(payments.deadLetterQueue), 'Arn'] }, maxReceiveCount: 5 });
    for (const [id, x] of queues) expect(x.Properties.SqsManagedSseEnabled, id).toBe(true);
    expect(resourcesOf(schedT, 'AWS::SQS::Queue')).toHaveLength(2); // inbound and its DLQ only
  });

  it('registers the tenant with a PutItem into the scheduler’s table', () => {
    const regs = resourcesOf(teamT, 'Custom::AWS');
    expect(regs).toHaveLength(1);
    const [regId, reg] = regs[0]!;
    const table = fromScheduler(ref(scheduler.table));
    const item = { ...keys.tenant(TENANT), queueUrl: { S: ref(payments.queue) }, dlqUrl: { S: ref(payments.deadLetterQueue) } };
    for (const phase of ['Create', 'Update']) {
      const call = JSON.parse(render(reg.Properties[phase], imports)) as { service: string; action: string; parameters: { TableName: string; Item: Json } };
      expect(call.service.toLowerCase(), phase).toBe('dynamodb');
      expect(call.action.toLowerCase(), phase).toBe('putitem');
      expect(call.parameters.TableName, phase).toBe(table);
      expect(call.parameters.Item, phase).toEqual(item);
    }
    const del = JSON.parse(render(reg.Properties.Delete, imports)) as { action: string; parameters: { TableName: string; Key: Json } };
    expect(del.action.toLowerCase()).toBe('deleteitem');
    expect(del.parameters).toEqual({ TableName: table, Key: keys.tenant(TENANT) });
    // The provider may write the registration into that table, and only there.
    const policies = resourcesOf(teamT, 'AWS::IAM::Policy').filter(([id]) => (reg.DependsOn ?? []).includes(id));
    expect(policies, `policy of ${regId}`).toHaveLength(1);
    const granted = allowed(roleStatements(teamT, /^\{Ref:(.+)\}$/.exec(render((policies[0]![1].Properties.Roles as Json[])[0]))![1]!, imports));
    expect([...(granted.get('dynamodb:PutItem') ?? [])]).toEqual([fromScheduler(getAtt(scheduler.table, 'Arn'))]);
  });

  it('the queue policy admits exactly the scheduler’s submit and dispatch roles from the other stack', () => {
    const expected = [fromScheduler(roleArn(scheduler.functions.submit.role)), fromScheduler(roleArn(scheduler.functions.dispatch.role))].sort();
    const statements = queuePolicyStatements(teamT, idOf(payments.queue), imports);
    const allows = statements.filter((s) => s.Effect === 'Allow');
    expect(allows).toHaveLength(1);
    expect(conditionValues(allows[0]!, 'ArnEquals', PRINCIPAL, imports)).toEqual(expected);
    const denies = statements.filter((s) => s.Effect === 'Deny' && conditionValues(s, 'ArnNotEquals', PRINCIPAL) !== undefined);
    expect(denies).toHaveLength(1);
    expect(denies[0]!.Action).toContain('sqs:SendMessage');
    expect(conditionValues(denies[0]!, 'ArnNotEquals', PRINCIPAL, imports)).toEqual(expected);
  });

  it('grants work against the imported API and the team’s queue', () => {
    const invoke = [...(allowed(roleStatements(teamT, idOf(apiRole), imports)).get('execute-api:Invoke') ?? [])];
    const api = fromScheduler(ref(scheduler.httpApi));
    expect(invoke).toHaveLength(4);
    for (const [method, path] of requests(TENANT)) expect(invoke.some((p) => arnMatches(p, requestArn(api, method, path))), `${method} ${path}`).toBe(true);
    for (const [method, path] of requests('demo')) expect(invoke.some((p) => arnMatches(p, requestArn(api, method, path))), `${method} ${path}`).toBe(false);
    const consume = allowed(roleStatements(teamT, idOf(workerRole), imports));
    expect([...consume.keys()].sort()).toEqual(['sqs:ChangeMessageVisibility', 'sqs:DeleteMessage', 'sqs:ReceiveMessage']);
    for (const [, resources] of consume) expect([...resources]).toEqual([getAtt(payments.queue, 'Arn')]);
  });

  it('alarms on its DLQ to the scheduler’s alarm topic', () => {
    const alarms = resourcesOf(teamT, 'AWS::CloudWatch::Alarm').filter(
      ([, a]) => a.Properties.MetricName === 'ApproximateNumberOfMessagesVisible' && render((a.Properties.Dimensions as { Value: Json }[])[0]!.Value) === getAtt(payments.deadLetterQueue, 'QueueName'),
    );
    expect(alarms).toHaveLength(1);
    expect((alarms[0]![1].Properties.AlarmActions as Json[]).map((x) => render(x, imports))).toEqual([fromScheduler(ref(topic))]);
  });
});
