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
