import { ArnFormat, Duration, Fn, Lazy, RemovalPolicy, Stack, Token, Validations } from 'aws-cdk-lib';
import { AccessLogFormat } from 'aws-cdk-lib/aws-apigateway';
import * as apigw from 'aws-cdk-lib/aws-apigatewayv2';
import { HttpIamAuthorizer } from 'aws-cdk-lib/aws-apigatewayv2-authorizers';
import { HttpLambdaIntegration } from 'aws-cdk-lib/aws-apigatewayv2-integrations';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import * as events from 'aws-cdk-lib/aws-events';
import * as targets from 'aws-cdk-lib/aws-events-targets';
import * as iam from 'aws-cdk-lib/aws-iam';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { SqsEventSource } from 'aws-cdk-lib/aws-lambda-event-sources';
import * as logs from 'aws-cdk-lib/aws-logs';
import { CfnScheduleGroup } from 'aws-cdk-lib/aws-scheduler';
import * as secrets from 'aws-cdk-lib/aws-secretsmanager';
import type * as sns from 'aws-cdk-lib/aws-sns';
import type * as sqs from 'aws-cdk-lib/aws-sqs';
import * as sfn from 'aws-cdk-lib/aws-stepfunctions';
import { Construct } from 'constructs';
import {
  DEFAULTS,
  INGEST_BATCHING_WINDOW_MS,
  INGEST_TIMEOUT_SECONDS,
  METRICS_NAMESPACE,
  metricService,
  QUEUE_SETTINGS,
  resolveSettings,
  type SchedulerSettings,
  TABLE_KEY,
} from '../core/model/index.js';
import { bundleCode } from './bundles.js';
import { SchedulerMonitoring, type SchedulerFiringMetric } from './monitoring.js';
import {
  grantPermissions,
  permissionStatements,
  type FunctionName,
  type PermissionHolder,
  type PermissionResource,
  type PermissionResources,
  type PermissionTarget,
} from './permissions.js';
import { TENANT_PLACEHOLDER } from '../core/tenants/index.js';
import {
  deadLetterQueueName,
  deadLetterQueuePattern,
  defaultPrefix,
  inboundSenderTagKey,
  tenantQueueName,
  tenantQueuePattern,
  tenantQueueUrlTemplate,
  validatePrefix,
} from './naming.js';
import { DLQ_REDRIVE_ACTIONS, secureDeadLetterQueue, secureQueue } from './queues.js';
import { admitSender, DyneinTenant, type DyneinTenantProps, type IDyneinScheduler, type SchedulerAttributes } from './tenant.js';
import {
  CELL_KEY,
  DISPATCH_FUNCTION_ARN_KEY,
  dispatchTimeoutSeconds,
  ERROR_BACKOFF_SECONDS,
  TICK_FUNCTION_ARN_KEY,
  tickDefinition,
} from './tickDefinition.js';

/**
 * How the scheduler table is billed ({@link DyneinSchedulerProps.tableCapacity}). `onDemand`: per
 * request, scales by itself (the default). `provisioned`: read and write capacity units billed by
 * the hour, each scaled by Application Auto Scaling (target tracking on the consumed share of the
 * provisioned capacity); cheaper per job under a steady high load (docs/capacity.md, "Provisioned
 * mode"), slower to follow a sudden rise (scaling out takes minutes; burst capacity covers about
 * five minutes of unused capacity).
 */
export type DyneinTableCapacity =
  | { readonly mode: 'onDemand' }
  | {
      readonly mode: 'provisioned';
      /** Fewest read capacity units auto scaling goes down to. @default 300 (one busy dispatcher's shard queries at 64 shards, about 190 RCU/s, at 70 %) */
      readonly minReadUnits?: number;
      /** Most read capacity units auto scaling goes up to. @default 40000 (the default per-table quota) */
      readonly maxReadUnits?: number;
      /** Fewest write capacity units auto scaling goes down to. @default 100 */
      readonly minWriteUnits?: number;
      /** Most write capacity units auto scaling goes up to (3 a job: 10,000 jobs/s need 30,000 consumed). @default 40000 (the default per-table quota) */
      readonly maxWriteUnits?: number;
      /** Consumed share of the provisioned capacity that auto scaling keeps, percent (20 to 90). @default 70 */
      readonly targetUtilizationPercent?: number;
    };

/** Defaults of a provisioned table ({@link DyneinTableCapacity}). */
export const PROVISIONED_DEFAULTS = {
  minReadUnits: 300,
  maxReadUnits: 40_000,
  minWriteUnits: 100,
  maxWriteUnits: 40_000,
  targetUtilizationPercent: 70,
} as const;

/** Log level of the functions (and of the state machine's execution log). */
export type DyneinLogLevel = 'DEBUG' | 'INFO' | 'WARN' | 'ERROR';

