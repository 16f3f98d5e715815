import { isoMs, parseTraceparent } from '../../core/model/index.js';
import type { APIGatewayProxyEventV2, Context, SQSBatchResponse, SQSEvent } from 'aws-lambda';
import { INGEST_RETRY_SECONDS, INGEST_TIMEOUT_SECONDS, QUEUE_SETTINGS } from '../../adapters/resources.js';
import { ingestMessage, type IngestOutcome, MalformedInboundError, recordDeadLetters } from '../../core/ingest/index.js';
import { type AuditReport, materialiseFiring, parseFiring } from '../../core/recurring/index.js';
import { type IngestedMessage, type PassMessage, parsePass, passBody, runPass, settleIngested } from '../../core/operations/index.js';
import { TenantAdmin } from '../../core/tenants/index.js';
import { limiter } from '../../core/util/index.js';
import {
  type Clock,
  groupsOfCell,
  INBOUND_MESSAGE_LIFETIME_MS,
  shardsOfGroup,
  systemClock,
  TENANT_METRICS,
  WorkflowNotFoundError,
} from '../../core/model/index.js';
import {
  type DispatchPlan,
  dispatchStep,
  type DispatchStepInput,
  type DispatchStepResult,
  idleWaitSeconds,
  type PlanDeps,
  planDispatchers,
} from '../../core/dispatch/index.js';
import { type JobReply, SubmitThrottledError } from '../../core/submit/index.js';
import { bodyOf, pathParam, respond, WithStatus, type HttpResult } from './http.js';
import { routeOf } from './routes.js';
import type { Wiring } from './wiring.js';

/** What handlers report besides their reply: metrics and unexpected errors. */
export interface Telemetry {
  count(name: string, n: number): void;
  values(name: string, unit: 'Milliseconds' | 'Count', values: readonly number[]): void;
  error(message: string, err: unknown): void;
  /** Something an operator should act on that is not a failure (parked jobs). */
  warn?(message: string, fields: Record<string, unknown>): void;
  /** A line kept for the record (every change of a tenant's controls, with who made it). */
  info?(message: string, fields: Record<string, unknown>): void;
  /**
   * Metrics of one tenant, with a `Tenant` dimension (besides `service`): one metrics line per
   * call, so callers aggregate per invocation (counts, and millisecond values already sampled).
   */
  tenantMetrics?(tenant: string, counts: Readonly<Record<string, number>>, milliseconds: Readonly<Record<string, readonly number[]>>): void;
  /**
   * Metrics of one concurrency key of a tenant (dimensions `Tenant` and `ConcurrencyKey`): one line
   * per call, for the busiest keys of a dispatch step only (docs/flow-control.md, "Metrics").
   */
  keyMetrics?(
    tenant: string,
    key: string,
    counts: Readonly<Record<string, number>>,
    milliseconds: Readonly<Record<string, readonly number[]>>,
  ): void;
  /** Adds `{service, name: value}` as a second dimension set of this invocation's metrics (the same line, no extra metric line). */
  dimensionSet?(name: string, value: string): void;
}

export const silentTelemetry: Telemetry = { count() {}, values() {}, error() {} };

/** `POST /v1/tenants/{tenant}/jobs` (201; 200 for a retry naming an existing job) and `POST /v1/tenants/{tenant}/jobs/batch` (200). */
export function submitHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  return flushing(w, submitRequest(w, t));
}

/**
 * `handle`, whose spans leave before it answers (the function may be frozen after), when spans
 * are recorded; `handle` itself when not.
 */
function flushing(w: Pick<Wiring, 'spans'>, handle: (event: APIGatewayProxyEventV2) => Promise<HttpResult>) {
  return w.spans ? async (event: APIGatewayProxyEventV2) => flushed(w, await handle(event)) : handle;
}

/** Sends the spans waiting (never throws: a failed export is dropped), then answers `result`. */
async function flushed<T>(w: Pick<Wiring, 'spans'>, result: T): Promise<T> {
  await w.spans?.flush();
  return result;
}

