/**
 * docs/tracing.md's CDK example as a runnable app (CI synthesizes it from the packed tarball with
 * cdk-nag: .ci/consumers/examples-check.mjs; test/client/docs.test.ts checks the page's blocks
 * appear here line for line): the scheduler exporting its spans to the ADOT collector layer.
 *
 *   node --import tsx examples/cdk-tracing.ts
 */
import { App, Stack, Validations, type StackProps } from 'aws-cdk-lib';
import { AwsSolutionsChecks } from 'cdk-nag';
import type { Construct } from 'constructs';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { DyneinScheduler } from 'dynein-serverless/cdk';

/** The scheduler's stack, its functions exporting spans to the collector layer. */
export class TracedSchedulerStack extends Stack {
  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);
    // The ADOT collector as a Lambda layer: it listens on localhost:4318 and forwards to X-Ray or
    // any OTLP backend, as its configuration file says.
    const adot = lambda.LayerVersion.fromLayerVersionArn(
      this,
      'Adot',
      `arn:aws:lambda:${this.region}:901920570463:layer:aws-otel-collector-arm64-ver-0-117-0:1`,
    );
    new DyneinScheduler(this, 'Scheduler', {
      tracing: {
        otlpEndpoint: 'http://localhost:4318',
        layers: [adot],
        environment: { OPENTELEMETRY_COLLECTOR_CONFIG_URI: '/opt/collector-config/config.yaml' },
      },
    });
  }
}

const app = new App();
new TracedSchedulerStack(app, 'TracedScheduler', { env: { region: 'eu-west-1' } });
Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
app.synth();
