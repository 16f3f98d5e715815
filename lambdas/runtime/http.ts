import type { APIGatewayProxyEventV2, APIGatewayProxyStructuredResultV2 } from 'aws-lambda';
import { ApiError, ValidationError } from '../../core/model/index.js';
import { stringifyWithRaw } from '../../core/util/index.js';
import { assertQuery } from './routes.js';

export type HttpResult = APIGatewayProxyStructuredResultV2 & { statusCode: number; body: string };

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The raw body of an HTTP API event, decoded when API Gateway base64-encoded it (it does for a
 * body it does not treat as text). Bytes that are not UTF-8 are a 400, never U+FFFD in their place.
 * @throws ValidationError
 */
export function bodyOf(event: APIGatewayProxyEventV2): string | undefined {
  if (event.body === undefined || event.body === null) return undefined;
  if (!event.isBase64Encoded) return event.body;
  try {
    return utf8.decode(Buffer.from(event.body, 'base64'));
  } catch {
    throw new ValidationError('request body is not valid UTF-8: send JSON text encoded in UTF-8');
  }
}

/** A reply whose status the operation chooses (a replayed submit answers 200, a new job 201). */
export class WithStatus {
  constructor(
    readonly statusCode: number,
    readonly value: unknown,
  ) {}
}

export function json(statusCode: number, value: unknown, requestId?: string): HttpResult {
  return {
    statusCode,
    headers: { 'content-type': 'application/json', ...(requestId ? { 'x-request-id': requestId } : {}) },
    body: stringifyWithRaw(value),
  };
}

/**
 * Runs an API operation and shapes its reply (`status`, unless the operation answers a
 * {@link WithStatus}), after refusing query parameters the route does not take
 * ({@link assertQuery}): an {@link ApiError} becomes its status and
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
    // Every route refuses a query parameter it does not take before it does anything.
    assertQuery(event);
    const value = await op();
    return value instanceof WithStatus ? json(value.statusCode, value.value, requestId) : json(status, value, requestId);
  } catch (err) {
    if (err instanceof ApiError) {
      const reply = json(err.status, { error: { code: err.code, message: err.message } }, requestId);
      return err.headers ? { ...reply, headers: { ...reply.headers, ...err.headers } } : reply;
    }
    onUnexpected(err);
    return json(
      500,
      { error: { code: 'InternalError', message: `internal error (request ${requestId ?? 'unknown'}): retry the request` } },
      requestId,
    );
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
