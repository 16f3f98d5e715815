import { Validations } from 'aws-cdk-lib';
import * as iam from 'aws-cdk-lib/aws-iam';

/**
 * What each of the scheduler's principals may do, as one table ({@link PERMISSIONS}): a row per
 * function (and one for the role EventBridge Scheduler fires with), each entry an IAM statement
 * with its actions spelled out (no wildcard actions), the resource it is granted on and the
 * condition that narrows it. {@link DyneinScheduler} generates every statement of these roles
 * from this table and nothing else, so "what may the status function do?" is answered by
 * `PERMISSIONS.status` (test/cdk/permissions.test.ts holds the synthesized roles to it).
 *
 * Not here: each function's right to write its own log group (`logs:CreateLogStream`,
 * `logs:PutLogEvents`, given with the role), and the tick state machines' role (invoke the tick
 * and dispatch functions, plus the log delivery and X-Ray statements CDK writes for Step Functions).
 */

/** The scheduler's functions. */
export type FunctionName = 'submit' | 'ingest' | 'tick' | 'dispatch' | 'cancel' | 'status' | 'schedules' | 'dlq' | 'admin' | 'workflows';

/**
 * A principal of the table: a function (`register`: the tenant registration function) or `firing`,
 * EventBridge Scheduler's execution role for the recurring schedules' firings.
 */
export type PermissionHolder = FunctionName | 'register' | 'firing';

/** What a statement is granted on. */
export type PermissionTarget =
  /** The scheduler table. */
  | 'table'
  /** The inbound queue (submit → ingest). */
  | 'inboundQueue'
  /** Every tenant queue, `<prefix>-t-*` (created later, possibly in other stacks). */
  | 'tenantQueues'
  /** Every tenant DLQ, `<prefix>-d-*`. */
  | 'tenantDeadLetterQueues'
  /** The job id key (Secrets Manager). */
  | 'jobIdKey'
  /** The EventBridge Scheduler schedules of the deployment's schedule group, `schedule/<group>/*`. */
  | 'groupSchedules'
  /** EventBridge Scheduler's execution role (the `firing` holder's role). */
  | 'schedulerRole'
  /** Where EventBridge Scheduler puts firings it could not deliver. */
  | 'schedulerDeadLetterQueue'
  /** The tick state machine of every cell. */
  | 'tickStateMachines';

/** One statement of a holder's policy. */
export interface Permission {
  /** The statement's Sid. @default - none */
  readonly sid?: string;
  /** The actions, each named (`service:Action`). */
  readonly actions: readonly string[];
  /** The resources, in this order. */
  readonly on: PermissionTarget | readonly PermissionTarget[];
  /** Only items whose partition key starts with one of these (`ForAllValues:StringLike` on `dynamodb:LeadingKeys`). @default - any item */
  readonly leadingKeys?: readonly string[];
  /** `iam:PassRole` only to this service (`StringEquals` on `iam:PassedToService`). @default - no condition */
  readonly passedToService?: string;
  /**
   * Why the holder may act on a resource pattern (the target is a wildcard): the acknowledgment of
   * cdk-nag's `AwsSolutions-IAM5` for it. Required for wildcard targets, refused for others.
   */
  readonly wildcardReason?: string;
}

/** Job rows' partition keys are bare shard numbers: `dynamodb:LeadingKeys` patterns `0*` to `9*` name them and nothing else. */
const SHARD_DIGITS = ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'];

const ID_KEY: Permission = { on: 'jobIdKey', actions: ['secretsmanager:GetSecretValue'] };
/**
 * A writer of a row due soon into a sleeping shard group starts its cell's tick at once
 * (docs/design-dispatch.md, "Sleep"), as the every-minute rule does.
 */
