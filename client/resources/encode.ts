/** What the per-resource calls share: path segments, query parameters, and payloads as JSON text. */
import { describeSqsUnsafeChar, findSqsUnsafeChar, isJson } from '../../core/util/index.js';
import type { JobRequest } from '../apiTypes.js';
import { ValidationError } from '../errors.js';

/** A path segment or query value, percent-encoded. */
export const enc = encodeURIComponent;

/** `path`, with `?` and the parameters when there are any. */
export function withQuery(path: string, query: readonly string[]): string {
  return `${path}${query.length > 0 ? `?${query.join('&')}` : ''}`;
}

/** The path of a tenant's resources. */
export const tenantPath = (tenant: string): string => `v1/tenants/${enc(tenant)}`;

/** A whole number in [min, max] for a query parameter, or a client-side ValidationError naming it. */
export function wholeNumber(field: string, n: number, min: number, max: number): number {
  if (!Number.isInteger(n) || n < min || n > max)
    throw new ValidationError({
      source: 'client',
      message: `${field} must be a whole number from ${min} to ${max}, got ${JSON.stringify(n)}`,
    });
  return n;
}

/**
 * A job's payload as JSON text: `payloadJson` checked and kept as given, or `payload` through
 * `JSON.stringify` with U+FFFE and U+FFFF escaped (SQS refuses them raw; the value is the same).
 */
export function payloadText(job: Pick<JobRequest<unknown>, 'payload' | 'payloadJson'>): string {
  if (job.payloadJson !== undefined) {
    if (job.payload !== undefined)
      throw new ValidationError({ source: 'client', message: 'give payload (a value) or payloadJson (JSON text), not both' });
    if (typeof job.payloadJson !== 'string' || !isJson(job.payloadJson)) {
      throw new ValidationError({
        source: 'client',
        message: 'payloadJson must be JSON text holding one value, e.g. \'{"id": 9007199254740993}\'',
      });
    }
    const bad = findSqsUnsafeChar(job.payloadJson);
    if (bad) {
      throw new ValidationError({
        source: 'client',
        message: `payloadJson holds ${describeSqsUnsafeChar(bad.codePoint)} at character ${bad.index}: write it as a JSON escape (\\u${bad.codePoint.toString(16).toUpperCase().padStart(4, '0')})`,
      });
    }
    return job.payloadJson.trim();
  }
  let text: string | undefined;
  try {
    text = JSON.stringify(job.payload === undefined ? null : job.payload);
  } catch (err) {
    throw new ValidationError({ source: 'client', message: `payload cannot be serialized as JSON: ${(err as Error).message}` });
  }
  if (text === undefined)
    throw new ValidationError({ source: 'client', message: 'payload cannot be serialized as JSON (a function or a symbol)' });
  return text.replace(/[\uFFFE\uFFFF]/g, (c) => `\\u${c.charCodeAt(0).toString(16).toUpperCase()}`);
}
