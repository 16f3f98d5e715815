/**
 * Queue settings shared by the CDK constructs (lib/) and the local stack (local/): they live in
 * core/model/schema.ts (pure, so lib/ can import them without runtime code); re-exported here for the
 * local stack.
 */
export { INGEST_BATCHING_WINDOW_MS, INGEST_RETRY_SECONDS, INGEST_TIMEOUT_SECONDS, QUEUE_SETTINGS } from '../core/model/index.js';
