/**
 * Queue settings shared by the CDK constructs (lib/) and the local stack (local/): one source
 * of truth for redrive, visibility and retention.
 */
export const QUEUE_SETTINGS = {
  /** The inbound buffer: ingest's timeout is 30 s and Lambda's event source wants six times that. */
  inbound: { visibilityTimeoutSeconds: 180, maxReceiveCount: 5, retentionSeconds: 7 * 86_400 },
  /** A tenant's destination queue; its workers extend visibility while they run. */
  tenant: { visibilityTimeoutSeconds: 30, maxReceiveCount: 5, retentionSeconds: 7 * 86_400 },
  /** Every DLQ keeps the maximum, longer than its source (a moved message keeps its timestamp). */
  dlqRetentionSeconds: 14 * 86_400,
} as const;

/**
 * The inbound event source's batching window: ingest waits up to this long to fill a batch of
 * 10, so receives, deletes and invocations are about a tenth of the jobs. Jobs through the
 * inbound queue are due at least the lookahead (5 s) ahead, so the wait costs no lateness.
 */
export const INGEST_BATCHING_WINDOW_MS = 1_000;
