// The Jest test a team adds to its `cdk init` project (.ci/consumer-check.sh, project (e)).
import * as cdk from 'aws-cdk-lib/core';
import { Match, Template } from 'aws-cdk-lib/assertions';
import * as Hello from '../lib/hello-stack';

test('the stack holds the scheduler and the billing tenant, and the service may schedule', () => {
  const app = new cdk.App();
  const stack = new Hello.HelloStack(app, 'MyTestStack');
  const template = Template.fromStack(stack);
  template.hasResourceProperties('AWS::DynamoDB::GlobalTable', {
    Replicas: Match.arrayWith([Match.objectLike({ PointInTimeRecoverySpecification: { PointInTimeRecoveryEnabled: true } })]),
  });
  const runtimes = Object.values(template.findResources('AWS::Lambda::Function')).map((f) => f.Properties.Runtime);
  expect(runtimes.length).toBeGreaterThan(0);
  expect(runtimes.filter((r) => r !== 'nodejs24.x')).toEqual([]);
  template.hasResourceProperties('AWS::IAM::Policy', {
    PolicyDocument: { Statement: Match.arrayWith([Match.objectLike({ Action: 'execute-api:Invoke' })]) },
  });
});
