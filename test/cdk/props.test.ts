/**
 * Props validation: a bad DyneinScheduler throws once with every problem listed; a bad tenant
 * name throws; valid values at the edges are accepted.
 */
import { type App, Duration, Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import type { CfnStateMachine } from 'aws-cdk-lib/aws-stepfunctions';
import { describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { DyneinTenant } from '../../lib/tenant.js';
import { fastApp } from './support.js';

let n = 0;
/** A fresh stack per construction (bundling skipped: one test synthesizes to read the functions' environment). */
const stack = (app: App = fastApp()) => new Stack(app, `S${n++}`);

describe('DyneinScheduler props', () => {
  it('throws ONE error listing every problem', () => {
    let error: unknown;
    try {
      new DyneinScheduler(stack(), 'X', {
        shardCount: 0,
        groupCount: 50,
        tickRunTime: Duration.seconds(10),
        dispatchReservedConcurrency: 1,
      });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(Error);
    const message = (error as Error).message;
    // One line per problem, each naming its prop.
    for (const prop of ['shardCount', 'groupCount', 'tickRunTime', 'dispatchReservedConcurrency'])
      expect(message, prop).toMatch(new RegExp(`^- ${prop}\\b`, 'm'));
    expect(message.split('\n').filter((l) => l.startsWith('- '))).toHaveLength(4);
    expect(message).toContain("'X'");
  });

  it('names the cross-field problems too (groupCount above shardCount, lease shorter than twice the lookahead)', () => {
    expect(
      () =>
        new DyneinScheduler(stack(), 'X', { shardCount: 10, groupCount: 20, lookahead: Duration.seconds(5), lease: Duration.seconds(6) }),
    ).toThrow(/groupCount \(20\) must not exceed shardCount \(10\)[\s\S]*leaseMs \(6000\) must be at least twice lookaheadMs \(5000\)/);
  });

  it('rejects a dispatcher rate that is negative or fractional, and passes a valid one to the functions', () => {
    expect(() => new DyneinScheduler(stack(), 'X', { dispatcherRowsPerSecond: -1 })).toThrow(
      /dispatcherRowsPerSecond must be an integer from 0/,
    );
    expect(() => new DyneinScheduler(stack(), 'X', { dispatcherRowsPerSecond: 2.5 })).toThrow(/dispatcherRowsPerSecond/);
    const s = new DyneinScheduler(stack(), 'X', { dispatcherRowsPerSecond: 0 });
    const env = Template.fromStack(Stack.of(s)).findResources('AWS::Lambda::Function');
    const values = Object.values(env).map(
      (f) =>
        (f as { Properties: { Environment?: { Variables?: Record<string, string> } } }).Properties.Environment?.Variables
          ?.DYNEIN_DISPATCHER_ROWS_PER_SECOND,
    );
    expect(values.filter((v) => v !== undefined).length).toBeGreaterThanOrEqual(6);
    expect(new Set(values.filter((v) => v !== undefined))).toEqual(new Set(['0']));
  });

  it('tracing: the functions that record spans (no other) export to the endpoint, with the layers and environment given', () => {
    expect(() => new DyneinScheduler(stack(), 'X', { tracing: { otlpEndpoint: 'localhost:4318' } })).toThrow(
      /tracing\.otlpEndpoint must be an http\(s\) URL/,
    );
    const st = stack();
    const layer = lambda.LayerVersion.fromLayerVersionArn(
      st,
      'Adot',
      'arn:aws:lambda:us-east-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1',
    );
    new DyneinScheduler(st, 'X', {
      tracing: {
        otlpEndpoint: 'http://localhost:4318',
        layers: [layer],
        environment: { OPENTELEMETRY_COLLECTOR_CONFIG_URI: '/var/task/collector.yaml' },
      },
    });
    type Fn = { Properties: { Environment?: { Variables?: Record<string, string> }; Layers?: string[] } };
    const functions = Object.entries(Template.fromStack(st).findResources('AWS::Lambda::Function')) as [string, Fn][];
    const traced = functions.filter(([, f]) => f.Properties.Environment?.Variables?.DYNEIN_OTLP_ENDPOINT !== undefined);
    expect(traced.map(([id]) => /^X(Submit|Ingest|Dispatch|Schedules|Workflows|Cancel)[0-9A-F]{8}$/.exec(id)?.[1]).sort()).toEqual([
      'Cancel',
      'Dispatch',
      'Ingest',
      'Schedules',
      'Submit',
      'Workflows',
    ]);
    for (const [, f] of traced) {
      expect(f.Properties.Environment!.Variables!.DYNEIN_OTLP_ENDPOINT).toBe('http://localhost:4318');
      expect(f.Properties.Environment!.Variables!.OPENTELEMETRY_COLLECTOR_CONFIG_URI).toBe('/var/task/collector.yaml');
      expect(f.Properties.Layers).toEqual([layer.layerVersionArn]);
    }
    const untraced = new DyneinScheduler(stack(), 'Y');
    const none = Object.values(Template.fromStack(Stack.of(untraced)).findResources('AWS::Lambda::Function')) as Fn[];
    expect(none.filter((f) => f.Properties.Environment?.Variables?.DYNEIN_OTLP_ENDPOINT !== undefined)).toEqual([]);
  });

  it('rejects a dispatch reserved concurrency that is not a whole number', () => {
    expect(() => new DyneinScheduler(stack(), 'X', { dispatchReservedConcurrency: 17.5 })).toThrow(/dispatchReservedConcurrency/);
  });

  it('accepts the defaults and every tickRunTime the validator allows (60 to 240 s)', () => {
    const app = fastApp();
    expect(() => new DyneinScheduler(stack(app), 'X')).not.toThrow();
    for (const s of [60, 90, 150, 200, 240]) {
      let scheduler: DyneinScheduler | undefined;
      expect(() => (scheduler = new DyneinScheduler(stack(app), 'X', { tickRunTime: Duration.seconds(s) })), `${s} s`).not.toThrow();
      // The execution may run that long: its timeout leaves room after the run, within Express's 300 s.
      const definition = JSON.parse((scheduler!.stateMachine.node.defaultChild as CfnStateMachine).definitionString as string) as {
        TimeoutSeconds: number;
      };
      expect(definition.TimeoutSeconds, `${s} s`).toBeGreaterThan(s);
      expect(definition.TimeoutSeconds, `${s} s`).toBeLessThanOrEqual(300);
    }
    expect(() => new DyneinScheduler(stack(app), 'X', { tickRunTime: Duration.seconds(241) })).toThrow(/tickRunTime/);
    expect(() => new DyneinScheduler(stack(app), 'X', { tickRunTime: Duration.seconds(59) })).toThrow(/tickRunTime/);
  });
});

describe('DyneinTenant props', () => {
  const attributes = {
    tableName: 'table',
    tableArn: 'arn:aws:dynamodb:eu-west-1:111111111111:table/table',
    httpApiId: 'api',
    senderRoleArns: ['arn:aws:iam::111111111111:role/submit', 'arn:aws:iam::111111111111:role/dispatch'],
    tenantQueuePrefix: 'Dynein',
    registrationServiceToken: 'arn:aws:lambda:eu-west-1:111122223333:function:dynein-register',
  };
  const tenant = (tenantName: string, extra: { maxReceiveCount?: number } = {}) =>
    new DyneinTenant(stack(), 'T', { scheduler: DyneinScheduler.fromAttributes(attributes), tenantName, ...extra });

  it.each(['', 'Billing', '-billing', 'billing_team', 'billing.team', 'a'.repeat(41), 'bill ing', 'billing/x'])(
    'rejects tenant name %j',
    (name) => {
      expect(() => tenant(name)).toThrow(/tenantName/);
    },
  );

  it.each(['a', '0', 'billing', 'team-42', 'a'.repeat(40)])('accepts tenant name %j', (name) => {
    expect(() => tenant(name)).not.toThrow();
  });

  it('lists a bad name and a bad maxReceiveCount together, and needs the scheduler senders', () => {
    expect(() => tenant('Bad_Name', { maxReceiveCount: 0 })).toThrow(/tenantName[\s\S]*maxReceiveCount/);
    expect(
      () =>
        new DyneinTenant(stack(), 'T', {
          scheduler: DyneinScheduler.fromAttributes({ ...attributes, senderRoleArns: [] }),
          tenantName: 'ok',
        }),
    ).toThrow(/senderRoleArns/);
  });
});
