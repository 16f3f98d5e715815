import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as logs from 'aws-cdk-lib/aws-logs';
import { TENANT_PATTERN } from '../core/model/index.js';
import type { DyneinLogLevel, DyneinSchedulerProps, DyneinTableCapacity } from './dyneinScheduler.js';

/**
 * The context keys bin/app.ts reads (`npx cdk deploy -c tenants=billing,payments -c shardCount=128`,
 * or `"context"` in cdk.json), each with its meaning. docs/constructs.md lists the same table.
 */
export const CONTEXT_KEYS = {
  stackName: 'stack name (default DyneinServerless)',
  tenants: 'comma-separated tenant names created in the scheduler stack (default none)',
  demoTenant: 'true adds the demo tenant (default false)',
  shardCount: 'DyneinScheduler shardCount',
  groupCount: 'DyneinScheduler groupCount',
  cells: 'DyneinScheduler cells (default 1)',
  dispatcherMemorySize: 'DyneinScheduler dispatcherMemorySize, MB',
  ingestMaxConcurrency: 'DyneinScheduler ingestMaxConcurrency (default none)',
  dispatchMaxConsecutiveFailures: 'DyneinScheduler dispatchMaxConsecutiveFailures',
  dispatcherRowsPerSecond: 'DyneinScheduler dispatcherRowsPerSecond',
  lookaheadSeconds: 'DyneinScheduler lookahead, seconds',
  leaseSeconds: 'DyneinScheduler lease, seconds',
  maxPayloadBytes: 'DyneinScheduler maxPayloadBytes',
  tickRunSeconds: 'DyneinScheduler tickRunTime, seconds',
  dispatchReservedConcurrency: 'DyneinScheduler dispatchReservedConcurrency (default none)',
  tenantQueuePrefix: 'DyneinScheduler tenantQueuePrefix',
  logLevel: 'DyneinScheduler logLevel: DEBUG, INFO, WARN or ERROR',
  logRetentionDays: 'DyneinScheduler logRetention, days (a CloudWatch Logs retention value: 1, 3, 5, 7, 14, 30, ...)',
  removalPolicy: 'DyneinScheduler removalPolicy of the table and id key: retain or destroy',
  apiName: 'DyneinScheduler apiName',
  alarmTopicArn: 'SNS topic ARN for every alarm (default none)',
  tableCapacity: 'DyneinScheduler tableCapacity mode: onDemand or provisioned (default onDemand)',
  tableMinReadUnits: 'DyneinScheduler tableCapacity.minReadUnits (provisioned only)',
  tableMaxReadUnits: 'DyneinScheduler tableCapacity.maxReadUnits (provisioned only)',
  tableMinWriteUnits: 'DyneinScheduler tableCapacity.minWriteUnits (provisioned only)',
  tableMaxWriteUnits: 'DyneinScheduler tableCapacity.maxWriteUnits (provisioned only)',
  tableTargetUtilizationPercent: 'DyneinScheduler tableCapacity.targetUtilizationPercent (provisioned only)',
} as const;

export type ContextKey = keyof typeof CONTEXT_KEYS;

/** What the app builds from its context: the stack's id and DyneinStack's props. */
export interface AppSettings {
  readonly stackName: string;
  readonly tenants: string[];
  readonly demoTenant: boolean;
  readonly scheduler: Omit<DyneinSchedulerProps, 'alarmTopic'>;
  readonly alarmTopicArn?: string;
}

const RETENTION_DAYS = new Set(Object.values(logs.RetentionDays).filter((v): v is number => typeof v === 'number'));

/**
 * Reads and checks the context: throws ONE error listing every bad value and how to pass it.
 * Values come as strings from `-c key=value`, or typed from cdk.json.
 *
 * @example appSettings((k) => app.node.tryGetContext(k))
 */