export interface DyneinSchedulerProps {
  /** Shards of the scheduler table; raising it later is safe, lowering it is not. @default 64 */
  readonly shardCount?: number;
  /**
   * Shard groups dispatched in parallel, in total over the cells: a multiple of `cells`, at most 40
   * per cell (each cell's tick Map runs at most 40 dispatchers). @default 8
   */
  readonly groupCount?: number;
  /**
   * Cells (docs/capacity.md, "Cells"): each cell has its own tick state machine (the same
   * definition) and EventBridge rule, and dispatches its own groups (group `g` is in cell
   * `g mod cells`), so capacity grows with the cells; jobs spread over them evenly with no change
   * to where they are stored. 1 to 20. Raising it on a live deployment is safe (the group leases
   * hand the groups over); cell 0 keeps the state machine of a deployment before cells.
   * @default 1
   */
  readonly cells?: number;
  /** Memory of the dispatch function, MB (its CPU share grows with it). 128 to 10,240. @default 1024 */
  readonly dispatcherMemorySize?: number;
  /**
   * Most concurrent ingest invocations the inbound queue's event source starts (the SQS event
   * source's `maximumConcurrency`), 2 to 1,000: bounds ingest's share of the account's Lambda
   * concurrency and its write rate on the table; messages beyond wait in the inbound queue.
   * @default - none (Lambda scales the pollers up to its own limit)
   */
  readonly ingestMaxConcurrency?: number;
  /**
   * The tick Map's failure handling: consecutive failed dispatch steps (each already retried in
   * place) after which a dispatcher stops for this execution; the next execution, a minute
   * later, takes its groups over. Iterations never fail the Map, so one dispatcher's failures
   * never stop the others. 1 to 10; waits 5, 10, 20, 40, then 60 s between failures.
   * @default 4
   */
  readonly dispatchMaxConsecutiveFailures?: number;
  /** Jobs due sooner skip the table; also the cancel cut-off before runAt. @default Duration.seconds(5) */
  readonly lookahead?: Duration;
  /** Lease of an acquired row, renewed while held. @default Duration.seconds(30) */
  readonly lease?: Duration;
  /** Largest serialized payload, bytes. @default 245760 (240 KiB) */
  readonly maxPayloadBytes?: number;
  /** How long each tick execution dispatches (executions start every minute and overlap). @default Duration.seconds(90) */
  readonly tickRunTime?: Duration;
  /** Topic for every alarm. @default - alarms without actions */
  readonly alarmTopic?: sns.ITopic;
  /** Lateness p99 above this raises the lateness alarm. @default Duration.seconds(2) */
  readonly latenessAlarmThreshold?: Duration;
  /** Oldest inbound message above this raises the ingest-backlog alarm. @default Duration.minutes(1) */
  readonly inboundAgeAlarmThreshold?: Duration;
  /** Default route throttling of the HTTP API. @default { rateLimit: 1000, burstLimit: 2000 } */
  readonly throttle?: { readonly rateLimit: number; readonly burstLimit: number };
  /** Retention of function, API access and state machine logs. @default logs.RetentionDays.ONE_MONTH */
  readonly logRetention?: logs.RetentionDays;
  /**
   * Warm throughput of the table. A new on-demand table starts near 4,000 writes/s (about 1,300
   * jobs/s at three writes a job); set this before a launch that needs more.
   * @default - none (the table warms up with traffic)
   */
  readonly warmThroughput?: dynamodb.WarmThroughput;
  /**
   * Billing of the scheduler table: on demand, or provisioned with auto scaling on reads and writes
   * for a steady high load (docs/capacity.md, "Provisioned mode"). Switching a live table between
   * the modes is an in-place update (DynamoDB allows up to four switches to on demand in a rolling
   * 24 hours, to provisioned at any time).
   * @default { mode: 'onDemand' }
   */
  readonly tableCapacity?: DyneinTableCapacity;
  /**
   * Due rows per second one dispatcher is planned to carry: each tick execution samples the rows
   * coming due during its run and packs the groups into just enough dispatchers (one Lambda each),
   * from one at low load to one per group. 0 runs one dispatcher per group always.
   * @default 200 (the capacity model: ~1.7 ms of dispatch CPU per job on a 1,024 MB Lambda, with headroom for a load that rises within a minute)
   */
  readonly dispatcherRowsPerSecond?: number;
  /**
   * Reserved concurrency of the dispatch function, opt-in: at least twice `groupCount` (tick
   * executions overlap, so each group may run twice), e.g. `2 × groupCount + 2`. Reserving needs
   * account concurrency beyond the 100 Lambda keeps unreserved (a new account's limit can be 10).
   * @default - none (the dispatch function uses the account's unreserved concurrency)
   */
  readonly dispatchReservedConcurrency?: number;
  /**
   * What deleting the stack (or replacing the resources) does with the scheduler table and the job
   * id key: both follow this one policy, so stored job ids stay verifiable as long as the jobs exist.
   * @default RemovalPolicy.RETAIN
   */
  readonly removalPolicy?: RemovalPolicy;
  /**
   * Prefix of the tenant queue names (`<prefix>-t-<tenant>`, DLQs `<prefix>-d-<tenant>`): the
   * submit and dispatch roles may send to `<prefix>-t-*` by their own IAM policy, which covers
   * tenants created later in other stacks. 1 to 35 letters, digits or '-', unique per account and
   * region. Changing it renames (replaces) every tenant queue.
   * @default `<stack name>-<construct id>` (shortened with a hash beyond 35 characters)
   */
  readonly tenantQueuePrefix?: string;
  /**
   * Log level. `WARN` and `ERROR`: warnings and errors only (no START/END/REPORT platform lines,
   * the state machine logs errors only). `INFO`: also the platform lines of every invocation and
   * every state transition of the tick (costly at high request rates). `DEBUG`: everything.
   * Metrics are unaffected (application logs are always kept at INFO or below for their EMF lines).
   * @default 'WARN'
   */
  readonly logLevel?: DyneinLogLevel;
  /** Name of the HTTP API. @default `<stack name>-dynein-api` */
  readonly apiName?: string;
  /** Alarm when rows of unregistered tenants wait parked for this many consecutive minutes. @default 5 */
  readonly parkedJobsAlarmMinutes?: number;
  /**
   * Alarm when a tenant that may send (not paused, registered) has had the same first job in a
   * hold lane for longer than this (1 minute to 1 day): held jobs not read back.
   * @default Duration.minutes(5)
   */
  readonly heldAfterResumeAlarmThreshold?: Duration;
  /**
   * Alarm when, for this many consecutive minutes, reports of workflow jobs' ends were stored
   * but not carried on to their children (the children wait until the report comes again).
   * @default 5
   */
  readonly workflowChildrenWaitingAlarmMinutes?: number;
  /**
   * Export the scheduler's spans (`dynein.submit`, `dynein.ingest`, `dynein.dispatch`,
   * `dynein.schedule.fire`, `dynein.workflow.release`) over OTLP/HTTP JSON (docs/tracing.md). Off
   * by default: no span is built.
   */
  readonly tracing?: DyneinTracing;
}

/** Where the functions that record spans (submit, ingest, dispatch, schedules, workflows, cancel) export them (docs/tracing.md#on-aws). */
export interface DyneinTracing {
  /**
   * The OTLP/HTTP endpoint (`http(s)://host:port`): spans are POSTed to its `/v1/traces`. With the
   * ADOT collector Lambda layer, `http://localhost:4318`; or a collector the team runs (in a VPC
   * the functions reach, or behind a public HTTPS endpoint).
   */
  readonly otlpEndpoint: string;
  /** Layers added to those functions (the ADOT collector layer). @default none */
  readonly layers?: lambda.ILayerVersion[];
  /** Environment added to those functions (the collector layer's configuration). @default none */
  readonly environment?: Record<string, string>;
}

export type { FunctionName } from './permissions.js';

interface FunctionOptions {
  readonly timeout: Duration;
  readonly memorySize?: number;
  readonly environment?: Record<string, string>;
  readonly reservedConcurrentExecutions?: number;
}

/**
 * The whole scheduler of DESIGN.md: the scheduler table (on demand by default, or provisioned with auto scaling; PITR, TTL, retained), the
 * inbound queue with its DLQ, the functions with least-privilege roles (lib/permissions.ts), the job id key in
 * Secrets Manager, the IAM-authorized HTTP API, the tick (EventBridge every minute → Step
 * Functions EXPRESS), the recurring schedules' EventBridge Scheduler group with its execution
 * role and firing DLQ, a dashboard and alarms. Tenants are added with {@link addTenant}, or from
 * another stack with {@link DyneinTenant} and {@link DyneinScheduler.fromAttributes}.
 *
 * @example
 * const scheduler = new DyneinScheduler(this, 'Dynein', { alarmTopic });
 * const billing = scheduler.addTenant('billing');
 * billing.grantSchedule(billingApiRole);
 * billing.grantConsume(billingWorkerRole);
 */
export class DyneinScheduler extends Construct implements IDyneinScheduler {
  /** A scheduler deployed elsewhere, for {@link DyneinTenant} in another stack. */
  static fromAttributes(attributes: SchedulerAttributes): IDyneinScheduler {
    return { attributes };
  }

