import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { ApiError } from '../../core/errors.js';

export type HttpResult = APIGatewayProxyStructuredResultV2 & { statusCode: number; body: string };

/** The raw body of an HTTP API event (decoded when API Gateway base64-encoded it). */
export function bodyOf(event: APIGatewayProxyEventV2): string | undefined {
  if (event.body === undefined || event.body === null) return undefined;
  return event.isBase64Encoded ? Buffer.from(event.body, 'base64').toString('utf8') : event.body;
}

export function json(statusCode: number, value: unknown, requestId?: string): HttpResult {
  return {
    statusCode,
    headers: { 'content-type': 'application/json', ...(requestId ? { 'x-request-id': requestId } : {}) },
    body: JSON.stringify(value),
  };
}

/**
 * Runs an API operation and shapes its reply: an {@link ApiError} becomes its status and
 * `{"error": {"code", "message"}}`; anything else is logged and answers 500 without details.
 */
export async function respond(
  event: APIGatewayProxyEventV2,
  status: number,
  op: () => Promise<unknown>,
  onUnexpected: (err: unknown) => void,
): Promise<HttpResult> {
  const requestId = event.requestContext?.requestId;
  try {
    return json(status, await op(), requestId);
  } catch (err) {
    if (err instanceof ApiError) return json(err.status, { error: { code: err.code, message: err.message } }, requestId);
    onUnexpected(err);
    return json(500, { error: { code: 'InternalError', message: `internal error (request ${requestId ?? 'unknown'}): retry the request` } }, requestId);
  }
}

/** A path parameter, URL-decoded (API Gateway passes them as sent). */
export function pathParam(event: APIGatewayProxyEventV2, name: string): string {
  const raw = event.pathParameters?.[name] ?? '';
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}
