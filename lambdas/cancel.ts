/**
 * `DELETE /v1/tenants/{tenant}/jobs/{jobId}`. A workflow job's cancel tells its children, and a
 * child that runs on a parent's failure is handed over (the inbound queue or its tenant queue).
 */
import { wireFromEnv } from './runtime/env.js';
import { cancelHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv({ inboundQueue: true });
export const handler = lambda('cancel', (t) => cancelHandler(wiring, t));
