/**
 * `GET /v1/tenants/{tenant}/jobs/{jobId}`, the listing `GET /v1/tenants/{tenant}/jobs`, and
 * `POST /v1/tenants/{tenant}/jobs/outcomes` (docs/history.md).
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { wireFromEnv } from './runtime/env.js';
import { outcomesHandler, statusHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv();
export const handler = lambda('status', (t) => {
  const status = statusHandler(wiring, t);
  const outcomes = outcomesHandler(wiring, t);
  return (event: APIGatewayProxyEventV2) => (event.requestContext?.http?.method === 'POST' ? outcomes(event) : status(event));
});
