/**
 * The local EventBridge Scheduler stand-in's data model: the stored schedule and group records,
 * the service's errors, and the validation of CreateSchedule/UpdateSchedule bodies as the real
 * service applies it (field constraints of the API reference; expressions and zones through
 * core/recurring/expression, the evaluator the product uses everywhere).
 */
import { parseSchedule, ScheduleExpressionError, type Schedule } from '../../core/recurring/index.js';

/** An error the stand-in answers with: `x-amzn-errortype: <type>` and `{"Message": ...}`. */
export class SchedulerApiError extends Error {
  constructor(
    readonly type:
      | 'ValidationException'
      | 'ConflictException'
      | 'ResourceNotFoundException'
      | 'InternalServerException'
      | 'SerializationException'
      | 'UnknownOperationException',
    readonly status: number,
    message: string,
  ) {
    super(message);
    this.name = type;
  }
}

export const validation = (message: string) => new SchedulerApiError('ValidationException', 400, message);
export const conflict = (message: string) => new SchedulerApiError('ConflictException', 409, message);
export const notFound = (message: string) => new SchedulerApiError('ResourceNotFoundException', 404, message);

export type ScheduleState = 'ENABLED' | 'DISABLED';
export type ActionAfterCompletion = 'NONE' | 'DELETE';

export interface TargetDef {
  readonly Arn: string;
  readonly RoleArn: string;
  readonly Input?: string;
  readonly SqsParameters?: { readonly MessageGroupId?: string };
  readonly RetryPolicy: { readonly MaximumEventAgeInSeconds: number; readonly MaximumRetryAttempts: number };
  readonly DeadLetterConfig?: { readonly Arn?: string };
}

/** A schedule as the stand-in stores it (dates as epoch milliseconds). */
export interface StoredSchedule {
  readonly Name: string;
  readonly GroupName: string;
  readonly ScheduleExpression: string;
  readonly ScheduleExpressionTimezone?: string;
  readonly StartDate?: number;
  readonly EndDate?: number;
  readonly Description?: string;
  readonly State: ScheduleState;
  readonly FlexibleTimeWindow: { readonly Mode: 'OFF' | 'FLEXIBLE'; readonly MaximumWindowInMinutes?: number };
  readonly Target: TargetDef;
  readonly ActionAfterCompletion: ActionAfterCompletion;
  readonly KmsKeyArn?: string;
  readonly ClientToken?: string;
  readonly CreationDate: number;
  readonly LastModificationDate: number;
  /** `rate()` without a StartDate counts its period from here: the last create or update. */
  readonly anchor: number;
  /** Occurrences before this instant are done (fired, skipped while down or while disabled). */
  readonly cursor: number;
}

export interface StoredGroup {
  readonly Name: string;
  readonly CreationDate: number;
  readonly LastModificationDate: number;
  readonly ClientToken?: string;
}

/** The real service's default RetryPolicy (GetSchedule shows it when none was given). */
export const DEFAULT_RETRY_POLICY = { MaximumEventAgeInSeconds: 86_400, MaximumRetryAttempts: 185 } as const;

/** Largest target input: the service quota on payload size (256 KB). */
export const MAX_INPUT_BYTES = 262_144;

/** StartDate may be at most this far in the past (the real service refuses earlier ones). */
export const START_DATE_GRACE_MS = 5 * 60_000;

const NAME = /^[0-9a-zA-Z\-_.]{1,64}$/;
const SQS_ARN = /^arn:aws[a-z-]*:sqs:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]{1,80}(\.fifo)?$/;

export function checkName(value: unknown, what: 'name' | 'groupName'): string {
  if (typeof value !== 'string' || !NAME.test(value)) {
    throw validation(
      `1 validation error detected: Value '${String(value)}' at '${what}' failed to satisfy constraint: Member must have length between 1 and 64 and match pattern ^[0-9a-zA-Z-_.]+$`,
    );
  }
  return value;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function field(path: string, message: string): never {
  throw validation(`1 validation error detected: Value at '${path}' failed to satisfy constraint: ${message}`);
}

function optString(body: Record<string, unknown>, key: string, path: string, max: number): string | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value.length < 1 || value.length > max)
    field(path, `Member must be a string of length between 1 and ${max}`);
  return value;
}

function reqString(body: Record<string, unknown>, key: string, path: string, max: number): string {
  const value = optString(body, key, path, max);
  if (value === undefined) field(path, 'Member must not be null');
  return value;
}

