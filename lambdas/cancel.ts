/** `DELETE /v1/tenants/{tenant}/jobs/{jobId}`. */
import { wireFromEnv } from './runtime/env';
import { cancelHandler } from './runtime/handlers';
import { lambda } from './runtime/powertools';

const wiring = await wireFromEnv();
export const handler = lambda('cancel', (t) => cancelHandler(wiring, t));
