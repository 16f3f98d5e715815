/** Recurring schedules: the API, the model, materialising occurrences, and the expression evaluator (cron, rate, at). */
export * from './audit.js';
export * from './materialise.js';
export * from './model.js';
export * from './ports.js';
export * from './service.js';
export * from './expression/index.js';
