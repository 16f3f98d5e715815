/**
 * The table's capacity (`tableCapacity`): on demand by default (unchanged), provisioned with
 * target-tracking auto scaling on reads and writes, bad values a synth-time error naming the prop;
 * a provisioned deployable stack passes cdk-nag AwsSolutions and the offline CloudFormation
 * validator (the one `npm run validate:templates` runs).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Stack, Validations, type App } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import type * as dynamodb from 'aws-cdk-lib/aws-dynamodb';
import { CDK_APP_MODE_CONTEXT, FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT } from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
import { describe, expect, it } from 'vitest';
import { DyneinScheduler, PROVISIONED_DEFAULTS, type DyneinSchedulerProps } from '../../lib/dyneinScheduler.js';
import { DyneinStack } from '../../lib/stack.js';
import { fastApp, synthError } from './support.js';

let n = 0;
const stack = (app: App = fastApp()) => new Stack(app, `S${n++}`);

/** The scheduler table's GlobalTable resource properties. */
function tableOf(props: DyneinSchedulerProps): Record<string, any> {
  const s = stack();
  new DyneinScheduler(s, 'Dynein', props);
  const tables = Template.fromStack(s).findResources('AWS::DynamoDB::GlobalTable');
  const all = Object.values(tables);
  expect(all).toHaveLength(1);
  return (all[0] as { Properties: Record<string, any> }).Properties;
}

/** The auto scaling settings of the table: writes at the table, reads at its one replica. */
function scaling(t: Record<string, any>) {
  return {
    write: t.WriteProvisionedThroughputSettings?.WriteCapacityAutoScalingSettings,
    read: t.Replicas?.[0]?.ReadProvisionedThroughputSettings?.ReadCapacityAutoScalingSettings,
  };
}