const STARTS_SLEEPING_DISPATCH: Permission = { sid: 'StartsSleepingDispatch', on: 'tickStateMachines', actions: ['states:StartExecution'] };
const SEND_TO_TENANT_QUEUES: Permission = {
  sid: 'SendToTenantQueues',
  on: 'tenantQueues',
  actions: ['sqs:SendMessage'],
  wildcardReason:
    "Tenant queues are created after the scheduler, often in other stacks; their names share this scheduler's prefix, so the send grant names exactly its tenant queues (one action, sqs:SendMessage) without the scheduler referring to those stacks.",
};

/**
 * Least privilege, one statement per need, in the order each role's policy lists them. Reads of
 * keys under known prefixes are limited to them (`leadingKeys`); job rows (pk = the bare shard
 * number) share no prefix a pattern could name, so the functions that read them (status, cancel,
 * dispatch, schedules) keep GetItem on the table.
 */
export const PERMISSIONS: Readonly<Record<PermissionHolder, readonly Permission[]>> = {
  submit: [
    // The registry and controls (tenant#<name>) and idempotency records (idem#<keyId>).
    { sid: 'ReadsTenantsAndIdempotency', on: 'table', actions: ['dynamodb:GetItem'], leadingKeys: ['tenant#', 'idem#'] },
    // Idempotency records (pk `idem#<keyId>`): submit writes, marks and releases them, and only them.
    { on: 'table', actions: ['dynamodb:PutItem', 'dynamodb:BatchWriteItem', 'dynamodb:DeleteItem'], leadingKeys: ['idem#'] },
    // Submit-rate counters (pk `rate#<tenant>#<slot>`, docs/tenant-controls.md): one conditional
    // UpdateItem per request of a tenant with maxSubmitsPerSecond, and only these items.
    { on: 'table', actions: ['dynamodb:UpdateItem'], leadingKeys: ['rate#'] },
    // Debounced jobs (docs/flow-control.md#debounce), which submit writes itself: the key's pointer
    // (db#) and the job's generation (dg#), its rows (pk = the bare shard number: a digit first)
    // and, for a row due soon, its late-lane pointer (l#<shard>).
    {
      sid: 'DebouncedJobs',
      on: 'table',
      actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem'],
      leadingKeys: ['db#', 'dg#', 'l#', ...SHARD_DIGITS],
    },
    // A debounced job's row wakes its shard group if it rests (docs/design-dispatch.md, "Rest"):
    // reads the group's lease item (lease#<group>) and brings its wake-up forward.
    { sid: 'WakesRestingGroups', on: 'table', actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'], leadingKeys: ['lease#'] },
    STARTS_SLEEPING_DISPATCH,
    ID_KEY,
    // Jobs due beyond the lookahead go to ingest through the inbound queue.
    { on: 'inboundQueue', actions: ['sqs:SendMessage'] },
    // Jobs due within the lookahead go straight to the tenant's queue.
    SEND_TO_TENANT_QUEUES,
  ],
  ingest: [
    // UpdateItem: a firing advances its schedule's watermark and writes tombstones; a bulk cancel
    // (docs/flow-control.md) cancels or marks the rows it matches (BatchWriteItem: the tombstones
    // of rows far from their due time), and saves its progress (PutItem). Query and GetItem: a
    // bulk cancel's passes read the shards (pk = the bare shard number, which shares no prefix a
    // pattern could name) and look a row up again when it changed under them.
    {
      on: 'table',
      actions: ['dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:BatchWriteItem', 'dynamodb:Query', 'dynamodb:GetItem'],
    },
    ID_KEY,
    // The inbound queue's SQS event source (Lambda polls with the function's role). The event
    // source grants the same statement itself (grantConsumeMessages); the policy lists it once.
    {
      on: 'inboundQueue',
      actions: ['sqs:ReceiveMessage', 'sqs:ChangeMessageVisibility', 'sqs:GetQueueUrl', 'sqs:DeleteMessage', 'sqs:GetQueueAttributes'],
    },
    // A bulk cancel's pass that ran out of time is sent on.
    { on: 'inboundQueue', actions: ['sqs:SendMessage'] },
    STARTS_SLEEPING_DISPATCH,
  ],
  status: [
    // One key lookup; Query: the listing reads the shards' sort-key ranges (docs/listing.md), and a
    // history tenant's failed attempts (h#a#<shard>) for the timeline.
    { on: 'table', actions: ['dynamodb:GetItem', 'dynamodb:Query'] },
    ID_KEY,
  ],
  workflows: [
    // Rows, tenants, controls, outcome records and workflow items (GetItem); a workflow's cancel
    // cancels its jobs handed to the table through their rows (UpdateItem), whose partition (the
    // bare shard number) shares no prefix a pattern could name; keyed jobs' outcomes and heartbeats
    // free and renew their slots (ck#<tenant>#<key>, UpdateItem; docs/flow-control.md).
    { on: 'table', actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'] },
    // Workflow items (pk w#<shard> waiting records, wp#<shard> specs, wf#<tenant> workflows and
    // claims) and outcome records (pk h#<shard>, docs/history.md: the outcomes route writes them).
    {
      sid: 'WorkflowItemsAndOutcomes',
      on: 'table',
      actions: ['dynamodb:PutItem', 'dynamodb:BatchWriteItem', 'dynamodb:BatchGetItem'],
      leadingKeys: ['w', 'h#'],
    },
    // The workers' heartbeats read the jobs' stop requests (cr#<shard>, docs/flow-control.md).
    { sid: 'ReadsStopRequests', on: 'table', actions: ['dynamodb:BatchGetItem'], leadingKeys: ['cr#'] },
    ID_KEY,
    // Jobs whose due time is known (a workflow's first jobs, a child whose last parent ended) are
    // handed over as submit hands a job: through the inbound queue, or straight to the tenant queue.
    { on: 'inboundQueue', actions: ['sqs:SendMessage'] },
    SEND_TO_TENANT_QUEUES,
  ],
  dlq: [
    // The tenant registry item (its queue and DLQ URLs).
    { sid: 'ReadsTenants', on: 'table', actions: ['dynamodb:GetItem'], leadingKeys: ['tenant#'] },
    // Edits' audit entries: written (two items, one BatchWriteItem) in the tenant's partition
    // (dlqa#<tenant>) and beside the job's outcome records (h#e#<shard>); read (Query) from the first.
    { sid: 'DeadLetterEditAudit', on: 'table', actions: ['dynamodb:BatchWriteItem', 'dynamodb:Query'], leadingKeys: ['dlqa#', 'h#e#'] },
    ID_KEY,
    // Peeks, redrives and deletes in the tenant DLQs (<prefix>-d-*) and sends redriven messages to
    // the tenant queues (<prefix>-t-*); the tenant queue policy admits it as one of the scheduler's
    // senders (attributes.senderRoleArns).
    {
      sid: 'TenantDeadLetterQueues',
      on: 'tenantDeadLetterQueues',
      actions: [
        'sqs:ReceiveMessage',
        'sqs:ChangeMessageVisibility',
        'sqs:DeleteMessage',
        'sqs:GetQueueAttributes',
        'sqs:StartMessageMoveTask',
        'sqs:ListMessageMoveTasks',
      ],
      wildcardReason:
        "Tenant DLQs are created after the scheduler, often in other stacks; their names share this scheduler's prefix (<prefix>-d-<tenant>), so the grant names exactly the tenant DLQs, with six named actions. The function acts on the DLQ of the tenant the IAM-authorized route names only.",
    },
    {
      sid: 'RedriveToTenantQueues',
      on: 'tenantQueues',
      actions: ['sqs:SendMessage', 'sqs:GetQueueAttributes'],
      wildcardReason:
        "Tenant queues are created after the scheduler, often in other stacks; their names share this scheduler's prefix, so the grant names exactly its tenant queues (sqs:SendMessage, sqs:GetQueueAttributes) for redriven messages.",
    },
  ],
  cancel: [
    // The job row, then a conditional update to CANCELLED or a tombstone; a workflow job's waiting
    // record (w#<shard>) and its children's.
    { on: 'table', actions: ['dynamodb:GetItem', 'dynamodb:UpdateItem'] },
    // A workflow job's cancel reads its children's specs (pk wp#<shard>) and their parents'
    // waiting records (pk w#<shard>) to tell them.
    { sid: 'ReadsWaitingRecords', on: 'table', actions: ['dynamodb:BatchGetItem'], leadingKeys: ['w#', 'wp#'] },
    ID_KEY,
    // Bulk cancels (docs/flow-control.md): the operation (op#<id>) and its tenant's index entry
    // (ops#<tenant>) written, taken back if its passes cannot start, and read with its progress.
    {
      sid: 'BulkCancelOperations',
      on: 'table',
      actions: ['dynamodb:PutItem', 'dynamodb:DeleteItem', 'dynamodb:Query'],
      leadingKeys: ['op#', 'ops#'],
    },
    // A running job's stop request (cr#<shard>), written by its DELETE (docs/flow-control.md).
    { sid: 'WritesStopRequests', on: 'table', actions: ['dynamodb:PutItem'], leadingKeys: ['cr#'] },
    // A child that runs on a parent's failure is handed over when a cancel ends its last parent;
    // a bulk cancel's passes start as messages to ingest.
    { on: 'inboundQueue', actions: ['sqs:SendMessage'] },
    SEND_TO_TENANT_QUEUES,
  ],
  // The tick samples the rows coming due to size its plan (keys only, read-only), and reads its
  // groups' lease items (lease#<group>): a group asleep past the run gets no dispatcher.
  tick: [
    { on: 'table', actions: ['dynamodb:Query'] },
    { sid: 'ReadsGroupRests', on: 'table', actions: ['dynamodb:GetItem'], leadingKeys: ['lease#'] },
  ],
  dispatch: [
    // Reads due rows, pointers and group marks (Query), rows, tenants and controls (GetItem);
    // acquires and renews (UpdateItem); marks delivered and writes pointers (BatchWriteItem); takes
    // the slots of concurrency keys (ck#<tenant>#<key>: UpdateItem, GetItem; docs/flow-control.md).
    { on: 'table', actions: ['dynamodb:Query', 'dynamodb:GetItem', 'dynamodb:UpdateItem', 'dynamodb:BatchWriteItem'] },
    // A debounced job's row that a later version replaced (or whose job was cancelled) is deleted
    // unsent (docs/flow-control.md#debounce): rows only (pk = the bare shard number).
    { sid: 'DropsReplacedRows', on: 'table', actions: ['dynamodb:DeleteItem'], leadingKeys: SHARD_DIGITS },
    SEND_TO_TENANT_QUEUES,
  ],
  schedules: [
    // Definitions (pk sched#<tenant>), their first occurrences and the cancels of update/pause/delete;
    // the never-fired check: its items (pk schedaudit) and each occurrence's row (GetItem).
    { on: 'table', actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:UpdateItem', 'dynamodb:DeleteItem', 'dynamodb:Query'] },
    ID_KEY,
    // The clocks: the schedules of this deployment's group only (EventBridge Scheduler names them `d-<hash>` at run time).
    {
      sid: 'ClocksOfTheGroup',
      on: 'groupSchedules',
      actions: ['scheduler:CreateSchedule', 'scheduler:UpdateSchedule', 'scheduler:DeleteSchedule', 'scheduler:GetSchedule'],
      wildcardReason:
        "EventBridge Scheduler schedules are created at run time, one per recurring schedule (named d-<hash of tenant and name>); the grant covers only the schedules of this deployment's schedule group, with four named actions.",
    },
    // CreateSchedule/UpdateSchedule pass the execution role, to EventBridge Scheduler and nothing else.
    { sid: 'PassSchedulerRole', on: 'schedulerRole', actions: ['iam:PassRole'], passedToService: 'scheduler.amazonaws.com' },
    // A schedule's first occurrences are rows: one due soon into a sleeping group starts its tick.
    STARTS_SLEEPING_DISPATCH,
  ],
  admin: [
    // Tenant controls (pk tenant#<name>, sk controls) and the registration it checks: read and
    // conditional put on the tenants' items only, nothing else of the table.
    { sid: 'TenantItemsOnly', on: 'table', actions: ['dynamodb:GetItem', 'dynamodb:PutItem'], leadingKeys: ['tenant#'] },
  ],
  register: [
    // Registry items only (pk tenant#<name>): its code writes and removes the sort key `tenant`
    // alone (never a tenant's controls, which it cannot name), and only URLs of the tenant's own queues.
    {
      sid: 'TenantRegistryItemsOnly',
      on: 'table',
      actions: ['dynamodb:GetItem', 'dynamodb:PutItem', 'dynamodb:DeleteItem'],
      leadingKeys: ['tenant#'],
    },
  ],
  // Each firing of a recurring schedule goes to the inbound queue; one that fails its retries to the firing DLQ.
  firing: [{ on: ['inboundQueue', 'schedulerDeadLetterQueue'], actions: ['sqs:SendMessage'] }],
};

/** A target's ARN, and for a pattern, how cdk-nag names it (`AwsSolutions-IAM5[Resource::<nagName>]`). */
export interface PermissionResource {
  /** Its ARN, or the ARNs of a target of several resources (one per cell). */
  readonly arn: string | readonly string[];
  /** Set on wildcard resources only. */
  readonly nagName?: string;
}

/** The targets' resources of one scheduler; asked only for the targets a holder's row names. */
export type PermissionResources = (target: PermissionTarget) => PermissionResource;

const targetsOf = (p: Permission): readonly PermissionTarget[] => (typeof p.on === 'string' ? [p.on as PermissionTarget] : p.on);

/** The IAM statements of `holder`'s row, in order. */
export function permissionStatements(holder: PermissionHolder, resources: PermissionResources): iam.PolicyStatement[] {
  return PERMISSIONS[holder].map(
    (p) =>
      new iam.PolicyStatement({
        sid: p.sid,
        actions: [...p.actions],
        resources: targetsOf(p).flatMap((t) => resources(t).arn),
        conditions: {
          ...(p.leadingKeys ? { 'ForAllValues:StringLike': { 'dynamodb:LeadingKeys': p.leadingKeys.map((k) => `${k}*`) } } : {}),
          ...(p.passedToService ? { StringEquals: { 'iam:PassedToService': p.passedToService } } : {}),
        },
      }),
  );
}

/**
 * Adds `holder`'s row to `role`'s policy, and acknowledges cdk-nag's `AwsSolutions-IAM5` on the
 * role for each wildcard resource with the row's reason (throws when a reason is missing or not needed).
 */
export function grantPermissions(holder: PermissionHolder, role: iam.IRole, resources: PermissionResources): void {
  const statements = permissionStatements(holder, resources);
  PERMISSIONS[holder].forEach((p, i) => {
    role.addToPrincipalPolicy(statements[i]!);
    const wildcards = targetsOf(p).flatMap((t) => resources(t).nagName ?? []);
    if (wildcards.length > 0 !== (p.wildcardReason !== undefined))
      throw new Error(
        `PERMISSIONS.${holder}: a wildcardReason is given for wildcard targets only, and always (${targetsOf(p).join(', ')})`,
      );
    for (const name of wildcards)
      Validations.of(role).acknowledge({ id: `AwsSolutions-IAM5[Resource::${name}]`, reason: p.wildcardReason! });
  });
}
