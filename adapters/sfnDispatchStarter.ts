import { randomBytes } from 'node:crypto';
import type { SFNClient } from '@aws-sdk/client-sfn';
import type { DispatchStarter } from '../core/model/index.js';

/**
 * {@link DispatchStarter} on AWS Step Functions: `StartExecution` of the cell's tick state machine
 * (docs/design-dispatch.md, "Sleep"), as the every-minute rule starts it. The client loads on the
 * first start (`@aws-sdk/client-sfn` is bundled into the functions that write rows; the local
 * stack starts its ticks in process and never loads it).
 */
export class StepFunctionsStarter implements DispatchStarter {
  #client: Promise<{ client: SFNClient; command: typeof import('@aws-sdk/client-sfn').StartExecutionCommand }> | undefined;

  /** `stateMachineArns[cell]` is the tick state machine of each cell. */
  constructor(
    private readonly stateMachineArns: readonly string[],
    private readonly endpoint?: string,
  ) {}

  async start(cell: number): Promise<void> {
    const arn = this.stateMachineArns[cell];
    if (arn === undefined) throw new RangeError(`no tick state machine for cell ${cell} (${this.stateMachineArns.length} configured)`);
    this.#client ??= import('@aws-sdk/client-sfn').then(({ SFNClient, StartExecutionCommand }) => ({
      // The SDK's retries (throttling, 5xx) with a few more attempts than its default: a start that
      // still fails is caught by the tick's next execution.
      client: new SFNClient({ maxAttempts: 5, ...(this.endpoint ? { endpoint: this.endpoint } : {}) }),
      command: StartExecutionCommand,
    }));
    // A load that failed is tried again at the next start.
    const { client, command } = await this.#client.catch((err: unknown) => {
      this.#client = undefined;
      throw err;
    });
    // The name is the group leases' owner: unique, and telling why it started.
    await client.send(new command({ stateMachineArn: arn, name: `wake-${Date.now()}-${randomBytes(4).toString('hex')}`, input: '{}' }));
  }
}
