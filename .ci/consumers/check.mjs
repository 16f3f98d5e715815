// An ESM consumer of the packed package (.ci/consumer-check.sh, (d): run in the cdk init project of (e)).
import assert from 'node:assert';
import { DyneinClient, UnrecoverableError, Worker } from 'dynein-serverless';
import { DyneinScheduler, DyneinTenant } from 'dynein-serverless/cdk';
import { dyneinLambdaHandler } from 'dynein-serverless/lambda';

for (const [name, value] of Object.entries({
  DyneinClient,
  UnrecoverableError,
  Worker,
  DyneinScheduler,
  DyneinTenant,
  dyneinLambdaHandler,
})) {
  assert.equal(typeof value, 'function', name);
}
// The HTTP API's contract ships beside the code.
const { readFileSync } = await import('node:fs');
const spec = readFileSync(new URL(import.meta.resolve('dynein-serverless/openapi.yaml')), 'utf8');
assert.match(spec, /^openapi: 3\.1\./m, 'dynein-serverless/openapi.yaml is the OpenAPI 3.1 document');
const root = await import('dynein-serverless');
assert.equal('dyneinLambdaHandler' in root, false, 'the client entry must not carry the Lambda wrapper');
console.log(`ESM consumer on Node ${process.versions.node}: ok`);
