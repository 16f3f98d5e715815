import { ValidationError } from '../../model/index.js';

/** The six fields of `cron(min hour day-of-month month day-of-week year)`, in order. */
export type CronFieldName = 'minutes' | 'hours' | 'dayOfMonth' | 'month' | 'dayOfWeek' | 'year';

/**
 * Which piece of a definition is wrong: one cron field, the cron expression as a whole (field
 * count, the `?` rule between the two day fields), the inside of `rate()` or `at()`, or the
 * expression's shape (free text, unknown function).
 */
export type SchedulePart = CronFieldName | 'cron' | 'rate' | 'at' | 'expression' | 'timezone';

/** The request field a schedule error belongs to. */
export type ScheduleField = 'expression' | 'timezone';

/**
 * A schedule expression or time zone that does not validate. It is a `ValidationError`, so the
 * API answers it with 400 `ValidationError`; `field` names the request field (`expression` or
 * `timezone`), `part` the piece inside it, and the message says what is wrong and how to fix it.
 *
 * @example
 * try { parseSchedule('cron(60 * * * ? *)') } catch (e) {
 *   // e.field === 'expression', e.part === 'minutes'
 *   // e.message === "expression: minutes value '60' is out of range: minutes take 0-59 ..."
 * }
 */
export class ScheduleExpressionError extends ValidationError {
  readonly field: ScheduleField;
  readonly part: SchedulePart;

  constructor(field: ScheduleField, part: SchedulePart, message: string) {
    super(`${field}: ${message}`);
    this.name = 'ScheduleExpressionError';
    this.field = field;
    this.part = part;
  }
}

/** Shorthand for an error in the `expression` field. */
export function expressionError(part: SchedulePart, message: string): ScheduleExpressionError {
  return new ScheduleExpressionError('expression', part, message);
}
