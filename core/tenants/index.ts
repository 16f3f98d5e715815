/** Tenants: the registry, registration, controls (pause, weight, limits) and the operator API on them. */
export * from './admin.js';
export * from './controls.js';
export * from './registration.js';
export * from './registry.js';
