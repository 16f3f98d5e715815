import { ConfigError, resolveSettings, type SchedulerSettings } from '../../core/model/index.js';
import { tenantQueueUrlProblems, type TenantQueueUrls } from '../../core/tenants/index.js';

/** What every Lambda reads from its environment, validated once at cold start. */
export interface LambdaConfig {
  readonly tableName: string;
  readonly inboundQueueUrl: string;
  readonly settings: SchedulerSettings;
  /** The job id key, base64 (local stack, tests), or the secret holding it; absent where unused (dispatch, tick). */
  readonly idKey?: { readonly base64: string } | { readonly secretArn: string };
  /** The inbound queue's maxReceiveCount: ingest's last attempt at a message writes DEAD records. @default 5 */
  readonly inboundMaxReceiveCount?: number;
  /** Optional SDK endpoints (the local stack's emulators). */
  readonly dynamodbEndpoint?: string;
  readonly sqsEndpoint?: string;
  /** The recurring schedules' clock (the schedules function only). */
  readonly scheduler?: SchedulerClockConfig;
  /**
   * Where the tenant queues are (`{tenant}` for the name): a registry item naming other URLs is
   * not used (core/tenants/registry.ts). The constructs and the local stack always set it.
   * @default - registry items are used as they are (tests with queues of their own names)
   */
  readonly tenantQueues?: TenantQueueUrls;
  /** Where the scheduler's spans are exported over OTLP/HTTP (docs/tracing.md); absent: none are built. */
  readonly otlpEndpoint?: string;
  /**
   * Dispatch lets idle groups sleep (docs/design-dispatch.md, "Sleep"): set where every writer of
   * rows can start a dispatcher ({@link LambdaConfig.tickStateMachines}). @default false
   */
  readonly groupsSleep?: boolean;
  /** The tick state machine of each cell, by cell: a writer of a row due soon into a sleeping group starts one. */
  readonly tickStateMachines?: readonly string[];
}

/** Where the schedules function keeps each schedule's clock (EventBridge Scheduler). */
export interface SchedulerClockConfig {
  readonly groupName: string;
  readonly roleArn: string;
  /** The inbound queue's ARN: the target of every firing. */
  readonly targetArn: string;
  readonly deadLetterArn?: string;
  /** The local stand-in's endpoint (local stack only). */
  readonly endpoint?: string;
}

/**
 * Reads and checks the environment; throws one {@link ConfigError} listing every problem.
 *
 * | variable | meaning |
 * |---|---|
 * | `DYNEIN_TABLE` | scheduler table name (required) |
 * | `DYNEIN_INBOUND_QUEUE_URL` | inbound queue URL (submit) |
 * | `DYNEIN_ID_KEY` or `DYNEIN_ID_KEY_SECRET_ARN` | job id HMAC key, base64 (≥ 32 bytes), or the secret whose string (≥ 32 bytes) is the key |
 * | `DYNEIN_SHARDS`, `DYNEIN_GROUPS`, `DYNEIN_LOOKAHEAD_MS`, `DYNEIN_LEASE_MS`, `DYNEIN_MAX_PAYLOAD_BYTES`, `DYNEIN_RELEASE_WINDOW_MS`, `DYNEIN_DISPATCHER_ROWS_PER_SECOND`, `DYNEIN_CELLS` | settings (defaults of DESIGN.md) |
 * | `DYNEIN_INBOUND_MAX_RECEIVE_COUNT` | the inbound queue's maxReceiveCount (ingest's last attempt writes DEAD records); default 5 |
 * | `DYNEIN_DYNAMODB_ENDPOINT`, `DYNEIN_SQS_ENDPOINT` | emulator endpoints (local stack only) |
 * | `DYNEIN_SCHEDULE_GROUP`, `DYNEIN_SCHEDULER_ROLE_ARN`, `DYNEIN_INBOUND_QUEUE_ARN` | the recurring schedules' clock: EventBridge Scheduler group, execution role, target (the schedules function) |
 * | `DYNEIN_SCHEDULER_DLQ_ARN`, `DYNEIN_SCHEDULER_ENDPOINT` | the firings' dead-letter queue; the local Scheduler stand-in's endpoint |
 * | `DYNEIN_OTLP_ENDPOINT` | an OTLP/HTTP endpoint (`http(s)://host:port`): the scheduler's spans are POSTed to its `/v1/traces` (docs/tracing.md) |
 * | `DYNEIN_GROUPS_SLEEP` | `true`: dispatch lets idle groups sleep (every writer has `DYNEIN_TICK_STATE_MACHINES`); default `false` |
 * | `DYNEIN_TICK_STATE_MACHINES` | the tick state machine ARN of each cell, comma-separated, by cell (the writers of rows) |
 * | `DYNEIN_TENANT_QUEUE_URL`, `DYNEIN_TENANT_DLQ_URL` | the tenant queue and DLQ URLs, `{tenant}` for the name (both or neither): registrations naming others are refused |
 */