  readonly settings: SchedulerSettings;
  readonly table: dynamodb.TableV2;
  readonly inboundQueue: sqs.Queue;
  readonly inboundDeadLetterQueue: sqs.Queue;
  readonly idKey: secrets.Secret;
  readonly httpApi: apigw.HttpApi;
  readonly stage: apigw.HttpStage;
  /** Cell 0's tick state machine (the deployment's only one with one cell). */
  readonly stateMachine: sfn.StateMachine;
  /** Cell 0's EventBridge rule (every minute). */
  readonly tickRule: events.Rule;
  /** The tick state machine of each cell, by cell. */
  readonly stateMachines: readonly sfn.StateMachine[];
  /** The EventBridge rule of each cell, by cell. */
  readonly tickRules: readonly events.Rule[];
  /** Runs the never-fired check of the recurring schedules' occurrences every 5 minutes (docs/tracing.md#never-fired). */
  readonly occurrenceAuditRule: events.Rule;
  readonly functions: Readonly<Record<FunctionName, lambda.Function>>;
  /**
   * Serves every tenant's registration custom resource (`Custom::DyneinTenantRegistration`, its
   * ARN the tenants' service token): writes and removes registry items (`pk = tenant#<name>`,
   * `sk = tenant`) whose queue and DLQ are the tenant's own, nothing else of the table.
   */
  readonly registrationFunction: lambda.Function;
  readonly monitoring: SchedulerMonitoring;
  readonly attributes: SchedulerAttributes;
  readonly tenants: DyneinTenant[] = [];
  /** Tenant queues are `<prefix>-t-<tenant>`; see {@link DyneinSchedulerProps.tenantQueuePrefix}. */
  readonly tenantQueuePrefix: string;
  /** The IAM principal tag ({@link grantInboundRedrive} sets it to `true`) that lets a principal send to the inbound queue. */
  readonly inboundSenderTagKey: string;
  /**
   * The EventBridge Scheduler schedule group holding the clock of every recurring schedule
   * (`cron()`/`rate()`), named {@link scheduleGroupName}. Deleting it deletes those schedules: it
   * is destroyed with the stack whatever the `removalPolicy` (the definitions stay in the table).
   */
  readonly scheduleGroup: CfnScheduleGroup;
  /** `<tenantQueuePrefix>-schedules`: the schedule group's name (the schedules function's `DYNEIN_SCHEDULE_GROUP`). */
  readonly scheduleGroupName: string;
  /** `arn:<partition>:scheduler:<region>:<account>:schedule-group/<scheduleGroupName>`. */
  readonly scheduleGroupArn: string;
  /**
   * The execution role EventBridge Scheduler assumes to fire the schedules of the group: trusted by
   * `scheduler.amazonaws.com` only for this account and this schedule group (`aws:SourceAccount`,
   * `aws:SourceArn`), allowed `sqs:SendMessage` on the inbound queue and
   * {@link schedulerDeadLetterQueue} only. The schedules function passes it (`iam:PassRole`, only to
   * `scheduler.amazonaws.com`).
   */
  readonly schedulerRole: iam.Role;
  /**
   * Where EventBridge Scheduler puts a firing it could not deliver to the inbound queue after its
   * retries (SSE, TLS only, 14 days). Any message raises the `SchedulerDlqNotEmpty` alarm;
   * docs/operating.md says what to do.
   */
  readonly schedulerDeadLetterQueue: sqs.Queue;
  /** Imported roles given {@link grantInboundRedrive} (no tag possible): listed in the inbound queue policy by ARN. */
  readonly #inboundExtraSenders: string[] = [];

