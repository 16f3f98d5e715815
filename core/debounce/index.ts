/**
 * Debounce (docs/flow-control.md#debounce): a key's pending job, replaced by each submit until it
 * is due; its generation item says which version of its row is the job.
 */
export * from './ports.js';
export * from './submit.js';
