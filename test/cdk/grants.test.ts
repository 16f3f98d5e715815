/**
 * Every grant returns ONE iam.Grant covering every queue it touches (callers can depend on it,
 * or check it, as a whole), and grantConsume's DLQ send is opt-in.
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { beforeAll, describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { DyneinTenant } from '../../lib/tenant.js';
import { allowed, fastApp, getAtt, idOf, resource, roleStatements } from './support.js';

let stack: Stack;
let scheduler: DyneinScheduler;
let tenant: DyneinTenant;
const role = (id: string) => new iam.Role(stack, id, { assumedBy: new iam.AccountRootPrincipal() });

beforeAll(() => {
  stack = new Stack(fastApp(), 'Grants');
  scheduler = new DyneinScheduler(stack, 'Dynein');
  tenant = scheduler.addTenant('alpha');
});

/** The actions a Grant's principal statements give, per resource (resolved in the stack). */
function grantedBy(grant: iam.Grant): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const st of grant.principalStatements) {
    const json = stack.resolve(st.toStatementJson()) as { Action: string | string[]; Resource: unknown };
    for (const r of [json.Resource].flat()) {
      const key = JSON.stringify(r);
      const set = out.get(key) ?? new Set<string>();
      for (const a of [json.Action].flat()) set.add(a);
      out.set(key, set);
    }
  }
  return out;
}
const arnOf = (c: Parameters<typeof idOf>[0]) => JSON.stringify({ 'Fn::GetAtt': [idOf(c), 'Arn'] });

describe('each grant is one Grant covering every queue it touches', () => {
  it('grantConsume: the queue; with deadLetter also the DLQ', () => {
    const plain = tenant.grantConsume(role('Plain'));
    expect(plain.success).toBe(true);
    expect([...grantedBy(plain)]).toEqual([
      [arnOf(tenant.queue), new Set(['sqs:ReceiveMessage', 'sqs:DeleteMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueAttributes'])],
    ]);
    const withDlq = grantedBy(tenant.grantConsume(role('WithDlq'), { deadLetter: true }));
    expect([...withDlq.keys()].sort()).toEqual([arnOf(tenant.queue), arnOf(tenant.deadLetterQueue)].sort());
    expect(withDlq.get(arnOf(tenant.deadLetterQueue))).toEqual(new Set(['sqs:SendMessage']));
  });

  it('grantRedrive: the DLQ and the queue', () => {
    const g = grantedBy(tenant.grantRedrive(role('Redrive')));
    expect([...g.keys()].sort()).toEqual([arnOf(tenant.queue), arnOf(tenant.deadLetterQueue)].sort());
    expect(g.get(arnOf(tenant.queue))).toEqual(new Set(['sqs:SendMessage', 'sqs:GetQueueAttributes']));
    expect(g.get(arnOf(tenant.deadLetterQueue))).toContain('sqs:StartMessageMoveTask');
  });

  it('grantInboundRedrive: the inbound DLQ and the inbound queue', () => {
    const g = grantedBy(scheduler.grantInboundRedrive(role('InboundRedrive')));
    expect([...g.keys()].sort()).toEqual([arnOf(scheduler.inboundQueue), arnOf(scheduler.inboundDeadLetterQueue)].sort());
    expect(g.get(arnOf(scheduler.inboundQueue))).toEqual(new Set(['sqs:SendMessage', 'sqs:GetQueueAttributes']));
    expect(g.get(arnOf(scheduler.inboundDeadLetterQueue))).toEqual(
      new Set([
        'sqs:ReceiveMessage',
        'sqs:DeleteMessage',
        'sqs:ChangeMessageVisibility',
        'sqs:GetQueueAttributes',
        'sqs:StartMessageMoveTask',
        'sqs:ListMessageMoveTasks',
        'sqs:CancelMessageMoveTask',
      ]),
    );
  });

  it('grantSchedule: the four job routes, the listing, outcome reports, heartbeats, bulk cancel and its operations, the six schedule routes and the three workflow routes', () => {
    const g = tenant.grantSchedule(role('Schedule'));
    expect(g.principalStatements.flatMap((s) => s.resources)).toHaveLength(18);
  });

  it('what the template grants matches: no DLQ send without deadLetter', () => {
    const t = Template.fromStack(stack);
    expect(allowed(roleStatements(t, idOf(stack.node.findChild('Plain') as iam.Role))).has('sqs:SendMessage')).toBe(false);
    const withDlq = allowed(roleStatements(t, idOf(stack.node.findChild('WithDlq') as iam.Role)));
    expect([...withDlq.get('sqs:SendMessage')!]).toEqual([getAtt(tenant.deadLetterQueue, 'Arn')]);
  });
});

