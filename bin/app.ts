/**
 * The CDK app: `npx cdk synth` / `npx cdk deploy`. Env-agnostic (the account and region come
 * from the deploying credentials). Tenants and settings come from the CDK context, never from
 * code edits: `npx cdk deploy -c tenants=billing,payments -c demoTenant=true -c shardCount=128`
 * (every key: docs/constructs.md, "Context keys"). cdk-nag's AwsSolutions checks run on every
 * synth and fail it on any unacknowledged finding.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { appSettings, type ContextKey } from '../lib/context.js';
import { DyneinStack } from '../lib/stack.js';

const app = new App();
let settings;
try {
  settings = appSettings((key: ContextKey) => app.node.tryGetContext(key));
} catch (err) {
  console.error((err as Error).message);
  process.exit(1);
}
new DyneinStack(app, settings.stackName, {
  description: 'Dynein Serverless: delayed-job scheduler (API Gateway, Lambda, DynamoDB, SQS, Step Functions Express)',
  tenants: settings.tenants,
  demoTenant: settings.demoTenant,
  scheduler: settings.scheduler,
  alarmTopicArn: settings.alarmTopicArn,
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
