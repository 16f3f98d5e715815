import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { ValidationError } from '../../core/model/index.js';

/** One route of the HTTP API and the query parameters it takes (names are case-sensitive). */
export interface RouteSpec {
  readonly method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** The path as API Gateway's route key writes it: `/v1/tenants/{tenant}/jobs`. */
  readonly path: string;
  readonly query: readonly string[];
}

/**
 * Every route of the HTTP API (docs/api.md) with the query parameters it takes: the one place
 * they are declared. A parameter a route does not take is a 400 naming it ({@link assertQuery}),
 * so a misspelt `?dryrun=true` never stores a schedule for real.
 */
export const ROUTES: readonly RouteSpec[] = [
  { method: 'POST', path: '/v1/tenants/{tenant}/jobs', query: [] },
  { method: 'POST', path: '/v1/tenants/{tenant}/jobs/batch', query: [] },
  { method: 'POST', path: '/v1/tenants/{tenant}/jobs/outcomes', query: [] },
  { method: 'POST', path: '/v1/tenants/{tenant}/jobs/heartbeats', query: [] },
  {
    method: 'GET',
    path: '/v1/tenants/{tenant}/jobs',
    query: ['state', 'from', 'to', 'schedule', 'tag', 'concurrencyKey', 'debounceKey', 'order', 'limit', 'cursor', 'workflow'],
  },
  { method: 'GET', path: '/v1/tenants/{tenant}/jobs/{jobId}', query: [] },
  { method: 'DELETE', path: '/v1/tenants/{tenant}/jobs/{jobId}', query: [] },
  { method: 'POST', path: '/v1/tenants/{tenant}/jobs/cancel', query: [] },
  { method: 'GET', path: '/v1/tenants/{tenant}/operations/{operationId}', query: [] },
  { method: 'PUT', path: '/v1/tenants/{tenant}/schedules/{name}', query: ['dryRun', 'count'] },
  { method: 'GET', path: '/v1/tenants/{tenant}/schedules/{name}', query: [] },
  { method: 'DELETE', path: '/v1/tenants/{tenant}/schedules/{name}', query: [] },
  { method: 'GET', path: '/v1/tenants/{tenant}/schedules', query: ['limit', 'cursor'] },
  { method: 'POST', path: '/v1/tenants/{tenant}/schedules/{name}/pause', query: [] },
  { method: 'POST', path: '/v1/tenants/{tenant}/schedules/{name}/resume', query: [] },
  { method: 'GET', path: '/v1/tenants/{tenant}/dlq', query: ['max'] },
  { method: 'POST', path: '/v1/tenants/{tenant}/dlq/redrive', query: [] },
  { method: 'GET', path: '/v1/tenants/{tenant}/dlq/redrive', query: [] },
  { method: 'POST', path: '/v1/tenants/{tenant}/dlq/delete', query: [] },
  { method: 'POST', path: '/v1/tenants/{tenant}/dlq/edit', query: [] },
  { method: 'GET', path: '/v1/tenants/{tenant}/dlq/audit', query: ['limit', 'cursor'] },
  { method: 'POST', path: '/v1/tenants/{tenant}/workflows', query: [] },
  { method: 'GET', path: '/v1/tenants/{tenant}/workflows/{workflowId}', query: [] },
  { method: 'DELETE', path: '/v1/tenants/{tenant}/workflows/{workflowId}', query: [] },
  { method: 'GET', path: '/v1/admin/tenants/{tenant}', query: [] },
  { method: 'POST', path: '/v1/admin/tenants/{tenant}/pause', query: [] },
  { method: 'POST', path: '/v1/admin/tenants/{tenant}/resume', query: [] },
  { method: 'PUT', path: '/v1/admin/tenants/{tenant}/settings', query: [] },
];

const keyOf = (r: RouteSpec) => `${r.method} ${r.path}`;
const BY_KEY = new Map(ROUTES.map((r) => [keyOf(r), r]));
const PATTERNS = ROUTES.map((r) => ({ route: r, pattern: new RegExp(`^${r.path.replace(/\{[^}]+\}/g, '[^/]+')}$`) }));

/**
 * The route an event is for: by its route key (as API Gateway sets it), else by its method and
 * path (an event built by hand).
 */
export function routeOf(event: APIGatewayProxyEventV2): RouteSpec | undefined {
  const byKey = BY_KEY.get(event.routeKey ?? '');
  if (byKey) return byKey;
  const method = (event.requestContext?.http?.method ?? '').toUpperCase();
  const path = event.rawPath ?? '';
  return PATTERNS.find((p) => p.route.method === method && p.pattern.test(path))?.route;
}

/**
 * Refuses a query parameter the event's route does not take (400 naming it, and the one meant
 * when only its case differs). An event of no known route takes none.
 * @throws ValidationError
 */
export function assertQuery(event: APIGatewayProxyEventV2): void {
  const given = Object.keys(event.queryStringParameters ?? {});
  if (given.length === 0) return;
  const route = routeOf(event);
  const allowed = route?.query ?? [];
  const unknown = given.find((k) => !allowed.includes(k));
  if (unknown === undefined) return;
  const meant = allowed.find((a) => a.toLowerCase() === unknown.toLowerCase());
  const where = route ? `${route.method} ${route.path}` : 'this route';
  throw new ValidationError(
    `${unknown} is not a query parameter of ${where}${meant ? ` (did you mean ${meant}? names are case-sensitive)` : ''}: ${
      allowed.length > 0 ? `it takes ${allowed.join(', ')}` : 'it takes none'
    }; nothing was done`,
  );
}