describe('tableCapacity', () => {
  it('defaults to on demand: PAY_PER_REQUEST, no provisioned throughput or auto scaling', () => {
    for (const props of [{}, { tableCapacity: { mode: 'onDemand' } }] satisfies DyneinSchedulerProps[]) {
      const t = tableOf(props);
      expect(t.BillingMode).toBe('PAY_PER_REQUEST');
      expect(t.WriteProvisionedThroughputSettings).toBeUndefined();
      expect(JSON.stringify(t)).not.toMatch(/AutoScaling|ProvisionedThroughput/);
    }
  });

  it('provisioned: PROVISIONED with target tracking on writes and reads at the defaults (70 %)', () => {
    const t = tableOf({ tableCapacity: { mode: 'provisioned' } });
    expect(t.BillingMode).toBe('PROVISIONED');
    const { write, read } = scaling(t);
    expect(write).toEqual({
      MinCapacity: PROVISIONED_DEFAULTS.minWriteUnits,
      MaxCapacity: PROVISIONED_DEFAULTS.maxWriteUnits,
      TargetTrackingScalingPolicyConfiguration: { TargetValue: 70 },
    });
    expect(read).toEqual({
      MinCapacity: PROVISIONED_DEFAULTS.minReadUnits,
      MaxCapacity: PROVISIONED_DEFAULTS.maxReadUnits,
      TargetTrackingScalingPolicyConfiguration: { TargetValue: 70 },
    });
    // The rest of the table is as on demand: keys, PITR, TTL.
    expect(t.Replicas[0].PointInTimeRecoverySpecification).toEqual({ PointInTimeRecoveryEnabled: true });
    expect(t.TimeToLiveSpecification.Enabled).toBe(true);
  });

  it('provisioned: the given bounds and target', () => {
    const t = tableOf({
      tableCapacity: {
        mode: 'provisioned',
        minReadUnits: 500,
        maxReadUnits: 5_000,
        minWriteUnits: 2_000,
        maxWriteUnits: 60_000,
        targetUtilizationPercent: 80,
      },
    });
    const { write, read } = scaling(t);
    expect(write).toMatchObject({ MinCapacity: 2_000, MaxCapacity: 60_000, TargetTrackingScalingPolicyConfiguration: { TargetValue: 80 } });
    expect(read).toMatchObject({ MinCapacity: 500, MaxCapacity: 5_000, TargetTrackingScalingPolicyConfiguration: { TargetValue: 80 } });
  });

  it('keeps warm throughput in either mode', () => {
    const warmThroughput: dynamodb.WarmThroughput = { readUnitsPerSecond: 15_000, writeUnitsPerSecond: 40_000 };
    for (const tableCapacity of [undefined, { mode: 'provisioned' as const }]) {
      const t = tableOf({ warmThroughput, ...(tableCapacity ? { tableCapacity } : {}) });
      expect(t.WarmThroughput).toEqual({ ReadUnitsPerSecond: 15_000, WriteUnitsPerSecond: 40_000 });
    }
  });

  it('bad values: one synth-time error, a line per problem naming tableCapacity.<field>', () => {
    let message = '';
    try {
      new DyneinScheduler(stack(), 'X', {
        tableCapacity: {
          mode: 'provisioned',
          minReadUnits: 0,
          minWriteUnits: 5_000,
          maxWriteUnits: 1_000,
          maxReadUnits: 2.5,
          targetUtilizationPercent: 95,
        },
      });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message).toMatch(/^- tableCapacity\.minReadUnits must be a positive integer, got 0$/m);
    expect(message).toMatch(/^- tableCapacity\.maxReadUnits must be a positive integer, got 2\.5$/m);
    expect(message).toMatch(/^- tableCapacity\.minWriteUnits \(5000\) must not exceed tableCapacity\.maxWriteUnits \(1000\)$/m);
    expect(message).toMatch(/^- tableCapacity\.targetUtilizationPercent must be an integer from 20 to 90\b/m);
    expect(message.split('\n').filter((l) => l.startsWith('- '))).toHaveLength(4);
  });

  it('a minimum above the default maximum needs the maximum raised too', () => {
    expect(() => new DyneinScheduler(stack(), 'X', { tableCapacity: { mode: 'provisioned', minWriteUnits: 50_000 } })).toThrow(
      /tableCapacity\.minWriteUnits \(50000\) must not exceed tableCapacity\.maxWriteUnits \(40000\)/,
    );
    expect(
      () => new DyneinScheduler(stack(), 'X', { tableCapacity: { mode: 'provisioned', minWriteUnits: 50_000, maxWriteUnits: 50_000 } }),
    ).not.toThrow();
  });

  it('an unknown mode names the prop', () => {
    expect(() => new DyneinScheduler(stack(), 'X', { tableCapacity: { mode: 'reserved' } as never })).toThrow(
      /tableCapacity\.mode must be 'onDemand' or 'provisioned', got "reserved"/,
    );
  });

  it('the targets at the edges (20 and 90) are accepted', () => {
    for (const targetUtilizationPercent of [20, 90])
      expect(() => new DyneinScheduler(stack(), 'X', { tableCapacity: { mode: 'provisioned', targetUtilizationPercent } })).not.toThrow();
  });
});

describe('a provisioned deployable stack', () => {
  it('synthesizes with cdk-nag AwsSolutions and no unacknowledged finding', () => {
    const app = fastApp({ [CDK_APP_MODE_CONTEXT]: 'inmemory', [FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT]: true });
    Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
    new DyneinStack(app, 'Provisioned', { demoTenant: true, scheduler: { tableCapacity: { mode: 'provisioned' } } });
    expect(synthError(app)).toBeUndefined();
  });

  it('passes the offline CloudFormation validator (.ci/validate-templates.ts)', () => {
    const outdir = mkdtempSync(join(tmpdir(), 'dynein-provisioned-'));
    try {
      const app = fastApp({}, { outdir });
      new DyneinStack(app, 'Provisioned', { demoTenant: true, scheduler: { tableCapacity: { mode: 'provisioned' } } });
      const assembly = app.synth();
      const requireFromCdk = createRequire(createRequire(import.meta.url).resolve('aws-cdk-lib/package.json'));
      const cfv = requireFromCdk('@aws/cloudformation-validate') as {
        CompositeEngine: new () => { validateTemplate(t: unknown): { diagnostics: { severity: string; message: string }[] }; free(): void };
        TemplateFile: new (path: string) => unknown;
      };
      const engine = new cfv.CompositeEngine();
      try {
        const file = join(outdir, assembly.getStackByName('Provisioned').templateFile);
        const { diagnostics } = engine.validateTemplate(new cfv.TemplateFile(file));
        expect(diagnostics.filter((d) => d.severity === 'ERROR' || d.severity === 'FATAL')).toEqual([]);
      } finally {
        engine.free();
      }
    } finally {
      rmSync(outdir, { recursive: true, force: true });
    }
  });
});