function optInt(body: Record<string, unknown>, key: string, path: string, min: number, max: number): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max)
    field(path, `Member must be a whole number from ${min} to ${max}`);
  return value;
}

function optEnum<T extends string>(body: Record<string, unknown>, key: string, path: string, values: readonly T[]): T | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || !(values as readonly string[]).includes(value))
    field(path, `Member must satisfy enum value set: [${values.join(', ')}]`);
  return value as T;
}

/** restJson1 timestamps in a JSON body are epoch seconds (fractions allowed). */
function optDate(body: Record<string, unknown>, key: string, path: string): number | undefined {
  const value = body[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) field(path, 'Member must be a timestamp in epoch seconds');
  return Math.round(value * 1000);
}

function parseTarget(value: unknown): TargetDef {
  if (!isRecord(value)) field('target', 'Member must not be null');
  const Arn = reqString(value, 'Arn', 'target.arn', 1600);
  const RoleArn = reqString(value, 'RoleArn', 'target.roleArn', 1600);
  if (!SQS_ARN.test(Arn)) {
    // A limitation of the stand-in, not of the service: it delivers to SQS queues only.
    throw validation(
      `Target.Arn '${Arn}' is not an SQS queue ARN (arn:aws:sqs:<region>:<account>:<queue>): the local Scheduler stand-in delivers to SQS queues only`,
    );
  }
  const Input = optString(value, 'Input', 'target.input', Number.MAX_SAFE_INTEGER);
  if (Input !== undefined && Buffer.byteLength(Input, 'utf8') > MAX_INPUT_BYTES) {
    throw validation(`Target.Input is ${Buffer.byteLength(Input, 'utf8')} bytes, the limit is ${MAX_INPUT_BYTES} bytes (256 KB)`);
  }
  const target: { -readonly [K in keyof TargetDef]: TargetDef[K] } = { Arn, RoleArn, RetryPolicy: DEFAULT_RETRY_POLICY };
  if (Input !== undefined) target.Input = Input;
  if (value.SqsParameters !== undefined && value.SqsParameters !== null) {
    if (!isRecord(value.SqsParameters)) field('target.sqsParameters', 'Member must be an object');
    const MessageGroupId = optString(value.SqsParameters, 'MessageGroupId', 'target.sqsParameters.messageGroupId', 128);
    target.SqsParameters = MessageGroupId === undefined ? {} : { MessageGroupId };
  }
  if (value.RetryPolicy !== undefined && value.RetryPolicy !== null) {
    if (!isRecord(value.RetryPolicy)) field('target.retryPolicy', 'Member must be an object');
    target.RetryPolicy = {
      MaximumEventAgeInSeconds:
        optInt(value.RetryPolicy, 'MaximumEventAgeInSeconds', 'target.retryPolicy.maximumEventAgeInSeconds', 60, 86_400) ??
        DEFAULT_RETRY_POLICY.MaximumEventAgeInSeconds,
      MaximumRetryAttempts:
        optInt(value.RetryPolicy, 'MaximumRetryAttempts', 'target.retryPolicy.maximumRetryAttempts', 0, 185) ??
        DEFAULT_RETRY_POLICY.MaximumRetryAttempts,
    };
  }
  if (value.DeadLetterConfig !== undefined && value.DeadLetterConfig !== null) {
    if (!isRecord(value.DeadLetterConfig)) field('target.deadLetterConfig', 'Member must be an object');
    const dlq = optString(value.DeadLetterConfig, 'Arn', 'target.deadLetterConfig.arn', 1600);
    if (dlq !== undefined && !SQS_ARN.test(dlq))
      field('target.deadLetterConfig.arn', 'Member must be an SQS queue ARN (arn:aws:sqs:<region>:<account>:<queue>)');
    target.DeadLetterConfig = dlq === undefined ? {} : { Arn: dlq };
  }
  return target;
}

/** The parsed expression of a stored schedule (validated when it was stored). */
export function scheduleOf(s: Pick<StoredSchedule, 'ScheduleExpression' | 'ScheduleExpressionTimezone'>): Schedule {
  return parseSchedule(s.ScheduleExpression, s.ScheduleExpressionTimezone ?? 'UTC');
}

