import { inboundMatchesId, parseInboundBody, tombstoneExpiresAtMs } from '../model/index.js';
import type { IngestDeps } from './ingest.js';

/**
 * Ingest's last attempt at an inbound message failed: the queue will move the message to its
 * dead-letter queue. Before that, each job of the message gets a small `DEAD` record at its key
 * (a conditional put: never over a row, a tombstone or a delivered marker), so that status
 * answers `DEAD_LETTERED` rather than nothing. A redrive from the dead-letter queue replaces the
 * record with the job's row. Best effort: when the table itself is failing (often why ingest
 * failed), no record is written and status answers `UNKNOWN`.
 *
 * Returns how many records were written.
 */
export async function recordDeadLetters(deps: IngestDeps, body: string): Promise<number> {
  const jobs = parseInboundBody(body);
  if (!jobs) return 0; // not a message submit wrote: no job to speak of
  const now = deps.clock.now();
  const written = await Promise.all(
    jobs.map(async (job) => {
      let id;
      try {
        id = deps.codec.parse(job.jobId);
      } catch {
        return false;
      }
      if (!inboundMatchesId(id, job)) return false;
      // Kept while the message can sit in the DLQ and come back: status answers DEAD_LETTERED
      // (not UNKNOWN) and a cancel still finds it until then.
      const expiresAt = tombstoneExpiresAtMs(job.dueMs, now, deps.settings);
      return deps.store.putDead({ shard: job.shard, dueMs: job.dueMs, jobId: job.jobId }, job.tenant, now, expiresAt).catch(() => false);
    }),
  );
  return written.filter(Boolean).length;
}
