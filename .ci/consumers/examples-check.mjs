// What the CDK examples synthesized from the packed tarball must hold (.ci/consumer-check.sh runs
// each examples/cdk-*.ts app with plain node, cdk-nag AwsSolutions inside it: a finding fails that
// run; this reads what they wrote). Usage: node examples-check.mjs <cdk.out directory> <suffix>,
// where <app>-<suffix> is each app's cloud assembly.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { deepStrictEqual, ok, strictEqual } from 'node:assert/strict';

const [outRoot, suffix] = process.argv.slice(2);
if (!outRoot || !suffix) {
  console.error('usage: node examples-check.mjs <cdk.out directory> <suffix>');
  process.exit(2);
}
const read = (dir, file) => JSON.parse(readFileSync(join(dir, file), 'utf8'));
const assembly = (app) => join(outRoot, `${app}-${suffix}`);
/** Each stack of an assembly with the stacks it depends on (asset manifests left out). */
const stacksOf = (dir) =>
  Object.fromEntries(
    Object.entries(read(dir, 'manifest.json').artifacts)
      .filter(([, a]) => a.type === 'aws:cloudformation:stack')
      .map(([id, a]) => [id, (a.dependencies ?? []).filter((d) => !d.endsWith('.assets'))]),
  );
const resources = (dir, stack) => Object.values(read(dir, `${stack}.template.json`).Resources);
const typesOf = (dir, stack) => resources(dir, stack).map((r) => r.Type);
const count = (list, value) => list.filter((x) => x === value).length;
/** cdk-nag ran in the app and found nothing. */
const nagClean = (dir) => deepStrictEqual(read(dir, 'validation-report.json').pluginReports, []);

const checks = {
  'cdk-two-stacks': () => {
    const dir = assembly('cdk-two-stacks');
    nagClean(dir);
    // The team stack depends on the scheduler stack, never the other way round.
    deepStrictEqual(stacksOf(dir), { DyneinScheduler: [], PaymentsTeam: ['DyneinScheduler'] });
    ok(!readFileSync(join(dir, 'DyneinScheduler.template.json'), 'utf8').includes('Fn::ImportValue'), 'the scheduler imports a team value');
    deepStrictEqual(read(dir, 'PaymentsTeam.template.json').Outputs ?? {}, {});
    // The tenant, its registration and the grants live in the team stack.
    const team = typesOf(dir, 'PaymentsTeam');
    strictEqual(count(team, 'AWS::SQS::Queue'), 2, 'the team stack holds its queue and DLQ');
    ok(team.includes('Custom::DyneinTenantRegistration') && team.includes('AWS::Lambda::EventSourceMapping'));
    const scheduler = typesOf(dir, 'DyneinScheduler');
    strictEqual(count(scheduler, 'AWS::SQS::Queue'), 3, 'inbound, its DLQ and the firing DLQ');
    ok(!scheduler.includes('Custom::DyneinTenantRegistration'));
  },
  'cdk-tracing': () => {
    const dir = assembly('cdk-tracing');
    nagClean(dir);
    // The functions that record spans export to the collector layer, the others not.
    const functions = resources(dir, 'TracedScheduler').filter((r) => r.Type === 'AWS::Lambda::Function');
    const traced = functions.filter((f) => f.Properties.Environment?.Variables?.DYNEIN_OTLP_ENDPOINT === 'http://localhost:4318');
    strictEqual(traced.length, 6, 'functions exporting spans');
    for (const f of traced) {
      deepStrictEqual(f.Properties.Layers, ['arn:aws:lambda:eu-west-1:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1']);
      strictEqual(f.Properties.Environment.Variables.OPENTELEMETRY_COLLECTOR_CONFIG_URI, '/opt/collector-config/config.yaml');
    }
    ok(functions.length > traced.length, 'every function traced');
  },
  'cdk-usage': () => {
    // Two stacks, neither depending on the other (the team's reads the scheduler's outputs).
    deepStrictEqual(stacksOf(assembly('cdk-usage')), { Scheduler: [], Payments: [] });
  },
};

let failed = 0;
for (const [app, check] of Object.entries(checks)) {
  try {
    check();
    console.log(`${app}: as expected`);
  } catch (err) {
    failed++;
    console.error(`${app}: ${err.message}`);
  }
}
process.exit(failed ? 1 : 0);
