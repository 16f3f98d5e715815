/** Workflows (issue #25): jobs that wait for other jobs. So far: the submit request, read and checked. */
export * from './request.js';