export function appSettings(get: (key: ContextKey) => unknown): AppSettings {
  const problems: string[] = [];
  const raw = (k: ContextKey) => {
    const v = get(k);
    return v === undefined || v === null || v === '' ? undefined : v;
  };
  const int = (k: ContextKey, min: number, max: number): number | undefined => {
    const v = raw(k);
    if (v === undefined) return undefined;
    const n = typeof v === 'number' ? v : typeof v === 'string' && /^-?\d+$/.test(v.trim()) ? Number(v) : NaN;
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${k} must be an integer from ${min} to ${max}, got ${JSON.stringify(v)} (-c ${k}=<n>)`);
      return undefined;
    }
    return n;
  };
  const bool = (k: ContextKey): boolean | undefined => {
    const v = raw(k);
    if (v === undefined) return undefined;
    if (v === true || v === 'true') return true;
    if (v === false || v === 'false') return false;
    problems.push(`${k} must be true or false, got ${JSON.stringify(v)} (-c ${k}=true)`);
    return undefined;
  };
  const text = (k: ContextKey): string | undefined => {
    const v = raw(k);
    if (v === undefined) return undefined;
    if (typeof v !== 'string') {
      problems.push(`${k} must be a string, got ${JSON.stringify(v)}`);
      return undefined;
    }
    return v.trim();
  };

  const tenantsRaw = raw('tenants');
  let tenants: string[] = [];
  if (Array.isArray(tenantsRaw)) tenants = tenantsRaw.map(String);
  else if (typeof tenantsRaw === 'string')
    tenants = tenantsRaw
      .split(',')
      .map((t) => t.trim())
      .filter((t) => t !== '');
  else if (tenantsRaw !== undefined)
    problems.push(`tenants must be a comma-separated list of names, got ${JSON.stringify(tenantsRaw)} (-c tenants=billing,payments)`);
  for (const t of tenants)
    if (!TENANT_PATTERN.test(t))
      problems.push(
        `tenants: '${t}' is not a valid tenant name (1 to 40 lowercase letters, digits or '-', starting with a letter or digit)`,
      );
  const dup = tenants.filter((t, i) => tenants.indexOf(t) !== i);
  if (dup.length > 0) problems.push(`tenants: ${[...new Set(dup)].join(', ')} listed twice`);

  const seconds = (k: ContextKey, min: number, max: number) => {
    const n = int(k, min, max);
    return n === undefined ? undefined : Duration.seconds(n);
  };
  const logLevel = text('logLevel')?.toUpperCase();
  if (logLevel !== undefined && !['DEBUG', 'INFO', 'WARN', 'ERROR'].includes(logLevel))
    problems.push(`logLevel must be DEBUG, INFO, WARN or ERROR, got '${logLevel}' (-c logLevel=WARN)`);
  const retentionDays = int('logRetentionDays', 1, 3653);
  if (retentionDays !== undefined && !RETENTION_DAYS.has(retentionDays)) {
    problems.push(
      `logRetentionDays must be a CloudWatch Logs retention (${[...RETENTION_DAYS]
        .filter((d) => d > 0)
        .sort((a, b) => a - b)
        .join(', ')}), got ${retentionDays}`,
    );
  }
  const removal = text('removalPolicy')?.toLowerCase();
  if (removal !== undefined && removal !== 'retain' && removal !== 'destroy')
    problems.push(`removalPolicy must be retain or destroy, got '${removal}' (-c removalPolicy=retain)`);
  const alarmTopicArn = text('alarmTopicArn');
  if (alarmTopicArn !== undefined && !/^arn:aws[a-z-]*:sns:[a-z0-9-]+:\d{12}:[A-Za-z0-9_-]+$/.test(alarmTopicArn))
    problems.push(`alarmTopicArn must be an SNS topic ARN, got '${alarmTopicArn}'`);

  const capacityMode = text('tableCapacity');
  if (capacityMode !== undefined && capacityMode !== 'onDemand' && capacityMode !== 'provisioned')
    problems.push(`tableCapacity must be onDemand or provisioned, got '${capacityMode}' (-c tableCapacity=provisioned)`);
  const capacityFields = prune({
    minReadUnits: int('tableMinReadUnits', 1, 1_000_000),
    maxReadUnits: int('tableMaxReadUnits', 1, 1_000_000),
    minWriteUnits: int('tableMinWriteUnits', 1, 1_000_000),
    maxWriteUnits: int('tableMaxWriteUnits', 1, 1_000_000),
    targetUtilizationPercent: int('tableTargetUtilizationPercent', 20, 90),
  });
  if (capacityMode !== 'provisioned' && Object.keys(capacityFields).length > 0)
    problems.push(
      `${Object.keys(capacityFields)
        .map((k) => `table${k.charAt(0).toUpperCase()}${k.slice(1)}`)
        .join(', ')} apply to a provisioned table only: add -c tableCapacity=provisioned`,
    );
  const tableCapacity: DyneinTableCapacity | undefined =
    capacityMode === 'provisioned'
      ? { mode: 'provisioned', ...capacityFields }
      : capacityMode === 'onDemand'
        ? { mode: 'onDemand' }
        : undefined;
  const scheduler: AppSettings['scheduler'] = prune({
    shardCount: int('shardCount', 1, 10_000),
    groupCount: int('groupCount', 1, 800),
    cells: int('cells', 1, 20),
    dispatcherMemorySize: int('dispatcherMemorySize', 128, 10_240),
    ingestMaxConcurrency: int('ingestMaxConcurrency', 2, 1_000),
    dispatchMaxConsecutiveFailures: int('dispatchMaxConsecutiveFailures', 1, 10),
    dispatcherRowsPerSecond: int('dispatcherRowsPerSecond', 0, 1_000_000),
    lookahead: seconds('lookaheadSeconds', 1, 900),
    lease: seconds('leaseSeconds', 2, 3_600),
    maxPayloadBytes: int('maxPayloadBytes', 1, 262_144),
    tickRunTime: seconds('tickRunSeconds', 1, 300),
    dispatchReservedConcurrency: int('dispatchReservedConcurrency', 1, 10_000),
    tenantQueuePrefix: text('tenantQueuePrefix'),
    logLevel: logLevel as DyneinLogLevel | undefined,
    logRetention: retentionDays as logs.RetentionDays | undefined,
    removalPolicy: removal === undefined ? undefined : removal === 'destroy' ? RemovalPolicy.DESTROY : RemovalPolicy.RETAIN,
    apiName: text('apiName'),
    tableCapacity,
  });
  const settings: AppSettings = {
    stackName: text('stackName') ?? 'DyneinServerless',
    tenants,
    demoTenant: bool('demoTenant') ?? false,
    scheduler,
    ...(alarmTopicArn ? { alarmTopicArn } : {}),
  };
  if (problems.length > 0) throw new Error(`invalid CDK context (docs/constructs.md, "Context keys"):\n- ${problems.join('\n- ')}`);
  return settings;
}

function prune<T extends object>(o: T): T {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
}
