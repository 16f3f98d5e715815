import type { SchedulerSettings } from './config.js';
import { QUEUE_SETTINGS } from './schema.js';

/**
 * How long after it was sent an inbound message can still reach ingest: the inbound queue keeps
 * it its retention, then its dead-letter queue keeps it the DLQ's retention, from where a redrive
 * sends it back. The deployment's own queue settings (lib/ builds the queues from the same
 * {@link QUEUE_SETTINGS}).
 */
export const INBOUND_MESSAGE_LIFETIME_MS = (QUEUE_SETTINGS.inbound.retentionSeconds + QUEUE_SETTINGS.dlqRetentionSeconds) * 1000;

/**
 * When a cancelled job's tombstone (or a dead-lettered job's record) may expire: not before its
 * message can no longer come back (the later of runAt and now, plus {@link INBOUND_MESSAGE_LIFETIME_MS}:
 * a job redriven from the inbound DLQ on its last day still meets the tombstone), and not before
 * status has shown it for `cancelRecordRetentionMs` after runAt (and after now).
 *
 * @example tombstoneExpiresAtMs(dueMs, clock.now(), settings) // ≥ max(dueMs, now) + 21 days by default
 */
export function tombstoneExpiresAtMs(
  dueMs: number,
  nowMs: number,
  settings: Pick<SchedulerSettings, 'tombstoneGraceMs' | 'cancelRecordRetentionMs'>,
): number {
  return Math.max(
    Math.max(dueMs, nowMs) + INBOUND_MESSAGE_LIFETIME_MS,
    Math.max(dueMs + settings.tombstoneGraceMs, nowMs) + settings.cancelRecordRetentionMs,
  );
}
