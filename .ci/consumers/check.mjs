// An ESM consumer of the packed package (.ci/consumer-check.sh, project (d)).
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
const root = await import('dynein-serverless');
assert.equal('dyneinLambdaHandler' in root, false, 'the client entry must not carry the Lambda wrapper');
console.log(`ESM consumer on Node ${process.versions.node}: ok`);