function submitRequest(w: Wiring, t: Telemetry) {
  return (event: APIGatewayProxyEventV2): Promise<HttpResult> => {
    const tenant = pathParam(event, 'tenant');
    const isBatch = (event.routeKey ?? '').endsWith('/batch') || (event.rawPath ?? '').endsWith('/jobs/batch');
    // W3C trace context (docs/tracing.md): the caller's trace, when its headers carry a valid one.
    const caller = parseTraceparent(event.headers?.traceparent, event.headers?.tracestate);
    const unexpected = (err: unknown) => {
      countControlReadFailures(w, t);
      t.error('submit failed', err);
    };
    // Requests refused by the tenant's maxSubmitsPerSecond (429 Throttled), per tenant.
    const throttled = async <T>(op: () => Promise<T>): Promise<T> =>
      op().catch((err: unknown) => {
        if (err instanceof SubmitThrottledError) {
          t.dimensionSet?.('Tenant', tenant);
          t.count('SubmitsThrottled', 1);
        }
        throw err;
      });
    if (isBatch) {
      return respond(
        event,
        200,
        async () => {
          const reply = await throttled(() => w.submitter.submitBatch(tenant, bodyOf(event), caller));
          t.dimensionSet?.('Tenant', tenant);
          countStates(
            t,
            reply.results.filter((r): r is JobReply => 'jobId' in r),
          );
          countControlReadFailures(w, t);
          return reply;
        },
        unexpected,
      );
    }
    return respond(
      event,
      201,
      async () => {
        const { status, job } = await throttled(() => w.submitter.submit(tenant, bodyOf(event), caller));
        t.dimensionSet?.('Tenant', tenant);
        countStates(t, [job]);
        countControlReadFailures(w, t);
        return new WithStatus(status, job);
      },
      unexpected,
    );
  };
}

/**
 * Reads of tenant controls that failed in this process since the last count (their tenants'
 * rows were held meanwhile: docs/tenant-controls.md#controls-that-cannot-be-read); only when some did.
 */
function countControlReadFailures(w: Pick<Wiring, 'controls'>, t: Telemetry): void {
  const n = w.controls?.takeReadFailures() ?? 0;
  if (n > 0) t.count('ControlReadFailures', n);
}

function countStates(t: Telemetry, replies: readonly JobReply[]): void {
  const queued = replies.filter((r) => r.state === 'QUEUED').length;
  t.count('JobsSubmitted', replies.length);
  t.count('JobsQueuedDirectly', queued);
}

/** `GET /v1/tenants/{tenant}/jobs/{jobId}`, and the listing `GET /v1/tenants/{tenant}/jobs` (the same function serves both). */
export function statusHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  const list = listHandler(w, t);
  return (event: APIGatewayProxyEventV2): Promise<HttpResult> =>
    event.routeKey === LIST_ROUTE || (event.routeKey !== STATUS_ROUTE && event.pathParameters?.jobId === undefined)
      ? list(event)
      : respond(
          event,
          200,
          () => w.jobs.status(pathParam(event, 'tenant'), pathParam(event, 'jobId')),
          (err) => t.error('status failed', err),
        );
}

const LIST_ROUTE = 'GET /v1/tenants/{tenant}/jobs';
const STATUS_ROUTE = 'GET /v1/tenants/{tenant}/jobs/{jobId}';

/** `GET /v1/tenants/{tenant}/jobs?state=&from=&to=&schedule=&order=&limit=&cursor=` (docs/listing.md). */
export function listHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  return (event: APIGatewayProxyEventV2): Promise<HttpResult> =>
    respond(
      event,
      200,
      async () => {
        const tenant = pathParam(event, 'tenant');
        const query = event.queryStringParameters ?? {};
        // ?workflow=: that workflow's jobs in its order (docs/workflows.md).
        if (query.workflow === undefined) return w.lister.list(tenant, query);
        const page = await w.workflows.listJobs(tenant, query);
        if (!page) throw new WorkflowNotFoundError(tenant);
        return page;
      },
      (err) => t.error('listing failed', err),
    );
}