/** The fields of a CreateSchedule/UpdateSchedule body, validated; the caller adds dates and state. */
export type ScheduleDefinition = Omit<StoredSchedule, 'Name' | 'CreationDate' | 'LastModificationDate' | 'anchor' | 'cursor'>;

/**
 * Validates a CreateSchedule or UpdateSchedule body (both replace the whole definition: an
 * omitted optional field takes its default). Throws a ValidationException naming the field.
 */
export function parseDefinition(body: unknown, now: number): ScheduleDefinition {
  if (!isRecord(body)) throw validation('The request body must be a JSON object');
  const ScheduleExpression = reqString(body, 'ScheduleExpression', 'scheduleExpression', 256);
  const ScheduleExpressionTimezone = optString(body, 'ScheduleExpressionTimezone', 'scheduleExpressionTimezone', 50);
  let schedule: Schedule;
  try {
    schedule = parseSchedule(ScheduleExpression, ScheduleExpressionTimezone ?? 'UTC');
  } catch (err) {
    if (err instanceof ScheduleExpressionError) throw validation(`Invalid Schedule Expression ${ScheduleExpression}: ${err.message}`);
    throw err;
  }
  if (!isRecord(body.FlexibleTimeWindow)) field('flexibleTimeWindow', 'Member must not be null');
  const Mode = optEnum(body.FlexibleTimeWindow, 'Mode', 'flexibleTimeWindow.mode', ['OFF', 'FLEXIBLE'] as const);
  if (Mode === undefined) field('flexibleTimeWindow.mode', 'Member must not be null');
  const MaximumWindowInMinutes = optInt(
    body.FlexibleTimeWindow,
    'MaximumWindowInMinutes',
    'flexibleTimeWindow.maximumWindowInMinutes',
    1,
    1440,
  );
  if (Mode === 'FLEXIBLE' && MaximumWindowInMinutes === undefined) {
    throw validation('FlexibleTimeWindow.MaximumWindowInMinutes is required when Mode is FLEXIBLE: give 1 to 1440, or use Mode OFF');
  }
  const Target = parseTarget(body.Target);
  const GroupName = body.GroupName === undefined || body.GroupName === null ? 'default' : checkName(body.GroupName, 'groupName');
  const StartDate = optDate(body, 'StartDate', 'startDate');
  const EndDate = optDate(body, 'EndDate', 'endDate');
  // One-time schedules ignore StartDate and EndDate (as the service documents); others check them.
  if (schedule.kind !== 'at') {
    if (StartDate !== undefined && StartDate < now - START_DATE_GRACE_MS) {
      throw validation(
        `The StartDate you specify (${new Date(StartDate).toISOString()}) cannot be earlier than 5 minutes ago: omit it or give a later one`,
      );
    }
    if (EndDate !== undefined && EndDate <= now)
      throw validation(`The EndDate you specify (${new Date(EndDate).toISOString()}) must be in the future`);
    if (StartDate !== undefined && EndDate !== undefined && EndDate <= StartDate)
      throw validation('The EndDate must be later than the StartDate');
  }
  const def: { -readonly [K in keyof ScheduleDefinition]: ScheduleDefinition[K] } = {
    GroupName,
    ScheduleExpression,
    State: optEnum(body, 'State', 'state', ['ENABLED', 'DISABLED'] as const) ?? 'ENABLED',
    FlexibleTimeWindow: MaximumWindowInMinutes === undefined ? { Mode } : { Mode, MaximumWindowInMinutes },
    Target,
    ActionAfterCompletion: optEnum(body, 'ActionAfterCompletion', 'actionAfterCompletion', ['NONE', 'DELETE'] as const) ?? 'NONE',
  };
  if (ScheduleExpressionTimezone !== undefined) def.ScheduleExpressionTimezone = ScheduleExpressionTimezone;
  if (StartDate !== undefined) def.StartDate = StartDate;
  if (EndDate !== undefined) def.EndDate = EndDate;
  const Description = optString(body, 'Description', 'description', 512);
  if (Description !== undefined) def.Description = Description;
  const KmsKeyArn = optString(body, 'KmsKeyArn', 'kmsKeyArn', 2048);
  if (KmsKeyArn !== undefined) def.KmsKeyArn = KmsKeyArn;
  const ClientToken = optString(body, 'ClientToken', 'clientToken', 64);
  if (ClientToken !== undefined) def.ClientToken = ClientToken;
  return def;
}