  /** The resources the permission table's targets name, as the builders create them. */
  readonly #permissionTargets = new Map<PermissionTarget, PermissionResource>();
  /** The resource of a permission target, once its builder has run. */
  readonly #permissionTarget: PermissionResources = (target) => {
    const r = this.#permissionTargets.get(target);
    if (!r) throw new Error(`DyneinScheduler: permission target ${target} is used before it is built`);
    return r;
  };

  constructor(scope: Construct, id: string, props: DyneinSchedulerProps = {}) {
    super(scope, id);
    this.tenantQueuePrefix = props.tenantQueuePrefix ?? defaultPrefix(Stack.of(this).stackName, id);
    this.settings = validateProps(id, props, this.tenantQueuePrefix);
    this.inboundSenderTagKey = inboundSenderTagKey(this.tenantQueuePrefix);
    const retention = props.logRetention ?? logs.RetentionDays.ONE_MONTH;
    const logLevel = props.logLevel ?? 'WARN';
    const removalPolicy = props.removalPolicy ?? RemovalPolicy.RETAIN;
    this.#addTenantQueueTargets();

    this.table = this.#buildTable(props, removalPolicy);
    ({ queue: this.inboundQueue, deadLetterQueue: this.inboundDeadLetterQueue } = this.#buildInbound());
    const clock = this.#buildRecurringClock();
    this.scheduleGroupName = clock.groupName;
    this.scheduleGroup = clock.group;
    this.scheduleGroupArn = clock.groupArn;
    this.schedulerDeadLetterQueue = clock.deadLetterQueue;
    this.schedulerRole = clock.role;
    this.idKey = this.#buildIdKey(removalPolicy);
    ({ functions: this.functions, registrationFunction: this.registrationFunction } = this.#buildFunctions(
      props,
      retention,
      logLevel,
      clock.firingPolicy,
    ));
    // One tick state machine and rule per cell; cell 0's keep the ids of a deployment before cells.
    const cellTicks = this.#buildTicks(props, retention, logLevel);
    this.stateMachines = cellTicks.map((c) => c.stateMachine);
    this.#letGroupsSleep();
    this.#grantPermissions();
    this.#connectInbound(props);
    ({ httpApi: this.httpApi, stage: this.stage } = this.#buildApi(props, retention));
    this.tickRules = cellTicks.map((c) => c.rule);
    ({ stateMachine: this.stateMachine, rule: this.tickRule } = cellTicks[0]!);
    this.occurrenceAuditRule = this.#buildOccurrenceAudit();

    const { submit, dispatch, dlq } = this.functions;
    this.attributes = {
      tableName: this.table.tableName,
      tableArn: this.table.tableArn,
      httpApiId: this.httpApi.apiId,
      senderRoleArns: [submit.role!.roleArn, dispatch.role!.roleArn, dlq.role!.roleArn],
      tenantQueuePrefix: this.tenantQueuePrefix,
      registrationServiceToken: this.registrationFunction.functionArn,
      alarmTopicArn: props.alarmTopic?.topicArn,
    };
    this.monitoring = this.#buildMonitoring(props);
  }

  /** The scheduler table (on demand or provisioned; PITR, TTL, retained by default). */
  #buildTable(props: DyneinSchedulerProps, removalPolicy: RemovalPolicy): dynamodb.TableV2 {
    const table = new dynamodb.TableV2(this, 'Table', {
      partitionKey: { name: TABLE_KEY.partitionKey, type: dynamodb.AttributeType.STRING },
      sortKey: { name: TABLE_KEY.sortKey, type: dynamodb.AttributeType.STRING },
      billing: tableBilling(props.tableCapacity),
      pointInTimeRecoverySpecification: { pointInTimeRecoveryEnabled: true },
      timeToLiveAttribute: TABLE_KEY.ttlAttribute,
      removalPolicy,
      ...(props.warmThroughput ? { warmThroughput: props.warmThroughput } : {}),
    });
    this.#permissionTargets.set('table', { arn: table.tableArn });
    return table;
  }

  /** The inbound queue (submit → ingest) with its DLQ. */
  #buildInbound(): { queue: sqs.Queue; deadLetterQueue: sqs.Queue } {
    // Lambda's guidance for an SQS event source: visibility ≥ 6 × the function timeout + the batching window.
    const inbound = QUEUE_SETTINGS.inbound;
    const queues = secureQueue(this, 'Inbound', {
      visibilityTimeout: Duration.seconds(inbound.visibilityTimeoutSeconds),
      maxReceiveCount: inbound.maxReceiveCount,
      retentionPeriod: Duration.seconds(inbound.retentionSeconds),
    });
    this.#permissionTargets.set('inboundQueue', { arn: queues.queue.queueArn });
    return queues;
  }

  /**
   * Recurring schedules: EventBridge Scheduler is the clock of each cron()/rate() schedule, in one
   * group per deployment; each firing goes to the inbound queue (ingest materialises the next
   * occurrences), a firing that fails its retries to the firing DLQ.
   */
  #buildRecurringClock(): {
    groupName: string;
    group: CfnScheduleGroup;
    groupArn: string;
    deadLetterQueue: sqs.Queue;
    role: iam.Role;
    firingPolicy: iam.Policy;
  } {
    const stack = Stack.of(this);
    const groupName = `${this.tenantQueuePrefix}-schedules`;
    const group = new CfnScheduleGroup(this, 'ScheduleGroup', { name: groupName });
    // Its schedules only mirror the table's definitions; kept after the stack, they would fire into deleted queues.
    group.applyRemovalPolicy(RemovalPolicy.DESTROY);
    const groupArn = stack.formatArn({
      service: 'scheduler',
      resource: 'schedule-group',
      resourceName: groupName,
      arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
    });
    const deadLetterQueue = secureDeadLetterQueue(this, 'SchedulerDlq');
    Validations.of(deadLetterQueue).acknowledge({
      id: 'AwsSolutions-SQS3',
      reason:
        'This queue is itself a dead-letter queue: EventBridge Scheduler sends the firings it could not deliver here (DeadLetterConfig of each schedule), so no SQS queue names it in a redrive policy.',
    });
    const role = new iam.Role(this, 'SchedulerRole', {
      // Confused-deputy guard (EventBridge Scheduler user guide): only this account's schedules of this group.
      assumedBy: new iam.ServicePrincipal('scheduler.amazonaws.com', {
        conditions: { StringEquals: { 'aws:SourceAccount': stack.account, 'aws:SourceArn': groupArn } },
      }),
      description: 'Dynein: EventBridge Scheduler execution role of the recurring schedules (sends firings to the inbound queue)',
    });
    // The clocks: the schedules of this deployment's group only (EventBridge Scheduler names them `d-<hash>` at run time).
    const groupSchedules = `${groupName}/*`;
    this.#permissionTargets.set('groupSchedules', {
      arn: stack.formatArn({
        service: 'scheduler',
        resource: 'schedule',
        resourceName: groupSchedules,
        arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
      }),
      nagName: `${nagArnPrefix(stack, 'scheduler')}:schedule/${groupSchedules}`,
    });
    this.#permissionTargets.set('schedulerRole', { arn: role.roleArn });
    this.#permissionTargets.set('schedulerDeadLetterQueue', { arn: deadLetterQueue.queueArn });
    const firingPolicy = new iam.Policy(this, 'SchedulerRolePolicy', {
      roles: [role],
      statements: permissionStatements('firing', this.#permissionTarget),
    });
    return { groupName, group, groupArn, deadLetterQueue, role, firingPolicy };
  }

  /** The HMAC key that signs job ids, in Secrets Manager. */
  #buildIdKey(removalPolicy: RemovalPolicy): secrets.Secret {
    const idKey = new secrets.Secret(this, 'JobIdKey', {
      description: 'Dynein Serverless: HMAC key that signs job ids (rotating it invalidates outstanding ids)',
      generateSecretString: { passwordLength: 64, excludePunctuation: true, includeSpace: false },
      // Kept as long as the table: deleting it would orphan every stored job id.
      removalPolicy,
    });
    Validations.of(idKey).acknowledge({
      id: 'AwsSolutions-SMG4',
      reason:
        'The job id key signs ids that live as long as their jobs (up to 10 years); rotation would invalidate them until key versions are supported.',
    });
    this.#permissionTargets.set('jobIdKey', { arn: idKey.secretArn });
    return idKey;
  }

  /**
   * Tenant queues and DLQs (created later, possibly in other stacks) are named `<prefix>-t-<tenant>`
   * and `<prefix>-d-<tenant>`: the scheduler's functions may use them by their own IAM policy,
   * whatever queue policy a team adds.
   */
  #addTenantQueueTargets(): void {
    const patterns: [PermissionTarget, string][] = [
      ['tenantQueues', tenantQueuePattern(this.tenantQueuePrefix)],
      ['tenantDeadLetterQueues', deadLetterQueuePattern(this.tenantQueuePrefix)],
    ];
    for (const [target, pattern] of patterns) {
      this.#permissionTargets.set(target, {
        arn: Stack.of(this).formatArn({ service: 'sqs', resource: pattern, arnFormat: ArnFormat.NO_RESOURCE_NAME }),
        nagName: `${nagArnPrefix(Stack.of(this), 'sqs')}:${pattern}`,
      });
    }
  }

  /** The functions, each with its log group and role (logs only: {@link #grantPermissions} adds the rest). */
  #buildFunctions(
    props: DyneinSchedulerProps,
    retention: logs.RetentionDays,
    logLevel: DyneinLogLevel,
    firingPolicy: iam.Policy,
  ): { functions: Record<FunctionName, lambda.Function>; registrationFunction: lambda.Function } {
    const s = this.settings;
    const stack = Stack.of(this);
    const fn = (name: FunctionName, opts: FunctionOptions) => this.#function(name, retention, logLevel, opts);
    const env = {
      DYNEIN_TABLE: this.table.tableName,
      DYNEIN_SHARDS: String(s.shardCount),
      DYNEIN_GROUPS: String(s.groupCount),
      DYNEIN_LOOKAHEAD_MS: String(s.lookaheadMs),
      DYNEIN_LEASE_MS: String(s.leaseMs),
      DYNEIN_MAX_PAYLOAD_BYTES: String(s.maxPayloadBytes),
      DYNEIN_DISPATCHER_ROWS_PER_SECOND: String(s.dispatcherRowsPerSecond),
      // Only with cells: a deployment of one cell keeps the environment it had before cells.
      ...(s.cells > 1 ? { DYNEIN_CELLS: String(s.cells) } : {}),
      // The tenants' own queues (this account, region and prefix): registrations naming others are refused.
      DYNEIN_TENANT_QUEUE_URL: tenantQueueUrlTemplate(stack, tenantQueueName(this.tenantQueuePrefix, TENANT_PLACEHOLDER)),
      DYNEIN_TENANT_DLQ_URL: tenantQueueUrlTemplate(stack, deadLetterQueueName(this.tenantQueuePrefix, TENANT_PLACEHOLDER)),
    };
    const withKey = { ...env, DYNEIN_ID_KEY_SECRET_ARN: this.idKey.secretArn };
    const withInbound = { ...withKey, DYNEIN_INBOUND_QUEUE_URL: this.inboundQueue.queueUrl };
    const submit = fn('submit', { timeout: Duration.seconds(10), environment: withInbound });
    // The inbound queue's URL: a failed message's visibility is shortened (INGEST_RETRY_SECONDS),
    // and a bulk cancel's pass that ran out of time is sent on.
    const ingest = fn('ingest', { timeout: Duration.seconds(INGEST_TIMEOUT_SECONDS), environment: withInbound });
    const status = fn('status', { timeout: Duration.seconds(10), environment: withKey });
    const cancel = fn('cancel', { timeout: Duration.seconds(10), environment: withInbound });
    // A fan-out of 1,000 children or a workflow of 1,000 jobs takes a few seconds; within the API's 30 s.
    const workflows = fn('workflows', { timeout: Duration.seconds(28), environment: withInbound });
    // Within the HTTP API's 30 s integration timeout: Scheduler API calls (retried when throttled) and occurrence cancels.
    const schedules = fn('schedules', {
      timeout: Duration.seconds(20),
      environment: {
        ...withKey,
        DYNEIN_SCHEDULE_GROUP: this.scheduleGroupName,
        DYNEIN_SCHEDULER_ROLE_ARN: this.schedulerRole.roleArn,
        DYNEIN_INBOUND_QUEUE_ARN: this.inboundQueue.queueArn,
        DYNEIN_SCHEDULER_DLQ_ARN: this.schedulerDeadLetterQueue.queueArn,
      },
    });
    // Tenant dead-letter queues through the API: a scan for named messages stops after 12 s, within the API's 30 s.
    const dlq = fn('dlq', { timeout: Duration.seconds(25), environment: withKey });
    // The operator API (tenant controls): no job ids, so no id key.
    const admin = fn('admin', { timeout: Duration.seconds(10), environment: env });
    const tick = fn('tick', { timeout: Duration.seconds(10), environment: env });
    const dispatch = fn('dispatch', {
      // One step dispatches a whole tick run (no gap between steps): the run plus 30 s.
      timeout: Duration.seconds(dispatchTimeoutSeconds((props.tickRunTime ?? Duration.seconds(90)).toMilliseconds())),
      memorySize: props.dispatcherMemorySize ?? 1024,
      environment: env,
      reservedConcurrentExecutions: props.dispatchReservedConcurrency,
    });
    // Tenant registrations (Custom::DyneinTenantRegistration of DyneinTenant, in any stack of the
    // account): the tenant stacks hold no principal that may write the table.
    const registrationFunction = this.#function('register', retention, logLevel, { timeout: Duration.seconds(60), environment: env });
    // Created (and answering requests) only once its group exists and the role it passes may send the firings.
    schedules.node.addDependency(this.scheduleGroup, firingPolicy);
    if (props.tracing) addTracing(props.tracing, [submit, ingest, dispatch, schedules, workflows, cancel]);
    return { functions: { submit, ingest, tick, dispatch, cancel, status, schedules, dlq, admin, workflows }, registrationFunction };
  }

  /**
   * Idle shard groups sleep (docs/design-dispatch.md, "Sleep"): dispatch lets them, and every
   * writer of rows (submit's debounced jobs, ingest, the schedules' first occurrences) may start
   * a cell's tick when it writes a row due soon into a sleeping group.
   */
  #letGroupsSleep(): void {
    const arns = this.stateMachines.map((m) => m.stateMachineArn);
    this.#permissionTargets.set('tickStateMachines', { arn: arns });
    const { submit, ingest, schedules, dispatch } = this.functions;
    for (const writer of [submit, ingest, schedules]) writer.addEnvironment('DYNEIN_TICK_STATE_MACHINES', Fn.join(',', arns));
    dispatch.addEnvironment('DYNEIN_GROUPS_SLEEP', 'true');
  }

  /** Every function's role policy, from its row of the permission table (lib/permissions.ts). */
  #grantPermissions(): void {
    const holders: [PermissionHolder, lambda.Function][] = [
      ...(Object.entries(this.functions) as [FunctionName, lambda.Function][]),
      ['register', this.registrationFunction],
    ];
    for (const [holder, f] of holders) grantPermissions(holder, f.role!, this.#permissionTarget);
  }

  /**
   * Ingest reads the inbound queue (its SQS event source); only submit and EventBridge Scheduler's
   * execution role (firings) write it (ingest trusts what it reads there, beyond the id's MAC), and
   * principals tagged by grantInboundRedrive (both conditions must hold for the deny).
   */
  #connectInbound(props: DyneinSchedulerProps): void {
    const { submit, ingest } = this.functions;
    ingest.addEventSource(
      new SqsEventSource(this.inboundQueue, {
        batchSize: 10,
        maxBatchingWindow: Duration.millis(INGEST_BATCHING_WINDOW_MS),
        reportBatchItemFailures: true,
        ...(props.ingestMaxConcurrency !== undefined ? { maxConcurrency: props.ingestMaxConcurrency } : {}),
      }),
    );
    this.inboundQueue.addToResourcePolicy(
      new iam.PolicyStatement({
        sid: 'OnlySubmitSends',
        effect: iam.Effect.DENY,
        actions: ['sqs:SendMessage'],
        principals: [new iam.AnyPrincipal()],
        resources: [this.inboundQueue.queueArn],
        conditions: {
          ArnNotEquals: {
            'aws:PrincipalArn': Lazy.list({
              produce: () => [submit.role!.roleArn, this.schedulerRole.roleArn, ...this.#inboundExtraSenders],
            }),
          },
          StringNotEquals: { [`aws:PrincipalTag/${this.inboundSenderTagKey}`]: 'true' },
        },
      }),
    );
  }

  /** The alarms and dashboard (lib/monitoring.ts). */
  #buildMonitoring(props: DyneinSchedulerProps): SchedulerMonitoring {
    return new SchedulerMonitoring(this, 'Monitoring', {
      scheduler: this,
      alarmTopic: props.alarmTopic,
      latenessAlarmThreshold: props.latenessAlarmThreshold ?? Duration.seconds(2),
      inboundAgeAlarmThreshold: props.inboundAgeAlarmThreshold ?? Duration.minutes(1),
      parkedJobsAlarmMinutes: props.parkedJobsAlarmMinutes ?? 5,
      heldAfterResumeAlarmThreshold: props.heldAfterResumeAlarmThreshold ?? Duration.minutes(5),
      workflowChildrenWaitingAlarmMinutes: props.workflowChildrenWaitingAlarmMinutes ?? 5,
    });
  }

  /** Adds a tenant in this stack: its queue and DLQ, registration, grants and dashboard widgets. */
  addTenant(tenantName: string, props: Omit<DyneinTenantProps, 'scheduler' | 'tenantName'> = {}): DyneinTenant {
    const tenant = new DyneinTenant(this, `Tenant-${tenantName}`, { ...props, scheduler: this, tenantName });
    this.tenants.push(tenant);
    this.monitoring.addTenant(tenant);
    return tenant;
  }

  /**
   * Lets `grantee` move the inbound DLQ back to the inbound queue after a fix (console "Start DLQ
   * redrive" or `StartMessageMoveTask`): `sqs:StartMessageMoveTask`, `sqs:ListMessageMoveTasks`,
   * `sqs:CancelMessageMoveTask`, `sqs:ReceiveMessage`, `sqs:DeleteMessage`,
   * `sqs:ChangeMessageVisibility`, `sqs:GetQueueAttributes` on the inbound DLQ; `sqs:SendMessage`,
   * `sqs:GetQueueAttributes` on the inbound queue. One grant covering both queues.
   *
   * The inbound queue policy admits the grantee as a sender by its principal tag
   * {@link inboundSenderTagKey} = `true`, which this sets on a role defined in the app (`iam.Role`,
   * a function's role), so the scheduler's stack never refers to the grantee's stack. An imported
   * role is listed in the policy by ARN instead.
   */
  grantInboundRedrive(grantee: iam.IGrantable): iam.Grant {
    admitSender(grantee, this.inboundSenderTagKey, this.#inboundExtraSenders, this.inboundQueue, 'grantInboundRedrive');
    const dlq = this.inboundDeadLetterQueue.grant(grantee, ...DLQ_REDRIVE_ACTIONS);
    return dlq.combine(this.inboundQueue.grant(grantee, 'sqs:SendMessage', 'sqs:GetQueueAttributes'));
  }

  /**
   * Lets `grantee` (an operator's role) use the operator API on every tenant: `execute-api:Invoke`
   * on exactly `GET /v1/admin/tenants/{tenant}`, `POST /v1/admin/tenants/{tenant}/pause` and
   * `.../resume`, and `PUT /v1/admin/tenants/{tenant}/settings` of the `$default` stage (`{tenant}`
   * a wildcard),
   * nothing else: no tenant route. Tenant grants never cover these routes. Teams running cdk-nag
   * acknowledge `AwsSolutions-IAM5` for the tenant wildcard on the grantee.
   */
  grantAdmin(grantee: iam.IGrantable): iam.Grant {
    const stack = Stack.of(this);
    return iam.Grant.addToPrincipal({
      grantee,
      actions: ['execute-api:Invoke'],
      resourceArns: ADMIN_ROUTES.map(([path, method]) =>
        stack.formatArn({
          service: 'execute-api',
          resource: this.httpApi.apiId,
          resourceName: `$default/${method}${path.replace('{tenant}', '*')}`,
          arnFormat: ArnFormat.SLASH_RESOURCE_NAME,
        }),
      ),
    });
  }

  /** The API's base URL. */
  get url(): string {
    return this.stage.url;
  }

  /** Jobs accepted by submit (both paths). */
  metricJobsSubmitted(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#metric('JobsSubmitted', 'submit', { statistic: 'Sum', ...props });
  }

  /** Rows written by ingest. */
  metricJobsIngested(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#metric('JobsIngested', 'ingest', { statistic: 'Sum', ...props });
  }

  /** Jobs sent to tenant queues by dispatch rounds. */
  metricJobsDispatched(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#metric('JobsDispatched', 'dispatch', { statistic: 'Sum', ...props });
  }

  /** Dispatchers each tick execution planned (groups packed by the load coming due); `Maximum` per minute. */
  metricDispatchers(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#metric('Dispatchers', 'tick', { statistic: 'Maximum', ...props });
  }

  /** Lateness of dispatched jobs in ms (due time to send acknowledged); pass `statistic: 'p99'` etc. */
  metricLateness(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#metric('LatenessMs', 'dispatch', { statistic: 'p95', ...props });
  }

  /**
   * Rows of tenants that are not registered (removed), left parked in the table: the most one
   * dispatch step saw at once (`Maximum` per minute). They are delivered once the tenant is
   * registered again; see docs/operating.md.
   */
  metricParkedJobs(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#metric('ParkedJobs', 'dispatch', { statistic: 'Maximum', ...props });
  }

  /**
   * The longest any tenant that may send (not paused, registered) has had the same first job in
   * the hold lanes a dispatch step looked at, in milliseconds (`Maximum` per minute; 0: none):
   * held jobs that are not read back. See docs/operating.md.
   */
  metricHeldAfterResume(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#metric('HeldAfterResumeMs', 'dispatch', { statistic: 'Maximum', ...props });
  }

  /**
   * Occurrences of recurring schedules not delivered 5 minutes after their time (the never-fired
   * check, every 5 minutes; docs/tracing.md#never-fired): `Sum` per 5 minutes; no data point when none.
   */
  metricMissedOccurrences(props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return this.#metric('MissedOccurrences', 'schedules', { statistic: 'Sum', period: Duration.minutes(5), ...props });
  }

  /** The schedules function runs the never-fired check every 5 minutes, with the input `{"audit": "occurrences"}`. */
  #buildOccurrenceAudit(): events.Rule {
    return new events.Rule(this, 'OccurrenceAudit', {
      description: 'Dynein: checks that every recurring-schedule occurrence due 5 minutes ago or earlier was delivered',
      schedule: events.Schedule.rate(Duration.minutes(5)),
      targets: [
        new targets.LambdaFunction(this.functions.schedules, {
          event: events.RuleTargetInput.fromObject({ audit: 'occurrences' }),
          retryAttempts: 2,
        }),
      ],
    });
  }

  /**
   * A metric EventBridge Scheduler publishes for this deployment's schedule group (namespace
   * `AWS/Scheduler`, dimension `ScheduleGroup`), `Sum` per minute: firings attempted
   * (`InvocationAttemptCount`), target errors, throttles, dropped, sent to (or failed to reach)
   * the firing DLQ. Published only while schedules fire.
   */
  metricFirings(metricName: SchedulerFiringMetric, props?: cloudwatch.MetricOptions): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: 'AWS/Scheduler',
      metricName,
      dimensionsMap: { ScheduleGroup: this.scheduleGroupName },
      period: Duration.minutes(1),
      statistic: 'Sum',
      ...props,
    });
  }

  #metric(name: string, fn: FunctionName, props: cloudwatch.MetricOptions): cloudwatch.Metric {
    return new cloudwatch.Metric({
      namespace: METRICS_NAMESPACE,
      metricName: name,
      dimensionsMap: { service: metricService(fn) },
      period: Duration.minutes(1),
      ...props,
    });
  }

  #function(
    name: FunctionName | 'register',
    retention: logs.RetentionDays,
    logLevel: DyneinLogLevel,
    opts: FunctionOptions,
  ): lambda.Function {
    const logGroup = new logs.LogGroup(this, `${cap(name)}Logs`, { retention, removalPolicy: RemovalPolicy.DESTROY });
    // A role of its own without managed policies: logs to its own group only, plus what each function needs.
    const role = new iam.Role(this, `${cap(name)}Role`, {
      assumedBy: new iam.ServicePrincipal('lambda.amazonaws.com'),
      description: `Dynein ${name} function`,
    });
    role.addToPolicy(
      new iam.PolicyStatement({ actions: ['logs:CreateLogStream', 'logs:PutLogEvents'], resources: [logGroup.logGroupArn] }),
    );
    const f = new lambda.Function(this, cap(name), {
      description: `Dynein Serverless: ${name}`,
      // Pre-built by scripts/bundle-lambdas.mjs (ESM, node24, source maps, @aws-sdk/* from the runtime).
      code: bundleCode(name),
      handler: 'index.handler',
      runtime: lambda.Runtime.NODEJS_24_X,
      architecture: lambda.Architecture.ARM_64,
      memorySize: opts.memorySize ?? 256,
      timeout: opts.timeout,
      role,
      logGroup,
      reservedConcurrentExecutions: opts.reservedConcurrentExecutions,
      // JSON logs so Lambda filters by level: no START/END/REPORT lines per request below INFO.
      // Application logs stay at INFO or below: the EMF metric lines have no level (Lambda counts them INFO).
      loggingFormat: lambda.LoggingFormat.JSON,
      applicationLogLevelV2: logLevel === 'DEBUG' ? lambda.ApplicationLogLevel.DEBUG : lambda.ApplicationLogLevel.INFO,
      systemLogLevelV2:
        logLevel === 'DEBUG' ? lambda.SystemLogLevel.DEBUG : logLevel === 'INFO' ? lambda.SystemLogLevel.INFO : lambda.SystemLogLevel.WARN,
      environment: {
        NODE_OPTIONS: '--enable-source-maps',
        POWERTOOLS_METRICS_NAMESPACE: METRICS_NAMESPACE,
        POWERTOOLS_LOG_LEVEL: logLevel,
        ...opts.environment,
      },
    });
    return f;
  }

  /** The IAM-authorized HTTP API: its stage, access logs and routes. */
  #buildApi(props: DyneinSchedulerProps, retention: logs.RetentionDays): { httpApi: apigw.HttpApi; stage: apigw.HttpStage } {
    const httpApi = new apigw.HttpApi(this, 'Api', {
      apiName: props.apiName ?? `${Stack.of(this).stackName}-dynein-api`,
      description: 'Dynein Serverless API (v1): every route is IAM-authorized',
      createDefaultStage: false,
      defaultAuthorizer: new HttpIamAuthorizer(),
    });
    const accessLogs = new logs.LogGroup(this, 'ApiAccessLogs', { retention, removalPolicy: RemovalPolicy.DESTROY });
    const stage = new apigw.HttpStage(this, 'ApiStage', {
      httpApi,
      stageName: '$default',
      autoDeploy: true,
      throttle: props.throttle ?? { rateLimit: 1000, burstLimit: 2000 },
      accessLogSettings: {
        destination: new apigw.LogGroupLogDestination(accessLogs),
        format: AccessLogFormat.custom(
          JSON.stringify({
            requestId: '$context.requestId',
            ip: '$context.identity.sourceIp',
            caller: '$context.identity.caller',
            userArn: '$context.identity.userArn',
            requestTime: '$context.requestTime',
            routeKey: '$context.routeKey',
            status: '$context.status',
            latencyMs: '$context.responseLatency',
            integrationError: '$context.integrationErrorMessage',
            integrationStatus: '$context.integrationStatus',
            errorType: '$context.error.responseType',
          }),
        ),
      },
    });
    const route = (path: string, method: apigw.HttpMethod, f: lambda.IFunction, name: string) =>
      httpApi.addRoutes({ path, methods: [method], integration: new HttpLambdaIntegration(`${name}Integration`, f) });
    const { submit, status, cancel, schedules, dlq, admin, workflows } = this.functions;
    route('/v1/tenants/{tenant}/jobs', apigw.HttpMethod.POST, submit, 'Submit');
    route('/v1/tenants/{tenant}/jobs/batch', apigw.HttpMethod.POST, submit, 'SubmitBatch');
    route('/v1/tenants/{tenant}/jobs/{jobId}', apigw.HttpMethod.GET, status, 'Status');
    route('/v1/tenants/{tenant}/jobs', apigw.HttpMethod.GET, status, 'ListJobs');
    // A workflow job's outcome moves its children on: served by the function that may.
    route('/v1/tenants/{tenant}/jobs/outcomes', apigw.HttpMethod.POST, workflows, 'Outcomes');
    // The workers' heartbeats (a running job's stop requested: docs/flow-control.md), served beside the outcome reports.
    route('/v1/tenants/{tenant}/jobs/heartbeats', apigw.HttpMethod.POST, workflows, 'Heartbeats');
    route('/v1/tenants/{tenant}/jobs/{jobId}', apigw.HttpMethod.DELETE, cancel, 'Cancel');
    // Bulk cancel (docs/flow-control.md): started and followed through the cancel function.
    route('/v1/tenants/{tenant}/jobs/cancel', apigw.HttpMethod.POST, cancel, 'BulkCancel');
    route('/v1/tenants/{tenant}/operations/{operationId}', apigw.HttpMethod.GET, cancel, 'Operation');
    // Recurring schedules: every route to the one schedules function (one integration).
    const integration = new HttpLambdaIntegration('SchedulesIntegration', schedules);
    const base = '/v1/tenants/{tenant}/schedules';
    const { GET, PUT, DELETE, POST } = apigw.HttpMethod;
    httpApi.addRoutes({ path: base, methods: [GET], integration });
    httpApi.addRoutes({ path: `${base}/{name}`, methods: [PUT, GET, DELETE], integration });
    httpApi.addRoutes({ path: `${base}/{name}/pause`, methods: [POST], integration });
    httpApi.addRoutes({ path: `${base}/{name}/resume`, methods: [POST], integration });
    // A tenant's dead-letter queue: peek, redrive, delete (one integration).
    const dlqIntegration = new HttpLambdaIntegration('DlqIntegration', dlq);
    httpApi.addRoutes({ path: '/v1/tenants/{tenant}/dlq', methods: [GET], integration: dlqIntegration });
    httpApi.addRoutes({ path: '/v1/tenants/{tenant}/dlq/redrive', methods: [POST, GET], integration: dlqIntegration });
    httpApi.addRoutes({ path: '/v1/tenants/{tenant}/dlq/delete', methods: [POST], integration: dlqIntegration });
    httpApi.addRoutes({ path: '/v1/tenants/{tenant}/dlq/edit', methods: [POST], integration: dlqIntegration });
    httpApi.addRoutes({ path: '/v1/tenants/{tenant}/dlq/audit', methods: [GET], integration: dlqIntegration });
    // Workflows (docs/workflows.md): one integration.
    const workflowsIntegration = new HttpLambdaIntegration('WorkflowsIntegration', workflows);
    httpApi.addRoutes({ path: '/v1/tenants/{tenant}/workflows', methods: [POST], integration: workflowsIntegration });
    httpApi.addRoutes({ path: '/v1/tenants/{tenant}/workflows/{workflowId}', methods: [GET, DELETE], integration: workflowsIntegration });
    // The operator API (tenant controls): its own prefix, so no tenant grant ever covers it (grantAdmin).
    const adminIntegration = new HttpLambdaIntegration('AdminIntegration', admin);
    for (const [path, method] of ADMIN_ROUTES) httpApi.addRoutes({ path, methods: [method], integration: adminIntegration });
    return { httpApi, stage };
  }

  /** The tick of each cell (EventBridge every minute → Step Functions EXPRESS), by cell. */
  #buildTicks(
    props: DyneinSchedulerProps,
    retention: logs.RetentionDays,
    logLevel: DyneinLogLevel,
  ): { stateMachine: sfn.StateMachine; rule: events.Rule }[] {
    const { tick, dispatch } = this.functions;
    return Array.from({ length: this.settings.cells }, (_, cell) => this.#buildTick(cell, tick, dispatch, props, retention, logLevel));
  }

  #buildTick(
    cell: number,
    tick: lambda.IFunction,
    dispatch: lambda.IFunction,
    props: DyneinSchedulerProps,
    retention: logs.RetentionDays,
    logLevel: DyneinLogLevel,
  ): { stateMachine: sfn.StateMachine; rule: events.Rule } {
    const suffix = cell === 0 ? '' : `Cell${cell}`;
    const logGroup = new logs.LogGroup(this, `TickExecutionLogs${suffix}`, { retention, removalPolicy: RemovalPolicy.DESTROY });
    const runMs = (props.tickRunTime ?? Duration.seconds(90)).toMilliseconds();
    const allEvents = logLevel === 'DEBUG' || logLevel === 'INFO';
    // A minute after the run for the last steps to return (150 s for the default 90 s), within Express's 300 s.
    const timeoutSeconds = Math.min(300, Math.ceil(runMs / 1000) + 60);
    const stateMachine = new sfn.StateMachine(this, `TickStateMachine${suffix}`, {
      stateMachineType: sfn.StateMachineType.EXPRESS,
      comment: `Dynein tick: plan shard groups, dispatch each in a loop until the execution ends${cell === 0 ? '' : ` (cell ${cell})`}`,
      definitionBody: sfn.DefinitionBody.fromString(
        JSON.stringify(tickDefinition({ runMs, timeoutSeconds, maxConsecutiveFailures: props.dispatchMaxConsecutiveFailures })),
      ),
      definitionSubstitutions: {
        [TICK_FUNCTION_ARN_KEY]: tick.functionArn,
        [DISPATCH_FUNCTION_ARN_KEY]: dispatch.functionArn,
        [CELL_KEY]: String(cell),
      },
      // Every transition at INFO/DEBUG; failures only at WARN/ERROR (an idle tick makes ~100 transitions a minute).
      logs: { destination: logGroup, level: allEvents ? sfn.LogLevel.ALL : sfn.LogLevel.ERROR, includeExecutionData: false },
      tracingEnabled: true,
    });
    if (!allEvents) {
      Validations.of(stateMachine).acknowledge({
        id: 'AwsSolutions-SF1',
        reason:
          "At logLevel WARN/ERROR the tick logs failed executions and states only: an idle tick makes about 100 state transitions a minute, logging each would be most of an idle deployment's cost. logLevel INFO or DEBUG logs ALL events.",
      });
    }
    stateMachine.addToRolePolicy(
      new iam.PolicyStatement({ actions: ['lambda:InvokeFunction'], resources: [tick.functionArn, dispatch.functionArn] }),
    );
    Validations.of(stateMachine).acknowledge({
      id: 'AwsSolutions-IAM5[Resource::*]',
      reason:
        'Step Functions log delivery (logs:*LogDelivery*, DescribeLogGroups, ...) and X-Ray (PutTraceSegments, ...) actions do not support resource-level permissions; CDK writes them with Resource "*".',
    });
    const rule = new events.Rule(this, `TickSchedule${suffix}`, {
      description: `Starts a Dynein tick execution${cell === 0 ? '' : ` of cell ${cell}`} every minute (each runs ~90 s, so they overlap)`,
      schedule: events.Schedule.rate(Duration.minutes(1)),
      targets: [new targets.SfnStateMachine(stateMachine)],
    });
    return { stateMachine, rule };
  }
}

