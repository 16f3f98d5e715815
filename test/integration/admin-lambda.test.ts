import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminHandler, silentTelemetry } from '../../lambdas/runtime/handlers.js';
import { startEmulators, type Emulators } from '../support/emulators.js';
import { httpApiEventWithIam, lambdaContext } from '../support/lambdaEvents.js';
import { createSystem, type TestSystem } from '../support/system.js';

/** lambdas/admin.ts as Lambda loads it (no job id key configured), and its log line per change. */
let em: Emulators;
let sys: TestSystem;
const context = lambdaContext({ functionName: 'admin', getRemainingTimeInMillis: () => 10_000 });

const event = (method: string, suffix: string, body?: string) =>
  httpApiEventWithIam({
    method,
    path: `/v1/admin/tenants/demo${suffix}`,
    body,
    pathParameters: { tenant: 'demo' },
    iam: { userArn: 'arn:aws:iam::1:role/ops', accessKey: 'AKID' },
  });

beforeAll(async () => {
  em = await startEmulators();
  sys = await createSystem(em);
  Object.assign(process.env, {
    AWS_REGION: 'us-east-1',
    AWS_ACCESS_KEY_ID: 'test',
    AWS_SECRET_ACCESS_KEY: 'test',
    POWERTOOLS_METRICS_DISABLED: 'true',
    POWERTOOLS_LOG_LEVEL: 'ERROR',
    DYNEIN_TABLE: sys.tableName,
    DYNEIN_DYNAMODB_ENDPOINT: em.dynamoEndpoint,
  });
  delete process.env.DYNEIN_ID_KEY;
  delete process.env.DYNEIN_ID_KEY_SECRET_ARN;
});
afterAll(async () => em?.stop());

describe('the admin Lambda', () => {
  it('starts without a job id key and serves pause and show', async () => {
    const { handler } = await import('../../lambdas/admin.js');
    const paused = await handler(event('POST', '/pause'), context);
    expect(paused.statusCode).toBe(200);
    expect(JSON.parse(paused.body)).toMatchObject({ tenant: 'demo', paused: true, changes: [{ by: 'arn:aws:iam::1:role/ops' }] });
    expect(JSON.parse((await handler(event('GET', ''), context)).body).paused).toBe(true);
  });

  it('logs one line per change with tenant, action, by, before and after; none for a no-op', async () => {
    const lines: { message: string; fields: Record<string, unknown> }[] = [];
    const handle = adminHandler(sys.w, { ...silentTelemetry, info: (message, fields) => lines.push({ message, fields }) });
    await handle(event('PUT', '/settings', '{"maxDeliveriesPerSecond":25}'));
    expect(lines.filter((l) => l.message === 'tenant controls changed')).toEqual([
      {
        message: 'tenant controls changed',
        fields: expect.objectContaining({
          tenant: 'demo',
          action: 'settings',
          by: 'arn:aws:iam::1:role/ops',
          before: expect.not.objectContaining({ maxDeliveriesPerSecond: expect.anything() }),
          after: expect.objectContaining({ maxDeliveriesPerSecond: 25 }),
        }),
      },
    ]);
    await handle(event('POST', '/pause'));
    expect(lines.filter((l) => l.message === 'tenant controls changed')).toHaveLength(1);
  });
});
