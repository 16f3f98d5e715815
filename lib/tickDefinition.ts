/**
 * The tick state machine (Amazon States Language, JSONPath), defined once for both the CDK
 * construct and the local stack. DESIGN.md, "Job lifecycle", Dispatch:
 *
 * ```
 * Plan (tick Lambda) ─▶ Groups (inline Map, one iteration per dispatcher, ≤ 40 at once)
 *                         └─ Dispatch ─▶ Decide ─┬─ done ─▶ GroupDone
 *                              ▲   │ error       ├─ idle ─▶ Idle (Wait lookahead − 2 s) ─┐
 *                              │   ▼             └─ else ───────────────────────────────┤
 *                              │ CountError ─▶ TooManyErrors ─┬─ ≥ 4 in a row ─▶ GaveUp  │
 *                              │                              └─▶ AfterError (Wait 5, 10, 20 s)
 *                              └────────────────────────────────────────────────────────┘
 * ```
 *
 * The error path is bounded: a failed step is retried in place with backoff (Retry), then
 * caught; each catch waits longer before the next step (5, 10, 20 s), and the fourth
 * consecutive failure ends the dispatcher for this execution (the next execution, a minute
 * later, takes its groups over). A persistently failing dispatch function thus costs at most
 * 12 invocations per dispatcher and execution, and the DispatchErrors alarm fires.
 *
 * Task resources are the placeholders `${TickFunctionArn}` and `${DispatchFunctionArn}`: CDK fills
 * them with `definitionSubstitutions`, local runs and tests with {@link renderTickDefinition}.
 * A task whose Resource is a Lambda function ARN passes its Parameters as the event and takes the
 * function's return value as its result (no `Payload` wrapper).
 */

/** `definitionSubstitutions` key of the tick (plan) function's ARN. */
export const TICK_FUNCTION_ARN_KEY = 'TickFunctionArn';
/** `definitionSubstitutions` key of the dispatch function's ARN. */
export const DISPATCH_FUNCTION_ARN_KEY = 'DispatchFunctionArn';
/**
 * `definitionSubstitutions` key of the cell a state machine dispatches (its decimal text, passed
 * to the tick as `cell`): every cell deploys the same definition, only this differs.
 */
export const CELL_KEY = 'Cell';

export interface TickDefinitionOptions {
  /** How long each execution dispatches, ms (the tick turns it into `untilMs`). @default 90_000 */
  readonly runMs?: number;
  /** Groups dispatched at once (an inline Map allows at most 40). @default 40 */
  readonly maxConcurrency?: number;
  /** The execution's timeout, seconds (Express allows at most 300). @default 150 */
  readonly timeoutSeconds?: number;
  /**
   * Consecutive caught failures after which a dispatcher stops for this execution (the Map's
   * failure handling: iterations never fail the Map; the next execution takes the groups over).
   * 1 to {@link ERROR_BACKOFF_SECONDS}.length. @default 4 ({@link MAX_CONSECUTIVE_FAILURES})
   */
  readonly maxConsecutiveFailures?: number;
}

/**
 * The dispatch function's timeout for executions of `runMs`: one step dispatches a whole run
 * (core/dispatch/loop.ts MAX_STEP_MS), so the timeout covers it, plus 30 s for the step's own start and end.
 */
export function dispatchTimeoutSeconds(runMs: number): number {
  return Math.ceil(runMs / 1000) + 30;
}

/** Lambda errors worth retrying in place: the service's, not the function's own. */
const LAMBDA_TRANSIENT_ERRORS = [
  'Lambda.ServiceException',
  'Lambda.AWSLambdaException',
  'Lambda.SdkClientException',
  'Lambda.TooManyRequestsException',
];

/** Consecutive caught failures after which a dispatcher stops for this execution (the default). */
export const MAX_CONSECUTIVE_FAILURES = 4;
/**
 * Wait after the 1st, 2nd, 3rd, ... caught failure, seconds (by default the 4th ends the
 * dispatcher); its length is the most `maxConsecutiveFailures` allows.
 */
export const ERROR_BACKOFF_SECONDS = [5, 10, 20, 40, 60, 60, 60, 60, 60, 60] as const;

/**
 * The tick state machine's definition. Executions start every minute and each dispatches for
 * `runMs` (~90 s), so two overlap; the group lease hands each group to the newer one. Plan packs
 * the groups into dispatchers by the load coming due (one at low load, one per group at high
 * load). Retry and Catch sit inside the Map iteration, so one dispatcher's failure never stops
 * the others.
 *
 * The execution context must provide `$$.Execution.Name` (the group-lease owner) and
 * `$$.Execution.StartTime` (the newer execution takes the groups over).
 */
