import { createHash } from 'node:crypto';
import {
  ConflictException,
  CreateScheduleCommand,
  DeleteScheduleCommand,
  ResourceNotFoundException,
  SchedulerClient,
  UpdateScheduleCommand,
  type CreateScheduleCommandInput,
} from '@aws-sdk/client-scheduler';
import { firingBody, type ScheduleRef, type ScheduleTrigger, type Timing } from '../core/recurring/index.js';
import { ThrottledError } from '../core/model/index.js';
import { cutText } from '../core/util/index.js';

export interface EventBridgeTriggerConfig {
  /** The deployment's schedule group. */
  readonly groupName: string;
  /** The execution role EventBridge Scheduler sends with (trusted by scheduler.amazonaws.com). */
  readonly roleArn: string;
  /** The inbound queue: every firing is a message there. */
  readonly targetArn: string;
  /** Where firings that failed every retry go. */
  readonly deadLetterArn?: string;
}

/**
 * The name of a schedule's clock in the group: `d-` and 40 hex characters of SHA-256 over the
 * tenant and schedule names (EventBridge names hold 64 characters; tenant and schedule names
 * together may not fit). The firing's input names the schedule in full.
 */
export function clockName(ref: ScheduleRef): string {
  return `d-${createHash('sha256').update(`${ref.tenant}\n${ref.name}`).digest('hex').slice(0, 40)}`;
}

/**
 * Retries of a firing EventBridge Scheduler could not send: for an hour, then the firings DLQ (and
 * its alarm). A firing lost so is no occurrence lost: the next firing writes from the watermark.
 */
const RETRY_POLICY = { MaximumEventAgeInSeconds: 3_600, MaximumRetryAttempts: 185 };

/** {@link ScheduleTrigger} on Amazon EventBridge Scheduler (`@aws-sdk/client-scheduler`), or its local stand-in. */
export class EventBridgeTrigger implements ScheduleTrigger {
  constructor(
    private readonly config: EventBridgeTriggerConfig,
    private readonly client: SchedulerClient = new SchedulerClient({}),
    private readonly now: () => number = Date.now,
  ) {}

  async upsert(ref: ScheduleRef, timing: Timing, enabled: boolean): Promise<void> {
    const now = this.now();
    // The service refuses an end in the past: such a schedule has no firing left.
    if (timing.endAtMs !== undefined && timing.endAtMs <= now + 1_000) return this.remove(ref);
    const input: CreateScheduleCommandInput = {
      Name: clockName(ref),
      GroupName: this.config.groupName,
      Description: cutText(`dynein ${ref.tenant}/${ref.name}`, 512),
      ScheduleExpression: timing.expression,
      ScheduleExpressionTimezone: timing.timezone,
      // A start in the past is refused (beyond 5 minutes): the clock only needs the firings to come.
      ...(timing.startAtMs !== undefined && timing.startAtMs > now ? { StartDate: new Date(timing.startAtMs) } : {}),
      ...(timing.endAtMs !== undefined ? { EndDate: new Date(timing.endAtMs) } : {}),
      State: enabled ? 'ENABLED' : 'DISABLED',
      FlexibleTimeWindow: { Mode: 'OFF' },
      ActionAfterCompletion: 'NONE',
      Target: {
        Arn: this.config.targetArn,
        RoleArn: this.config.roleArn,
        Input: firingBody(ref),
        RetryPolicy: RETRY_POLICY,
        ...(this.config.deadLetterArn ? { DeadLetterConfig: { Arn: this.config.deadLetterArn } } : {}),
      },
    };
    try {
      await this.client.send(new UpdateScheduleCommand(input));
    } catch (err) {
      if (!(err instanceof ResourceNotFoundException) && (err as Error).name !== 'ResourceNotFoundException') throw translate(err);
      try {
        await this.client.send(new CreateScheduleCommand(input));
      } catch (e) {
        // Created by a concurrent call in between: update it.
        if (!(e instanceof ConflictException) && (e as Error).name !== 'ConflictException') throw translate(e);
        await this.client.send(new UpdateScheduleCommand(input)).catch((x: unknown) => {
          throw translate(x);
        });
      }
    }
  }

  async remove(ref: ScheduleRef): Promise<void> {
    try {
      await this.client.send(new DeleteScheduleCommand({ Name: clockName(ref), GroupName: this.config.groupName }));
    } catch (err) {
      if (err instanceof ResourceNotFoundException || (err as Error).name === 'ResourceNotFoundException') return;
      throw translate(err);
    }
  }
}

function translate(err: unknown): unknown {
  const name = (err as Error)?.name;
  if (name === 'ThrottlingException' || name === 'ServiceQuotaExceededException')
    return new ThrottledError(`EventBridge Scheduler: ${(err as Error).message}`, err);
  return err;
}
