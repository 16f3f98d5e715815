/**
 * Workflows (issue #25): jobs that wait for other jobs. So far: the submit request read and
 * checked, when a waiting job becomes due, and the store of waiting jobs.
 */
export * from './ports.js';
export * from './release.js';
export * from './request.js';
