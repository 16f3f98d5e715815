/**
 * The stand-in's clock: fires every ENABLED schedule at each of its occurrences (core/recurring/expression's
 * nextRuns) by sending the target's Input to its SQS queue. Never before the occurrence: a
 * timer that wakes early sleeps again. Each occurrence is sent once per run of the process; a
 * failed send is retried with backoff within the target's RetryPolicy, then goes to the
 * DeadLetterConfig queue if there is one (as the real service does), else to the log.
 */
import { createHash, randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { SendMessageCommand, type SendMessageCommandInput, type SQSClient } from '@aws-sdk/client-sqs';
import { nextRuns } from '../../core/recurring/index.js';
import { scheduleOf, type StoredSchedule } from './model.js';
import type { ScheduleStore } from './store.js';

/** Where the stand-in reads the time; tests may pass their own. */
export interface SchedulerClock {
  now(): number;
}

export const systemClock: SchedulerClock = { now: () => Date.now() };

/** Maps an SQS queue ARN (`arn:aws:sqs:<region>:<account>:<name>`) to the queue URL to send to. */
export type QueueUrlResolver = (queueArn: string) => Promise<string>;

export interface FiringOptions {
  readonly store: ScheduleStore;
  readonly clock: SchedulerClock;
  readonly sqs: SQSClient;
  readonly resolveQueueUrl: QueueUrlResolver;
  readonly scheduleArn: (s: StoredSchedule) => string;
  readonly log: (message: string) => void;
  /** Longest sleep between checks, so a clock that jumps (tests) is noticed. */
  readonly maxSleepMs?: number;
  /** First retry delay after a failed send; doubles up to 60 s. */
  readonly retryBaseMs?: number;
}

/** One firing, as the clock reports it to observers (tests, logs). */
export interface Firing {
  readonly scheduleArn: string;
  readonly occurrence: number;
  readonly firedAt: number;
  readonly delivered: boolean;
}

/** `2022-03-22T18:59:43Z`, the format of `<aws.scheduler.scheduled-time>`. */
export const scheduledTimeText = (t: number) => new Date(t).toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Replaces the context attributes EventBridge Scheduler fills in a target's Input. */
export function fillContext(input: string, c: { scheduleArn: string; occurrence: number; executionId: string; attempt: number }): string {
  if (!input.includes('<aws.scheduler.')) return input;
  return input
    .replaceAll('<aws.scheduler.schedule-arn>', c.scheduleArn)
    .replaceAll('<aws.scheduler.scheduled-time>', scheduledTimeText(c.occurrence))
    .replaceAll('<aws.scheduler.execution-id>', c.executionId)
    .replaceAll('<aws.scheduler.attempt-number>', String(c.attempt));
}

/** Server faults, throttling and network errors are retried; other client faults are not. */
function retryable(err: Error): boolean {
  const fault = (err as { $fault?: unknown }).$fault;
  return fault !== 'client' || /throttl/i.test(err.name);
}

export class ScheduleClock {
  private timer: NodeJS.Timeout | undefined;
  /** Cached next occurrence per schedule key (null: none left). */
  private readonly nextDue = new Map<string, number | null>();
  private readonly inFlight = new Set<Promise<void>>();
  private readonly abort = new AbortController();
  private readonly listeners: ((f: Firing) => void)[] = [];
  private stopped = false;

  constructor(private readonly o: FiringOptions) {}

  /** Reports each firing once its send (and retries) finished. */
  onFiring(listener: (f: Firing) => void): void {
    this.listeners.push(listener);
  }

  /** A schedule changed (or was created or deleted): recompute it and re-plan the timer. */
  changed(key: string): void {
    this.nextDue.delete(key);
    this.plan(0);
  }

  start(): void {
    this.plan(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.abort.abort();
    await Promise.allSettled([...this.inFlight]);
  }

  private plan(delay: number): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.tick(), Math.max(0, delay));
  }

  private next(key: string, s: StoredSchedule): number | null {
    let due = this.nextDue.get(key);
    if (due === undefined) {
      const schedule = scheduleOf(s);
      // One-time schedules ignore StartDate and EndDate, as the service documents.
      const [first] =
        schedule.kind === 'at'
          ? nextRuns(schedule, { after: s.cursor, count: 1 })
          : nextRuns(schedule, { after: s.cursor, count: 1, startAt: s.StartDate, endAt: s.EndDate, createdAt: s.anchor });
      due = first ?? null;
      this.nextDue.set(key, due);
    }
    return due;
  }

  private tick(): void {
    if (this.stopped) return;
    const { store, clock } = this.o;
    const now = clock.now();
    let earliest = Infinity;
    let dirty = false;
    for (const [key, stored] of [...store.schedules]) {
      if (stored.State !== 'ENABLED') continue;
      let s = stored;
      let due = this.next(key, s);
      while (due !== null && due <= now) {
        this.fire(s, due);
        s = { ...s, cursor: due + 1 };
        store.schedules.set(key, s);
        dirty = true;
        this.nextDue.delete(key);
        due = this.next(key, s);
        if (due === null && s.ActionAfterCompletion === 'DELETE') {
          store.schedules.delete(key);
          this.nextDue.delete(key);
        }
      }
      if (due !== null) earliest = Math.min(earliest, due);
    }
    if (dirty) store.save();
    const maxSleep = this.o.maxSleepMs ?? 1_000;
    this.plan(earliest === Infinity ? maxSleep : Math.min(maxSleep, Math.max(1, earliest - clock.now())));
  }

  private fire(s: StoredSchedule, occurrence: number): void {
    const p = this.deliver(s, occurrence).finally(() => this.inFlight.delete(p));
    this.inFlight.add(p);
  }

  private async deliver(s: StoredSchedule, occurrence: number): Promise<void> {
    const { clock, log } = this.o;
    const scheduleArn = this.o.scheduleArn(s);
    const { MaximumRetryAttempts, MaximumEventAgeInSeconds } = s.Target.RetryPolicy;
    let delay = this.o.retryBaseMs ?? 1_000;
    let lastError: Error = new Error('not sent');
    let attempt = 1;
    let exhausted = 'MaximumRetryAttemptsExceeded';
    for (; ; attempt++) {
      const body = fillContext(s.Target.Input ?? '{}', { scheduleArn, occurrence, executionId: randomBytes(8).toString('hex'), attempt });
      try {
        await this.send(s.Target.Arn, body, s, scheduleArn, occurrence);
        this.report({ scheduleArn, occurrence, firedAt: clock.now(), delivered: true });
        return;
      } catch (err) {
        lastError = err as Error;
      }
      if (this.stopped) break;
      // A request SQS refuses (missing queue, invalid body) fails the same way again: no retry.
      if (!retryable(lastError)) {
        exhausted = 'NonRetryableError';
        break;
      }
      if (attempt > MaximumRetryAttempts) break;
      if (clock.now() + delay - occurrence > MaximumEventAgeInSeconds * 1000) {
        exhausted = 'MaximumEventAgeExceeded';
        break;
      }
      try {
        await sleep(delay, undefined, { signal: this.abort.signal });
      } catch {
        break;
      }
      delay = Math.min(delay * 2, 60_000);
    }
    log(
      `scheduler: ${scheduleArn} occurrence ${scheduledTimeText(occurrence)} not delivered after ${attempt} attempt(s): ${lastError.name}: ${lastError.message}`,
    );
    const dlq = s.Target.DeadLetterConfig?.Arn;
    if (dlq !== undefined && !this.stopped) {
      try {
        await this.o.sqs.send(
          new SendMessageCommand({
            QueueUrl: await this.o.resolveQueueUrl(dlq),
            MessageBody: fillContext(s.Target.Input ?? '{}', {
              scheduleArn,
              occurrence,
              executionId: randomBytes(8).toString('hex'),
              attempt,
            }),
            MessageAttributes: {
              ERROR_CODE: { DataType: 'String', StringValue: lastError.name || 'Error' },
              ERROR_MESSAGE: { DataType: 'String', StringValue: lastError.message || 'unknown' },
              EXHAUSTED_RETRY_CONDITION: { DataType: 'String', StringValue: exhausted },
              RETRY_ATTEMPTS: { DataType: 'String', StringValue: String(attempt - 1) },
              SCHEDULE_ARN: { DataType: 'String', StringValue: scheduleArn },
              TARGET_ARN: { DataType: 'String', StringValue: s.Target.Arn },
            },
          }),
        );
      } catch (err) {
        log(`scheduler: dead-letter send to ${dlq} failed too: ${(err as Error).message}`);
      }
    }
    this.report({ scheduleArn, occurrence, firedAt: clock.now(), delivered: false });
  }

  private async send(queueArn: string, body: string, s: StoredSchedule, scheduleArn: string, occurrence: number): Promise<void> {
    const input: SendMessageCommandInput = { QueueUrl: await this.o.resolveQueueUrl(queueArn), MessageBody: body };
    if (queueArn.endsWith('.fifo')) {
      input.MessageGroupId = s.Target.SqsParameters?.MessageGroupId ?? s.Name;
      input.MessageDeduplicationId = createHash('sha256').update(`${scheduleArn}@${occurrence}`).digest('hex').slice(0, 64);
    }
    await this.o.sqs.send(new SendMessageCommand(input), { abortSignal: this.abort.signal });
  }

  private report(f: Firing): void {
    for (const l of this.listeners) l(f);
  }
}
