import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { SIGV4_MESSAGES, canonicalUri, verifySigV4, type SignedRequest } from '../../local/sigv4.js';
import { specSign } from '../support/specSigner.js';

const creds = { accessKeyId: 'AKIAEXAMPLE000000000', secretAccessKey: 'secret-of-alpha-0123456789abcdef' };
const secretOf = (id: string) => (id === creds.accessKeyId ? creds.secretAccessKey : undefined);
const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);
const REGION = 'eu-central-1';
const verify = (r: SignedRequest, now = NOW) => verifySigV4(r, { secretOf, now, region: REGION });
const message = (r: SignedRequest, now = NOW) => {
  const v = verify(r, now);
  return v.ok ? 'ok' : v.message;
};

/**
 * Signs with the AWS SDK's own signer, as clients do, and returns what the server receives.
 * `wirePath` is the path as it goes on the wire (already percent-encoded), which is what the SDK
 * hands its signer.
 */
async function sdkSigned(
  method: string,
  wirePath: string,
  body = '',
  opts: {
    query?: Record<string, string>;
    credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
    region?: string;
    date?: Date;
  } = {},
): Promise<SignedRequest> {
  const signer = new SignatureV4({
    service: 'execute-api',
    region: opts.region ?? REGION,
    credentials: opts.credentials ?? creds,
    sha256: Hash.bind(null, 'sha256'),
  });
  const query = opts.query ?? {};
  const req = await signer.sign(
    {
      method,
      protocol: 'http:',
      hostname: '127.0.0.1',
      port: 8080,
      path: wirePath,
      query,
      headers: { host: '127.0.0.1:8080', 'content-type': 'application/json' },
      body: body || undefined,
    },
    { signingDate: opts.date ?? new Date(NOW) },
  );
  const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k.toLowerCase(), v]));
  const qs = Object.entries(query)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join('&');
  return { method, path: wirePath, query: qs, headers, body: Buffer.from(body) };
}

/** The same request signed by an independent signer written from the SigV4 specification (test/support/specSigner.ts). */
function specSigned(
  method: string,
  wirePath: string,
  body = '',
  c: { accessKeyId: string; secretAccessKey: string } = creds,
): SignedRequest {
  const headers = specSign({ method, host: '127.0.0.1:8080', wirePath, body, ...c, region: REGION, date: new Date(NOW) });
  return { method, path: wirePath, query: '', headers, body: Buffer.from(body) };
}

/** Paths as they go on the wire: encoded by encodeURIComponent, or sent with characters left literal, or with lower-case or needless escapes. */
const WIRE_PATHS = [
  '/v1/tenants/alpha/jobs',
  '/v1/tenants/alpha/jobs/j1.alpha.3.1795320629774.t.RkjbVMk9RFQEr7QK.ZXtlQJ_rsul-qJdAfeThxg',
  `/v1/tenants/alpha/jobs/${encodeURIComponent('a b+c=d&e')}`,
  `/v1/tenants/alpha/jobs/${encodeURIComponent('café ☃ 😀')}`,
  `/v1/tenants/alpha/jobs/${encodeURIComponent('x/y')}`, // an encoded slash stays inside its segment
  `/v1/tenants/alpha/jobs/${encodeURIComponent('100%')}`,
  '/v1/tenants/alpha/jobs/a:b@c!d$e(f)*g,h;i', // reserved characters sent literally (curl, botocore)
  '/v1/tenants/alpha/jobs/caf%c3%a9', // lower-case hex
  '/v1/tenants/%61lpha/jobs/%7Ex', // escapes of unreserved characters
];

