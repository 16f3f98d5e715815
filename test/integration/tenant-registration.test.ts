/**
 * The tenant registration custom resource (lambdas/register.ts) against dynalite: a stack registers
 * a name that is free; another stack cannot take it over (the deploy fails with a message naming
 * the owner, and nothing is written); a delete removes only what the same resource wrote; a legacy
 * item without an owner is adopted; a registration naming queues that are not the tenant's own is
 * refused, and such an item written into the table by anyone else is never used (dispatch, submit
 * and redrive treat the tenant as not registered). The CloudFormation response is captured instead
 * of PUT to S3.
 */
import { randomUUID } from 'node:crypto';
import { GetItemCommand, QueryCommand } from '@aws-sdk/client-dynamodb';
import { CreateQueueCommand, GetQueueAttributesCommand } from '@aws-sdk/client-sqs';
import type { CloudFormationCustomResourceEvent, SQSEvent } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { resolveSettings } from '../../core/model/config.js';
import {
  registrationRequest,
  TENANT_PLACEHOLDER,
  type RegistrationProperties,
  type TenantQueueUrls,
} from '../../core/tenants/registration.js';
import { tenantItemKey } from '../../core/model/schema.js';
import { registerConfig, registerHandler, type RegisterDeps, type RegisterResponse } from '../../lambdas/register.js';
import type { LambdaConfig } from '../../lambdas/runtime/config.js';
import { dispatchHandler, ingestHandler } from '../../lambdas/runtime/handlers.js';
import { wire } from '../../lambdas/runtime/wiring.js';
import { startSqsEventSource } from '../../local/sqsEventSource.js';
import { startEmulators, type Emulators } from '../support/emulators.js';

let em: Emulators;
beforeAll(async () => {
  em = await startEmulators();
});
afterAll(async () => em?.stop());

const STACK_A = 'arn:aws:cloudformation:eu-west-1:123456789012:stack/TeamA/11111111-aaaa';
const STACK_B = 'arn:aws:cloudformation:eu-west-1:123456789012:stack/TeamB/22222222-bbbb';

