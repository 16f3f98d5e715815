/** A tenant's dead-letter queue: peek, redrive (all, or some by handle), the move tasks, delete, edit, the edits' audit. */
import type {
  DeadLetterAuditPage,
  DeadLetterEdit,
  DeadLetterEditRequest,
  DeadLetterMoveTask,
  DeadLetterPage,
  DeadLetterRedrive,
  DeadLettersDeleted,
} from '../apiTypes.js';
import type { CallOptions } from '../callOptions.js';
import type { ApiTransport } from '../transport.js';
import { enc, payloadText, tenantPath, wholeNumber, withQuery } from './encode.js';

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

/** `POST .../dlq/edit`: the handle, then the payload spliced in as text (`payloadJson` as given). */
export function editDeadLetter<P>(
  api: ApiTransport,
  tenant: string,
  handle: string,
  edit: DeadLetterEditRequest<P>,
  opts: CallOptions,
): Promise<DeadLetterEdit> {
  const body = `{"handle":${JSON.stringify(handle)},"payload":${payloadText(edit)}}`;
  return api.request<DeadLetterEdit>('POST', `${dlqPath(tenant)}/edit`, body, opts.signal);
}

export function deadLetterAudit(
  api: ApiTransport,
  tenant: string,
  opts: CallOptions & { readonly limit?: number; readonly cursor?: string },
): Promise<DeadLetterAuditPage> {
  const query: string[] = [];
  if (opts.limit !== undefined) query.push(`limit=${wholeNumber('limit', opts.limit, 1, 100)}`);
  if (opts.cursor !== undefined) query.push(`cursor=${enc(opts.cursor)}`);
  return api.request<DeadLetterAuditPage>('GET', withQuery(`${dlqPath(tenant)}/audit`, query), undefined, opts.signal);
}
