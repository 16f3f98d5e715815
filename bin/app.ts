/**
 * The CDK app: `npx cdk synth` / `npx cdk deploy`. Env-agnostic (the account and region come
 * from the deploying credentials); cdk-nag's AwsSolutions checks run on every synth and fail it
 * on any unacknowledged finding.
 */
import { App, Validations } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import { DyneinStack } from '../lib/stack.js';

const app = new App();
new DyneinStack(app, app.node.tryGetContext('dynein:stackName') ?? 'DyneinServerless', {
  description: 'Dynein Serverless: delayed-job scheduler (API Gateway, Lambda, DynamoDB, SQS, Step Functions Express)',
});
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
