/** The inbound queue's event source target (report partial batch failures on the mapping). */
import { wireFromEnv } from './runtime/env.js';
import { ingestHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv();
export const handler = lambda('ingest', (t) => ingestHandler(wiring, t));
