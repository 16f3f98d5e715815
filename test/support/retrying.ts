/**
 * API calls as a careful client makes them when AWS fails some calls (the local stack under
 * `DYNEIN_FAULTS`): a 5xx, a 429 or a network error is retried with backoff; a submit carries an
 * idempotency key per job, so a retry after an answer that was lost (or a 500 whose job was
 * written anyway) names the same job instead of making a second one.
 */
import { signedFetch, type LocalJson } from './localStack.js';

type Creds = { accessKeyId: string; secretAccessKey: string };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A signed request, repeated on 5xx, 429 or a network error (only for requests that are safe to repeat). */
export async function signedRetrying(
  endpoint: string,
  creds: Creds,
  method: string,
  path: string,
  body?: string,
  maxAttempts = 8,
): Promise<{ status: number; json: any; attempts: number }> {
  for (let attempt = 1; ; attempt++) {
    let res: { status: number; json: any } | undefined;
    let error: Error | undefined;
    try {
      res = await signedFetch(endpoint, creds, method, path, body);
    } catch (err) {
      error = err as Error;
    }
    const retry = error !== undefined || res!.status >= 500 || res!.status === 429;
    if (!retry) return { ...res!, attempts: attempt };
    if (attempt >= maxAttempts) {
      if (error) throw error;
      return { ...res!, attempts: attempt };
    }
    await sleep(Math.min(2_000, 100 * 2 ** attempt) * Math.random());
  }
}

export interface KeyedJob {
  /** The idempotency key: one per job, the same on every retry. */
  readonly key: string;
  readonly payload: unknown;
  readonly runAtMs: number;
}

export interface SubmitOutcome {
  /** Accepted jobs: index into the jobs given, job id, and the state submit answered. */
  readonly accepted: { readonly index: number; readonly jobId: string; readonly state: string }[];
  /** Jobs refused for good (their first error), or still failing after every retry. */
  readonly refused: { readonly index: number; readonly code: string; readonly message: string }[];
  /** Requests made beyond the first. */
  readonly retries: number;
}

/**
 * Submits keyed jobs as one batch (up to 100), resubmitting, unchanged, the jobs whose result was
 * an `InternalError` (or the whole request on a 5xx), until each has an answer that is not one.
 */
export async function submitKeyed(local: LocalJson, tenant: string, jobs: readonly KeyedJob[], maxRounds = 8): Promise<SubmitOutcome> {
  const accepted: SubmitOutcome['accepted'] = [];
  const refused: SubmitOutcome['refused'] = [];
  let pending = jobs.map((_, i) => i);
  let retries = 0;
  for (let round = 1; pending.length > 0; round++) {
    const body = JSON.stringify({
      jobs: pending.map((i) => ({
        payload: jobs[i]!.payload,
        runAt: new Date(jobs[i]!.runAtMs).toISOString(),
        idempotencyKey: jobs[i]!.key,
      })),
    });
    const res = await signedRetrying(local.endpoint, local.tenants[tenant]!, 'POST', `/v1/tenants/${tenant}/jobs/batch`, body);
    retries += res.attempts - 1;
    const last = round >= maxRounds;
    if (res.status !== 200) {
      for (const i of pending) refused.push({ index: i, code: `HTTP ${res.status}`, message: JSON.stringify(res.json).slice(0, 200) });
      break;
    }
    const again: number[] = [];
    (res.json.results as ({ jobId: string; state: string } | { error: { code: string; message: string } })[]).forEach((r, k) => {
      const index = pending[k]!;
      if ('jobId' in r) accepted.push({ index, jobId: r.jobId, state: r.state });
      else if (r.error.code === 'InternalError' && !last) again.push(index);
      else refused.push({ index, ...r.error });
    });
    if (again.length > 0) retries++;
    pending = again;
  }
  return { accepted, refused, retries };
}
