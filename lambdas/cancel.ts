/** `DELETE /v1/tenants/{tenant}/jobs/{jobId}`. */
import { wireFromEnv } from './runtime/env.js';
import { cancelHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv();
export const handler = lambda('cancel', (t) => cancelHandler(wiring, t));
