export * from './filter.js';
export * from './operations.js';
export * from './ports.js';
export * from './settle.js';
