/** Plans a tick execution: samples the rows coming due and packs the shard groups into dispatchers. */
import { wireFromEnv } from './runtime/env.js';
import { tickHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv({ idKey: false });
export const handler = lambda('tick', (t) =>
  tickHandler({ store: wiring.store, settings: wiring.config.settings, clock: wiring.dispatch.clock, log: wiring.dispatch.log }, t),
);
