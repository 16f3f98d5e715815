/**
 * Bulk cancel (docs/flow-control.md): the request's filter, the operation, its passes over the
 * shards, ingest's settling of jobs written after it, and the marks that count each job once.
 */
export * from './filter.js';
export * from './operations.js';
export * from './ports.js';
export * from './settle.js';
