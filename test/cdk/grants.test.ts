import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import * as iam from 'aws-cdk-lib/aws-iam';
import { describe, expect, it } from 'vitest';
import { DyneinScheduler } from '../../lib/dyneinScheduler.js';
import { fastApp, getAtt, render, type Json } from './support.js';

/** Actions granted to a role by the policies attached to it, with their resources rendered. */
function grants(t: Template, roleId: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const r of Object.values(t.toJSON().Resources as Record<string, { Type: string; Properties: Record<string, Json> }>)) {
    if (r.Type !== 'AWS::IAM::Policy' || !render(r.Properties.Roles).includes(roleId)) continue;
    for (const s of (r.Properties.PolicyDocument as { Statement: { Action: Json; Resource: Json }[] }).Statement) {
      for (const a of [s.Action].flat() as string[]) out.set(a, [...(out.get(a) ?? []), ...[s.Resource].flat().map((x) => render(x as Json))]);
    }
  }
  return out;
}

describe('grantConsume', () => {
  it('adds SendMessage on the DLQ only when asked', () => {
    const stack = new Stack(fastApp(), 'Grants');
    const scheduler = new DyneinScheduler(stack, 'Dynein');
    const tenant = scheduler.addTenant('alpha');
    const plain = new iam.Role(stack, 'Plain', { assumedBy: new iam.AccountRootPrincipal() });
    const withDlq = new iam.Role(stack, 'WithDlq', { assumedBy: new iam.AccountRootPrincipal() });
    tenant.grantConsume(plain);
    tenant.grantConsume(withDlq, { deadLetter: true });
    const t = Template.fromStack(stack);
    const id = (r: iam.Role) => stack.resolve((r.node.defaultChild as iam.CfnRole).logicalId) as string;
    expect(grants(t, id(plain)).has('sqs:SendMessage')).toBe(false);
    const g = grants(t, id(withDlq));
    expect(g.get('sqs:SendMessage')).toEqual([getAtt(tenant.deadLetterQueue.node.defaultChild as never, 'Arn')]);
    expect(g.get('sqs:ReceiveMessage')).toEqual([getAtt(tenant.queue.node.defaultChild as never, 'Arn')]);
  });
});