/** `POST /v1/tenants/{tenant}/jobs/outcomes`: a worker's outcome reports (docs/history.md). */
export function outcomesHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  // A workflow job's report may release its children (their `dynein.workflow.release` spans).
  return flushing(w, (event: APIGatewayProxyEventV2): Promise<HttpResult> =>
    (event.rawPath ?? '').endsWith('/jobs/heartbeats')
      ? respond(
          event,
          200,
          () => w.jobs.heartbeats(pathParam(event, 'tenant'), bodyOf(event)),
          (err) => t.error('heartbeats failed', err),
        )
      : respond(
          event,
          200,
          async () => {
            const tenant = pathParam(event, 'tenant');
            const reply = await w.outcomes.report(tenant, bodyOf(event)).finally(() => {
              // Children left waiting until the report comes again (the WorkflowChildrenWaiting alarm).
              const stuck = w.outcomes.takeCarryOnFailures();
              if (stuck > 0) t.count('WorkflowCarryOnFailures', stuck);
            });
            const states = reply.results.flatMap((r) => ('state' in r ? [r.state] : []));
            t.count('OutcomesReported', states.length);
            // The tenant's failed jobs (its dashboard and failed-jobs alarm: TENANT_METRICS.failed).
            // A job stopped on a cancel request (CANCELLED) did not fail.
            t.tenantMetrics?.(tenant, { [TENANT_METRICS.failed.name]: states.filter((s) => s === 'FAILED' || s === 'DEAD').length }, {});
            return reply;
          },
          (err) => t.error('outcomes failed', err),
        ),
  );
}

/**
 * The workflow routes (docs/workflows.md): `POST /v1/tenants/{tenant}/workflows` (201; 200 for a
 * retry with the same idempotency key and body), `GET` and `DELETE
 * /v1/tenants/{tenant}/workflows/{workflowId}` (404 `WorkflowNotFound` for an id the tenant has
 * none of).
 */
export function workflowsHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  return flushing(w, (event: APIGatewayProxyEventV2): Promise<HttpResult> => {
    const tenant = pathParam(event, 'tenant');
    const method = event.requestContext?.http?.method ?? event.routeKey?.split(' ')[0];
    const failed = (err: unknown) => t.error('workflows failed', err);
    if (method === 'POST')
      return respond(
        event,
        201,
        async () => {
          // W3C trace context (docs/tracing.md): every job of the workflow goes in the caller's trace.
          const caller = parseTraceparent(event.headers?.traceparent, event.headers?.tracestate);
          const { status, reply } = await w.workflows.submit(tenant, bodyOf(event), caller);
          t.count('WorkflowsSubmitted', status === 201 ? 1 : 0);
          t.count('WorkflowJobsSubmitted', status === 201 ? Object.keys(reply.jobs).length : 0);
          return new WithStatus(status, reply);
        },
        failed,
      );
    const workflowId = pathParam(event, 'workflowId');
    const found = <T>(reply: T | undefined): T => {
      if (reply === undefined) throw new WorkflowNotFoundError(tenant);
      return reply;
    };
    if (method === 'DELETE') return respond(event, 200, async () => found(await w.workflows.cancel(tenant, workflowId)), failed);
    return respond(event, 200, async () => found(await w.workflows.get(tenant, workflowId)), failed);
  });
}

/** `DELETE /v1/tenants/{tenant}/jobs/{jobId}`. */
export function cancelHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  const bulk = bulkCancelHandler(w, t);
  // A workflow parent's cancel may release children that run on a parent's failure (their spans).
  return flushing(w, (event: APIGatewayProxyEventV2): Promise<HttpResult> =>
    BULK_ROUTES.has(routeOf(event)?.path ?? '')
      ? bulk(event)
      : respond(
          event,
          200,
          async () => {
            const reply = await w.jobs.cancel(pathParam(event, 'tenant'), pathParam(event, 'jobId'));
            // A delivered job whose worker is asked to stop it: 202, the stop is up to the worker.
            if (reply.state === 'CANCEL_REQUESTED') {
              t.count('CancelsRequested', 1);
              return new WithStatus(202, reply);
            }
            t.count('JobsCancelled', 1);
            return reply;
          },
          (err) => t.error('cancel failed', err),
        ),
  );
}

const BULK_ROUTES = new Set(['/v1/tenants/{tenant}/jobs/cancel', '/v1/tenants/{tenant}/operations/{operationId}']);

/**
 * Bulk cancel (docs/flow-control.md): `POST /v1/tenants/{tenant}/jobs/cancel` (202 with the
 * operation's id) and `GET /v1/tenants/{tenant}/operations/{operationId}` (its progress).
 */
