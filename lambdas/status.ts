/** `GET /v1/tenants/{tenant}/jobs/{jobId}` and the listing `GET /v1/tenants/{tenant}/jobs`. */
import { wireFromEnv } from './runtime/env.js';
import { statusHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv();
export const handler = lambda('status', (t) => statusHandler(wiring, t));
