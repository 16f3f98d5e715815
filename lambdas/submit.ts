/** `POST /v1/tenants/{tenant}/jobs` and `.../jobs/batch`. */
import { wireFromEnv } from './runtime/env.js';
import { submitHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv({ inboundQueue: true });
export const handler = lambda('submit', (t) => submitHandler(wiring, t));
