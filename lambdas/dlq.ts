/** A tenant's dead-letter queue: `GET /v1/tenants/{tenant}/dlq`, `POST .../dlq/redrive`, `POST .../dlq/delete`. */
import { wireFromEnv } from './runtime/env.js';
import { dlqHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv();
export const handler = lambda('dlq', (t) => dlqHandler(wiring, t));
