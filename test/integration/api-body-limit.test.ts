/**
 * Oversized request bodies get 413, never a 5xx: the local API (API Gateway's stand-in) refuses a
 * body whose event would exceed Lambda's synchronous-invoke limit, as no function could receive it
 * on AWS, and the submit handler answers 413 PayloadTooLarge itself for every body above the batch
 * limit that reaches it. Signed with the AWS SDK's own signer; real HTTP.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import type { APIGatewayProxyEventV2 } from 'aws-lambda';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULTS } from '../../core/model/config.js';
import { LAMBDA_SYNC_PAYLOAD_BYTES } from '../../core/model/schema.js';
import { startApiServer } from '../../local/apiServer.js';

const KEYS = { accessKeyId: 'AKIDLOCALTEST', secretAccessKey: 'local-secret-key-for-tests' };
let server: Server;
let base: string;
const received: number[] = [];

beforeAll(async () => {
  const ok = async (event: APIGatewayProxyEventV2) => {
    received.push(Buffer.byteLength(event.body ?? ''));
    return { statusCode: 200, body: '{}' };
  };
  server = await startApiServer({
    port: 0,
    region: 'us-east-1',
    keys: { demo: KEYS },
    handlers: { submit: ok, status: ok, cancel: ok },
    metrics: () => ({}),
  });
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

async function post(body: string): Promise<{ status: number; json: unknown }> {
  const url = new URL(`${base}/v1/tenants/demo/jobs/batch`);
  const signer = new SignatureV4({ service: 'execute-api', region: 'us-east-1', credentials: KEYS, sha256: Hash.bind(null, 'sha256') });
  const signed = await signer.sign({
    method: 'POST',
    protocol: 'http:',
    hostname: url.hostname,
    port: Number(url.port),
    path: url.pathname,
    headers: { host: url.host, 'content-type': 'application/json' },
    body,
  });
  const res = await fetch(url, { method: 'POST', headers: signed.headers as Record<string, string>, body });
  return { status: res.status, json: await res.json() };
}

/** A batch body of about `bytes` bytes whose payload strings are `fill` repeated. */
const batchOf = (bytes: number, fill: string) =>
  JSON.stringify({ jobs: [{ payload: fill.repeat(Math.floor(bytes / fill.length)), delaySeconds: 60 }] });

describe('request bodies above what Lambda accepts', () => {
  it('reach the handler while their event fits Lambda’s 6 MB (the handler then answers for itself)', async () => {
    const body = batchOf(DEFAULTS.maxBatchBytes + 100_000, 'a');
    const r = await post(body);
    expect(r.status).toBe(200);
    expect(received.at(-1)).toBe(Buffer.byteLength(body));
  });

  it('get 413 from the API when the event would exceed Lambda’s limit, though under API Gateway’s 10 MB', async () => {
    const before = received.length;
    const plain = await post(batchOf(LAMBDA_SYNC_PAYLOAD_BYTES + 10_000, 'a'));
    expect(plain).toEqual({ status: 413, json: { message: 'Request Entity Too Large' } });
    // Escaping counts: a 3.5 MB body of escaped quotes (under the 5 MiB batch limit) is 7 MB once
    // it is a JSON string inside the event (docs/constructs.md, "Request size").
    const quotedBody = batchOf(1_750_000, '"');
    expect(Buffer.byteLength(quotedBody)).toBeLessThan(DEFAULTS.maxBatchBytes);
    const quoted = await post(quotedBody);
    expect(quoted.status).toBe(413);
    expect(received.length).toBe(before);
  });
});
