/** A tenant's dead-letter queue through the API: peek, redrive, delete. */
export * from './deadLetterService.js';
export * from './edits.js';