export function readConfig(
  env: NodeJS.ProcessEnv,
  needs: { inboundQueue?: boolean; storage?: boolean; idKey?: boolean; scheduler?: boolean } = {},
): LambdaConfig {
  const storage = needs.storage ?? true;
  const needsKey = storage && (needs.idKey ?? true);
  const problems: string[] = [];
  const str = (name: string, required: boolean): string | undefined => {
    const v = env[name]?.trim();
    if (!v && required) problems.push(`${name} is required`);
    return v || undefined;
  };
  const int = (name: string): number | undefined => {
    const v = env[name]?.trim();
    if (!v) return undefined;
    if (!/^\d+$/.test(v)) {
      problems.push(`${name} must be a whole number, got '${v}'`);
      return undefined;
    }
    return Number(v);
  };
  const tableName = str('DYNEIN_TABLE', storage) ?? '';
  const inboundQueueUrl = str('DYNEIN_INBOUND_QUEUE_URL', needs.inboundQueue ?? false) ?? '';
  const keyB64 = str('DYNEIN_ID_KEY', false);
  const secretArn = str('DYNEIN_ID_KEY_SECRET_ARN', false);
  if (needsKey && !keyB64 && !secretArn) problems.push('one of DYNEIN_ID_KEY (base64) or DYNEIN_ID_KEY_SECRET_ARN is required');
  if (keyB64 && Buffer.from(keyB64, 'base64').length < 32) problems.push('DYNEIN_ID_KEY must be base64 of at least 32 bytes');
  const overrides = {
    shardCount: int('DYNEIN_SHARDS'),
    groupCount: int('DYNEIN_GROUPS'),
    lookaheadMs: int('DYNEIN_LOOKAHEAD_MS'),
    leaseMs: int('DYNEIN_LEASE_MS'),
    maxPayloadBytes: int('DYNEIN_MAX_PAYLOAD_BYTES'),
    releaseWindowMs: int('DYNEIN_RELEASE_WINDOW_MS'),
    dispatcherRowsPerSecond: int('DYNEIN_DISPATCHER_ROWS_PER_SECOND'),
    cells: int('DYNEIN_CELLS'),
  };
  const groupName = str('DYNEIN_SCHEDULE_GROUP', needs.scheduler ?? false);
  const roleArn = str('DYNEIN_SCHEDULER_ROLE_ARN', needs.scheduler ?? false);
  const targetArn = str('DYNEIN_INBOUND_QUEUE_ARN', needs.scheduler ?? false);
  const scheduler =
    groupName && roleArn && targetArn
      ? {
          groupName,
          roleArn,
          targetArn,
          ...(str('DYNEIN_SCHEDULER_DLQ_ARN', false) ? { deadLetterArn: str('DYNEIN_SCHEDULER_DLQ_ARN', false)! } : {}),
          ...(str('DYNEIN_SCHEDULER_ENDPOINT', false) ? { endpoint: str('DYNEIN_SCHEDULER_ENDPOINT', false)! } : {}),
        }
      : undefined;
  const inboundMaxReceiveCount = int('DYNEIN_INBOUND_MAX_RECEIVE_COUNT');
  if (inboundMaxReceiveCount !== undefined && (inboundMaxReceiveCount < 1 || inboundMaxReceiveCount > 1000))
    problems.push(`DYNEIN_INBOUND_MAX_RECEIVE_COUNT must be from 1 to 1000, got ${inboundMaxReceiveCount}`);
  const queueUrl = str('DYNEIN_TENANT_QUEUE_URL', false);
  const dlqUrl = str('DYNEIN_TENANT_DLQ_URL', false);
  const tenantQueues = queueUrl || dlqUrl ? { queueUrl: queueUrl ?? '', dlqUrl: dlqUrl ?? '' } : undefined;
  if (tenantQueues)
    problems.push(
      ...tenantQueueUrlProblems(tenantQueues).map((p) =>
        p.replace(/^queueUrl/, 'DYNEIN_TENANT_QUEUE_URL').replace(/^dlqUrl/, 'DYNEIN_TENANT_DLQ_URL'),
      ),
    );
  let settings: SchedulerSettings | undefined;
  try {
    settings = resolveSettings(overrides);
  } catch (err) {
    problems.push((err as Error).message);
  }
  const otlpEndpoint = str('DYNEIN_OTLP_ENDPOINT', false);
  if (otlpEndpoint !== undefined && !/^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(otlpEndpoint))
    problems.push(`DYNEIN_OTLP_ENDPOINT must be an http(s) URL like http://127.0.0.1:4318, got '${otlpEndpoint}'`);
  const sleepText = str('DYNEIN_GROUPS_SLEEP', false);
  if (sleepText !== undefined && sleepText !== 'true' && sleepText !== 'false')
    problems.push(`DYNEIN_GROUPS_SLEEP must be true or false, got '${sleepText}'`);
  const machines = str('DYNEIN_TICK_STATE_MACHINES', false)
    ?.split(',')
    .map((a) => a.trim());
  const badMachine = machines?.find((a) => !/^arn:aws[a-z-]*:states:[a-z0-9-]+:\d{12}:stateMachine:[A-Za-z0-9_-]{1,80}$/.test(a));
  if (badMachine !== undefined)
    problems.push(
      `DYNEIN_TICK_STATE_MACHINES must list state machine ARNs (arn:aws:states:<region>:<account>:stateMachine:<name>), got '${badMachine}'`,
    );
  if (machines && settings && machines.length !== settings.cells)
    problems.push(`DYNEIN_TICK_STATE_MACHINES must name one state machine per cell (${settings.cells}), got ${machines.length}`);
  if (problems.length > 0 || !settings) throw new ConfigError(`invalid Lambda configuration:\n- ${problems.join('\n- ')}`);
  return {
    tableName,
    inboundQueueUrl,
    settings,
    idKey: keyB64 ? { base64: keyB64 } : secretArn ? { secretArn } : undefined,
    ...(inboundMaxReceiveCount !== undefined ? { inboundMaxReceiveCount } : {}),
    dynamodbEndpoint: str('DYNEIN_DYNAMODB_ENDPOINT', false),
    sqsEndpoint: str('DYNEIN_SQS_ENDPOINT', false),
    ...(scheduler ? { scheduler } : {}),
    ...(tenantQueues ? { tenantQueues } : {}),
    ...(otlpEndpoint !== undefined ? { otlpEndpoint } : {}),
    ...(sleepText === 'true' ? { groupsSleep: true } : {}),
    ...(machines ? { tickStateMachines: machines } : {}),
  };
}
