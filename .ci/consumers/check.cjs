// A CommonJS consumer of the packed package (.ci/consumer-check.sh, (d): run in the cdk init project of (e)).
const assert = require('node:assert');
const { execFileSync } = require('node:child_process');

const client = require('dynein-serverless');
const lambda = require('dynein-serverless/lambda');
const cdk = require('dynein-serverless/cdk');

for (const name of ['DyneinClient', 'Worker', 'UnrecoverableError', 'DyneinApiError', 'parseDelivery', 'OutcomeReporter']) {
  assert.equal(typeof client[name], 'function', `require('dynein-serverless').${name}`);
}
assert.equal(typeof lambda.dyneinLambdaHandler, 'function', "require('dynein-serverless/lambda').dyneinLambdaHandler");
assert.equal(typeof cdk.DyneinScheduler, 'function', "require('dynein-serverless/cdk').DyneinScheduler");
assert.equal(typeof cdk.DyneinTenant, 'function', "require('dynein-serverless/cdk').DyneinTenant");
assert.equal(client.dyneinLambdaHandler, undefined, 'the client entry must not carry the Lambda wrapper');

// One module graph: the Lambda entry uses the client entry's modules (its UnrecoverableError is the
// one a handler throws), not copies of them.
const loaded = Object.keys(require.cache).filter((f) => /[\\/]dist[\\/]client[\\/]delivery\.cjs$/.test(f));
assert.equal(loaded.length, 1, `delivery modules loaded: ${loaded}`);
assert.match(require('dynein-serverless/package.json').version, /^\d+\.\d+\.\d+/);

// Requiring the client alone loads neither Powertools nor the AWS CDK (a fresh process).
const heavy = execFileSync(process.execPath, [
  '-e',
  "require('dynein-serverless'); console.log(Object.keys(require.cache).filter((f) => /node_modules[\\\\/](@aws-lambda-powertools|aws-cdk-lib|constructs)[\\\\/]/.test(f)).join(' '))",
])
  .toString()
  .trim();
assert.equal(heavy, '', `require('dynein-serverless') loaded ${heavy}`);

// The constructs load from CommonJS; the project's Jest test (CommonJS too) synthesizes them.
assert.equal(typeof require('aws-cdk-lib').Stack, 'function');
console.log(`CommonJS consumer on Node ${process.versions.node}: ok`);
