/** One dispatch step for one shard group: the task inside the tick's Map iteration. */
import { wireFromEnv } from './runtime/env.js';
import { dispatchHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv({ idKey: false });
export const handler = lambda('dispatch', (t) => dispatchHandler(wiring, t));
