/** Small leaf utilities: backoff, a min-heap, a concurrency limit, text cutting, JSON text with raw values, SQS body characters. */
export * from './backoff.js';
export * from './concurrencyLimit.js';
export * from './heap.js';
export * from './jsonText.js';
export * from './sqsChars.js';
export * from './text.js';
