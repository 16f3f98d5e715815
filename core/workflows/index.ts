/** Workflows (issue #25): jobs that wait for other jobs. So far: the submit request read and checked, and when a waiting job becomes due. */
export * from './release.js';
export * from './request.js';
