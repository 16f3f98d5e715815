/**
 * The tenant registration custom resource (DyneinTenant): writes the tenant's registry item into
 * the scheduler table at deploy and removes it at delete, answering CloudFormation itself
 * (a Lambda-backed custom resource: no provider framework). One function per scheduler, in its
 * stack, serves the tenants of every stack: the tenants' stacks hold no principal that may write
 * the table, and this function writes registry items only (`sk = tenant`, never a tenant's
 * controls), in its own table, naming the tenant's own queue and DLQ (any other is refused).
 *
 * A tenant name belongs to one stack: the item records its owner (the stack id) and the resource
 * that wrote it (stack id / logical id). A put only succeeds into an empty key, an item of the same
 * owner, or an item written before owners were recorded; another stack's tenant of the same name
 * fails the deploy with a message that names the owner. A delete only removes the item this very
 * resource wrote: a failed create, or a registration moved to another logical id in the same
 * stack (created first, the old one deleted after), leaves the item alone.
 */
import {
  ConditionalCheckFailedException,
  DeleteItemCommand,
  DynamoDBClient,
  GetItemCommand,
  PutItemCommand,
} from '@aws-sdk/client-dynamodb';
import type { CloudFormationCustomResourceEvent, Context } from 'aws-lambda';
import {
  foreignQueues,
  registrationConflictMessage,
  registrationRequest,
  tenantQueueUrlProblems,
  type RegistrationProperties,
  type TenantQueueUrls,
} from '../core/tenants/index.js';
import { TENANT_ATTRIBUTES, tenantItemKey } from '../core/model/index.js';
import { cutText } from '../core/util/index.js';

type Event = CloudFormationCustomResourceEvent<RegistrationProperties>;

export interface RegisterDeps {
  readonly dynamo: DynamoDBClient;
  /** The scheduler's table: a registration naming another is refused. @default - the one the request names (tests) */
  readonly tableName?: string;
  /** Where the tenants' queues are: a registration naming other queues is refused. @default - not checked (tests) */
  readonly queues?: TenantQueueUrls;
  /** Why the function cannot serve any request (its configuration): every request fails with it. */
  readonly misconfigured?: string;
  /** Sends the response to CloudFormation's pre-signed URL. */
  readonly respond?: (url: string, body: string) => Promise<void>;
}

/** What the handler answered CloudFormation (also its return value, for tests). */
export interface RegisterResponse {
  readonly Status: 'SUCCESS' | 'FAILED';
  readonly Reason?: string;
  readonly PhysicalResourceId: string;
  readonly StackId: string;
  readonly RequestId: string;
  readonly LogicalResourceId: string;
  readonly Data?: Record<string, string>;
}