export function tickDefinition(opts: TickDefinitionOptions = {}): object {
  const runMs = opts.runMs ?? 90_000;
  const maxConcurrency = opts.maxConcurrency ?? 40;
  const timeoutSeconds = opts.timeoutSeconds ?? 150;
  const maxFailures = opts.maxConsecutiveFailures ?? MAX_CONSECUTIVE_FAILURES;
  if (!Number.isInteger(maxFailures) || maxFailures < 1 || maxFailures > ERROR_BACKOFF_SECONDS.length)
    throw new RangeError(`maxConsecutiveFailures must be an integer from 1 to ${ERROR_BACKOFF_SECONDS.length}, got ${maxFailures}`);
  if (!Number.isInteger(runMs) || runMs < 1_000) throw new RangeError(`runMs must be an integer ≥ 1000, got ${runMs}`);
  if (!Number.isInteger(maxConcurrency) || maxConcurrency < 1 || maxConcurrency > 40)
    throw new RangeError(`maxConcurrency must be an integer from 1 to 40, got ${maxConcurrency}`);
  if (!Number.isInteger(timeoutSeconds) || timeoutSeconds < 1 || timeoutSeconds > 300)
    throw new RangeError(`timeoutSeconds must be an integer from 1 to 300 (Express), got ${timeoutSeconds}`);
  if (timeoutSeconds * 1000 <= runMs) throw new RangeError(`timeoutSeconds (${timeoutSeconds}) must leave room after runMs (${runMs})`);

  return {
    Comment:
      "Dynein tick: plan the shard groups, then dispatch each group until the execution's untilMs, handing groups over to the next execution through group leases.",
    QueryLanguage: 'JSONPath',
    TimeoutSeconds: timeoutSeconds,
    StartAt: 'Plan',
    States: {
      Plan: {
        Comment:
          'Tick function: samples the rows coming due and packs the shard groups into dispatchers, one Map item each ({groups, owner, ownerStartMs, untilMs, idleWaitSeconds, shards}); owner is this execution, untilMs its start + runMs.',
        Type: 'Task',
        Resource: `\${${TICK_FUNCTION_ARN_KEY}}`,
        Parameters: {
          'executionName.$': '$$.Execution.Name',
          'executionStartTime.$': '$$.Execution.StartTime',
          runMs,
          // The cell this state machine dispatches (its groups only), filled in per cell.
          cell: `\${${CELL_KEY}}`,
        },
        // A failing plan fails the execution (TickFailures alarm) after three retries; the next starts a minute later.
        Retry: [
          { ErrorEquals: ['States.ALL'], IntervalSeconds: 1, MaxAttempts: 3, BackoffRate: 2, MaxDelaySeconds: 4, JitterStrategy: 'FULL' },
        ],
        Next: 'Groups',
      },
      Groups: {
        Comment:
          'One iteration per dispatcher, all at once (inline Map, at most 40). Iterations never fail: errors are retried, caught and bounded inside.',
        Type: 'Map',
        ItemsPath: '$.items',
        // Each iteration starts with no failures counted.
        ItemSelector: {
          'groups.$': '$$.Map.Item.Value.groups',
          'owner.$': '$$.Map.Item.Value.owner',
          'ownerStartMs.$': '$$.Map.Item.Value.ownerStartMs',
          'untilMs.$': '$$.Map.Item.Value.untilMs',
          'idleWaitSeconds.$': '$$.Map.Item.Value.idleWaitSeconds',
          failures: 0,
        },
        MaxConcurrency: maxConcurrency,
        ResultPath: null,
        ItemProcessor: {
          ProcessorConfig: { Mode: 'INLINE' },
          StartAt: 'Dispatch',
          States: {
            Dispatch: {
              Comment:
                'Dispatch function: take or renew the leases of its groups, run one dispatch round; answers the groups still held, done (all lost or time up) and idle (nothing due within the lookahead).',
              Type: 'Task',
              Resource: `\${${DISPATCH_FUNCTION_ARN_KEY}}`,
              Parameters: {
                'groups.$': '$.groups',
                'owner.$': '$.owner',
                'ownerStartMs.$': '$.ownerStartMs',
                'untilMs.$': '$.untilMs',
                'idleWaitSeconds.$': '$.idleWaitSeconds',
              },
              // Only what the loop needs, so the iteration's state stays small; a step that
              // succeeded resets the count of consecutive failures.
              ResultSelector: {
                'groups.$': '$.groups',
                'owner.$': '$.owner',
                'ownerStartMs.$': '$.ownerStartMs',
                'untilMs.$': '$.untilMs',
                'idleWaitSeconds.$': '$.idleWaitSeconds',
                'done.$': '$.done',
                'idle.$': '$.idle',
                failures: 0,
              },
              // A busy step runs to untilMs: its timeout is the dispatch function's (run + 30 s).
              TimeoutSeconds: dispatchTimeoutSeconds(runMs),
              Retry: [
                {
                  ErrorEquals: LAMBDA_TRANSIENT_ERRORS,
                  IntervalSeconds: 1,
                  MaxAttempts: 6,
                  BackoffRate: 2,
                  MaxDelaySeconds: 8,
                  JitterStrategy: 'FULL',
                },
                // The function's own errors (and timeouts): twice more, after 2 and 4 s.
                {
                  ErrorEquals: ['States.ALL'],
                  IntervalSeconds: 2,
                  MaxAttempts: 2,
                  BackoffRate: 2,
                  MaxDelaySeconds: 8,
                  JitterStrategy: 'FULL',
                },
              ],
              Catch: [{ ErrorEquals: ['States.ALL'], ResultPath: '$.error', Next: 'CountError' }],
              Next: 'Decide',
            },
            CountError: {
              Comment: `The step failed for good (error in $.error): count consecutive failures and pick the wait before the next step (${ERROR_BACKOFF_SECONDS.slice(0, maxFailures - 1).join(', ')} s). Rows it held are dispatched again once their lease expires.`,
              Type: 'Pass',
              Parameters: {
                'groups.$': '$.groups',
                'owner.$': '$.owner',
                'ownerStartMs.$': '$.ownerStartMs',
                'untilMs.$': '$.untilMs',
                'idleWaitSeconds.$': '$.idleWaitSeconds',
                'failures.$': 'States.MathAdd($.failures, 1)',
                'backoffSeconds.$': `States.ArrayGetItem(States.Array(${ERROR_BACKOFF_SECONDS.slice(0, maxFailures).join(', ')}), $.failures)`,
                'error.$': '$.error',
              },
              Next: 'TooManyErrors',
            },
            TooManyErrors: {
              Comment: `After ${maxFailures} consecutive failures this dispatcher stops for this execution (the next one, a minute later, takes its groups over); otherwise wait, then dispatch again.`,
              Type: 'Choice',
              Choices: [{ Variable: '$.failures', NumericGreaterThanEquals: maxFailures, Next: 'GaveUp' }],
              Default: 'AfterError',
            },
            AfterError: {
              Comment: 'Back off before dispatching again (whole seconds, from CountError).',
              Type: 'Wait',
              SecondsPath: '$.backoffSeconds',
              Next: 'Dispatch',
            },
            GaveUp: {
              Comment:
                'The dispatch function failed repeatedly (the DispatchErrors alarm fires): stop burning invocations; the groups go to the next execution once their lease lapses.',
              Type: 'Succeed',
            },
            Decide: {
              Comment: 'Stop when done; after an idle step wait before looking again; otherwise dispatch again at once.',
              Type: 'Choice',
              Choices: [
                { Variable: '$.done', BooleanEquals: true, Next: 'GroupDone' },
                { Variable: '$.idle', BooleanEquals: true, Next: 'Idle' },
              ],
              Default: 'Dispatch',
            },
            Idle: {
              Comment: 'Nothing was due within the lookahead: wait lookahead − 2 s (whole seconds, from the step result).',
              Type: 'Wait',
              SecondsPath: '$.idleWaitSeconds',
              Next: 'Dispatch',
            },
            GroupDone: {
              Comment: 'This execution is done with these groups: a newer execution took them over, or untilMs is near.',
              Type: 'Succeed',
            },
          },
        },
        End: true,
      },
    },
  };
}

/**
 * The definition as JSON text with the task resources filled in (what CDK's
 * `definitionSubstitutions` does on deploy), for local runs and tests.
 */
export function renderTickDefinition(def: object, arns: { tick: string; dispatch: string }, cell = 0): string {
  const text = JSON.stringify(def)
    .split(`\${${TICK_FUNCTION_ARN_KEY}}`)
    .join(arns.tick)
    .split(`\${${DISPATCH_FUNCTION_ARN_KEY}}`)
    .join(arns.dispatch)
    .split(`\${${CELL_KEY}}`)
    .join(String(cell));
  const left = /\$\{[A-Za-z0-9]+\}/.exec(text);
  if (left) throw new Error(`tick definition still holds the placeholder ${left[0]}`);
  return text;
}
