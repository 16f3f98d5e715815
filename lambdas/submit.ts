/** `POST /v1/tenants/{tenant}/jobs` and `.../jobs/batch`. */
import { wireFromEnv } from './runtime/env';
import { submitHandler } from './runtime/handlers';
import { lambda } from './runtime/powertools';

const wiring = await wireFromEnv({ inboundQueue: true });
export const handler = lambda('submit', (t) => submitHandler(wiring, t));
