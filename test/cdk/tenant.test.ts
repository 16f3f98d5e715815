/**
 * DyneinTenant: the queue policy that lets only the scheduler (and tagged redrive principals)
 * send, the scheduler's own send grant by queue name, the schedule / consume / redrive grants,
 * the conditional registration, and a tenant added from a team's own stack.
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as sns from 'aws-cdk-lib/aws-sns';
import type { IConstruct } from 'constructs';
import { beforeAll, describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { DyneinTenant } from '../../lib/tenant.js';
import {
  allowed,
  allPermissionStatements,
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
  const re = pattern
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${re}$`).test(arn);
}

/** The `execute-api` ARN API Gateway authorizes a request against. */
const requestArn = (api: string, method: string, path: string) =>
  `arn:{Ref:AWS::Partition}:execute-api:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${api}/$default/${method}${path}`;

/** Requests of the tenant's job, bulk-cancel and schedule routes for `tenant`. */
const requests = (tenant: string): [string, string][] => [
  ['POST', `/v1/tenants/${tenant}/jobs`],
  ['GET', `/v1/tenants/${tenant}/jobs`],
  ['POST', `/v1/tenants/${tenant}/jobs/batch`],
  ['GET', `/v1/tenants/${tenant}/jobs/job-123`],
  ['DELETE', `/v1/tenants/${tenant}/jobs/job-123`],
  ['POST', `/v1/tenants/${tenant}/jobs/cancel`],
  ['POST', `/v1/tenants/${tenant}/jobs/heartbeats`],
  ['GET', `/v1/tenants/${tenant}/operations/op1.AAAAAAAAAAAAAAAAAAAAAA`],
  ['GET', `/v1/tenants/${tenant}/schedules`],
  ['PUT', `/v1/tenants/${tenant}/schedules/nightly-report`],
  ['GET', `/v1/tenants/${tenant}/schedules/nightly-report`],
  ['DELETE', `/v1/tenants/${tenant}/schedules/nightly-report`],
  ['POST', `/v1/tenants/${tenant}/schedules/nightly-report/pause`],
  ['POST', `/v1/tenants/${tenant}/schedules/nightly-report/resume`],
];

