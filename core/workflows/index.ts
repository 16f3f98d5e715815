/**
 * Workflows (issue #25): jobs that wait for other jobs. So far: the submit request read and
 * checked, when a waiting job becomes due, the stores of waiting jobs, specs and workflows, and
 * the hand-over of a job whose due time is known, and the submit (not yet on a route).
 */
export * from './handOff.js';
export * from './ports.js';
export * from './release.js';
export * from './request.js';
export * from './service.js';
