/**
 * Workflows: jobs that wait for other jobs, not yet on a route (the API, SDK and CLI come next).
 * The submit request read and checked, the submit (specs, waiting records, the workflow record,
 * then the jobs without parents handed over), a job's end carried to its descendants (release, or
 * cancel on a failed parent), the outcomes route's side (delivered or not, and the end carried
 * on), when a waiting job becomes due, the hand-over of a job whose due time is known, and what
 * GET of a workflow shows.
 */
export * from './handOff.js';
export * from './jobs.js';
export * from './outcomes.js';
export * from './ports.js';
export * from './progress.js';
export * from './release.js';
export * from './request.js';
export * from './service.js';
export * from './view.js';
