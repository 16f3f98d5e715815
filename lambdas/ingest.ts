/** The inbound queue's event source target (report partial batch failures on the mapping). */
import { wireFromEnv } from './runtime/env';
import { ingestHandler } from './runtime/handlers';
import { lambda } from './runtime/powertools';

const wiring = await wireFromEnv();
export const handler = lambda('ingest', (t) => ingestHandler(wiring, t));
