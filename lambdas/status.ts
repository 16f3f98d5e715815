/** `GET /v1/tenants/{tenant}/jobs/{jobId}`. */
import { wireFromEnv } from './runtime/env';
import { statusHandler } from './runtime/handlers';
import { lambda } from './runtime/powertools';

const wiring = await wireFromEnv();
export const handler = lambda('status', (t) => statusHandler(wiring, t));
