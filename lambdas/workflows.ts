/**
 * The workflow routes, `POST /v1/tenants/{tenant}/workflows`, `GET` and `DELETE
 * /v1/tenants/{tenant}/workflows/{workflowId}` (docs/workflows.md), and the outcome reports,
 * `POST /v1/tenants/{tenant}/jobs/outcomes` (docs/history.md): a workflow job's report moves its
 * children on, so it is served where workflows may write; and the workers' heartbeats, `POST
 * /v1/tenants/{tenant}/jobs/heartbeats` (docs/flow-control.md), sent by the same callers.
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { wireFromEnv } from './runtime/env.js';
import { outcomesHandler, workflowsHandler } from './runtime/handlers.js';
import { lambda } from './runtime/powertools.js';

const wiring = await wireFromEnv({ inboundQueue: true });
export const handler = lambda('workflows', (t) => {
  const workflows = workflowsHandler(wiring, t);
  const outcomes = outcomesHandler(wiring, t);
  // Outcome reports and the workers' heartbeats (docs/flow-control.md) share the outcomes handler.
  return (event: APIGatewayProxyEventV2) =>
    /\/jobs\/(outcomes|heartbeats)$/.test(event.rawPath ?? '') ? outcomes(event) : workflows(event);
});
