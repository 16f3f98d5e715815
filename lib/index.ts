/**
 * `dynein-serverless/cdk`: the CDK constructs. Placeholder until the constructs' own index lands
 * (it re-exports the scheduler and the tenant construct with their props and types).
 */
export * from './dyneinScheduler.js';
export * from './tenant.js';