describe('verifySigV4', () => {
  it('accepts requests signed by the AWS SDK signer', async () => {
    for (const r of [
      await sdkSigned('POST', '/v1/tenants/alpha/jobs', '{"payload":1,"delaySeconds":5}'),
      await sdkSigned('GET', '/v1/tenants/alpha/jobs/j1.alpha.3.1795320629774.t.RkjbVMk9RFQEr7QK.ZXtlQJ_rsul-qJdAfeThxg'),
      await sdkSigned('DELETE', '/v1/tenants/alpha/jobs/x', '', { query: { b: '2', a: 'x y' } }),
    ]) {
      expect(verify(r)).toEqual({ ok: true, accessKeyId: creds.accessKeyId });
    }
  });

  it('verifies every percent-encoded or literal path that API Gateway verifies, signed by the SDK and by an independent signer', async () => {
    for (const path of WIRE_PATHS) {
      expect([path, message(await sdkSigned('GET', path))]).toEqual([path, 'ok']);
      expect([path, message(specSigned('GET', path))]).toEqual([path, 'ok']);
      expect([path, message(specSigned('POST', path, '{"payload":"é"}'))]).toEqual([path, 'ok']);
    }
  });

  it('forms the canonical URI as API Gateway does (its own "canonical string should have been" answers)', () => {
    // The wire path is encoded once more, never decoded first: examples quoted from API Gateway's
    // 403 answers ("The Canonical String for this request should have been ...").
    expect(canonicalUri('/path/%C3%A4')).toBe('/path/%25C3%25A4');
    expect(canonicalUri('/devo/this%20path')).toBe('/devo/this%2520path');
    expect(canonicalUri('/myStage/@connections')).toBe('/myStage/%40connections');
    expect(canonicalUri('/a/x%2Fy')).toBe('/a/x%252Fy');
    expect(canonicalUri('/a+b')).toBe('/a%2Bb');
    expect(canonicalUri('')).toBe('/');
  });

  it('refuses a path whose encoding changed after signing: the same decoded path, other bytes on the wire', async () => {
    const r = await sdkSigned('GET', '/v1/tenants/alpha/jobs/a%20b');
    for (const path of [
      '/v1/tenants/alpha/jobs/a+b',
      '/v1/tenants/alpha/jobs/a%2520b',
      '/v1/tenants/%61lpha/jobs/a%20b',
      '/v1/tenants/alpha/jobs/a%20B',
    ]) {
      expect(message({ ...r, path })).toBe(SIGV4_MESSAGES.mismatch);
    }
  });

  it('refuses a request changed after signing: body, path, method, query or a signed header', async () => {
    const r = await sdkSigned('POST', '/v1/tenants/alpha/jobs', '{"payload":1,"delaySeconds":5}', { query: { q: '1' } });
    const changed: SignedRequest[] = [
      { ...r, body: Buffer.from('{"payload":1,"delaySeconds":6}') },
      { ...r, path: '/v1/tenants/beta/jobs' },
      { ...r, method: 'PUT' },
      { ...r, query: 'q=2' },
      { ...r, headers: { ...r.headers, 'content-type': 'text/plain' } },
    ];
    for (const c of changed) expect(message(c)).toBe(SIGV4_MESSAGES.mismatch);
  });

  it("refuses a credential scoped to another region, with API Gateway's message", async () => {
    const r = await sdkSigned('GET', '/v1/tenants/alpha/jobs/x', '', { region: 'us-east-1' });
    expect(message(r)).toBe("Credential should be scoped to a valid region, not 'us-east-1'. ");
    expect(verifySigV4(r, { secretOf, now: NOW, region: 'us-east-1' }).ok).toBe(true);
  });

  it('refuses any session token the local stack did not issue, signed or not', async () => {
    const withToken = await sdkSigned('GET', '/v1/tenants/alpha/jobs/x', '', {
      credentials: { ...creds, sessionToken: 'IQoJb3JpZ2luX2VjEMadeUp' },
    });
    expect(withToken.headers['x-amz-security-token']).toBe('IQoJb3JpZ2luX2VjEMadeUp');
    expect(message(withToken)).toBe('The security token included in the request is invalid.');
    const plain = await sdkSigned('GET', '/v1/tenants/alpha/jobs/x');
    expect(message({ ...plain, headers: { ...plain.headers, 'x-amz-security-token': 'x' } })).toBe(
      'The security token included in the request is invalid.',
    );
    // A deployment that issued the token accepts it (the hook for temporary keys).
    expect(
      verifySigV4(withToken, { secretOf, now: NOW, region: REGION, knownSessionToken: (t) => t === 'IQoJb3JpZ2luX2VjEMadeUp' }).ok,
    ).toBe(true);
  });

  it('refuses unknown keys, wrong secrets, another service, missing or malformed signatures, and stale dates', async () => {
    const r = await sdkSigned('GET', '/v1/tenants/alpha/jobs/x');
    expect(message(await sdkSigned('GET', '/x', '', { credentials: { ...creds, accessKeyId: 'AKIAUNKNOWN000000000' } }))).toBe(
      'The security token included in the request is invalid.',
    );
    expect(message(await sdkSigned('GET', '/x', '', { credentials: { ...creds, secretAccessKey: 'wrong' } }))).toBe(
      SIGV4_MESSAGES.mismatch,
    );
    expect(message(specSigned('GET', '/x', '', { ...creds, secretAccessKey: 'wrong' }))).toBe(SIGV4_MESSAGES.mismatch);
    const otherService = {
      ...r,
      headers: { ...r.headers, authorization: String(r.headers.authorization).replace('/execute-api/', '/lambda/') },
    };
    expect(message(otherService)).toBe("Credential should be scoped to correct service: 'execute-api'. ");
    expect(message({ ...r, headers: { ...r.headers, authorization: undefined } })).toBe('Forbidden');
    expect(message({ ...r, headers: { ...r.headers, authorization: 'Bearer abc' } })).toMatch(/Authorization header requires/);
    expect(message(r, NOW + 5 * 60_000 + 1_000)).toMatch(/^Signature expired/);
    expect(message(r, NOW - 5 * 60_000 - 1_000)).toMatch(/^Signature expired/);
    expect(message(r, NOW + 4 * 60_000)).toBe('ok');
  });
});