export function bulkCancelHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  return (event: APIGatewayProxyEventV2): Promise<HttpResult> => {
    const tenant = pathParam(event, 'tenant');
    const unexpected = (err: unknown) => t.error('bulk cancel failed', err);
    if ((event.requestContext?.http?.method ?? event.routeKey?.split(' ')[0] ?? '').toUpperCase() === 'GET')
      return respond(event, 200, () => w.operationsService.get(tenant, pathParam(event, 'operationId')), unexpected);
    return respond(
      event,
      202,
      async () => {
        const reply = await w.operationsService.cancel(tenant, bodyOf(event));
        t.count('BulkCancelsStarted', 1);
        return reply;
      },
      unexpected,
    );
  };
}

/** Log lines one check writes at most (one per missed occurrence): the metric counts them all. */
const MISSED_LINES = 20;

/** What the never-fired check answers (the rule ignores it; the local stack and tests read it). */
export interface OccurrenceAuditResult {
  readonly from: string;
  readonly through: string;
  readonly schedules: number;
  readonly occurrences: number;
  readonly missed: number;
}

/**
 * The never-fired check (docs/tracing.md#never-fired), run every 5 minutes by a rule: the
 * `MissedOccurrences` count (the alarm's metric; published only when above 0), per tenant for those with misses,
 * and a warning per missed occurrence naming it, its job and its trace.
 */
export function occurrenceAuditHandler(w: Pick<Wiring, 'auditOccurrences'>, t: Telemetry = silentTelemetry) {
  return async (): Promise<OccurrenceAuditResult> => {
    const report: AuditReport = await w.auditOccurrences();
    t.count('MissedOccurrences', report.missed.length);
    t.count('OccurrencesChecked', report.occurrences);
    const byTenant = new Map<string, number>();
    for (const m of report.missed) byTenant.set(m.tenant, (byTenant.get(m.tenant) ?? 0) + 1);
    for (const [tenant, missed] of byTenant) t.tenantMetrics?.(tenant, { MissedOccurrences: missed }, {});
    for (const m of report.missed.slice(0, MISSED_LINES))
      t.warn?.('schedule occurrence never fired', {
        tenant: m.tenant,
        schedule: m.schedule,
        occurrenceAt: isoMs(m.dueMs),
        reason: m.reason,
        jobId: m.jobId,
        traceId: m.traceId,
      });
    return {
      from: isoMs(report.fromMs),
      through: isoMs(report.throughMs),
      schedules: report.schedules,
      occurrences: report.occurrences,
      missed: report.missed.length,
    };
  };
}

/**
 * The recurring-schedule routes: `PUT`, `GET`, `DELETE /v1/tenants/{tenant}/schedules/{name}`,
 * `GET /v1/tenants/{tenant}/schedules`, `POST .../schedules/{name}/pause` and `/resume`.
 */
export function schedulesHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  // A change materialises first occurrences: their spans leave before the function returns.
  return flushing(w, scheduleRequest(w, t));
}

function scheduleRequest(w: Wiring, t: Telemetry) {
  return (event: APIGatewayProxyEventV2): Promise<HttpResult> => {
    const tenant = pathParam(event, 'tenant');
    const name = pathParam(event, 'name');
    const method = (event.requestContext?.http?.method ?? '').toUpperCase();
    const path = event.rawPath ?? '';
    const query = event.queryStringParameters ?? {};
    const unexpected = (err: unknown) => t.error('schedules failed', err);
    const service = w.schedules;
    if (!service)
      return respond(event, 500, () => Promise.reject(new Error('the schedules function has no scheduler clock configured')), unexpected);
    if (method === 'PUT')
      return respond(
        event,
        200,
        async () => {
          const caller = parseTraceparent(event.headers?.traceparent, event.headers?.tracestate);
          const { status, schedule } = await service.put(tenant, name, bodyOf(event), query, caller);
          if (!schedule.dryRun) t.count('SchedulesPut', 1);
          return new WithStatus(status, schedule);
        },
        unexpected,
      );
    if (method === 'DELETE') return respond(event, 200, () => service.delete(tenant, name), unexpected);
    if (method === 'POST')
      return respond(event, 200, () => service.setState(tenant, name, path.endsWith('/pause') ? 'DISABLED' : 'ENABLED'), unexpected);
    if (event.pathParameters?.name === undefined) return respond(event, 200, () => service.list(tenant, query), unexpected);
    return respond(event, 200, () => service.get(tenant, name), unexpected);
  };
}