/** The operator API's routes (docs/tenant-controls.md), all served by the admin function. */
const ADMIN_ROUTES: readonly (readonly [string, apigw.HttpMethod])[] = [
  ['/v1/admin/tenants/{tenant}', apigw.HttpMethod.GET],
  ['/v1/admin/tenants/{tenant}/pause', apigw.HttpMethod.POST],
  ['/v1/admin/tenants/{tenant}/resume', apigw.HttpMethod.POST],
  ['/v1/admin/tenants/{tenant}/settings', apigw.HttpMethod.PUT],
];

function cap(s: string): string {
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** The table's billing from {@link DyneinSchedulerProps.tableCapacity} (validated before). */
function tableBilling(capacity: DyneinTableCapacity | undefined): dynamodb.Billing {
  if (capacity === undefined || capacity.mode === 'onDemand') return dynamodb.Billing.onDemand();
  const c = { ...PROVISIONED_DEFAULTS, ...prunedUndefined(capacity) };
  const scaled = (minCapacity: number, maxCapacity: number) =>
    dynamodb.Capacity.autoscaled({ minCapacity, maxCapacity, targetUtilizationPercent: c.targetUtilizationPercent });
  return dynamodb.Billing.provisioned({
    readCapacity: scaled(c.minReadUnits, c.maxReadUnits),
    writeCapacity: scaled(c.minWriteUnits, c.maxWriteUnits),
  });
}

function prunedUndefined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The problems of a {@link DyneinTableCapacity}, each naming the prop. */
function tableCapacityProblems(capacity: DyneinTableCapacity | undefined): string[] {
  if (capacity === undefined) return [];
  const mode = (capacity as { mode?: unknown }).mode;
  if (mode === 'onDemand') return [];
  if (mode !== 'provisioned') return [`tableCapacity.mode must be 'onDemand' or 'provisioned', got ${JSON.stringify(mode)}`];
  const problems: string[] = [];
  const c = { ...PROVISIONED_DEFAULTS, ...prunedUndefined(capacity) };
  for (const k of ['minReadUnits', 'maxReadUnits', 'minWriteUnits', 'maxWriteUnits'] as const) {
    const v = c[k];
    if (!Number.isInteger(v) || v < 1) problems.push(`tableCapacity.${k} must be a positive integer, got ${String(v)}`);
  }
  if (c.minReadUnits > c.maxReadUnits)
    problems.push(`tableCapacity.minReadUnits (${c.minReadUnits}) must not exceed tableCapacity.maxReadUnits (${c.maxReadUnits})`);
  if (c.minWriteUnits > c.maxWriteUnits)
    problems.push(`tableCapacity.minWriteUnits (${c.minWriteUnits}) must not exceed tableCapacity.maxWriteUnits (${c.maxWriteUnits})`);
  const t = c.targetUtilizationPercent;
  if (!Number.isInteger(t) || t < 20 || t > 90)
    problems.push(
      `tableCapacity.targetUtilizationPercent must be an integer from 20 to 90 (DynamoDB auto scaling's range), got ${String(t)}`,
    );
  return problems;
}

/** Checks every prop and throws once with every problem listed. */
function validateProps(id: string, props: DyneinSchedulerProps, prefix: string): SchedulerSettings {
  const problems: string[] = [];
  const ms = (d: Duration | undefined) => (d === undefined || Token.isUnresolved(d.toString()) ? undefined : d.toMilliseconds());
  let settings: SchedulerSettings = DEFAULTS;
  try {
    settings = resolveSettings({
      shardCount: props.shardCount,
      groupCount: props.groupCount,
      lookaheadMs: ms(props.lookahead),
      leaseMs: ms(props.lease),
      maxPayloadBytes: props.maxPayloadBytes,
      dispatcherRowsPerSecond: props.dispatcherRowsPerSecond,
      cells: props.cells,
    });
  } catch (err) {
    problems.push(...(err as Error).message.split('\n- ').slice(1));
  }
  const run = ms(props.tickRunTime);
  if (run !== undefined && (run < 60_000 || run > 240_000))
    problems.push(`tickRunTime must be from 60 to 240 seconds (executions start every minute and must overlap), got ${run / 1000} s`);
  const lat = ms(props.latenessAlarmThreshold);
  if (lat !== undefined && lat <= 0) problems.push('latenessAlarmThreshold must be positive');
  if (props.throttle && (!(props.throttle.rateLimit > 0) || !(props.throttle.burstLimit > 0)))
    problems.push('throttle.rateLimit and throttle.burstLimit must be positive');
  const memory = props.dispatcherMemorySize;
  if (memory !== undefined && (!Number.isInteger(memory) || memory < 128 || memory > 10_240))
    problems.push(`dispatcherMemorySize must be an integer from 128 to 10240 MB, got ${memory}`);
  const ingestMax = props.ingestMaxConcurrency;
  if (ingestMax !== undefined && (!Number.isInteger(ingestMax) || ingestMax < 2 || ingestMax > 1000))
    problems.push(`ingestMaxConcurrency must be an integer from 2 to 1000 (the SQS event source's maximumConcurrency), got ${ingestMax}`);
  const failures = props.dispatchMaxConsecutiveFailures;
  if (failures !== undefined && (!Number.isInteger(failures) || failures < 1 || failures > ERROR_BACKOFF_SECONDS.length))
    problems.push(`dispatchMaxConsecutiveFailures must be an integer from 1 to ${ERROR_BACKOFF_SECONDS.length}, got ${failures}`);
  const groups = props.groupCount ?? DEFAULTS.groupCount;
  const reserved = props.dispatchReservedConcurrency;
  if (reserved !== undefined && (!Number.isInteger(reserved) || reserved < 2 * groups)) {
    problems.push(
      `dispatchReservedConcurrency must be an integer at least twice groupCount (${2 * groups}): tick executions overlap, got ${reserved}`,
    );
  }
  problems.push(
    ...validatePrefix(prefix).map(
      (p) =>
        `tenantQueuePrefix ${p}${props.tenantQueuePrefix === undefined ? ' (derived from the stack name and id: pass tenantQueuePrefix)' : ''}`,
    ),
  );
  if (props.logLevel !== undefined && !['DEBUG', 'INFO', 'WARN', 'ERROR'].includes(props.logLevel))
    problems.push(`logLevel must be DEBUG, INFO, WARN or ERROR, got ${String(props.logLevel)}`);
  problems.push(...tableCapacityProblems(props.tableCapacity));
  const parked = props.parkedJobsAlarmMinutes;
  if (parked !== undefined && (!Number.isInteger(parked) || parked < 1 || parked > 1440))
    problems.push(`parkedJobsAlarmMinutes must be an integer from 1 to 1440, got ${parked}`);
  const waitingMinutes = props.workflowChildrenWaitingAlarmMinutes;
  if (waitingMinutes !== undefined && (!Number.isInteger(waitingMinutes) || waitingMinutes < 1 || waitingMinutes > 1440))
    problems.push(`workflowChildrenWaitingAlarmMinutes must be an integer from 1 to 1440, got ${waitingMinutes}`);
  const heldAfter = props.heldAfterResumeAlarmThreshold?.toMilliseconds();
  if (heldAfter !== undefined && !(heldAfter >= 60_000 && heldAfter <= 86_400_000))
    problems.push(
      `heldAfterResumeAlarmThreshold must be from 1 minute to 1 day, got ${props.heldAfterResumeAlarmThreshold!.toHumanString()}`,
    );
  if (problems.length > 0) throw new Error(`invalid DyneinScheduler '${id}':\n- ${problems.join('\n- ')}`);
  return settings;
}

/**
 * An ARN's `arn:partition:service:region:account` as cdk-nag prints it in a finding's id: a
 * pseudo parameter as `<AWS::Region>`, a region or account the stack's `env` gives as itself.
 */
function nagArnPrefix(stack: Stack, service: string): string {
  const region = Token.isUnresolved(stack.region) ? '<AWS::Region>' : stack.region;
  const account = Token.isUnresolved(stack.account) ? '<AWS::AccountId>' : stack.account;
  return `arn:<AWS::Partition>:${service}:${region}:${account}`;
}

/** The functions that record spans export them to `tracing.otlpEndpoint` (docs/tracing.md#on-aws). */
function addTracing(tracing: DyneinTracing, functions: readonly lambda.Function[]): void {
  const endpoint = tracing.otlpEndpoint;
  if (!Token.isUnresolved(endpoint) && !/^https?:\/\/[^\s/]+(\/\S*)?$/.test(endpoint))
    throw new Error(`DyneinScheduler: tracing.otlpEndpoint must be an http(s) URL like http://localhost:4318, got '${endpoint}'`);
  for (const f of functions) {
    f.addEnvironment('DYNEIN_OTLP_ENDPOINT', endpoint);
    for (const [k, v] of Object.entries(tracing.environment ?? {})) f.addEnvironment(k, v);
    if (tracing.layers?.length) f.addLayers(...tracing.layers);
  }
}
