/**
 * Names the CDK constructs (lib/), the Lambda code, the adapters and the local stack share: one
 * source of truth, pure data (no AWS SDK, no aws-cdk-lib), so that lib/ can import it without
 * pulling runtime code.
 */

/** The scheduler table's key schema. Attribute `expiresAt` is the TTL attribute. */
export const TABLE_KEY = {
  partitionKey: 'pk',
  sortKey: 'sk',
  ttlAttribute: 'expiresAt',
} as const;

/**
 * The key of a tenant's registry item (`pk = tenant#<name>`, `sk = tenant`). Its attributes are
 * {@link TENANT_ATTRIBUTES}.
 */
export function tenantItemKey(name: string): { pk: string; sk: string } {
  return { pk: `tenant#${name}`, sk: 'tenant' };
}

/** Attributes of a tenant's registry item besides its key. */
export const TENANT_ATTRIBUTES = {
  queueUrl: 'queueUrl',
  dlqUrl: 'dlqUrl',
  /** The stack that registered the tenant (CloudFormation stack id): another stack may not take the name over. */
  owner: 'owner',
  /** The registration resource that wrote the item (stack id / logical id): only it removes the item. */
  registration: 'registration',
  /** History on: outcome records' retention, ms (a number); absent when history is off (docs/history.md). */
  historyTtlMs: 'historyTtlMs',
} as const;

/** The ingest function's timeout, seconds (the inbound visibility timeout derives from it). */
export const INGEST_TIMEOUT_SECONDS = 30;

/**
 * The inbound event source's batching window: ingest waits up to this long to fill a batch of
 * 10, so receives, deletes and invocations are about a tenth of the jobs. Jobs through the
 * inbound queue are due at least the lookahead (5 s) ahead, so the wait costs no lateness.
 */
export const INGEST_BATCHING_WINDOW_MS = 1_000;

/**
 * How soon an inbound message whose ingest failed (a throttle, a timeout: most failures are
 * transient) comes back, by the receive that failed: ingest shortens its visibility to 5 s after
 * the first, 30 s after the second and 90 s after the third, so that its jobs are late by
 * seconds, not by the queue's visibility timeout (a fault injected into a third of the calls
 * failed some message twice in most runs of the local fault test: three minutes late). Later
 * failures wait the full timeout; six receives span about 8 minutes of an outage before the DLQ.
 */
export const INGEST_RETRY_SECONDS: readonly number[] = [5, 30, 90];

/** Settings of the queues the constructs and the local stack create: redrive, visibility, retention. */
export const QUEUE_SETTINGS = {
  /**
   * The inbound buffer. Lambda's guidance for an SQS event source: a visibility timeout of at least
   * six times the function's timeout plus the batching window (6 × 30 s + 1 s = 181 s). A message
   * whose ingest failed comes back sooner the first three times ({@link INGEST_RETRY_SECONDS});
   * later receives wait the timeout: six receives span about 8 minutes of an outage before the DLQ.
   */
  inbound: {
    visibilityTimeoutSeconds: 6 * INGEST_TIMEOUT_SECONDS + Math.ceil(INGEST_BATCHING_WINDOW_MS / 1000),
    maxReceiveCount: 6,
    retentionSeconds: 7 * 86_400,
  },
  /** A tenant's destination queue; its workers extend visibility while they run. */
  tenant: { visibilityTimeoutSeconds: 30, maxReceiveCount: 5, retentionSeconds: 7 * 86_400 },
  /** Every DLQ keeps the maximum, longer than its source (a moved message keeps its timestamp). */
  dlqRetentionSeconds: 14 * 86_400,
} as const;

/**
 * Lambda's limit on a synchronous invocation's event (6 MB, 6,291,456 bytes): API Gateway's HTTP
 * API takes bodies up to 10 MB, but an event above this never reaches the function. The body is a
 * JSON string inside the event, so escaping can nearly double it (every `"` and `\`).
 */
export const LAMBDA_SYNC_PAYLOAD_BYTES = 6_291_456;

/** The CloudWatch namespace of the functions' metrics (Powertools EMF). */
export const METRICS_NAMESPACE = 'DyneinServerless';

/** The metric `service` dimension of a function's metrics. */
export function metricService(fn: string): string {
  return `dynein-${fn}`;
}

/**
 * The per-tenant metrics (dimensions `service` and `Tenant`), by what they show: the function
 * that emits each (its `service`) and the metric name. The dashboard and the tenant construct's
 * alarms read them; docs/operating.md has their cost.
 * - `scheduled`: jobs accepted by submit (a second dimension set on submit's own metrics line);
 * - `delivered`, `lateness`, `deliveryFailures`: dispatch, one line per tenant per invocation
 *   (lateness a uniform sample of at most 100 values per invocation);
 * - `failed`: jobs whose worker reported a failure (tenants with history on: the outcomes route,
 *   served by the status function);
 * - `held`, `deferred`, `paused` (dispatch) and `throttled` (submit): tenant controls.
 */
export const TENANT_METRICS = {
  scheduled: { fn: 'submit', name: 'JobsSubmitted' },
  delivered: { fn: 'dispatch', name: 'JobsDispatched' },
  lateness: { fn: 'dispatch', name: 'LatenessMs' },
  deliveryFailures: { fn: 'dispatch', name: 'DeliveryFailures' },
  failed: { fn: 'status', name: 'JobsFailed' },
  // Tenant controls (docs/tenant-controls.md): jobs held while paused, sends waiting for the
  // delivery limit, a line per dispatch step while paused with jobs held, refused submits.
  held: { fn: 'dispatch', name: 'JobsHeld' },
  deferred: { fn: 'dispatch', name: 'DeliveriesDeferred' },
  paused: { fn: 'dispatch', name: 'TenantPaused' },
  throttled: { fn: 'submit', name: 'SubmitsThrottled' },
} as const;
