/**
 * bin/app.ts's settings come from the CDK context (`-c key=value` or cdk.json), validated
 * together; the app synthesizes with no tenant at all, and the demo tenant is one flag.
 */
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { appSettings, CONTEXT_KEYS, type ContextKey } from '../../lib/context.js';
import { DyneinStack } from '../../lib/stack.js';
import { fastApp, resourcesOf } from './support.js';

const from = (ctx: Record<string, unknown>) => appSettings((k: ContextKey) => ctx[k]);

describe('appSettings', () => {
  it('defaults: stack DyneinServerless, no tenant, no demo tenant, the scheduler defaults', () => {
    expect(from({})).toEqual({ stackName: 'DyneinServerless', tenants: [], demoTenant: false, scheduler: {} });
  });

  it('reads every key, from -c strings and from typed cdk.json values alike', () => {
    const s = from({
      stackName: 'Jobs',
      tenants: 'billing, payments',
      demoTenant: 'true',
      shardCount: '128',
      groupCount: 16,
      dispatcherRowsPerSecond: '0',
      lookaheadSeconds: '5',
      leaseSeconds: 30,
      maxPayloadBytes: '100000',
      tickRunSeconds: '120',
      dispatchReservedConcurrency: '34',
      tenantQueuePrefix: 'jobs',
      logLevel: 'info',
      logRetentionDays: '90',
      removalPolicy: 'destroy',
      apiName: 'jobs-api',
      alarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:oncall',
    });
    expect(s).toEqual({
      stackName: 'Jobs',
      tenants: ['billing', 'payments'],
      demoTenant: true,
      alarmTopicArn: 'arn:aws:sns:eu-west-1:123456789012:oncall',
      scheduler: {
        shardCount: 128,
        groupCount: 16,
        dispatcherRowsPerSecond: 0,
        lookahead: Duration.seconds(5),
        lease: Duration.seconds(30),
        maxPayloadBytes: 100_000,
        tickRunTime: Duration.seconds(120),
        dispatchReservedConcurrency: 34,
        tenantQueuePrefix: 'jobs',
        logLevel: 'INFO',
        logRetention: 90,
        removalPolicy: RemovalPolicy.DESTROY,
        apiName: 'jobs-api',
      },
    });
    expect(from({ tenants: ['a', 'b'] }).tenants).toEqual(['a', 'b']);
    // The capacity keys of #16 (cells, dispatcher memory, ingest concurrency, the Map's failure handling).
    expect(
      from({ cells: '2', groupCount: '80', dispatcherMemorySize: '2048', ingestMaxConcurrency: '50', dispatchMaxConsecutiveFailures: '6' })
        .scheduler,
    ).toEqual({ cells: 2, groupCount: 80, dispatcherMemorySize: 2048, ingestMaxConcurrency: 50, dispatchMaxConsecutiveFailures: 6 });
    // Every key the table documents is read (none is silently ignored).
    expect(Object.keys(CONTEXT_KEYS).sort()).toEqual([
      'alarmTopicArn',
      'apiName',
      'cells',
      'demoTenant',
      'dispatchMaxConsecutiveFailures',
      'dispatchReservedConcurrency',
      'dispatcherMemorySize',
      'dispatcherRowsPerSecond',
      'groupCount',
      'ingestMaxConcurrency',
      'leaseSeconds',
      'logLevel',
      'logRetentionDays',
      'lookaheadSeconds',
      'maxPayloadBytes',
      'removalPolicy',
      'shardCount',
      'stackName',
      'tableCapacity',
      'tableMaxReadUnits',
      'tableMaxWriteUnits',
      'tableMinReadUnits',
      'tableMinWriteUnits',
      'tableTargetUtilizationPercent',
      'tenantQueuePrefix',
      'tenants',
      'tickRunSeconds',
    ]);
  });

  it('tableCapacity: provisioned with its bounds from -c strings; onDemand; the bounds without provisioned are an error', () => {
    expect(
      from({ tableCapacity: 'provisioned', tableMaxWriteUnits: '45000', tableTargetUtilizationPercent: 80, tableMinReadUnits: '500' })
        .scheduler.tableCapacity,
    ).toEqual({ mode: 'provisioned', maxWriteUnits: 45_000, targetUtilizationPercent: 80, minReadUnits: 500 });
    expect(from({ tableCapacity: 'provisioned' }).scheduler.tableCapacity).toEqual({ mode: 'provisioned' });
    expect(from({ tableCapacity: 'onDemand' }).scheduler.tableCapacity).toEqual({ mode: 'onDemand' });
    expect(from({}).scheduler.tableCapacity).toBeUndefined();
    expect(() => from({ tableCapacity: 'reserved' })).toThrow(/tableCapacity must be onDemand or provisioned, got 'reserved'/);
    expect(() => from({ tableMaxWriteUnits: '45000' })).toThrow(/tableMaxWriteUnits apply to a provisioned table only/);
    expect(() => from({ tableCapacity: 'provisioned', tableTargetUtilizationPercent: '95' })).toThrow(
      /tableTargetUtilizationPercent must be an integer from 20 to 90/,
    );
  });

  it('throws ONE error listing every bad value, each with how to pass it', () => {
    let message = '';
    try {
      from({
        tenants: 'billing,Bad_Name,billing',
        demoTenant: 'yes',
        shardCount: 'many',
        groupCount: '801',
        logLevel: 'loud',
        logRetentionDays: '10',
        removalPolicy: 'keep',
        alarmTopicArn: 'topic',
      });
    } catch (err) {
      message = (err as Error).message;
    }
    const lines = message.split('\n').filter((l) => l.startsWith('- '));
    expect(lines).toHaveLength(9);
    for (const key of [
      'tenants',
      'demoTenant',
      'shardCount',
      'groupCount',
      'logLevel',
      'logRetentionDays',
      'removalPolicy',
      'alarmTopicArn',
    ])
      expect(message, key).toMatch(new RegExp(`^- ${key}\\b`, 'm'));
    expect(message).toContain("'Bad_Name' is not a valid tenant name");
    expect(message).toContain('billing listed twice');
    expect(message).toContain('-c shardCount=<n>');
  });
});

describe('the deployable stack from settings', () => {
  it('synthesizes with no tenant at all, and the demo tenant is one flag', () => {
    const app = fastApp();
    const bare = new DyneinStack(app, 'Bare', from({}));
    const demo = new DyneinStack(app, 'Demo', { ...from({ demoTenant: 'true', tenants: 'billing' }) });
    expect(resourcesOf(Template.fromStack(bare), 'Custom::DyneinTenantRegistration')).toEqual([]);
    expect(bare.scheduler.tenants).toEqual([]);
    expect(demo.scheduler.tenants.map((t) => t.tenantName)).toEqual(['demo', 'billing']);
    expect(Template.fromStack(bare).toJSON().Outputs).toHaveProperty('TenantQueuePrefix');
  });
});
