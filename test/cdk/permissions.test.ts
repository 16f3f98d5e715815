/**
 * The permission table (lib/permissions.ts) is the truth about what the scheduler's roles may do:
 * each role's synthesized policy is its row, statement for statement (actions, resources,
 * conditions), and no role holds an action its row does not list: with the default feature flags
 * and with `minimizePolicies` (cdk.json, as `cdk deploy` synthesizes).
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type * as iam from 'aws-cdk-lib/aws-iam';
import { beforeAll, describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { PERMISSIONS, type Permission, type PermissionHolder, type PermissionTarget } from '../../lib/permissions.js';
import { conditionValues, fastApp, getAtt, idOf, ref, roleStatements, type Statement } from './support.js';

const HOLDERS = Object.keys(PERMISSIONS) as PermissionHolder[];
const LOGS = ['logs:CreateLogStream', 'logs:PutLogEvents'];

interface Synth {
  readonly scheduler: DyneinScheduler;
  readonly template: Template;
}

function synth(context: Record<string, unknown> = {}): Synth {
  const stack = new Stack(fastApp(context), 'Perm');
  const scheduler = new DyneinScheduler(stack, 'Dynein', { tenantQueuePrefix: 'acme' });
  scheduler.addTenant('billing', { history: {} });
  return { scheduler, template: Template.fromStack(stack) };
}

let plain: Synth;
let minimized: Synth;
beforeAll(() => {
  plain = synth();
  minimized = synth({ '@aws-cdk/aws-iam:minimizePolicies': true });
});

function roleOf(s: DyneinScheduler, holder: PermissionHolder): iam.IRole {
  if (holder === 'firing') return s.schedulerRole;
  return (holder === 'register' ? s.registrationFunction : s.functions[holder]).role!;
}

/** A target as the template renders its ARN (its ARNs: one per cell). */
function rendered(s: DyneinScheduler, target: PermissionTarget): string | string[] {
  const arn = (service: string, resource: string) =>
    `arn:{Ref:AWS::Partition}:${service}:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${resource}`;
  switch (target) {
    case 'table':
      return getAtt(s.table, 'Arn');
    case 'inboundQueue':
      return getAtt(s.inboundQueue, 'Arn');
    case 'tenantQueues':
      return arn('sqs', 'acme-t-*');
    case 'tenantDeadLetterQueues':
      return arn('sqs', 'acme-d-*');
    case 'jobIdKey':
      return ref(s.idKey);
    case 'groupSchedules':
      return arn('scheduler', 'schedule/acme-schedules/*');
    case 'schedulerRole':
      return getAtt(s.schedulerRole, 'Arn');
    case 'schedulerDeadLetterQueue':
      return getAtt(s.schedulerDeadLetterQueue, 'Arn');
    case 'tickStateMachines':
      return s.stateMachines.map((m) => ref(m));
  }
}

/** A statement as a comparable record. */
const shape = (st: Statement) => ({
  sid: st.Sid,
  actions: st.Action,
  resources: st.Resource,
  leadingKeys: conditionValues(st, 'ForAllValues:StringLike', 'dynamodb:LeadingKeys'),
  passedTo: conditionValues(st, 'StringEquals', 'iam:PassedToService'),
});

/** A row's entry as {@link shape} gives the statement it should be. */
const expected = (s: DyneinScheduler, p: Permission) => ({
  sid: p.sid,
  actions: [...p.actions],
  resources: (typeof p.on === 'string' ? [p.on] : p.on).flatMap((t) => rendered(s, t)),
  leadingKeys: p.leadingKeys?.map((k) => `${k}*`).sort(),
  passedTo: p.passedToService === undefined ? undefined : [p.passedToService],
});

/** The role's statements, but for the function's own log group. */
function statementsOf({ scheduler, template }: Synth, holder: PermissionHolder): Statement[] {
  const all = roleStatements(template, idOf(roleOf(scheduler, holder)));
  expect(all.every((st) => st.Effect === 'Allow')).toBe(true);
  return all.filter((st) => !(st.Action.length === 2 && LOGS.every((a) => st.Action.includes(a))));
}

