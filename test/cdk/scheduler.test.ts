/**
 * DyneinScheduler as the app deploys it (lib/stack.ts, here with tenants demo and billing) and
 * with non-default props: the HTTP API, queues, IAM, functions, table and tick of DESIGN.md.
 */
import { Stack } from 'aws-cdk-lib';
import { Match, Template } from 'aws-cdk-lib/assertions';
import { beforeAll, describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { DyneinStack } from '../../lib/stack.js';
import type { DyneinTenant } from '../../lib/tenant.js';
import type { IConstruct } from 'constructs';
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

type FunctionName = keyof DyneinScheduler['functions'];
const FUNCTIONS: readonly FunctionName[] = [
  'submit',
  'ingest',
  'tick',
  'dispatch',
  'cancel',
  'status',
  'schedules',
  'dlq',
  'admin',
  'workflows',
];

// Non-default props of the second stack.
const CUSTOM_GROUPS = 12;
const CUSTOM_THROTTLE = { rateLimit: 50, burstLimit: 120 };

let main: DyneinStack;
let mainT: Template;
let custom: Stack;
let customScheduler: DyneinScheduler;
let customT: Template;
let gamma: DyneinTenant;
let delta: DyneinTenant;

beforeAll(() => {
  const app = fastApp();
  main = new DyneinStack(app, 'Main', { demoTenant: true, tenants: ['billing'] });
  custom = new Stack(app, 'Custom');
  customScheduler = new DyneinScheduler(custom, 'Dynein', { groupCount: CUSTOM_GROUPS, shardCount: 96, throttle: CUSTOM_THROTTLE });
  gamma = customScheduler.addTenant('gamma', { maxReceiveCount: 3 });
  delta = customScheduler.addTenant('delta');
  mainT = Template.fromStack(main);
  customT = Template.fromStack(custom);
});

/** Both stacks, for checks that hold in every configuration. */
const both = (): [string, DyneinScheduler, Template][] => [
  ['Main', main.scheduler, mainT],
  ['Custom', customScheduler, customT],
];

describe('HTTP API', () => {
  const ROUTES = [
    'POST /v1/tenants/{tenant}/jobs',
    'POST /v1/tenants/{tenant}/jobs/batch',
    'GET /v1/tenants/{tenant}/jobs/{jobId}',
    'DELETE /v1/tenants/{tenant}/jobs/{jobId}',
    'GET /v1/tenants/{tenant}/jobs',
    'GET /v1/tenants/{tenant}/schedules',
    'PUT /v1/tenants/{tenant}/schedules/{name}',
    'GET /v1/tenants/{tenant}/schedules/{name}',
    'DELETE /v1/tenants/{tenant}/schedules/{name}',
    'POST /v1/tenants/{tenant}/schedules/{name}/pause',
    'POST /v1/tenants/{tenant}/schedules/{name}/resume',
    'GET /v1/tenants/{tenant}/dlq',
    'POST /v1/tenants/{tenant}/dlq/redrive',
    'POST /v1/tenants/{tenant}/dlq/delete',
    'GET /v1/tenants/{tenant}/dlq/redrive',
    'POST /v1/tenants/{tenant}/dlq/edit',
    'GET /v1/tenants/{tenant}/dlq/audit',
    'POST /v1/tenants/{tenant}/jobs/outcomes',
    'GET /v1/admin/tenants/{tenant}',
    'POST /v1/admin/tenants/{tenant}/pause',
    'POST /v1/admin/tenants/{tenant}/resume',
    'PUT /v1/admin/tenants/{tenant}/settings',
    'POST /v1/tenants/{tenant}/workflows',
    'GET /v1/tenants/{tenant}/workflows/{workflowId}',
    'DELETE /v1/tenants/{tenant}/workflows/{workflowId}',
    'POST /v1/tenants/{tenant}/jobs/cancel',
    'GET /v1/tenants/{tenant}/operations/{operationId}',
    'POST /v1/tenants/{tenant}/jobs/heartbeats',
  ];

  it('has exactly the four job routes of DESIGN.md, the listing, the six schedule routes, the six dead-letter routes, the operator, workflow and bulk-cancel routes, every one AWS_IAM, each on the function that serves it', () => {
    const s = main.scheduler;
    const routes = resourcesOf(mainT, 'AWS::ApiGatewayV2::Route');
    expect(routes.map(([, r]) => r.Properties.RouteKey).sort()).toEqual([...ROUTES].sort());
    const served: Record<string, FunctionName> = {
      [ROUTES[0]!]: 'submit',
      [ROUTES[1]!]: 'submit',
      [ROUTES[2]!]: 'status',
      [ROUTES[3]!]: 'cancel',
      [ROUTES[4]!]: 'status',
      ...Object.fromEntries(ROUTES.slice(5, 11).map((r) => [r, 'schedules'])),
      ...Object.fromEntries(ROUTES.slice(11, 17).map((r) => [r, 'dlq'])),
      [ROUTES[17]!]: 'workflows', // outcome reports (docs/history.md): a workflow job's moves its children on
      ...Object.fromEntries(ROUTES.slice(18, 22).map((r) => [r, 'admin'])), // the operator API (docs/tenant-controls.md)
      ...Object.fromEntries(ROUTES.slice(22, 25).map((r) => [r, 'workflows'])), // docs/workflows.md
      ...Object.fromEntries(ROUTES.slice(25, 27).map((r) => [r, 'cancel'])), // bulk cancel (docs/flow-control.md)
      [ROUTES[27]!]: 'workflows', // the workers' heartbeats, beside their outcome reports
    };
    for (const [id, r] of routes) {
      expect(r.Properties.AuthorizationType, `${id} authorization`).toBe('AWS_IAM');
      expect(r.Properties.ApiId).toEqual({ Ref: idOf(s.httpApi) });
      const integrationId = /^integrations\/\{Ref:(.+)\}$/.exec(render(r.Properties.Target))?.[1];
      expect(integrationId, `${id} target`).toBeDefined();
      const integration = resource(mainT, integrationId!);
      expect(render(integration.Properties.IntegrationUri)).toBe(getAtt(s.functions[served[render(r.Properties.RouteKey)]!], 'Arn'));
    }
  });

  it('has one stage with access logs to a retained log group and default route throttling', () => {
    const stages = resourcesOf(mainT, 'AWS::ApiGatewayV2::Stage');
    expect(stages).toHaveLength(1);
    const [, stage] = stages[0]!;
    const access = stage.Properties.AccessLogSettings as { DestinationArn: Json; Format: string } | undefined;
    expect(access, 'access log settings').toBeDefined();
    const logGroupId = /^\{GetAtt:(.+)\.Arn\}$/.exec(render(access!.DestinationArn))?.[1];
    expect(resource(mainT, logGroupId!).Type).toBe('AWS::Logs::LogGroup');
    expect(resource(mainT, logGroupId!).Properties.RetentionInDays).toBeGreaterThan(0);
    expect(access!.Format).toContain('$context.requestId');
    expect(stage.Properties.DefaultRouteSettings).toEqual(
      expect.objectContaining({ ThrottlingRateLimit: expect.any(Number), ThrottlingBurstLimit: expect.any(Number) }),
    );
    const throttle = stage.Properties.DefaultRouteSettings as { ThrottlingRateLimit: number; ThrottlingBurstLimit: number };
    expect(throttle.ThrottlingRateLimit).toBeGreaterThan(0);
    expect(throttle.ThrottlingBurstLimit).toBeGreaterThan(0);
  });

  it('applies the throttle prop to the stage', () => {
    customT.hasResourceProperties('AWS::ApiGatewayV2::Stage', {
      DefaultRouteSettings: { ThrottlingRateLimit: CUSTOM_THROTTLE.rateLimit, ThrottlingBurstLimit: CUSTOM_THROTTLE.burstLimit },
      AccessLogSettings: Match.objectLike({ DestinationArn: Match.anyValue() }),
    });
  });
});

describe('queues', () => {
  /** Logical id of the queue a RedrivePolicy points at. */
  const dlqOf = (q: Resource) =>
    /^\{GetAtt:(.+)\.Arn\}$/.exec(
      render((q.Properties.RedrivePolicy as { deadLetterTargetArn?: Json } | undefined)?.deadLetterTargetArn),
    )?.[1];

  it.each(['Main', 'Custom'])('%s: every queue is one the scheduler or a tenant owns, and all have SSE', (name) => {
    const [, s, t] = both().find(([n]) => n === name)!;
    const owned = [
      s.inboundQueue,
      s.inboundDeadLetterQueue,
      s.schedulerDeadLetterQueue,
      ...s.tenants.flatMap((x) => [x.queue, x.deadLetterQueue]),
    ].map(idOf);
    const queues = resourcesOf(t, 'AWS::SQS::Queue');
    expect(queues.map(([id]) => id).sort()).toEqual([...owned].sort());
    for (const [id, q] of queues) {
      const sse = q.Properties.SqsManagedSseEnabled === true || q.Properties.KmsMasterKeyId !== undefined;
      expect(sse, `${id} SSE`).toBe(true);
    }
  });

  it.each(['Main', 'Custom'])('%s: every queue that is not a DLQ redrives to a DLQ of its own', (name) => {
    const [, s, t] = both().find(([n]) => n === name)!;
    const queues = resourcesOf(t, 'AWS::SQS::Queue');
    const dlqs = new Set(queues.map(([, q]) => dlqOf(q)).filter((x): x is string => x !== undefined));
    // The DLQs are exactly the scheduler's and the tenants' dead-letter queues, none shared.
    expect([...dlqs].sort()).toEqual([s.inboundDeadLetterQueue, ...s.tenants.map((x) => x.deadLetterQueue)].map(idOf).sort());
    // The firing DLQ is EventBridge Scheduler's dead-letter queue (no SQS queue redrives to it): a DLQ too.
    const firingDlq = idOf(s.schedulerDeadLetterQueue);
    expect(dlqs.has(firingDlq)).toBe(false);
    expect(resource(t, firingDlq).Properties.RedrivePolicy, 'the firing DLQ is a DLQ').toBeUndefined();
    const sources = queues.filter(([id]) => !dlqs.has(id) && id !== firingDlq);
    expect(sources.length).toBe(1 + s.tenants.length);
    for (const [id, q] of sources) {
      const redrive = q.Properties.RedrivePolicy as { maxReceiveCount?: number } | undefined;
      expect(redrive, `${id} RedrivePolicy`).toBeDefined();
      expect(redrive!.maxReceiveCount, `${id} maxReceiveCount`).toBeGreaterThanOrEqual(1);
      expect(dlqOf(q)).not.toBe(id);
    }
    for (const [id, q] of queues.filter(([x]) => dlqs.has(x))) expect(q.Properties.RedrivePolicy, `${id} is a DLQ`).toBeUndefined();
  });

  it('tenant queues redrive after 5 receives by default, and maxReceiveCount overrides it', () => {
    const mrc = (t: Template, tenant: DyneinTenant) => {
      const q = resource(t, idOf(tenant.queue));
      expect(dlqOf(q)).toBe(idOf(tenant.deadLetterQueue));
      return (q.Properties.RedrivePolicy as { maxReceiveCount: number }).maxReceiveCount;
    };
    expect(main.scheduler.tenants.map((x) => x.tenantName).sort()).toEqual(['billing', 'demo']);
    for (const tenant of main.scheduler.tenants) expect(mrc(mainT, tenant), tenant.tenantName).toBe(5);
    expect(mrc(customT, delta)).toBe(5);
    expect(mrc(customT, gamma)).toBe(3);
  });

  it.each(['Main', 'Custom'])('%s: every queue has a policy that denies every action without TLS', (name) => {
    const [, , t] = both().find(([n]) => n === name)!;
    const queues = resourcesOf(t, 'AWS::SQS::Queue');
    expect(queues.length).toBeGreaterThanOrEqual(4);
    for (const [id] of queues) {
      const tlsDeny = queuePolicyStatements(t, id).filter(
        (s) =>
          s.Effect === 'Deny' &&
          isAnyone(s.Principal) &&
          (s.Action.includes('sqs:*') || s.Action.includes('*')) &&
          s.Resource.includes(getAtt(id, 'Arn')) &&
          String((s.Condition.Bool as Record<string, Json> | undefined)?.['aws:SecureTransport']) === 'false',
      );
      expect(tlsDeny, `${id} TLS-only deny`).toHaveLength(1);
    }
  });
});

describe('IAM', () => {
  /** Statements that grant (or, but for the TLS-only deny, deny) a wildcard action: `*`, `service:*`, `service:Get*`, ... */
  const wildcardViolations = (statements: readonly Statement[]): string[] => {
    const tlsDeny = (s: Statement) =>
      s.Effect === 'Deny' && String((s.Condition.Bool as Record<string, Json> | undefined)?.['aws:SecureTransport']) === 'false';
    const out: string[] = [];
    for (const s of statements) {
      if (s.NotAction.length > 0) out.push(`${s.source}: ${s.Effect} NotAction ${s.NotAction.join(',')}`);
      // A Deny may be broad only where broader is safer: the TLS-only deny of every queue.
      for (const a of s.Action) if (/[*?]/.test(a) && !tlsDeny(s)) out.push(`${s.source}: ${s.Effect} ${a}`);
    }
    return out;
  };
  const probe = (effect: string, action: string, condition: Record<string, Json> = {}): Statement => ({
    Effect: effect,
    Action: [action],
    NotAction: [],
    Resource: ['*'],
    NotResource: [],
    Principal: undefined,
    Condition: condition as Statement['Condition'],
    source: 'probe',
  });

  it('the wildcard check flags service:*, service:Get* and *, but not the TLS-only deny', () => {
    for (const a of ['sqs:*', 'dynamodb:Get*', 'logs:*LogDelivery*', 's3:?etObject', '*'])
      expect(wildcardViolations([probe('Allow', a)]), a).toHaveLength(1);
    expect(wildcardViolations([probe('Deny', 'sqs:*')])).toHaveLength(1);
    expect(wildcardViolations([probe('Deny', 'sqs:*', { Bool: { 'aws:SecureTransport': 'false' } })])).toEqual([]);
    expect(wildcardViolations([probe('Allow', 'sqs:SendMessage')])).toEqual([]);
  });

  it.each(['Main', 'Custom'])('%s: no statement grants a wildcard action (identity, inline and queue policies)', (name) => {
    const [, , t] = both().find(([n]) => n === name)!;
    const statements = allPermissionStatements(t);
    // The scan reaches the function roles, the state machine, the rule, the registration and every queue policy.
    const sources = new Set(statements.map((s) => s.source));
    for (const [id] of [...resourcesOf(t, 'AWS::IAM::Policy'), ...resourcesOf(t, 'AWS::SQS::QueuePolicy')])
      expect(sources.has(id), id).toBe(true);
    expect(resourcesOf(t, 'AWS::SQS::QueuePolicy').length).toBeGreaterThanOrEqual(4);
    for (const s of statements) for (const a of s.Action) expect(a, `${s.source}: action ${a}`).toMatch(/^[a-z0-9-]+:/);
    expect(wildcardViolations(statements)).toEqual([]);
  });
});

describe('functions', () => {
  it('the ten Dynein functions and the tenant registration function use nodejs24.x on arm64 with a log group of their own with retention', () => {
    const s = main.scheduler;
    const ids = FUNCTIONS.map((n) => idOf(s.functions[n]));
    expect(new Set(ids).size).toBe(10);
    const others = resourcesOf(mainT, 'AWS::Lambda::Function')
      .map(([id]) => id)
      .filter((id) => !ids.includes(id));
    // The scheduler's registration function serves every tenant, nothing else (no provider framework, no AwsCustomResource).
    expect(others).toEqual([idOf(s.registrationFunction)]);
    const groups = new Set<string>();
    for (const id of [...ids, ...others]) {
      const f = resource(mainT, id);
      const n = id;
      expect(f.Properties.Runtime, n).toBe('nodejs24.x');
      expect(f.Properties.Architectures, n).toEqual(['arm64']);
      expect(f.Properties.Handler, n).toBe('index.handler');
      const lg = /^\{Ref:(.+)\}$/.exec(render((f.Properties.LoggingConfig as { LogGroup?: Json } | undefined)?.LogGroup))?.[1];
      expect(lg, `${n} log group`).toBeDefined();
      groups.add(lg!);
      const group = resource(mainT, lg!);
      expect(group.Type).toBe('AWS::Logs::LogGroup');
      expect(group.Properties.RetentionInDays, `${n} retention`).toBeGreaterThan(0);
    }
    expect(groups.size).toBe(11);
  });

  // What each function's role may do (DESIGN.md flows). `required` must be granted; nothing
  // outside `allowed` may be; logs go to the function's own group only.
  const NEEDS: Record<FunctionName, { required: string[]; allowed: string[] }> = {
    // Tenant registry read, id signing, inbound send and tenant queue send (direct path);
    // idempotency records (put, sent marks, release), limited to `idem#` keys (its own test);
    // submit-rate counters (UpdateItem), limited to `rate#` keys (issue #15, its own test).
    submit: {
      required: [
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'dynamodb:BatchWriteItem',
        'dynamodb:DeleteItem',
        'dynamodb:UpdateItem',
        'secretsmanager:GetSecretValue',
        'sqs:SendMessage',
        // A debounced row due soon into a sleeping group starts its cell's tick (docs/design-dispatch.md#sleep).
        'states:StartExecution',
      ],
      allowed: [],
    },
    // Conditional put of the row and cancel-record claim; the SQS event source's consume actions.
    // A firing of a recurring schedule: UpdateItem advances the schedule's watermark and writes tombstones.
    // A bulk cancel's passes: the shards read (Query), rows cancelled or marked (UpdateItem) and
    // looked up again (GetItem), far rows' tombstones written whole (BatchWriteItem), progress
    // saved (PutItem), an unfinished pass sent on (SendMessage).
    ingest: {
      required: [
        'dynamodb:BatchWriteItem',
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'dynamodb:UpdateItem',
        'dynamodb:Query',
        'secretsmanager:GetSecretValue',
        'sqs:ReceiveMessage',
        'sqs:DeleteMessage',
        'sqs:SendMessage',
        // A row due soon into a sleeping group starts its cell's tick.
        'states:StartExecution',
      ],
      // The SQS event source's grant (Lambda polls with the function's role).
      allowed: ['sqs:ChangeMessageVisibility', 'sqs:GetQueueAttributes', 'sqs:GetQueueUrl'],
    },
    // One key lookup; the listing's Queries over the shards (and a history tenant's failed attempts).
    status: { required: ['dynamodb:GetItem', 'dynamodb:Query', 'secretsmanager:GetSecretValue'], allowed: [] },
    // Conditional update to CANCELLED, or a tombstone; a workflow job's children told, and handed over when they run on failure.
    // Bulk cancel: the operation and its index entry written (PutItem), taken back (DeleteItem), read (Query).
    cancel: {
      required: [
        'dynamodb:GetItem',
        'dynamodb:UpdateItem',
        'dynamodb:BatchGetItem',
        'dynamodb:PutItem',
        'dynamodb:DeleteItem',
        'dynamodb:Query',
        'secretsmanager:GetSecretValue',
        'sqs:SendMessage',
      ],
      allowed: [],
    },
    // Workflows and outcome reports: workflow items and outcome records (limited to w and h# keys),
    // rows (a workflow's cancel), the ids of its jobs, and their hand-over (inbound or tenant queue).
    workflows: {
      required: [
        'dynamodb:GetItem',
        'dynamodb:UpdateItem',
        'dynamodb:PutItem',
        'dynamodb:BatchWriteItem',
        'dynamodb:BatchGetItem',
        'secretsmanager:GetSecretValue',
        'sqs:SendMessage',
      ],
      allowed: [],
    },
    // Samples the rows coming due (keys-only Query) to pack groups into dispatchers, and reads the
    // groups' lease items (GetItem, lease# only: its own test): reads, never writes.
    tick: { required: ['dynamodb:Query', 'dynamodb:GetItem'], allowed: [] },
    // Query the due range and pointers, CAS acquire and lease renewals, delivered markers and
    // pointers in batches; sends to tenant queues; never the id key, never a single put or delete.
    // DeleteItem: a debounced job's replaced row, deleted unsent (rows only: its own test).
    dispatch: {
      required: [
        'dynamodb:Query',
        'dynamodb:UpdateItem',
        'dynamodb:GetItem',
        'dynamodb:BatchWriteItem',
        'dynamodb:DeleteItem',
        'sqs:SendMessage',
      ],
      allowed: [],
    },
    // Recurring schedules: definitions, first occurrences and cancels in the table; the ids of the
    // occurrences it materialises; the EventBridge Scheduler clocks of its group; passing their execution role.
    schedules: {
      required: [
        'dynamodb:GetItem',
        'dynamodb:PutItem',
        'dynamodb:UpdateItem',
        'dynamodb:DeleteItem',
        'dynamodb:Query',
        'secretsmanager:GetSecretValue',
        'scheduler:CreateSchedule',
        'scheduler:UpdateSchedule',
        'scheduler:DeleteSchedule',
        'scheduler:GetSchedule',
        'iam:PassRole',
        // A first occurrence due soon into a sleeping group starts its cell's tick.
        'states:StartExecution',
      ],
      allowed: [],
    },
    // A tenant's DLQ through the API: the tenant registry item, the handles' key; peek, redrive
    // (a message move task, or copies sent to the tenant queue) and delete in the tenant DLQs.
    dlq: {
      required: [
        'dynamodb:GetItem',
        // Dead-letter edits' audit entries (dlqa#, h#e#).
        'dynamodb:BatchWriteItem',
        'dynamodb:Query',
        'secretsmanager:GetSecretValue',
        'sqs:ReceiveMessage',
        'sqs:ChangeMessageVisibility',
        'sqs:DeleteMessage',
        'sqs:GetQueueAttributes',
        'sqs:StartMessageMoveTask',
        'sqs:ListMessageMoveTasks',
        'sqs:SendMessage',
      ],
      allowed: [],
    },
    // The operator API: the tenants' controls items (and registration), limited to tenant# keys (test/cdk/admin.test.ts).
    admin: { required: ['dynamodb:GetItem', 'dynamodb:PutItem'], allowed: [] },
  };
  const LOGS = ['logs:CreateLogStream', 'logs:PutLogEvents'];

  /** The actions a role's statements allow, each with the LeadingKeys patterns it is limited to (`*` unlimited). */
  const roleActions = (f: IConstruct) => {
    const fn = resource(mainT, idOf(f));
    const roleId = /^\{GetAtt:(.+)\.Arn\}$/.exec(render(fn.Properties.Role))![1]!;
    const out = new Map<string, string[]>();
    for (const st of roleStatements(mainT, roleId).filter((x) => x.Effect === 'Allow')) {
      const keys = conditionValues(st, 'ForAllValues:StringLike', 'dynamodb:LeadingKeys') ?? ['*'];
      for (const a of st.Action) out.set(a, [...(out.get(a) ?? []), ...keys].sort());
    }
    return out;
  };

  // Every action each role holds, exactly: an action no code path calls fails here (each one is
  // traced to the adapter call that needs it, in the comments of the permission table, lib/permissions.ts).
  const EXACT: Record<FunctionName | 'register', string[]> = {
    submit: [
      'dynamodb:BatchWriteItem',
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
      'secretsmanager:GetSecretValue',
      'sqs:SendMessage',
      'states:StartExecution',
    ],
    ingest: [
      'dynamodb:BatchWriteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
      'secretsmanager:GetSecretValue',
      'sqs:ChangeMessageVisibility',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:GetQueueUrl',
      'sqs:ReceiveMessage',
      'sqs:SendMessage',
      'states:StartExecution',
    ],
    status: ['dynamodb:GetItem', 'dynamodb:Query', 'secretsmanager:GetSecretValue'],
    cancel: [
      'dynamodb:BatchGetItem',
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
      'secretsmanager:GetSecretValue',
      'sqs:SendMessage',
    ],
    workflows: [
      'dynamodb:BatchGetItem',
      'dynamodb:BatchWriteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:UpdateItem',
      'secretsmanager:GetSecretValue',
      'sqs:SendMessage',
    ],
    tick: ['dynamodb:GetItem', 'dynamodb:Query'],
    dispatch: [
      'dynamodb:BatchWriteItem',
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
      'sqs:SendMessage',
    ],
    schedules: [
      'dynamodb:DeleteItem',
      'dynamodb:GetItem',
      'dynamodb:PutItem',
      'dynamodb:Query',
      'dynamodb:UpdateItem',
      'iam:PassRole',
      'scheduler:CreateSchedule',
      'scheduler:DeleteSchedule',
      'scheduler:GetSchedule',
      'scheduler:UpdateSchedule',
      'secretsmanager:GetSecretValue',
      'states:StartExecution',
    ],
    dlq: [
      'dynamodb:BatchWriteItem',
      'dynamodb:GetItem',
      'dynamodb:Query',
      'secretsmanager:GetSecretValue',
      'sqs:ChangeMessageVisibility',
      'sqs:DeleteMessage',
      'sqs:GetQueueAttributes',
      'sqs:ListMessageMoveTasks',
      'sqs:ReceiveMessage',
      'sqs:SendMessage',
      'sqs:StartMessageMoveTask',
    ],
    admin: ['dynamodb:GetItem', 'dynamodb:PutItem'],
    register: ['dynamodb:DeleteItem', 'dynamodb:GetItem', 'dynamodb:PutItem'],
  };

  it.each([...FUNCTIONS, 'register' as const])('%s: its role holds exactly the actions its code calls', (n) => {
    const s = main.scheduler;
    const f = n === 'register' ? s.registrationFunction : s.functions[n];
    expect([...roleActions(f).keys()].filter((a) => !LOGS.includes(a)).sort()).toEqual([...EXACT[n]].sort());
  });

  /** `dynamodb:LeadingKeys` patterns of job rows: their partition key is the bare shard number. */
  const DIGITS = ['0*', '1*', '2*', '3*', '4*', '5*', '6*', '7*', '8*', '9*'];

  it('GetItem is limited to the key prefixes a function reads wherever those have a prefix', () => {
    const s = main.scheduler;
    const getItem = (f: IConstruct) => roleActions(f).get('dynamodb:GetItem');
    // Registry and controls items, idempotency records; debounced jobs' pointers, generations and
    // rows (a digit first: the bare shard number) and late pointers (docs/flow-control.md#debounce);
    // the shard groups' lease items, whose rest a debounced row may end (docs/design-dispatch.md#rest).
    expect(getItem(s.functions.submit)).toEqual([...DIGITS, 'db#*', 'dg#*', 'idem#*', 'l#*', 'lease#*', 'tenant#*']);
    expect(roleActions(s.functions.dispatch).get('dynamodb:DeleteItem')).toEqual(DIGITS);
    // Ingest reads job rows (a bulk cancel's passes look one up again), whose partition is the bare
    // shard number: no prefix; its other reads (cancel records, definitions) are under that grant.
    expect(getItem(s.functions.ingest)).toEqual(['*']);
    // The cancel function's own items: bulk cancels' operations and the tenants' operation indexes,
    // and (PutItem) running jobs' stop requests.
    expect(roleActions(s.functions.cancel).get('dynamodb:PutItem')).toEqual(['cr#*', 'op#*', 'ops#*']);
    expect(roleActions(s.functions.cancel).get('dynamodb:DeleteItem')).toEqual(['op#*', 'ops#*']);
    // The workers' heartbeats read stop requests, and only those besides workflow items and outcomes.
    expect(roleActions(s.functions.workflows).get('dynamodb:BatchGetItem')).toEqual(['cr#*', 'h#*', 'w*']);
    expect(getItem(s.functions.dlq)).toEqual(['tenant#*']);
    // Its edits' audit entries: the tenants' trails and the jobs' edit items, nothing else.
    for (const a of ['dynamodb:BatchWriteItem', 'dynamodb:Query'])
      expect(roleActions(s.functions.dlq).get(a), a).toEqual(['dlqa#*', 'h#e#*']);
    expect(getItem(s.functions.admin)).toEqual(['tenant#*']);
    expect(getItem(s.registrationFunction)).toEqual(['tenant#*']);
    // Job rows (pk: the bare shard number) have no prefix to name.
    for (const n of ['status', 'cancel', 'dispatch', 'schedules', 'workflows'] as const) expect(getItem(s.functions[n]), n).toEqual(['*']);
    // The registration function's writes too: tenant items only.
    for (const a of ['dynamodb:PutItem', 'dynamodb:DeleteItem']) expect(roleActions(s.registrationFunction).get(a)).toEqual(['tenant#*']);
  });

  it('submit writes idempotency records and debounced jobs only: its table writes are limited to their leading keys', () => {
    const actions = roleActions(main.scheduler.functions.submit);
    expect(actions.get('dynamodb:PutItem')).toEqual([...DIGITS, 'db#*', 'dg#*', 'idem#*', 'l#*']);
    expect(actions.get('dynamodb:DeleteItem')).toEqual([...DIGITS, 'db#*', 'dg#*', 'idem#*', 'l#*']);
    expect(actions.get('dynamodb:BatchWriteItem')).toEqual(['idem#*']);
  });

  it('submit updates submit-rate counters and debounced jobs only: its UpdateItem is limited to their leading keys', () => {
    expect(roleActions(main.scheduler.functions.submit).get('dynamodb:UpdateItem')).toEqual([
      ...DIGITS,
      'db#*',
      'dg#*',
      'l#*',
      'lease#*',
      'rate#*',
    ]);
  });

  it.each(FUNCTIONS)('%s: its role grants only what its flow needs, on the scheduler resources only', (n) => {
    const s = main.scheduler;
    const f = resource(mainT, idOf(s.functions[n]));
    const roleId = /^\{GetAtt:(.+)\.Arn\}$/.exec(render(f.Properties.Role))?.[1];
    expect(roleId, `${n} role`).toBeDefined();
    const role = resource(mainT, roleId!);
    expect(role.Properties.ManagedPolicyArns ?? [], `${n} managed policies`).toEqual([]);
    const statements = roleStatements(mainT, roleId!);
    for (const st of statements) expect(st.Effect, st.source).toBe('Allow');
    const granted = allowed(statements);
    const need = NEEDS[n];
    for (const a of [...need.required, ...LOGS]) expect(granted.has(a), `${n} needs ${a}`).toBe(true);
    for (const a of granted.keys()) expect([...need.required, ...need.allowed, ...LOGS], `${n} must not have ${a}`).toContain(a);

    const logGroup = `{GetAtt:${render((f.Properties.LoggingConfig as { LogGroup: Json }).LogGroup).slice('{Ref:'.length, -1)}.Arn}`;
    const tenantQueues = `arn:{Ref:AWS::Partition}:sqs:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${s.tenantQueuePrefix}-t-*`;
    const expectedResources = (a: string): string[] => {
      if (a.startsWith('dynamodb:')) return [getAtt(s.table, 'Arn')];
      if (a.startsWith('secretsmanager:')) return [ref(s.idKey)];
      // submit (and workflows, cancel: a workflow job handed over) sends to the inbound queue and
      // (due soon) to tenant queues; dispatch to tenant queues; ingest consumes inbound.
      if (a === 'sqs:SendMessage') {
        if (n === 'ingest') return [getAtt(s.inboundQueue, 'Arn')];
        return ['submit', 'workflows', 'cancel'].includes(n) ? [getAtt(s.inboundQueue, 'Arn'), tenantQueues].sort() : [tenantQueues];
      }
      // dlq: in the tenant DLQs (<prefix>-d-*); it sends redriven messages (and reads the ARN) of the tenant queues.
      const tenantDlqs = `arn:{Ref:AWS::Partition}:sqs:{Ref:AWS::Region}:{Ref:AWS::AccountId}:${s.tenantQueuePrefix}-d-*`;
      if (n === 'dlq' && a === 'sqs:GetQueueAttributes') return [tenantDlqs, tenantQueues].sort();
      if (n === 'dlq' && a.startsWith('sqs:')) return [tenantDlqs];
      if (a.startsWith('sqs:')) return [getAtt(s.inboundQueue, 'Arn')];
      if (a.startsWith('logs:')) return [logGroup];
      if (a.startsWith('scheduler:'))
        return [`arn:{Ref:AWS::Partition}:scheduler:{Ref:AWS::Region}:{Ref:AWS::AccountId}:schedule/${s.scheduleGroupName}/*`];
      if (a === 'iam:PassRole') return [getAtt(s.schedulerRole, 'Arn')];
      if (a === 'states:StartExecution') return s.stateMachines.map((m) => ref(m)).sort();
      throw new Error(`unexpected ${a}`);
    };
    for (const [a, resources] of granted) expect([...resources].sort(), `${n}: ${a}`).toEqual(expectedResources(a));
  });

  it('the DESIGN.md examples hold: status reads only, tick only reads the table, dispatch has no key, submit sends to inbound', () => {
    const s = main.scheduler;
    const grantsOf = (n: FunctionName) =>
      allowed(roleStatements(mainT, /^\{GetAtt:(.+)\.Arn\}$/.exec(render(resource(mainT, idOf(s.functions[n])).Properties.Role))![1]!));
    const status = grantsOf('status');
    // Reads jobs only (one key lookup, the listing's Queries).
    expect([...status.keys()].filter((a) => a.startsWith('dynamodb:')).sort()).toEqual(['dynamodb:GetItem', 'dynamodb:Query']);
    expect([...status.get('dynamodb:GetItem')!]).toEqual([getAtt(s.table, 'Arn')]);
    expect([...status.get('dynamodb:Query')!]).toEqual([getAtt(s.table, 'Arn')]);
    expect([...grantsOf('tick').keys()].filter((a) => !a.startsWith('logs:')).sort()).toEqual(['dynamodb:GetItem', 'dynamodb:Query']);
    expect([...grantsOf('tick').get('dynamodb:Query')!]).toEqual([getAtt(s.table, 'Arn')]);
    // Its GetItem reads the shard groups' lease items only (whether they sleep).
    expect(roleActions(s.functions.tick).get('dynamodb:GetItem')).toEqual(['lease#*']);
    // The writers that may start a sleeping cell's tick may start those state machines and nothing else.
    for (const n of ['submit', 'ingest', 'schedules'] as const)
      expect([...(grantsOf(n).get('states:StartExecution') ?? [])].sort(), n).toEqual(s.stateMachines.map((m) => ref(m)).sort());
    expect([...grantsOf('dispatch').keys()].filter((a) => a.startsWith('secretsmanager:'))).toEqual([]);
    expect([...grantsOf('dispatch').keys()].filter((a) => a.startsWith('sqs:'))).toEqual(['sqs:SendMessage']);
    expect([...(grantsOf('submit').get('sqs:SendMessage') ?? [])]).toContain(getAtt(s.inboundQueue, 'Arn'));
  });

  it('ingest reads the inbound queue through an event source that reports partial batch failures', () => {
    const s = main.scheduler;
    const mappings = resourcesOf(mainT, 'AWS::Lambda::EventSourceMapping');
    expect(mappings).toHaveLength(1);
    const [, m] = mappings[0]!;
    expect(render(m.Properties.EventSourceArn)).toBe(getAtt(s.inboundQueue, 'Arn'));
    expect(render(m.Properties.FunctionName)).toBe(ref(s.functions.ingest));
    expect(m.Properties.FunctionResponseTypes).toEqual(['ReportBatchItemFailures']);
    // Lambda's guidance for SQS sources: visibility timeout at least six times the function timeout plus the batching window.
    const timeout = resource(mainT, idOf(s.functions.ingest)).Properties.Timeout as number;
    const window = m.Properties.MaximumBatchingWindowInSeconds as number;
    expect(window).toBeGreaterThan(0);
    expect(resource(mainT, idOf(s.inboundQueue)).Properties.VisibilityTimeout as number).toBeGreaterThanOrEqual(6 * timeout + window);
  });
});

describe('scheduler table', () => {
  it('is one on-demand table keyed pk/sk with PITR, TTL on expiresAt, retained on delete and replace', () => {
    const tables = resourcesOf(mainT, 'AWS::DynamoDB::GlobalTable');
    expect(tables).toHaveLength(1);
    expect(resourcesOf(mainT, 'AWS::DynamoDB::Table')).toHaveLength(0);
    const [id, table] = tables[0]!;
    expect(id).toBe(idOf(main.scheduler.table));
    expect(table.DeletionPolicy).toBe('Retain');
    expect(table.UpdateReplacePolicy).toBe('Retain');
    expect(table.Properties.BillingMode).toBe('PAY_PER_REQUEST');
    expect(table.Properties.TimeToLiveSpecification).toEqual({ AttributeName: 'expiresAt', Enabled: true });
    expect(table.Properties.KeySchema).toEqual([
      { AttributeName: 'pk', KeyType: 'HASH' },
      { AttributeName: 'sk', KeyType: 'RANGE' },
    ]);
    const replicas = table.Properties.Replicas as { PointInTimeRecoverySpecification?: { PointInTimeRecoveryEnabled?: boolean } }[];
    expect(replicas.length).toBeGreaterThanOrEqual(1);
    for (const r of replicas) expect(r.PointInTimeRecoverySpecification?.PointInTimeRecoveryEnabled).toBe(true);
  });
});

describe('tick', () => {
  interface State {
    Type: string;
    Resource?: string;
    Retry?: unknown[];
    Catch?: { ErrorEquals: string[]; Next: string }[];
    MaxConcurrency?: number;
    ItemProcessor?: Machine;
    Iterator?: Machine;
    Parameters?: Record<string, Json>;
    Next?: string;
  }
  interface Machine {
    StartAt: string;
    States: Record<string, State>;
    TimeoutSeconds?: number;
  }

  /** The deployed definition, with definitionSubstitutions applied as Step Functions does. */
  function definition(t: Template, smId: string): Machine {
    const sm = resource(t, smId);
    let text = render(sm.Properties.DefinitionString);
    const subs = (sm.Properties.DefinitionSubstitutions ?? {}) as Record<string, Json>;
    for (const [k, v] of Object.entries(subs)) text = text.split(`\${${k}}`).join(render(v));
    expect(text).not.toMatch(/\$\{[A-Za-z0-9_]+\}/);
    return JSON.parse(text) as Machine;
  }

  it.each(['Main', 'Custom'])(
    '%s: EXPRESS, one Map of at most 40 (and at least groupCount) with Retry and Catch inside each iteration',
    (name) => {
      const [, s, t] = both().find(([n]) => n === name)!;
      const machines = resourcesOf(t, 'AWS::StepFunctions::StateMachine');
      expect(machines).toHaveLength(1);
      expect(machines[0]![1].Properties.StateMachineType).toBe('EXPRESS');
      const def = definition(t, idOf(s.stateMachine));
      const functionArns = [getAtt(s.functions.tick, 'Arn'), getAtt(s.functions.dispatch, 'Arn')];

      const maps = Object.entries(def.States).filter(([, st]) => st.Type === 'Map');
      expect(maps).toHaveLength(1);
      const [, map] = maps[0]!;
      const groups = name === 'Custom' ? CUSTOM_GROUPS : s.settings.groupCount;
      // MaxConcurrency 0 would mean unlimited; fewer than the groups would starve some groups.
      expect(Number.isInteger(map.MaxConcurrency)).toBe(true);
      expect(map.MaxConcurrency!).toBeLessThanOrEqual(40);
      expect(map.MaxConcurrency!).toBeGreaterThanOrEqual(groups);

      const iteration = map.ItemProcessor ?? map.Iterator;
      expect(iteration).toBeDefined();
      const inner = Object.entries(iteration!.States);
      const tasks = inner.filter(([, st]) => st.Type === 'Task');
      expect(tasks.length).toBeGreaterThan(0);
      expect(inner.filter(([, st]) => st.Type === 'Fail')).toEqual([]);
      for (const [n, task] of tasks) {
        expect(task.Retry?.length ?? 0, `${n} Retry`).toBeGreaterThan(0);
        const catchAll = (task.Catch ?? []).filter((c) => c.ErrorEquals.includes('States.ALL'));
        expect(catchAll, `${n} Catch States.ALL`).toHaveLength(1);
        expect(Object.keys(iteration!.States), `${n} catches to a state inside the iteration`).toContain(catchAll[0]!.Next);
      }

      // Every task runs the tick or the dispatch function, and both are used.
      const allTasks = [...Object.values(def.States), ...Object.values(iteration!.States)].filter((st) => st.Type === 'Task');
      for (const task of allTasks) expect(functionArns).toContain(task.Resource);
      expect(new Set(allTasks.map((x) => x.Resource))).toEqual(new Set(functionArns));
    },
  );

  it('runs each execution ~90 s within the Express limit, so consecutive executions overlap', () => {
    const def = definition(mainT, idOf(main.scheduler.stateMachine));
    const plan = Object.values(def.States).find((st) => st.Resource === getAtt(main.scheduler.functions.tick, 'Arn'));
    expect(plan?.Parameters?.runMs).toBe(90_000);
    expect(def.TimeoutSeconds).toBeGreaterThan(90);
    expect(def.TimeoutSeconds).toBeLessThanOrEqual(300);
    // One dispatch step covers a whole run (no gap between steps): the function's timeout and the
    // task's cover 90 s and fit in the execution.
    const fnTimeout = resource(mainT, idOf(main.scheduler.functions.dispatch)).Properties.Timeout as number;
    expect(fnTimeout).toBeGreaterThan(90);
    expect(fnTimeout).toBeLessThan(def.TimeoutSeconds!);
    const map = Object.values(def.States).find((st) => st.Type === 'Map')!;
    const dispatchTask = Object.values((map.ItemProcessor ?? map.Iterator)!.States).find((st) => st.Type === 'Task') as {
      TimeoutSeconds?: number;
    };
    expect(dispatchTask.TimeoutSeconds).toBe(fnTimeout);
  });

  it('an EventBridge rule starts it every minute', () => {
    const smRef = { Ref: idOf(main.scheduler.stateMachine) };
    const rules = resourcesOf(mainT, 'AWS::Events::Rule').filter(([, r]) =>
      (r.Properties.Targets as { Arn: Json }[] | undefined)?.some((x) => JSON.stringify(x.Arn) === JSON.stringify(smRef)),
    );
    expect(rules).toHaveLength(1);
    const [, rule] = rules[0]!;
    expect(rule.Properties.ScheduleExpression).toBe('rate(1 minute)');
    expect(rule.Properties.State ?? 'ENABLED').toBe('ENABLED');
  });

  it('the state machine role invokes the tick and dispatch functions and nothing else', () => {
    const s = main.scheduler;
    const sm = resource(mainT, idOf(s.stateMachine));
    const roleId = /^\{GetAtt:(.+)\.Arn\}$/.exec(render(sm.Properties.RoleArn))![1]!;
    const statements = roleStatements(mainT, roleId);
    const lambdaStatements = statements.filter((st) => st.Action.some((a) => a.startsWith('lambda:') || a === '*'));
    const actions = new Set(lambdaStatements.flatMap((st) => st.Action));
    expect([...actions]).toEqual(['lambda:InvokeFunction']);
    const targets = new Set(lambdaStatements.flatMap((st) => st.Resource));
    const tick = getAtt(s.functions.tick, 'Arn');
    const dispatch = getAtt(s.functions.dispatch, 'Arn');
    expect(targets.has(tick) && targets.has(dispatch)).toBe(true);
    // Versions and aliases of the two functions are fine; any other resource is not.
    for (const r of targets) expect([tick, dispatch, `${tick}:*`, `${dispatch}:*`]).toContain(r);
    // No other service may be reached with the role's Resource "*" statements than logs delivery and X-Ray.
    for (const st of statements.filter((x) => x.Resource.includes('*'))) {
      for (const a of st.Action) expect(a, st.source).toMatch(/^(logs|xray):/);
    }
  });
});

describe('stateful resources keep their logical ids', () => {
  // A refactor that moves one of these in the construct tree changes its logical id, and
  // CloudFormation then replaces it on deploy: a new, empty table (or a new id key: every stored
  // job id fails to verify), or a new inbound queue while messages wait in the old one.
  it('the table, the inbound queue and its DLQ, and the job id key', () => {
    const s = main.scheduler;
    expect([idOf(s.table), idOf(s.inboundQueue), idOf(s.inboundDeadLetterQueue), idOf(s.idKey)]).toEqual([
      'DyneinTable465CC353',
      'DyneinInboundE4056B4B',
      'DyneinInboundDlq60F81B04',
      'DyneinJobIdKey703FAC97',
    ]);
  });
});