/**
 * The tenant dead-letter queue routes: `GET /v1/tenants/{tenant}/dlq` (peek),
 * `POST .../dlq/redrive`, `GET .../dlq/redrive` (the move tasks), `POST .../dlq/delete`,
 * `POST .../dlq/edit` (the caller, as the admin routes name it, goes in the audit entry) and
 * `GET .../dlq/audit`.
 */
export function dlqHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  return (event: APIGatewayProxyEventV2): Promise<HttpResult> => {
    const tenant = pathParam(event, 'tenant');
    const path = event.rawPath ?? '';
    const method = (event.requestContext?.http?.method ?? '').toUpperCase();
    const unexpected = (err: unknown) => t.error('dlq failed', err);
    const service = w.deadLetters;
    if (method === 'POST' && path.endsWith('/dlq/redrive'))
      return respond(event, 200, () => service.redrive(tenant, bodyOf(event)), unexpected);
    if (method === 'GET' && path.endsWith('/dlq/redrive')) return respond(event, 200, () => service.redriveStatus(tenant), unexpected);
    if (method === 'POST' && path.endsWith('/dlq/delete'))
      return respond(event, 200, () => service.delete(tenant, bodyOf(event)), unexpected);
    if (method === 'POST' && path.endsWith('/dlq/edit'))
      return respond(event, 200, () => service.edit(tenant, bodyOf(event), callerOf(event)), unexpected);
    if (method === 'GET' && path.endsWith('/dlq/audit'))
      return respond(event, 200, () => service.audit(tenant, event.queryStringParameters ?? {}), unexpected);
    return respond(event, 200, () => service.peek(tenant, event.queryStringParameters ?? {}), unexpected);
  };
}

/**
 * The operator API (docs/tenant-controls.md): `GET /v1/admin/tenants/{tenant}`,
 * `POST .../pause`, `POST .../resume`, `PUT .../settings`. The caller (`by` in the audit trail)
 * is the IAM principal ARN API Gateway authorised, or its access key id when there is no ARN.
 */
export function adminHandler(w: Pick<Wiring, 'controlsStore' | 'tenants' | 'dispatch'>, t: Telemetry = silentTelemetry) {
  const admin = new TenantAdmin({
    controls: w.controlsStore,
    tenants: w.tenants,
    clock: w.dispatch.clock,
    log: (message, fields) => (t.info ?? t.warn)?.(message, fields),
  });
  return (event: APIGatewayProxyEventV2): Promise<HttpResult> => {
    const tenant = pathParam(event, 'tenant');
    const path = event.rawPath ?? '';
    const method = (event.requestContext?.http?.method ?? '').toUpperCase();
    const by = callerOf(event);
    const unexpected = (err: unknown) => t.error('admin failed', err);
    if (method === 'POST' && path.endsWith('/pause')) return respond(event, 200, () => admin.pause(tenant, by), unexpected);
    if (method === 'POST' && path.endsWith('/resume')) return respond(event, 200, () => admin.resume(tenant, by), unexpected);
    if (method === 'PUT' && path.endsWith('/settings'))
      return respond(event, 200, () => admin.setSettings(tenant, bodyOf(event), by), unexpected);
    return respond(event, 200, () => admin.get(tenant), unexpected);
  };
}

/** Who called: the IAM authorizer's principal ARN, else its access key id (the local stack's operator key). */
function callerOf(event: APIGatewayProxyEventV2): string {
  const iam = (event.requestContext as { authorizer?: { iam?: { userArn?: string | null; accessKey?: string | null } } } | undefined)
    ?.authorizer?.iam;
  return iam?.userArn || iam?.accessKey || 'unknown';
}

/** Table writes one ingest invocation keeps in flight (an inbound message carries up to ~250 jobs). */
const INGEST_CONCURRENCY = 32;

/**
 * The inbound queue's consumer: one conditional put per job (a record carries one or more),
 * failures reported per record so that only those come back. A malformed record fails every time
 * and so ends in the DLQ.
 */
export function ingestHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  const handle = ingestBatch(w, t);
  return w.spans
    ? async (event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>) => flushed(w, await handle(event, context))
    : handle;
}