/** (action, resource, condition) triples the statements allow. */
const triples = (statements: readonly { actions: string[]; resources: string[]; leadingKeys?: string[]; passedTo?: string[] }[]) =>
  new Set(
    statements.flatMap((st) =>
      st.actions.flatMap((a) => st.resources.map((r) => `${a} on ${r} if ${JSON.stringify([st.leadingKeys, st.passedTo])}`)),
    ),
  );

describe('the permission table', () => {
  it('lists every function and the firing role, each action named (no wildcard actions)', () => {
    expect([...HOLDERS].sort()).toEqual(
      ['admin', 'cancel', 'dispatch', 'dlq', 'firing', 'ingest', 'register', 'schedules', 'status', 'submit', 'tick', 'workflows'].sort(),
    );
    expect(Object.keys(plain.scheduler.functions).every((f) => f in PERMISSIONS)).toBe(true);
    for (const h of HOLDERS) for (const p of PERMISSIONS[h]) for (const a of p.actions) expect(a, h).toMatch(/^[a-z0-9-]+:[A-Za-z]+$/);
  });

  it.each(HOLDERS)("%s: its role's policy is its row, statement for statement", (holder) => {
    const s = plain.scheduler;
    expect(statementsOf(plain, holder).map(shape)).toEqual(PERMISSIONS[holder].map((p) => expected(s, p)));
  });

  it.each(HOLDERS)('%s: no action outside its row, with minimizePolicies too (the same grants, merged)', (holder) => {
    const rowActions = new Set(PERMISSIONS[holder].flatMap((p) => p.actions));
    for (const synthed of [plain, minimized]) {
      const statements = statementsOf(synthed, holder);
      const held = new Set(statements.flatMap((st) => st.Action));
      expect(held).toEqual(rowActions);
      expect(triples(statements.map(shape))).toEqual(triples(PERMISSIONS[holder].map((p) => expected(synthed.scheduler, p))));
    }
  });

  // What a reader of the table learns, spelled out for three functions.
  it('status: reads jobs and lists, writes nothing, and reads the id key', () => {
    const actions = (holder: PermissionHolder) => [...new Set(statementsOf(plain, holder).flatMap((st) => st.Action))].sort();
    expect(actions('status')).toEqual(['dynamodb:GetItem', 'dynamodb:Query', 'secretsmanager:GetSecretValue']);
  });

  it('workflows: puts and batch-writes workflow items (w*) and outcome records (h#*) only', () => {
    const writes = statementsOf(plain, 'workflows').filter((st) => st.Action.some((a) => /^dynamodb:(Put|BatchWrite)/.test(a)));
    expect(writes.map((st) => conditionValues(st, 'ForAllValues:StringLike', 'dynamodb:LeadingKeys'))).toEqual([['h#*', 'w*']]);
  });

  it('dispatch: the table and the tenant queues only, never the id key', () => {
    const s = plain.scheduler;
    const byResource = statementsOf(plain, 'dispatch').map((st) => [st.Resource.join(','), [...st.Action].sort()]);
    expect(byResource).toEqual([
      [rendered(s, 'table'), ['dynamodb:BatchWriteItem', 'dynamodb:GetItem', 'dynamodb:Query', 'dynamodb:UpdateItem']],
      // A debounced job's replaced row, deleted unsent: rows only (pk = the bare shard number).
      [rendered(s, 'table'), ['dynamodb:DeleteItem']],
      [rendered(s, 'tenantQueues'), ['sqs:SendMessage']],
    ]);
  });

  it('schedules: the clocks of its own group, and passes the execution role to EventBridge Scheduler only', () => {
    const s = plain.scheduler;
    const st = statementsOf(plain, 'schedules');
    const clocks = st.find((x) => x.Sid === 'ClocksOfTheGroup')!;
    expect(clocks.Resource).toEqual([rendered(s, 'groupSchedules')]);
    expect(clocks.Action.every((a) => a.startsWith('scheduler:'))).toBe(true);
    const pass = st.find((x) => x.Action.includes('iam:PassRole'))!;
    expect(pass.Resource).toEqual([rendered(s, 'schedulerRole')]);
    expect(conditionValues(pass, 'StringEquals', 'iam:PassedToService')).toEqual(['scheduler.amazonaws.com']);
  });
});
