/**
 * The expressions of recurring schedules: EventBridge Scheduler's `cron()`, `rate()` and `at()` expressions in
 * any IANA time zone, validated and evaluated by pure functions (no AWS SDK, no I/O, no clock:
 * callers pass `after`). One evaluator serves the API preview, the materialiser and the local
 * Scheduler stand-in. Grammar and semantics for users: docs/schedules.md.
 */
export { ScheduleExpressionError, type CronFieldName, type ScheduleField, type SchedulePart } from './errors.js';
export { parseSchedule, MAX_EXPRESSION_LENGTH, MAX_RATE_VALUE, type RateUnit, type Schedule } from './expression.js';
export { nextRuns, END_OF_TIME, MAX_RUNS_PER_CALL, type NextRunsOptions } from './nextRuns.js';
export { validateTimeZone, offsetAt, wallTime, instantsOf, firstInstant } from './zone.js';
export type { CronSpec } from './cron.js';
export type { DayRule } from './days.js';
