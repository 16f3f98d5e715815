/**
 * The tenant registration custom resource (lambdas/register.ts) against dynalite: a stack registers
 * a name that is free; another stack cannot take it over (the deploy fails with a message naming
 * the owner, and nothing is written); a delete removes only what the same resource wrote; a legacy
 * item without an owner is adopted. The CloudFormation response is captured instead of PUT to S3.
 */
import { GetItemCommand } from '@aws-sdk/client-dynamodb';
import type { CloudFormationCustomResourceEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { registrationRequest, type RegistrationProperties } from '../../core/registration.js';
import { tenantItemKey } from '../../core/schema.js';
import { registerHandler, type RegisterResponse } from '../../lambdas/register.js';
import { startEmulators, type Emulators } from '../support/emulators.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const STACK_A = 'arn:aws:cloudformation:eu-west-1:123456789012:stack/TeamA/11111111-aaaa';
const STACK_B = 'arn:aws:cloudformation:eu-west-1:123456789012:stack/TeamB/22222222-bbbb';

function setup(table: string) {
  const sent: { url: string; body: RegisterResponse }[] = [];
  const handler = registerHandler({
    dynamo: em.dynamo,
    respond: async (url, body) => void sent.push({ url, body: JSON.parse(body) as RegisterResponse }),
  });
  let n = 0;
  const event = (
    type: 'Create' | 'Update' | 'Delete',
    stackId: string,
    props: Partial<RegistrationProperties> = {},
    extra: { logicalId?: string; physicalId?: string } = {},
  ): CloudFormationCustomResourceEvent<RegistrationProperties> => {
    const ResourceProperties = {
      ServiceToken: 'arn:fn',
      TableName: table,
      TenantName: 'payments',
      QueueUrl: `https://sqs/${stackId.split('/')[1]}-q`,
      DlqUrl: `https://sqs/${stackId.split('/')[1]}-dlq`,
      ...props,
    };
    const common = {
      ServiceToken: 'arn:fn',
      ResponseURL: `https://cfn-response/${n++}`,
      StackId: stackId,
      RequestId: `req-${n}`,
      LogicalResourceId: extra.logicalId ?? 'PaymentsRegistration',
      ResourceType: 'Custom::DyneinTenantRegistration',
      ResourceProperties,
    };
    if (type === 'Create') return { ...common, RequestType: 'Create' };
    if (type === 'Update')
      return {
        ...common,
        RequestType: 'Update',
        PhysicalResourceId: extra.physicalId ?? 'dynein-tenant-payments',
        OldResourceProperties: ResourceProperties,
      };
    return { ...common, RequestType: 'Delete', PhysicalResourceId: extra.physicalId ?? 'dynein-tenant-payments' };
  };
  const item = async () => {
    const k = tenantItemKey('payments');
    return (await em.dynamo.send(new GetItemCommand({ TableName: table, Key: { pk: { S: k.pk }, sk: { S: k.sk } }, ConsistentRead: true })))
      .Item;
  };
  return { handler, event, item, sent };
}

describe('tenant registration', () => {
  it('registers a free name, refuses another stack’s takeover with a clear message, and never deletes what it does not own', async () => {
    const { handler, event, item, sent } = setup(await em.createTable());

    const created = await handler(event('Create', STACK_A));
    expect(created).toMatchObject({ Status: 'SUCCESS', PhysicalResourceId: 'dynein-tenant-payments' });
    expect(sent.at(-1)).toEqual({ url: expect.stringMatching(/^https:\/\/cfn-response\//), body: created });
    expect(await item()).toMatchObject({
      queueUrl: { S: 'https://sqs/TeamA-q' },
      owner: { S: STACK_A },
      registration: { S: `${STACK_A}/PaymentsRegistration` },
    });

    // Another stack's tenant of the same name: FAILED, the message names the owner and the fix; the item is untouched.
    const refused = await handler(event('Create', STACK_B));
    expect(refused.Status).toBe('FAILED');
    expect(refused.Reason).toContain(`Dynein tenant 'payments' is already registered by ${STACK_A}`);
    expect(refused.Reason).toMatch(/choose another tenantName, or remove the tenant from that stack/);
    expect((await item())?.queueUrl?.S).toBe('https://sqs/TeamA-q');
    // ... and the same on an update of B's existing resource.
    expect((await handler(event('Update', STACK_B))).Status).toBe('FAILED');
    // CloudFormation rolls B back: the delete of B's failed resource leaves A's registration.
    expect((await handler(event('Delete', STACK_B, {}, { physicalId: refused.PhysicalResourceId }))).Status).toBe('SUCCESS');
    expect((await item())?.owner?.S).toBe(STACK_A);

    // A updates its own registration (a new queue URL).
    expect((await handler(event('Update', STACK_A, { QueueUrl: 'https://sqs/TeamA-q2' }))).Status).toBe('SUCCESS');
    expect((await item())?.queueUrl?.S).toBe('https://sqs/TeamA-q2');

    // A moves the registration to another logical id: the new one is created first, then the old one
    // deleted; the delete must not remove the item the new resource wrote.
    expect((await handler(event('Create', STACK_A, {}, { logicalId: 'MovedRegistration' }))).Status).toBe('SUCCESS');
    expect((await handler(event('Delete', STACK_A))).Status).toBe('SUCCESS');
    expect((await item())?.registration?.S).toBe(`${STACK_A}/MovedRegistration`);

    // Removing the tenant from A deletes it; the name is then free for B.
    expect((await handler(event('Delete', STACK_A, {}, { logicalId: 'MovedRegistration' }))).Status).toBe('SUCCESS');
    expect(await item()).toBeUndefined();
    expect((await handler(event('Create', STACK_B))).Status).toBe('SUCCESS');
    expect((await item())?.owner?.S).toBe(STACK_B);
  });

  it('adopts a registration written before owners were recorded', async () => {
    const table = await em.createTable();
    const { handler, event, item } = setup(table);
    const { DynamoJobStore } = await import('../../adapters/dynamoJobStore.js');
    await new DynamoJobStore(table, em.dynamo).putTenant({ name: 'payments', queueUrl: 'https://sqs/old', dlqUrl: 'https://sqs/old-dlq' });
    expect((await handler(event('Update', STACK_A))).Status).toBe('SUCCESS');
    expect((await item())?.owner?.S).toBe(STACK_A);
  });

  it('a malformed request fails with every problem named (and still answers CloudFormation)', async () => {
    const { handler, event, sent } = setup(await em.createTable());
    const r = await handler(event('Create', STACK_A, { TenantName: 'Bad_Name', QueueUrl: '' }));
    expect(r.Status).toBe('FAILED');
    expect(r.Reason).toMatch(/QueueUrl must be a non-empty string; TenantName 'Bad_Name' must match/);
    expect(sent).toHaveLength(1);
    expect(() => registrationRequest(undefined)).toThrow(/TableName.*TenantName.*QueueUrl.*DlqUrl/);
  });
});
