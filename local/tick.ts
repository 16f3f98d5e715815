import { StateMachine } from 'aws-local-stepfunctions';

type JSONValue = Parameters<StateMachine['run']>[0];
import type { DispatchStepInput } from '../core/dispatch/index.js';
import { dispatchTimeoutSeconds, renderTickDefinition, tickDefinition } from '../lib/tickDefinition.js';
import type { TickInput } from '../lambdas/runtime/handlers.js';

const ARNS = {
  tick: 'arn:aws:lambda:us-east-1:000000000000:function:dynein-tick',
  dispatch: 'arn:aws:lambda:us-east-1:000000000000:function:dynein-dispatch',
};

export interface LocalTickOptions {
  readonly runMs: number;
  readonly everyMs: number;
  readonly tick: (input: TickInput) => Promise<unknown>;
  /** The dispatch handler, given the Lambda's remaining time as AWS would (70 s timeout). */
  readonly dispatch: (input: DispatchStepInput, context: { getRemainingTimeInMillis(): number }) => Promise<unknown>;
  readonly onError?: (err: unknown) => void;
  /** The cell this tick dispatches (its own state machine, as each cell has on AWS). @default 0 */
  readonly cell?: number;
}

/**
 * The tick as EventBridge and Step Functions run it on AWS: the very state machine definition
 * the CDK stack deploys, in aws-local-stepfunctions, its tasks bound to the in-process handlers.
 * An execution starts at once and then every `everyMs`; each runs `runMs`, so they overlap.
 * `startNow()` starts one more at once, as `StartExecution` does on AWS (a writer of a row due
 * soon into a sleeping group: docs/design-dispatch.md#sleep).
 */
export function startLocalTick(opts: LocalTickOptions): { stop(): void; startNow(): void } {
  const machine = new StateMachine(
    JSON.parse(
      renderTickDefinition(tickDefinition({ runMs: opts.runMs, timeoutSeconds: Math.ceil(opts.runMs / 1000) + 60 }), ARNS, opts.cell ?? 0),
    ),
  );
  const running = new Set<{ abort(): void }>();
  let stopped = false;
  let n = 0;
  const start = () => {
    const name = `local-${opts.cell ? `c${opts.cell}-` : ''}${Date.now()}-${n++}`;
    const execution = machine.run(
      {},
      {
        context: { Execution: { Name: name } },
        overrides: {
          // Keyed by state name: the Plan and Dispatch tasks run the in-process handlers.
          taskResourceLocalHandlers: {
            Plan: async (input) => (await opts.tick(input as unknown as TickInput)) as JSONValue,
            Dispatch: async (input) => {
              // The dispatch function's timeout on AWS (the task state's TimeoutSeconds is the same).
              const deadline = Date.now() + dispatchTimeoutSeconds(opts.runMs) * 1000;
              return (await opts.dispatch(input as unknown as DispatchStepInput, {
                getRemainingTimeInMillis: () => deadline - Date.now(),
              })) as JSONValue;
            },
          },
        },
      },
    );
    running.add(execution);
    // After stop(), an execution's end is its abort: not an error.
    execution.result.catch((err: unknown) => stopped || opts.onError?.(err)).finally(() => running.delete(execution));
  };
  start();
  const timer = setInterval(start, opts.everyMs);
  return {
    startNow() {
      if (!stopped) start();
    },
    stop() {
      stopped = true;
      clearInterval(timer);
      for (const e of running) e.abort();
    },
  };
}
