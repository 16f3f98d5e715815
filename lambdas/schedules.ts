/**
 * The recurring-schedule routes: `PUT|GET|DELETE /v1/tenants/{tenant}/schedules/{name}`, the list,
 * pause and resume; and the never-fired check of their occurrences, which a rule runs every 5
 * minutes with the input `{"audit": "occurrences"}` (docs/tracing.md#never-fired).
 */
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { readConfig } from './runtime/config.js';
import { type OccurrenceAuditResult, occurrenceAuditHandler, schedulesHandler } from './runtime/handlers.js';
import type { HttpResult } from './runtime/http.js';
import { lambda } from './runtime/powertools.js';
import { wire } from './runtime/wiring.js';

const wiring = await wire(readConfig(process.env, { scheduler: true }));
export const handler = lambda('schedules', (t) => {
  const routes = schedulesHandler(wiring, t);
  const audit = occurrenceAuditHandler(wiring, t);
  return (event: APIGatewayProxyEventV2 | { readonly audit: 'occurrences' }): Promise<HttpResult | OccurrenceAuditResult> =>
    'audit' in event && event.audit === 'occurrences' ? audit() : routes(event as APIGatewayProxyEventV2);
});