describe('a principal that cannot be tagged', () => {
  it('an imported role with a literal ARN is listed by ARN in the queue policy; a role of another app is refused with the fix', () => {
    const own = new Stack(fastApp(), 'Imports');
    const tenant = new DyneinScheduler(own, 'Dynein').addTenant('alpha');
    const imported = iam.Role.fromRoleArn(own, 'Imported', 'arn:aws:iam::123456789012:role/ops');
    expect(() => tenant.grantRedrive(imported)).not.toThrow();
    const statements = Template.fromStack(own).toJSON() as {
      Resources: Record<
        string,
        {
          Type: string;
          Properties: { PolicyDocument?: { Statement: { Sid?: string; Condition?: { ArnNotEquals?: Record<string, unknown> } }[] } };
        }
      >;
    };
    const policy = Object.values(statements.Resources).find(
      (r) => r.Type === 'AWS::SQS::QueuePolicy' && JSON.stringify(r.Properties).includes(idOf(tenant.queue)),
    );
    const deny = policy!.Properties.PolicyDocument!.Statement.find((s) => s.Sid === 'OnlySchedulerSends')!;
    expect(JSON.stringify(deny.Condition!.ArnNotEquals)).toContain('arn:aws:iam::123456789012:role/ops');
    const other = new Stack(fastApp(), 'Other');
    const foreign = iam.Role.fromRoleArn(other, 'Foreign', new iam.Role(other, 'R', { assumedBy: new iam.AccountRootPrincipal() }).roleArn);
    expect(() => tenant.grantRedrive(foreign)).toThrow(/tag the principal with 'dynein:.*:sender:alpha' = 'true'/);
  });
});

describe('a grantee in another stack than the tenant', () => {
  it('names the queues by their fixed names: no reference between the stacks, even from the scheduler’s stack', () => {
    const app = fastApp();
    const schedulerStack = new Stack(app, 'Sched');
    const s = new DyneinScheduler(schedulerStack, 'Dynein');
    const ops = new iam.Role(schedulerStack, 'Ops', { assumedBy: new iam.AccountRootPrincipal() });
    const team = new Stack(app, 'Team');
    const pay = new DyneinTenant(team, 'Pay', { scheduler: s, tenantName: 'pay' });
    pay.grantConsume(ops, { deadLetter: true });
    pay.grantRedrive(ops);
    app.synth();
    expect(schedulerStack.dependencies).toEqual([]);
    expect(team.dependencies).toEqual([schedulerStack]);
    const arn = (name: string) => `arn:{Ref:AWS::Partition}:sqs:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${name}`;
    const granted = allowed(roleStatements(Template.fromStack(schedulerStack), idOf(ops)));
    // Consume receives from the queue, redrive from the DLQ.
    expect([...granted.get('sqs:ReceiveMessage')!].sort()).toEqual(
      [arn(`${s.tenantQueuePrefix}-t-pay`), arn(`${s.tenantQueuePrefix}-d-pay`)].sort(),
    );
    expect([...granted.get('sqs:SendMessage')!].sort()).toEqual(
      [arn(`${s.tenantQueuePrefix}-t-pay`), arn(`${s.tenantQueuePrefix}-d-pay`)].sort(),
    );
    expect([...granted.get('sqs:StartMessageMoveTask')!]).toEqual([arn(`${s.tenantQueuePrefix}-d-pay`)]);
    // Those names are the queues' own.
    const teamT = Template.fromStack(team);
    expect(resource(teamT, idOf(pay.queue)).Properties.QueueName).toBe(`${s.tenantQueuePrefix}-t-pay`);
    expect(resource(teamT, idOf(pay.deadLetterQueue)).Properties.QueueName).toBe(`${s.tenantQueuePrefix}-d-pay`);
  });
});
