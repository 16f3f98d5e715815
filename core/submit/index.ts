/** Submitting jobs: validation to placement, idempotency, the submit rate limit, the sends to the inbound and tenant queues. */
export * from './idempotency.js';
export * from './sendParcels.js';
export * from './submitRateLimit.js';
export * from './submitter.js';
