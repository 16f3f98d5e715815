/** Ingest: the inbound queue's messages written into the table, and its dead-letter records. */
export * from './ingest.js';
export * from './recordDeadLetters.js';