/** The handler, over a DynamoDB client (tests pass one pointed at dynalite). */
export function registerHandler(deps: RegisterDeps) {
  const respond = deps.respond ?? putResponse;
  return async (event: Event, context?: Pick<Context, 'logStreamName'>): Promise<RegisterResponse> => {
    let response: RegisterResponse;
    try {
      if (deps.misconfigured) throw new Error(deps.misconfigured);
      const props = registrationRequest(event.ResourceProperties);
      if (deps.tableName !== undefined && props.tableName !== deps.tableName)
        throw new Error(
          `invalid Dynein tenant registration: TableName '${props.tableName}' is not this scheduler's table '${deps.tableName}' (pass the scheduler's attributes as they are)`,
        );
      const owner = event.StackId;
      const registration = `${event.StackId}/${event.LogicalResourceId}`;
      const physicalId = `dynein-tenant-${props.tenantName}`;
      const key = tenantItemKey(props.tenantName);
      const Key = { pk: { S: key.pk }, sk: { S: key.sk } };
      if (event.RequestType === 'Delete') {
        // Only the item this resource wrote (or a legacy item without owner) is removed.
        try {
          await deps.dynamo.send(
            new DeleteItemCommand({
              TableName: props.tableName,
              Key,
              ConditionExpression: '#registration = :registration OR attribute_not_exists(#owner)',
              ExpressionAttributeNames: { '#owner': TENANT_ATTRIBUTES.owner, '#registration': TENANT_ATTRIBUTES.registration },
              ExpressionAttributeValues: { ':registration': { S: registration } },
            }),
          );
        } catch (err) {
          if (!(err instanceof ConditionalCheckFailedException)) throw err;
          console.warn(
            JSON.stringify({
              level: 'WARN',
              message: 'tenant registration written by another resource: left in place',
              tenant: props.tenantName,
            }),
          );
        }
        response = success(event, event.PhysicalResourceId);
      } else {
        // Only the tenant's own queues: a registration never points the scheduler at another's.
        const foreign = deps.queues && foreignQueues(deps.queues, props.tenantName, props);
        if (foreign)
          throw new Error(
            `invalid Dynein tenant registration: ${foreign} (a tenant registers the queues DyneinTenant creates for it, in the scheduler's account and region)`,
          );
        try {
          await deps.dynamo.send(
            new PutItemCommand({
              TableName: props.tableName,
              Item: {
                ...Key,
                [TENANT_ATTRIBUTES.queueUrl]: { S: props.queueUrl },
                [TENANT_ATTRIBUTES.dlqUrl]: { S: props.dlqUrl },
                [TENANT_ATTRIBUTES.owner]: { S: owner },
                [TENANT_ATTRIBUTES.registration]: { S: registration },
                // History on (docs/history.md); an update that turns it off drops the attribute.
                ...(props.historyTtlMs !== undefined ? { [TENANT_ATTRIBUTES.historyTtlMs]: { N: String(props.historyTtlMs) } } : {}),
              },
              // The name is free, ours already, or registered before owners were recorded.
              ConditionExpression: 'attribute_not_exists(pk) OR attribute_not_exists(#owner) OR #owner = :owner',
              ExpressionAttributeNames: { '#owner': TENANT_ATTRIBUTES.owner },
              ExpressionAttributeValues: { ':owner': { S: owner } },
            }),
          );
        } catch (err) {
          if (!(err instanceof ConditionalCheckFailedException)) throw err;
          const current = await deps.dynamo.send(new GetItemCommand({ TableName: props.tableName, Key, ConsistentRead: true }));
          throw new Error(registrationConflictMessage(props.tenantName, current.Item?.[TENANT_ATTRIBUTES.owner]?.S ?? 'another stack'));
        }
        response = success(event, physicalId, { TenantName: props.tenantName });
      }
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      console.error(JSON.stringify({ level: 'ERROR', message: 'tenant registration failed', error: message }));
      response = {
        Status: 'FAILED',
        Reason: cutText(`${message}${context?.logStreamName ? ` (log stream ${context.logStreamName})` : ''}`, 3_000),
        // A failed create keeps a stable id, so the rollback's delete names the same resource.
        PhysicalResourceId: event.RequestType === 'Create' ? `dynein-tenant-failed-${event.RequestId}` : event.PhysicalResourceId,
        StackId: event.StackId,
        RequestId: event.RequestId,
        LogicalResourceId: event.LogicalResourceId,
      };
    }
    await respond(event.ResponseURL, JSON.stringify(response));
    return response;
  };
}

function success(event: Event, physicalId: string, data?: Record<string, string>): RegisterResponse {
  return {
    Status: 'SUCCESS',
    PhysicalResourceId: physicalId,
    StackId: event.StackId,
    RequestId: event.RequestId,
    LogicalResourceId: event.LogicalResourceId,
    ...(data ? { Data: data } : {}),
  };
}

/** CloudFormation's response: a PUT of the JSON to the pre-signed S3 URL, no content type. */
async function putResponse(url: string, body: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      const res = await fetch(url, { method: 'PUT', body, headers: { 'content-type': '' } });
      if (res.ok) return;
      throw new Error(`CloudFormation response URL answered ${res.status}`);
    } catch (err) {
      if (attempt >= 4) throw err;
      await new Promise((r) => setTimeout(r, 500 * 2 ** attempt));
    }
  }
}

/** The deployed function's configuration: the scheduler sets every variable. */
export function registerConfig(env: NodeJS.ProcessEnv): Omit<RegisterDeps, 'dynamo'> {
  const tableName = env.DYNEIN_TABLE?.trim() ?? '';
  const queues = { queueUrl: env.DYNEIN_TENANT_QUEUE_URL?.trim() ?? '', dlqUrl: env.DYNEIN_TENANT_DLQ_URL?.trim() ?? '' };
  const problems = [...(tableName ? [] : ['DYNEIN_TABLE is required']), ...tenantQueueUrlProblems(queues)];
  return problems.length > 0
    ? { misconfigured: `the Dynein registration function is misconfigured: ${problems.join('; ')}` }
    : { tableName, queues };
}

export const handler = registerHandler({ dynamo: new DynamoDBClient({}), ...registerConfig(process.env) });
