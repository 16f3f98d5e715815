/** A tenant's dead-letter queue: peek, redrive (all, or some by handle), the move tasks, delete. */
import type { DeadLetterMoveTask, DeadLetterPage, DeadLetterRedrive, DeadLettersDeleted } from '../apiTypes.js';
import type { CallOptions } from '../callOptions.js';
import type { ApiTransport } from '../transport.js';
import { tenantPath, wholeNumber } from './encode.js';

const dlqPath = (tenant: string): string => `${tenantPath(tenant)}/dlq`;

export function peekDeadLetters(api: ApiTransport, tenant: string, opts: CallOptions & { readonly max?: number }): Promise<DeadLetterPage> {
  const query = opts.max !== undefined ? `?max=${wholeNumber('max', opts.max, 1, 10)}` : '';
  return api.request<DeadLetterPage>('GET', `${dlqPath(tenant)}${query}`, undefined, opts.signal);
}

export function redriveDeadLetters(
  api: ApiTransport,
  tenant: string,
  what: { readonly all: true } | { readonly handles: readonly string[] },
  opts: CallOptions,
): Promise<DeadLetterRedrive> {
  return api.request<DeadLetterRedrive>('POST', `${dlqPath(tenant)}/redrive`, JSON.stringify(what), opts.signal);
}

export function deadLetterMoves(api: ApiTransport, tenant: string, opts: CallOptions): Promise<{ tasks: readonly DeadLetterMoveTask[] }> {
  return api.request<{ tasks: readonly DeadLetterMoveTask[] }>('GET', `${dlqPath(tenant)}/redrive`, undefined, opts.signal);
}

export function deleteDeadLetters(
  api: ApiTransport,
  tenant: string,
  handles: readonly string[],
  opts: CallOptions,
): Promise<DeadLettersDeleted> {
  return api.request<DeadLettersDeleted>('POST', `${dlqPath(tenant)}/delete`, JSON.stringify({ handles }), opts.signal);
}