function setup(table: string, config: Omit<RegisterDeps, 'dynamo'> = {}) {
  const sent: { url: string; body: RegisterResponse }[] = [];
  const handler = registerHandler({
    ...config,
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

/** Queues named as a deployment names them (`<prefix>-t-<tenant>`, `<prefix>-d-<tenant>`), and their URL templates. */
async function ownQueues(tenants: readonly string[]): Promise<{ urls: TenantQueueUrls; of: Record<string, TenantQueueUrls> }> {
  const prefix = `p${randomUUID().slice(0, 8)}`;
  const of: Record<string, TenantQueueUrls> = {};
  for (const t of tenants) {
    const dlqUrl = (await em.sqs.send(new CreateQueueCommand({ QueueName: `${prefix}-d-${t}` }))).QueueUrl!;
    const queueUrl = (await em.sqs.send(new CreateQueueCommand({ QueueName: `${prefix}-t-${t}` }))).QueueUrl!;
    of[t] = { queueUrl, dlqUrl };
  }
  const first = of[tenants[0]!]!;
  const urls = {
    queueUrl: first.queueUrl.replace(`${prefix}-t-${tenants[0]}`, `${prefix}-t-${TENANT_PLACEHOLDER}`),
    dlqUrl: first.dlqUrl.replace(`${prefix}-d-${tenants[0]}`, `${prefix}-d-${TENANT_PLACEHOLDER}`),
  };
  return { urls, of };
}

async function depth(queueUrl: string): Promise<number> {
  const a = (await em.sqs.send(new GetQueueAttributesCommand({ QueueUrl: queueUrl, AttributeNames: ['All'] }))).Attributes ?? {};
  return Number(a.ApproximateNumberOfMessages ?? 0) + Number(a.ApproximateNumberOfMessagesNotVisible ?? 0);
}

describe('a tenant uses only its own queues', () => {
  it('a registration naming another tenant’s queue, or another table, is refused with a one-line reason and writes nothing', async () => {
    const table = await em.createTable();
    const { urls, of } = await ownQueues(['payments', 'billing']);
    const { handler, event, item } = setup(table, { tableName: table, queues: urls });
    const own = { QueueUrl: of.payments!.queueUrl, DlqUrl: of.payments!.dlqUrl };

    const stolen = await handler(event('Create', STACK_A, { ...own, QueueUrl: of.billing!.queueUrl }));
    expect(stolen.Status).toBe('FAILED');
    expect(stolen.Reason).toContain(`tenant 'payments' names queue ${of.billing!.queueUrl}, not its own queue ${of.payments!.queueUrl}`);
    expect(stolen.Reason).not.toContain('\n');
    expect(await item()).toBeUndefined();
    // Another account's or region's queue of the same name: refused alike.
    const elsewhere = await handler(
      event('Create', STACK_A, {
        ...own,
        DlqUrl: `https://sqs.eu-west-1.amazonaws.com/999999999999/${of.payments!.dlqUrl.split('/').pop()}`,
      }),
    );
    expect(elsewhere.Reason).toMatch(/names DLQ https:\/\/sqs\.eu-west-1\.amazonaws\.com\/999999999999\/.*, not its own DLQ/);
    expect(await item()).toBeUndefined();
    const otherTable = await handler(event('Create', STACK_A, { ...own, TableName: 'someone-elses-table' }));
    expect(otherTable.Reason).toMatch(/TableName 'someone-elses-table' is not this scheduler's table/);

    // Its own queues: registered; an update pointing elsewhere is refused and leaves the item as it was.
    expect((await handler(event('Create', STACK_A, own))).Status).toBe('SUCCESS');
    const update = await handler(event('Update', STACK_A, { ...own, QueueUrl: of.billing!.queueUrl }));
    expect(update.Status).toBe('FAILED');
    expect((await item())?.queueUrl?.S).toBe(of.payments!.queueUrl);
    // A delete always works (no URL check on the way out).
    expect((await handler(event('Delete', STACK_A, { ...own, QueueUrl: of.billing!.queueUrl }))).Status).toBe('SUCCESS');
    expect(await item()).toBeUndefined();
  });

  it('the deployed function without its configuration fails every request, naming what is missing', async () => {
    const config = registerConfig({ DYNEIN_TABLE: 't' });
    expect(config.misconfigured).toMatch(/queueUrl must be an http\(s\) URL naming \{tenant\}/);
    const { handler, event } = setup(await em.createTable(), config);
    const r = await handler(event('Create', STACK_A));
    expect(r.Status).toBe('FAILED');
    expect(r.Reason).toMatch(/misconfigured/);
    expect(
      registerConfig({
        DYNEIN_TABLE: 't',
        DYNEIN_TENANT_QUEUE_URL: 'https://q/a-t-{tenant}',
        DYNEIN_TENANT_DLQ_URL: 'https://q/a-d-{tenant}',
      }),
    ).toEqual({ tableName: 't', queues: { queueUrl: 'https://q/a-t-{tenant}', dlqUrl: 'https://q/a-d-{tenant}' } });
  });

  it('an item naming another tenant’s queue, written into the table directly, is never used: rows stay parked, submit and redrive refuse', async () => {
    const settings = resolveSettings({ lookaheadMs: 1_000, leaseMs: 4_000, shardCount: 2, groupCount: 1 });
    const tableName = await em.createTable();
    const inbound = await em.createQueue('inbound', { dlq: true, visibilityTimeout: 30 });
    const { urls, of } = await ownQueues(['victim', 'thief']);
    const idKey = randomUUID().repeat(2);
    const config: LambdaConfig = {
      tableName,
      inboundQueueUrl: inbound.url,
      settings,
      idKey: { base64: Buffer.from(idKey).toString('base64') },
      tenantQueues: urls,
    };
    const opts = { dynamo: em.dynamo, sqs: em.sqs, idKey: Buffer.from(idKey) };
    const w = await wire(config, opts);
    for (const t of ['victim', 'thief']) await w.store.putTenant({ name: t, ...of[t]! });

    // The thief's jobs go through the table (due beyond the lookahead).
    const due = Date.now() + 2_500;
    const { results } = await w.submitter.submitBatch(
      'thief',
      JSON.stringify({ jobs: Array.from({ length: 4 }, (_, i) => ({ payload: { i }, runAt: new Date(due + i).toISOString() })) }),
    );
    expect(results.every((r) => !('error' in r))).toBe(true);
    const ingest = startSqsEventSource({
      sqs: em.sqs,
      queueUrl: inbound.url,
      handler: (e: SQSEvent) => ingestHandler(w)(e),
      waitTimeSeconds: 1,
    });
    const rows = async () => {
      let n = 0;
      for (let shard = 0; shard < settings.shardCount; shard++) {
        const res = await em.dynamo.send(
          new QueryCommand({
            TableName: tableName,
            KeyConditionExpression: 'pk = :pk',
            ExpressionAttributeValues: { ':pk': { S: String(shard) } },
            ConsistentRead: true,
          }),
        );
        n += (res.Items ?? []).filter((i) => i.tenant?.S === 'thief' && i.state?.S === 'SCHEDULED').length;
      }
      return n;
    };
    for (let tries = 0; (await rows()) < 4; tries++) {
      if (tries > 100) throw new Error('rows not ingested');
      await new Promise((r) => setTimeout(r, 100));
    }
    await ingest.stop();

    // Someone rewrites the thief's registration to name the victim's queue and DLQ.
    await w.store.putTenant({ name: 'thief', ...of.victim! });
    const logged: string[] = [];
    const spy = vi.spyOn(console, 'error').mockImplementation((m: unknown) => void logged.push(String(m)));
    try {
      // A fresh instance (nothing cached), as after the registry's TTL.
      const fresh = await wire(config, opts);
      await new Promise((r) => setTimeout(r, Math.max(0, due + 100 - Date.now())));
      const now = Date.now();
      const step = await dispatchHandler(fresh)(
        { groups: [0], owner: `exec-${now}`, ownerStartMs: now, untilMs: now + 1_500 },
        { getRemainingTimeInMillis: () => 10_000 },
      );
      expect(step.sent).toBe(0);
      expect(step.parked).toBe(4);
      expect(step.parkedTenants).toEqual(['thief']);
      expect(await depth(of.victim!.queueUrl)).toBe(0);
      expect(await rows()).toBe(4);
      // The log says why.
      expect(logged.some((l) => l.includes('tenant registration refused') && l.includes(`not its own queue ${of.thief!.queueUrl}`))).toBe(
        true,
      );
      // Submit (direct path included) and the dead-letter routes refuse the tenant too.
      await expect(
        fresh.submitter.submitBatch('thief', JSON.stringify({ jobs: [{ payload: {}, runAt: new Date().toISOString() }] })),
      ).rejects.toMatchObject({
        code: 'TenantNotFound',
      });
      await expect(fresh.deadLetters.redrive('thief', '{"all": true}')).rejects.toMatchObject({ code: 'TenantNotFound' });
      await expect(fresh.deadLetters.peek('thief', {})).rejects.toMatchObject({ code: 'TenantNotFound' });
      expect(await depth(of.victim!.queueUrl)).toBe(0);
    } finally {
      spy.mockRestore();
    }
  });
});