function ingestBatch(w: Wiring, t: Telemetry) {
  return async (event: SQSEvent, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<SQSBatchResponse> => {
    const limit = limiter(INGEST_CONCURRENCY);
    const failures: string[] = [];
    const outcomes: IngestOutcome[] = [];
    const written = new Map<string, IngestedRecord[]>();
    // A row keeps its message's SentTimestamp only while its tenant has bulk cancels that may
    // still meet it (one consistent read of one item per tenant and invocation): a bulk cancel's
    // passes pass over jobs accepted after it by that time. Any other row stays the bytes (and
    // write units) it was.
    const stamps = new Map<string, Promise<boolean>>();
    const stamp = (tenant: string): Promise<boolean> => {
      let known = stamps.get(tenant);
      if (!known) {
        known = w.operations.store.hasOperations(tenant, w.ingest.clock.now() - INBOUND_MESSAGE_LIFETIME_MS);
        stamps.set(tenant, known);
      }
      return known;
    };
    let materialised = 0;
    const remaining = context?.getRemainingTimeInMillis?.() ?? INGEST_TIMEOUT_SECONDS * 1000;
    // Passes stop well before the function's timeout: a bulk cancel's passes pick up where they stopped.
    const passDeadlineMs = w.ingest.clock.now() + remaining - 8_000;
    await Promise.all(
      event.Records.map(async (r) => {
        const pass = parsePass(r.body);
        if (pass) {
          if (!(await runPassOf(w, t, r, pass, passDeadlineMs))) failures.push(r.messageId);
          return;
        }
        // A recurring schedule's clock fired: write the occurrences ahead as jobs.
        const firing = parseFiring(r.body);
        if (firing) {
          try {
            materialised += await materialiseFiring(w.recurring, firing);
          } catch (err) {
            t.error('materialising a schedule failed', err);
            failures.push(r.messageId);
            await retrySoon(w, t, r);
          }
          return;
        }
        // SQS stamps every message; a record without the stamp counts as sent now (no earlier operation applies).
        const sentAtMs = Number(r.attributes?.SentTimestamp) || w.ingest.clock.now();
        const { outcomes: done, written: jobs, error } = await ingestMessage(w.ingest, r.body, limit, { atMs: sentAtMs, stamp });
        outcomes.push(...done);
        if (jobs.length > 0) {
          const tenant = jobs[0]!.tenant;
          written.set(tenant, [...(written.get(tenant) ?? []), { messageId: r.messageId, sentAtMs, jobs, receipt: r }]);
        }
        if (error !== undefined) {
          t.error(error instanceof MalformedInboundError ? 'malformed inbound message' : 'ingest failed', error);
          // The last receive before the queue moves the message to its DLQ: leave DEAD records.
          if (
            Number(r.attributes?.ApproximateReceiveCount ?? 0) >=
            (w.config.inboundMaxReceiveCount ?? QUEUE_SETTINGS.inbound.maxReceiveCount)
          ) {
            t.count('JobsDeadLettered', await recordDeadLetters(w.ingest, r.body));
          }
          failures.push(r.messageId);
          await retrySoon(w, t, r);
        }
      }),
    );
    // After the writes: the tenants' bulk cancels created since their messages were sent settle their jobs.
    await Promise.all(
      [...written].map(async ([tenant, messages]) => {
        try {
          await settleIngested(w.operations, tenant, messages);
        } catch (err) {
          // Retried whole: a matching job must not stay on its way to delivery unsettled.
          t.error('settling bulk cancels over ingested jobs failed', err);
          for (const m of messages) {
            if (!failures.includes(m.messageId)) {
              failures.push(m.messageId);
              await retrySoon(w, t, m.receipt);
            }
          }
        }
      }),
    );
    t.count('JobsIngested', outcomes.filter((o) => o === 'created').length);
    t.count('IngestDuplicates', outcomes.filter((o) => o === 'duplicate').length);
    t.count('OccurrencesMaterialised', materialised);
    return { batchItemFailures: failures.map((id) => ({ itemIdentifier: id })) };
  };
}

/** An ingested message with the record it came in (to retry it when settling fails). */
interface IngestedRecord extends IngestedMessage {
  readonly receipt: SQSEvent['Records'][number];
}

/**
 * Runs a bulk cancel's pass; when the deadline stops it, sends the pass again (it resumes from
 * its saved progress). False when the record is to be retried.
 */
async function runPassOf(w: Wiring, t: Telemetry, r: SQSEvent['Records'][number], pass: PassMessage, deadlineMs: number): Promise<boolean> {
  try {
    if (await runPass(w.operations, pass, deadlineMs)) return true;
    const url = w.config.inboundQueueUrl;
    if (!url) throw new Error('a pass that did not finish cannot be sent on: the function has no DYNEIN_INBOUND_QUEUE_URL');
    const failed = await w.sender.sendBatch(url, [{ id: '0', body: passBody(pass) }]);
    if (failed.length > 0) throw new Error(`sending the rest of the pass failed: ${failed[0]!.message}`);
    return true;
  } catch (err) {
    t.error('a bulk cancel pass failed', err);
    await retrySoon(w, t, r);
    return false;
  }
}

/**
 * A record whose first, second or third receive failed comes back after that receive's
 * {@link INGEST_RETRY_SECONDS}, not the queue's visibility timeout (later receives wait that).
 * Best effort: should the call fail, the timeout applies.
 */
async function retrySoon(w: Wiring, t: Telemetry, r: SQSEvent['Records'][number]): Promise<void> {
  const seconds = INGEST_RETRY_SECONDS[Number(r.attributes?.ApproximateReceiveCount ?? 0) - 1];
  if (seconds === undefined || !w.inboundRetry) return;
  try {
    await w.inboundRetry(r.receiptHandle, seconds);
  } catch (err) {
    t.error("shortening a failed inbound message's visibility failed (it comes back after the queue's timeout)", err);
  }
}

/** One dispatch step for one shard group; returns before the function's own timeout. */
export function dispatchHandler(w: Wiring, t: Telemetry = silentTelemetry) {
  const handle = dispatchStepHandler(w, t);
  return w.spans
    ? async (input: DispatchStepInput, context?: Pick<Context, 'getRemainingTimeInMillis'>) => flushed(w, await handle(input, context))
    : handle;
}

function dispatchStepHandler(w: Wiring, t: Telemetry) {
  return async (input: DispatchStepInput, context?: Pick<Context, 'getRemainingTimeInMillis'>): Promise<DispatchStepResult> => {
    const remaining = context?.getRemainingTimeInMillis?.() ?? Number.POSITIVE_INFINITY;
    const result = await dispatchStep(w.dispatch, input, {
      deadlineMs: w.dispatch.clock.now() + remaining - 2_000,
      // Counted as rows are sent, not when the step returns: a busy step runs for its whole
      // execution (~90 s), and the local dashboard reads these counters live.
      onLateness: (l) => {
        t.count('JobsDispatched', l.length);
        t.values('LatenessMs', 'Milliseconds', l);
      },
      // Per tenant: one metrics line per tenant per invocation (a step runs up to a whole tick run).
      onTenants: (tenants) => {
        for (const [tenant, s] of tenants)
          t.tenantMetrics?.(
            tenant,
            { JobsDispatched: s.sent, DeliveryFailures: s.failedSends, JobsHeld: s.held, DeliveriesDeferred: s.deferred },
            { LatenessMs: s.latenessSampleMs },
          );
      },
      // The busiest concurrency keys: one line each (at most BUSIEST_KEYS a step).
      onKeys: (keys) => {
        for (const k of keys)
          t.keyMetrics?.(
            k.tenant,
            k.key,
            { KeyJobsStarted: k.started, KeySlotAsksRefused: k.refused, KeyJobsWaiting: k.waitingMax },
            { KeyWaitMs: k.waitSampleMs },
          );
      },
    });
    // Paused tenants with jobs held in this step's shards: one line each (the PausedTooLong alarm).
    for (const tenant of result.pausedTenants) t.tenantMetrics?.(tenant, { TenantPaused: 1 }, {});
    t.count('AcquireConflicts', result.conflicts);
    t.count('RowsRecovered', result.recovered);
    t.count('BacklogRows', result.backlogRows);
    t.count('LateLaneRows', result.lateRows);
    t.count('LeasesLost', result.leaseLost);
    countControlReadFailures(w, t);
    // Rows of unregistered tenants left in the table (the ParkedJobs alarm): the most one look found.
    t.count('ParkedJobs', result.parked);
    if (result.parked > 0)
      t.warn?.('jobs parked: their tenant is not registered (re-register it to deliver them)', {
        tenants: result.parkedTenants,
        rows: result.parked,
      });
    // The longest a tenant that may send has had the same first row in the hold lanes (the HeldAfterResume alarm).
    t.values('HeldAfterResumeMs', 'Milliseconds', [result.heldAfterResumeMs]);
    if (result.heldAfterResumeMs >= 60_000)
      t.warn?.('held jobs not read back although their tenant may send', {
        tenants: result.heldAfterResumeTenants,
        waitedMs: result.heldAfterResumeMs,
      });
    return result;
  };
}

/** The tick's input: what the state machine passes from its execution context. */
export interface TickInput {
  /** Execution name or id (the group-lease owner). */
  readonly executionName: string;
  /** Execution start time (RFC 3339, `$$.Execution.StartTime`). */
  readonly executionStartTime: string;
  /** How long the execution dispatches. @default 90_000 */
  readonly runMs?: number;
  /**
   * The cell this tick state machine dispatches (docs/capacity.md, "Cells"): its groups only. A
   * number, or its decimal text (the definition substitution `${Cell}`). @default 0 (every group
   * when there is one cell; an execution of a definition before cells)
   */
  readonly cell?: number | string;
}

export interface TickPlan {
  /** One Map item per dispatcher: the first dispatch step's input, and how many shards it covers. */
  readonly items: (Required<Omit<DispatchStepInput, 'group'>> & { readonly shards: number })[];
  /** The peak rate the plan was sized for, rows/s (null: unknown, one dispatcher per group). */
  readonly peakRowsPerSecond: number | null;
  readonly reason: DispatchPlan['reason'];
  /**
   * One item per group, in the shape definitions before packing read (`$.groups`, `{group}`):
   * CloudFormation updates this function before the state machine, and an execution starting in
   * between still dispatches.
   */
  readonly groups: (Omit<TickPlan['items'][number], 'groups'> & { readonly group: number })[];
}

/**
 * Plans one tick execution: it samples the table for the rows coming due during the run and
 * packs the shard groups into just enough dispatchers (core/dispatch/plan.ts), each dispatching until
 * `untilMs` (about 90 s after the execution started, so consecutive executions overlap).
 */
export function tickHandler(deps: PlanDeps & { readonly clock?: Clock }, t: Telemetry = silentTelemetry) {
  const { settings } = deps;
  return async (input: TickInput): Promise<TickPlan> => {
    const startMs = Date.parse(input.executionStartTime);
    const ownerStartMs = Number.isFinite(startMs) ? startMs : Date.now();
    const untilMs = ownerStartMs + (input.runMs ?? 90_000);
    const cell = tickCell(input.cell, settings.cells);
    const plan = await planDispatchers(deps, (deps.clock ?? systemClock).now(), untilMs, cell);
    t.count('Dispatchers', plan.dispatchers.length);
    const common = { owner: input.executionName, ownerStartMs, untilMs, idleWaitSeconds: idleWaitSeconds(settings.lookaheadMs) };
    const shards = (groups: readonly number[]) => groups.reduce((n, g) => n + shardsOfGroup(g, settings).length, 0);
    return {
      items: plan.dispatchers.map((groups) => ({ groups, ...common, shards: shards(groups) })),
      peakRowsPerSecond: Number.isFinite(plan.peakRowsPerSecond) ? Math.round(plan.peakRowsPerSecond) : null,
      reason: plan.reason,
      groups: groupsOfCell(cell, settings).map((group) => ({ group, ...common, shards: shards([group]) })),
    };
  };
}

/** The cell a tick input names, checked against the deployment's cells (absent: cell 0). */
export function tickCell(cell: TickInput['cell'], cells: number): number {
  if (cell === undefined || cell === '') return 0;
  const n = typeof cell === 'number' ? cell : /^\d+$/.test(cell) ? Number(cell) : Number.NaN;
  if (!Number.isInteger(n) || n < 0 || n >= cells)
    throw new RangeError(
      `the tick's cell must be an integer from 0 to ${cells - 1} (DYNEIN_CELLS = ${cells}), got ${JSON.stringify(cell)}`,
    );
  return n;
}