/** A function's role (an `IRole` is a construct): the function must have one. */
const roleOf = (r: iam.IRole | undefined): iam.IRole => {
  if (!r) throw new Error('the function has no role');
  return r;
};
const roleArn = (r: iam.IRole | undefined) => getAtt(roleOf(r), 'Arn');
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
    const denies = statements.filter(
      (s) =>
        s.Effect === 'Deny' &&
        (s.Action.includes('sqs:SendMessage') || s.Action.includes('sqs:*')) &&
        conditionValues(s, 'ArnNotEquals', PRINCIPAL) !== undefined,
    );
    return { allows, denies, queueArn };
  }
  const tagCondition = (tenant: DyneinTenant) => `aws:PrincipalTag/${tenant.senderTagKey}`;

  it('the queue policy denies sqs:SendMessage to everyone but the submit, dispatch and dlq roles and principals tagged for this tenant, and allows nothing', () => {
    const expected = [
      roleArn(scheduler.functions.submit.role),
      roleArn(scheduler.functions.dispatch.role),
      roleArn(scheduler.functions.dlq.role),
    ].sort();
    const { allows, denies, queueArn } = senders(beta);
    // No Allow in the queue policy: the senders' own IAM policies allow (a team's policy cannot take it away).
    expect(allows).toEqual([]);
    expect(denies).toHaveLength(1);
    const deny = denies[0]!;
    expect(isAnyone(deny.Principal)).toBe(true);
    expect(deny.Action).toEqual(['sqs:SendMessage']);
    expect(deny.Resource).toEqual([queueArn]);
    expect(conditionValues(deny, 'ArnNotEquals', PRINCIPAL)).toEqual(expected);
    // The only other condition: the tenant's sender tag, which the deny requires to be absent (both must hold).
    expect(Object.keys(deny.Condition).sort()).toEqual(['ArnNotEquals', 'StringNotEquals']);
    expect(Object.keys(deny.Condition.StringNotEquals as Record<string, Json>)).toEqual([tagCondition(beta)]);
    expect(conditionValues(deny, 'StringNotEquals', tagCondition(beta))).toEqual(['true']);
    expect(beta.senderTagKey).not.toBe(alpha.senderTagKey);
  });

  it('the scheduler’s submit and dispatch roles may send to every tenant queue by name, not to the DLQs', () => {
    const pattern = `arn:{Ref:AWS::Partition}:sqs:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${scheduler.tenantQueuePrefix}-t-*`;
    const queueArn = (q: IConstruct) =>
      `arn:{Ref:AWS::Partition}:sqs:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${String(resource(t, idOf(q)).Properties.QueueName)}`;
    for (const f of [scheduler.functions.submit, scheduler.functions.dispatch]) {
      const sends = [...(allowed(roleStatements(t, idOf(roleOf(f.role)))).get('sqs:SendMessage') ?? [])];
      const tenantGrants = sends.filter((r) => r !== getAtt(scheduler.inboundQueue, 'Arn'));
      expect(tenantGrants).toEqual([pattern]);
      for (const tenant of [alpha, beta]) {
        expect(arnMatches(pattern, queueArn(tenant.queue)), `${tenant.tenantName} queue`).toBe(true);
        expect(arnMatches(pattern, queueArn(tenant.deadLetterQueue)), `${tenant.tenantName} DLQ`).toBe(false);
      }
    }
  });

  it('grantSchedule allows execute-api:Invoke on this tenant’s routes only', () => {
    const statements = roleStatements(t, idOf(scheduleRole));
    const granted = allowed(statements);
    expect([...granted.keys()]).toEqual(['execute-api:Invoke']);
    const patterns = [...granted.get('execute-api:Invoke')!];
    expect(patterns).toHaveLength(18);
    const api = ref(scheduler.httpApi);
    for (const p of patterns) {
      expect(p).toMatch(/^arn:\{Ref:AWS::Partition\}:execute-api:\{Ref:AWS::Region\}:\{Ref:AWS::AccountId\}:/);
      expect(p.startsWith(`arn:{Ref:AWS::Partition}:execute-api:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${api}/`), p).toBe(true);
    }
    // Exactly the job routes, the listing, bulk cancel and its operations, the six schedule routes and the three workflow routes, on the $default stage, each with its own method.
    expect(patterns.map((p) => p.slice(p.indexOf('/$default/'))).sort()).toEqual([
      '/$default/DELETE/v1/tenants/alpha/jobs/*',
      '/$default/DELETE/v1/tenants/alpha/schedules/*',
      '/$default/DELETE/v1/tenants/alpha/workflows/*',
      '/$default/GET/v1/tenants/alpha/jobs',
      '/$default/GET/v1/tenants/alpha/jobs/*',
      '/$default/GET/v1/tenants/alpha/operations/*',
      '/$default/GET/v1/tenants/alpha/schedules',
      '/$default/GET/v1/tenants/alpha/schedules/*',
      '/$default/GET/v1/tenants/alpha/workflows/*',
      '/$default/POST/v1/tenants/alpha/jobs',
      '/$default/POST/v1/tenants/alpha/jobs/batch',
      '/$default/POST/v1/tenants/alpha/jobs/cancel',
      '/$default/POST/v1/tenants/alpha/jobs/heartbeats',
      '/$default/POST/v1/tenants/alpha/jobs/outcomes',
      '/$default/POST/v1/tenants/alpha/schedules/*/pause',
      '/$default/POST/v1/tenants/alpha/schedules/*/resume',
      '/$default/POST/v1/tenants/alpha/workflows',
      '/$default/PUT/v1/tenants/alpha/schedules/*',
    ]);
    for (const [method, path] of [
      ['POST', '/v1/tenants/alpha/jobs/x'],
      ['PUT', '/v1/tenants/alpha/jobs/x'],
      ['DELETE', '/v1/tenants/alpha/jobs'],
      ['POST', '/v1/tenants/alpha/schedules'],
      ['POST', '/v1/tenants/alpha/schedules/x'],
      ['PUT', '/v1/tenants/alpha/schedules'],
      ['DELETE', '/v1/tenants/alpha/schedules'],
      ['POST', '/v1/tenants/alpha/schedules/x/delete'],
    ] as [string, string][]) {
      expect(
        patterns.some((p) => arnMatches(p, requestArn(api, method, path))),
        `${method} ${path}`,
      ).toBe(false);
    }
    // Every route of alpha is allowed; no route of beta is; nor is a route outside /v1/tenants.
    for (const [method, path] of requests('alpha'))
      expect(
        patterns.some((p) => arnMatches(p, requestArn(api, method, path))),
        `${method} ${path}`,
      ).toBe(true);
    for (const [method, path] of [...requests('beta'), ...requests('alphabet'), ['GET', '/v1/tenants/alpha'] as [string, string]]) {
      expect(
        patterns.some((p) => arnMatches(p, requestArn(api, method, path))),
        `${method} ${path}`,
      ).toBe(false);
    }
  });

  it('grantConsume allows exactly receive, delete, change-visibility and get-attributes on this tenant’s queue', () => {
    const granted = allowed(roleStatements(t, idOf(consumeRole)));
    expect([...granted.keys()].sort()).toEqual([
      'sqs:ChangeMessageVisibility',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:ReceiveMessage',
    ]);
    for (const [a, resources] of granted) expect([...resources], a).toEqual([getAtt(alpha.queue, 'Arn')]);
  });

  it('grantRedrive tags the role as a sender of this tenant’s queue only, and grants the move on its DLQ and the send on its queue', () => {
    const tags = (role: iam.Role) => (resource(t, idOf(role)).Properties.Tags ?? []) as { Key: string; Value: string }[];
    expect(tags(redriveRole)).toEqual([{ Key: alpha.senderTagKey, Value: 'true' }]);
    for (const other of [scheduleRole, consumeRole]) expect(tags(other)).toEqual([]);
    // The queue policies name no role of the grantee: nothing in the tenant's stack refers to it.
    const expected = [
      roleArn(scheduler.functions.submit.role),
      roleArn(scheduler.functions.dispatch.role),
      roleArn(scheduler.functions.dlq.role),
    ].sort();
    for (const tenant of [alpha, beta]) expect(conditionValues(senders(tenant).denies[0]!, 'ArnNotEquals', PRINCIPAL)).toEqual(expected);
    const granted = allowed(roleStatements(t, idOf(redriveRole)));
    expect([...granted.get('sqs:SendMessage')!]).toEqual([getAtt(alpha.queue, 'Arn')]);
    expect([...granted.get('sqs:GetQueueAttributes')!].sort()).toEqual(
      [getAtt(alpha.queue, 'Arn'), getAtt(alpha.deadLetterQueue, 'Arn')].sort(),
    );
    for (const a of [
      'sqs:StartMessageMoveTask',
      'sqs:ListMessageMoveTasks',
      'sqs:CancelMessageMoveTask',
      'sqs:ReceiveMessage',
      'sqs:DeleteMessage',
      'sqs:ChangeMessageVisibility',
    ]) {
      expect([...(granted.get(a) ?? [])], a).toEqual([getAtt(alpha.deadLetterQueue, 'Arn')]);
    }
  });

  it('a second tenant of the same name in the same stack is refused at synth', () => {
    expect(() => new DyneinTenant(stack, 'AlphaAgain', { scheduler, tenantName: 'alpha' })).toThrow(
      /tenant 'alpha' is already defined in stack/,
    );
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
    payments = new DyneinTenant(teamStack, 'Payments', {
      scheduler: DyneinScheduler.fromAttributes(scheduler.attributes),
      tenantName: TENANT,
    });
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
    expect(q.Properties.RedrivePolicy).toEqual({
      deadLetterTargetArn: { 'Fn::GetAtt': [idOf(payments.deadLetterQueue), 'Arn'] },
      maxReceiveCount: 5,
    });
    for (const [id, x] of queues) expect(x.Properties.SqsManagedSseEnabled, id).toBe(true);
    // The inbound queue, its DLQ and the firing DLQ only.
    expect(resourcesOf(schedT, 'AWS::SQS::Queue')).toHaveLength(3);
  });

  it('registers the tenant through the scheduler’s registration function: the team’s stack holds no principal that may touch the table', () => {
    const regs = resourcesOf(teamT, 'Custom::DyneinTenantRegistration');
    expect(regs).toHaveLength(1);
    const [, reg] = regs[0]!;
    expect(render(reg.Properties.TableName as Json, imports)).toBe(fromScheduler(ref(scheduler.table)));
    expect(reg.Properties.TenantName).toBe(TENANT);
    expect(render(reg.Properties.QueueUrl as Json)).toBe(ref(payments.queue));
    expect(render(reg.Properties.DlqUrl as Json)).toBe(ref(payments.deadLetterQueue));
    // Served by the scheduler's function (the pre-built register bundle), not by one in the team's stack.
    expect(render(reg.Properties.ServiceToken as Json, imports)).toBe(fromScheduler(getAtt(scheduler.registrationFunction, 'Arn')));
    expect(resourcesOf(teamT, 'AWS::Lambda::Function')).toEqual([]);
    const teamActions = allPermissionStatements(teamT).flatMap((st) => st.Action);
    expect(teamActions.filter((a) => a.startsWith('dynamodb:'))).toEqual([]);
  });

  it('the registration function may read, write and remove tenant items only (pk tenant#…), and is told the tenants’ own queue URLs', () => {
    const fn = resource(schedT, idOf(scheduler.registrationFunction));
    expect(fn.Properties.Runtime).toBe('nodejs24.x');
    const roleId = /^\{GetAtt:(.+)\.Arn\}$/.exec(render(fn.Properties.Role))![1]!;
    expect(resource(schedT, roleId).Properties.ManagedPolicyArns ?? []).toEqual([]);
    const table = roleStatements(schedT, roleId).filter((st) => st.Action.some((a) => a.startsWith('dynamodb:')));
    expect(table).toHaveLength(1);
    expect(table[0]!.Action.sort()).toEqual(['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem']);
    expect(table[0]!.Resource).toEqual([getAtt(scheduler.table, 'Arn')]);
    expect(conditionValues(table[0]!, 'ForAllValues:StringLike', 'dynamodb:LeadingKeys')).toEqual(['tenant#*']);
    const env = (fn.Properties.Environment as { Variables: Record<string, Json> }).Variables;
    const prefix = scheduler.tenantQueuePrefix;
    expect(render(env.DYNEIN_TENANT_QUEUE_URL)).toBe(
      `https://sqs.{Ref:AWS::Region}.{Ref:AWS::URLSuffix}/{Ref:AWS::AccountId}/${prefix}-t-{tenant}`,
    );
    expect(render(env.DYNEIN_TENANT_DLQ_URL)).toBe(
      `https://sqs.{Ref:AWS::Region}.{Ref:AWS::URLSuffix}/{Ref:AWS::AccountId}/${prefix}-d-{tenant}`,
    );
    expect(render(env.DYNEIN_TABLE)).toBe(ref(scheduler.table));
  });

  it('the queue policy admits exactly the scheduler’s submit, dispatch and dlq roles from the other stack', () => {
    const expected = [
      fromScheduler(roleArn(scheduler.functions.submit.role)),
      fromScheduler(roleArn(scheduler.functions.dispatch.role)),
      fromScheduler(roleArn(scheduler.functions.dlq.role)),
    ].sort();
    const statements = queuePolicyStatements(teamT, idOf(payments.queue), imports);
    expect(statements.filter((s) => s.Effect === 'Allow')).toEqual([]);
    const denies = statements.filter((s) => s.Effect === 'Deny' && conditionValues(s, 'ArnNotEquals', PRINCIPAL) !== undefined);
    expect(denies).toHaveLength(1);
    expect(denies[0]!.Action).toContain('sqs:SendMessage');
    expect(conditionValues(denies[0]!, 'ArnNotEquals', PRINCIPAL, imports)).toEqual(expected);
  });

  it('grants work against the imported API and the team’s queue', () => {
    const invoke = [...(allowed(roleStatements(teamT, idOf(apiRole), imports)).get('execute-api:Invoke') ?? [])];
    const api = fromScheduler(ref(scheduler.httpApi));
    expect(invoke).toHaveLength(18);
    for (const [method, path] of requests(TENANT))
      expect(
        invoke.some((p) => arnMatches(p, requestArn(api, method, path))),
        `${method} ${path}`,
      ).toBe(true);
    for (const [method, path] of requests('demo'))
      expect(
        invoke.some((p) => arnMatches(p, requestArn(api, method, path))),
        `${method} ${path}`,
      ).toBe(false);
    const consume = allowed(roleStatements(teamT, idOf(workerRole), imports));
    expect([...consume.keys()].sort()).toEqual([
      'sqs:ChangeMessageVisibility',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:ReceiveMessage',
    ]);
    for (const [, resources] of consume) expect([...resources]).toEqual([getAtt(payments.queue, 'Arn')]);
  });

  it('nothing in the scheduler stack refers to the team stack', () => {
    expect(JSON.stringify(schedT.toJSON())).not.toContain('Fn::ImportValue');
    expect(schedulerStack.dependencies).toEqual([]);
    expect(teamStack.dependencies).toEqual([schedulerStack]);
  });

  it('alarms on its DLQ to the scheduler’s alarm topic', () => {
    const alarms = resourcesOf(teamT, 'AWS::CloudWatch::Alarm').filter(
      ([, a]) =>
        a.Properties.MetricName === 'ApproximateNumberOfMessagesVisible' &&
        render((a.Properties.Dimensions as { Value: Json }[])[0]!.Value) === getAtt(payments.deadLetterQueue, 'QueueName'),
    );
    expect(alarms).toHaveLength(1);
    expect((alarms[0]![1].Properties.AlarmActions as Json[]).map((x) => render(x, imports))).toEqual([fromScheduler(ref(topic))]);
  });
});
