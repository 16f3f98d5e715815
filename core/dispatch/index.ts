/** Dispatch: the tick's plan, the dispatch loop and its rounds (reading shards, acquiring, releasing on time), fair share, delivery limits and the groups' rests. */
export * from './acquirer.js';
export * from './adaptiveLimit.js';
export * from './deps.js';
export * from './loop.js';
export * from './parked.js';
export * from './plan.js';
export * from './releaser.js';
export * from './releaseStats.js';
export * from './rest.js';
export * from './roundReport.js';
export * from './round.js';
export * from './tenantTally.js';
export * from './tokenBucket.js';
