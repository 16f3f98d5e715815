import { Logger } from '@aws-lambda-powertools/logger';
import { injectLambdaContext } from '@aws-lambda-powertools/logger/middleware';
import { MetricUnit, Metrics } from '@aws-lambda-powertools/metrics';
import { logMetrics } from '@aws-lambda-powertools/metrics/middleware';
import middy from '@middy/core';
import type { Context } from 'aws-lambda';
import { METRICS_NAMESPACE } from '../../core/model/index.js';
import type { Telemetry } from './handlers.js';

/** The CloudWatch namespace (core/model/schema.ts, shared with the CDK dashboard and alarms). */
export const NAMESPACE = METRICS_NAMESPACE;

/** Logger, EMF metrics and the {@link Telemetry} the handler factories report to. */
export function powertools(service: string): { logger: Logger; metrics: Metrics; telemetry: Telemetry } {
  const logger = new Logger({ serviceName: `dynein-${service}` });
  const metrics = new Metrics({ namespace: NAMESPACE, serviceName: `dynein-${service}` });
  const telemetry: Telemetry = {
    count: (name, n) => {
      if (n > 0) metrics.addMetric(name, MetricUnit.Count, n);
    },
    values: (name, unit, values) => {
      for (const v of values) metrics.addMetric(name, unit === 'Milliseconds' ? MetricUnit.Milliseconds : MetricUnit.Count, v);
    },
    error: (message, err) => logger.error(message, err as Error),
    warn: (message, fields) => logger.warn(message, fields),
    info: (message, fields) => logger.info(message, fields),
    tenantMetrics: (tenant, counts, milliseconds) => publishLine({ Tenant: tenant }, counts, milliseconds),
    keyMetrics: (tenant, key, counts, milliseconds) => publishLine({ Tenant: tenant, ConcurrencyKey: key }, counts, milliseconds),
    // An empty set keeps the {service} metrics of the line; the second adds {service, name}.
    dimensionSet: (name, value) => void metrics.addDimensions({}).addDimensions({ [name]: value }),
  };
  /** One metrics line with its own dimensions (besides `service`), only when it holds a value. */
  function publishLine(
    dimensions: Readonly<Record<string, string>>,
    counts: Readonly<Record<string, number>>,
    milliseconds: Readonly<Record<string, readonly number[]>>,
  ): void {
    const m = new Metrics({ namespace: NAMESPACE, serviceName: `dynein-${service}` });
    // One dimension set {service, ...dimensions} (addDimensions would start another set).
    for (const [name, value] of Object.entries(dimensions)) m.addDimension(name, value);
    let any = false;
    for (const [name, n] of Object.entries(counts)) {
      if (n <= 0) continue;
      m.addMetric(name, MetricUnit.Count, n);
      any = true;
    }
    for (const [name, values] of Object.entries(milliseconds)) {
      for (const v of values) m.addMetric(name, MetricUnit.Milliseconds, v);
      any ||= values.length > 0;
    }
    if (any) m.publishStoredMetrics();
  }
  return { logger, metrics, telemetry };
}

/** Wraps a handler with middy: Lambda context in every log line, metrics flushed per invocation. */
export function lambda<E, R>(service: string, make: (t: Telemetry) => (event: E, context: Context) => Promise<R>) {
  const { logger, metrics, telemetry } = powertools(service);
  return middy(make(telemetry)).use(injectLambdaContext(logger)).use(logMetrics(metrics));
}
