/** The shared vocabulary: settings, API errors, job ids, the wire format, the ports, the schema, shard lanes, job validation, tombstones, trace context, spans and the writers' side of rests. */
export * from './config.js';
export * from './errors.js';
export * from './jobId.js';
export * from './lanes.js';
export * from './messages.js';
export * from './ports.js';
export * from './rest.js';
export * from './schema.js';
export * from './tombstones.js';
export * from './validate.js';
export * from './traceContext.js';
export * from './spans.js';
