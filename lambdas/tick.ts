/** Plans a tick execution: the shard groups its Map dispatches and until when. */
import { readConfig } from './runtime/config';
import { tickHandler } from './runtime/handlers';
import { lambda } from './runtime/powertools';

const { settings } = readConfig(process.env, { storage: false });
export const handler = lambda('tick', () => tickHandler(settings));
