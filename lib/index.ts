/**
 * `dynein-serverless/cdk`: the constructs. Nothing here loads the Lambda runtime code or the AWS
 * SDK: the functions deploy pre-built bundles (`dist/lambdas/<name>`, built by `npm run build`).
 */
export {
  DyneinScheduler,
  PROVISIONED_DEFAULTS,
  type DyneinLogLevel,
  type DyneinSchedulerProps,
  type DyneinTableCapacity,
  type DyneinTracing,
  type FunctionName,
} from './dyneinScheduler.js';
export { DyneinTenant, type DyneinTenantProps, type IDyneinScheduler, type SchedulerAttributes } from './tenant.js';
export { SchedulerMonitoring, type SchedulerFiringMetric, type SchedulerMonitoringProps } from './monitoring.js';
export { DyneinStack, type DyneinStackProps } from './stack.js';
export { appSettings, CONTEXT_KEYS, type AppSettings, type ContextKey } from './context.js';
export { MAX_PREFIX_LENGTH } from './naming.js';
