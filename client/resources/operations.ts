/** Bulk cancel (docs/flow-control.md "Bulk cancel"): start one, read its operation, wait for it. */
import { sleep } from '../../core/util/index.js';
import type { CancelJobsFilter, CancelJobsStarted, Operation } from '../apiTypes.js';
import type { CallOptions, CancelJobsWaitOptions } from '../callOptions.js';
import { DyneinError, ValidationError } from '../errors.js';
import type { ApiTransport } from '../transport.js';
import { enc, tenantPath } from './encode.js';

/** `cancelJobsAndWait`'s defaults. */
export const OPERATION_TIMEOUT_MS = 600_000;
export const OPERATION_POLL_MS = 1_000;

/** `POST .../jobs/cancel`: the filter as given, a Date bound as RFC 3339 (the API checks the rest). */
export function cancelJobs(api: ApiTransport, tenant: string, filter: CancelJobsFilter, opts: CallOptions): Promise<CancelJobsStarted> {
  const time = (t: string | Date) => {
    if (!(t instanceof Date)) return t;
    if (Number.isNaN(t.getTime()))
      throw new ValidationError({ source: 'client', message: 'from and to must be valid Dates or RFC 3339 times' });
    return t.toISOString();
  };
  const body =
    'state' in filter
      ? {
          ...filter,
          ...(filter.from !== undefined ? { from: time(filter.from) } : {}),
          ...(filter.to !== undefined ? { to: time(filter.to) } : {}),
        }
      : filter;
  return api.request<CancelJobsStarted>('POST', `${tenantPath(tenant)}/jobs/cancel`, JSON.stringify(body), opts.signal);
}

export function getOperation(api: ApiTransport, tenant: string, operationId: string, opts: CallOptions): Promise<Operation> {
  return api.request<Operation>('GET', `${tenantPath(tenant)}/operations/${enc(operationId)}`, undefined, opts.signal);
}

/**
 * Reads the operation every `pollIntervalMs` until it is `DONE` (answers that reply), handing each
 * reply to `onProgress`; past `timeoutMs` throws a DyneinError naming the operation (it runs on).
 */
export async function waitForOperation(
  api: ApiTransport,
  tenant: string,
  operationId: string,
  opts: CancelJobsWaitOptions,
): Promise<Operation> {
  const timeoutMs = opts.timeoutMs ?? OPERATION_TIMEOUT_MS;
  const until = api.now() + timeoutMs;
  for (;;) {
    const op = await getOperation(api, tenant, operationId, opts);
    opts.onProgress?.(op);
    if (op.state === 'DONE') return op;
    if (api.now() >= until)
      throw new DyneinError(
        `operation ${operationId} is still RUNNING after ${timeoutMs} ms (matched ${op.matched}, cancelled ${op.cancelled} so far): it runs on; read it with operation('${tenant}', '${operationId}')`,
      );
    await sleep(Math.min(opts.pollIntervalMs ?? OPERATION_POLL_MS, Math.max(0, until - api.now())), opts.signal);
    if (opts.signal?.aborted) throw opts.signal.reason;
  }
}
