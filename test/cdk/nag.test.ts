/**
 * cdk-nag AwsSolutions on the deployable stack (lib/stack.ts), as bin/app.ts runs it: a
 * validation plugin whose unacknowledged findings fail `app.synth()`. A deliberately insecure
 * stack is the negative control that shows the plugin runs here at all.
 */
import { Stack, Validations, type App } from 'aws-cdk-lib';
import * as sqs from 'aws-cdk-lib/aws-sqs';
import { CDK_APP_MODE_CONTEXT, FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT } from 'aws-cdk-lib/cx-api';
import { AwsSolutionsChecks } from 'cdk-nag';
import { beforeAll, expect, it } from 'vitest';
import { DyneinStack } from '../../lib/stack.js';
import { fastApp } from './support.js';

/**
 * An app with the AwsSolutions checks, as bin/app.ts adds them. In-memory mode makes a failed
 * validation throw with the report in the error (as under `NODE_ENV=test`), whatever the environment.
 */
function nagApp(): App {
  const app = fastApp({ [CDK_APP_MODE_CONTEXT]: 'inmemory', [FAIL_SYNTH_ON_VALIDATION_ERRORS_CONTEXT]: true });
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app));
  return app;
}

let app: App;
let synthError: unknown;

beforeAll(() => {
  app = nagApp();
  // With tenants (their registration function and grants), and a second stack at logLevel INFO
  // (the state machine logs ALL events there, so no acknowledgement of AwsSolutions-SF1).
  new DyneinStack(app, 'DyneinServerless', { description: 'Dynein Serverless (cdk-nag test)', demoTenant: true, tenants: ['billing'] });
  new DyneinStack(app, 'Verbose', { scheduler: { logLevel: 'INFO', dispatchReservedConcurrency: 18 } });
  // A stack with its account and region given (its wildcard ARNs name them, not pseudo parameters).
  new DyneinStack(app, 'Pinned', { env: { account: '123456789012', region: 'eu-west-1' }, tenants: ['billing'] });
  try {
    app.synth();
  } catch (err) {
    synthError = err;
  }
});

it('the deployable stack synthesizes with cdk-nag AwsSolutions and no unacknowledged finding', () => {
  expect(synthError === undefined ? undefined : String((synthError as Error).message)).toBeUndefined();
});

it('negative control: an insecure queue in the same kind of app fails the synth with its findings', () => {
  const bad = nagApp();
  const throwaway = new Stack(bad, 'Throwaway');
  // No enforceSSL and no DLQ: AwsSolutions-SQS4 and AwsSolutions-SQS3.
  new sqs.Queue(throwaway, 'Insecure', { encryption: sqs.QueueEncryption.SQS_MANAGED });
  let message = '';
  try {
    bad.synth();
  } catch (err) {
    message = (err as Error).message;
  }
  expect(message).toMatch(/AwsSolutions-SQS4/);
  expect(message).toMatch(/AwsSolutions-SQS3/);
  expect(message).toContain('Throwaway/Insecure');
});

it('every acknowledgement names a rule and gives a real reason, on a resource rather than a whole stack', () => {
  const acks: { path: string; id: string; reason: unknown; onStackOrApp: boolean }[] = [];
  for (const c of app.node.findAll()) {
    for (const m of c.node.metadata) {
      if (m.type !== Validations.ACKNOWLEDGED_RULES_METADATA_KEY) continue;
      for (const [id, reason] of Object.entries(m.data as Record<string, unknown>)) {
        acks.push({ path: c.node.path, id, reason, onStackOrApp: c === app || Stack.isStack(c) });
      }
    }
  }
  // The stack acknowledges some rules (the key rotation, the provider, ...).
  expect(acks.length).toBeGreaterThan(0);
  for (const a of acks) {
    const rule = a.id.replace(/^[A-Za-z-]+::/, ''); // 'Annotation::AwsSolutions-SMG4' → 'AwsSolutions-SMG4'
    expect(rule, `${a.path}: rule id`).toMatch(/^AwsSolutions-[A-Z]+[0-9]+(\[.+\])?$/);
    expect(typeof a.reason, `${a.path} ${a.id}: reason`).toBe('string');
    expect((a.reason as string).trim().length, `${a.path} ${a.id}: reason "${String(a.reason)}"`).toBeGreaterThanOrEqual(30);
    expect(a.onStackOrApp, `${a.path} ${a.id}: acknowledged for a whole stack`).toBe(false);
  }
});
