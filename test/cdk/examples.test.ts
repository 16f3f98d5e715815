/**
 * The CDK examples are runnable consumer apps: each is run as a program (node + tsx, which maps
 * `dynein-serverless/cdk` to lib/index.ts through tsconfig paths, as the installed package would
 * resolve it), synthesizes with cdk-nag AwsSolutions and no finding, and the two-stack app has no
 * dependency from the scheduler's stack on the team's.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import './support.js'; // builds the Lambda bundles if missing

const run = promisify(execFile);
const dirs: string[] = [];

/** Runs an example app into a fresh cloud assembly directory; returns the directory. */
async function synth(example: string): Promise<string> {
  const out = mkdtempSync(join(tmpdir(), 'dynein-example-'));
  dirs.push(out);
  await run(process.execPath, ['--import', 'tsx', `examples/${example}`], {
    env: { ...process.env, CDK_OUTDIR: out },
    maxBuffer: 16 * 1024 * 1024,
  });
  return out;
}

interface Manifest {
  artifacts: Record<string, { type: string; dependencies?: string[] }>;
}
const stacksOf = (dir: string) =>
  Object.fromEntries(
    Object.entries((JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8')) as Manifest).artifacts)
      .filter(([, a]) => a.type === 'aws:cloudformation:stack')
      .map(([id, a]) => [id, (a.dependencies ?? []).filter((d) => !d.endsWith('.assets'))]),
  );
const templateOf = (dir: string, stack: string) => readFileSync(join(dir, `${stack}.template.json`), 'utf8');

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

describe('examples/cdk-two-stacks.ts', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await synth('cdk-two-stacks.ts');
  });

  it('synthesizes both stacks (cdk-nag AwsSolutions runs in the app: a finding would fail the run)', () => {
    expect(Object.keys(stacksOf(dir)).sort()).toEqual(['DyneinScheduler', 'PaymentsTeam']);
    expect(JSON.parse(readFileSync(join(dir, 'validation-report.json'), 'utf8'))).toMatchObject({ pluginReports: [] });
  });

  it('the team stack depends on the scheduler stack, never the other way round', () => {
    const stacks = stacksOf(dir);
    expect(stacks.DyneinScheduler).toEqual([]);
    expect(stacks.PaymentsTeam).toEqual(['DyneinScheduler']);
    // No value of the team stack flows into the scheduler's template.
    expect(templateOf(dir, 'DyneinScheduler')).not.toContain('Fn::ImportValue');
    expect(JSON.parse(templateOf(dir, 'PaymentsTeam')).Outputs ?? {}).toEqual({});
  });

  it('the tenant, its registration and the grants live in the team stack', () => {
    const team = JSON.parse(templateOf(dir, 'PaymentsTeam')) as {
      Resources: Record<string, { Type: string; Properties?: Record<string, unknown> }>;
    };
    const types = Object.values(team.Resources).map((r) => r.Type);
    expect(types.filter((x) => x === 'AWS::SQS::Queue')).toHaveLength(2);
    expect(types).toContain('Custom::DyneinTenantRegistration');
    expect(types).toContain('AWS::Lambda::EventSourceMapping');
    const sched = JSON.parse(templateOf(dir, 'DyneinScheduler')) as { Resources: Record<string, { Type: string }> };
    expect(Object.values(sched.Resources).filter((r) => r.Type === 'AWS::SQS::Queue')).toHaveLength(3); // inbound, its DLQ and the firing DLQ
    expect(Object.values(sched.Resources).map((r) => r.Type)).not.toContain('Custom::DyneinTenantRegistration');
  });
});

describe('examples/cdk-tracing.ts', () => {
  it('synthesizes with cdk-nag: the functions that record spans export to the collector layer, the others not', async () => {
    const dir = await synth('cdk-tracing.ts');
    expect(JSON.parse(readFileSync(join(dir, 'validation-report.json'), 'utf8'))).toMatchObject({ pluginReports: [] });
    const template = JSON.parse(templateOf(dir, 'TracedScheduler')) as {
      Resources: Record<
        string,
        { Type: string; Properties: { Environment?: { Variables?: Record<string, unknown> }; Layers?: unknown[] } }
      >;
    };
    const functions = Object.values(template.Resources).filter((r) => r.Type === 'AWS::Lambda::Function');
    const traced = functions.filter((f) => f.Properties.Environment?.Variables?.DYNEIN_OTLP_ENDPOINT === 'http://localhost:4318');
    expect(traced).toHaveLength(6);
    for (const f of traced) {
      expect(f.Properties.Layers).toEqual(['arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1']);
      expect(f.Properties.Environment!.Variables!.OPENTELEMETRY_COLLECTOR_CONFIG_URI).toBe('/opt/collector-config/config.yaml');
    }
    expect(functions.length).toBeGreaterThan(traced.length);
  });
});

describe('examples/cdk-usage.ts', () => {
  it('synthesizes its two stacks with cdk-nag, neither depending on the other', async () => {
    const dir = await synth('cdk-usage.ts');
    expect(stacksOf(dir)).toEqual({ Scheduler: [], Payments: [] });
  });
});
