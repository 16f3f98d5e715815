/** A job once submitted: status, cancel, listing, outcomes and history, and the replies they give. */
export * from './history.js';
export * from './jobsService.js';
export * from './listing.js';
export * from './replies.js';
