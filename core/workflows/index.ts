/**
 * Workflows: jobs that wait for other jobs (docs/workflows.md). The submit request read and
 * checked, the submit (specs, waiting records, the workflow record, then the jobs without parents
 * handed over), a job's end carried to its descendants (release, or cancel on a failed parent), the
 * outcomes route's side (delivered or not, and the end carried on), status and cancel of a
 * workflow's job, when a waiting job becomes due, the hand-over of a job whose due time is known,
 * GET, DELETE and the listing of a workflow.
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
