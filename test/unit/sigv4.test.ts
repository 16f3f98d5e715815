import { Hash } from '@smithy/hash-node';
import { SignatureV4 } from '@smithy/signature-v4';
import { describe, expect, it } from 'vitest';
import { verifySigV4, type SignedRequest } from '../../local/sigv4.js';

const creds = { accessKeyId: 'AKIAEXAMPLE000000000', secretAccessKey: 'secret-of-alpha-0123456789abcdef' };
const secretOf = (id: string) => (id === creds.accessKeyId ? creds.secretAccessKey : undefined);
const NOW = Date.UTC(2026, 10, 22, 12, 0, 0);

/** Signs with the AWS SDK's own signer, as clients do, and returns what the server receives. */
async function signed(method: string, path: string, body = '', query: Record<string, string> = {}, credentials = creds, date = new Date(NOW)): Promise<SignedRequest> {
  const signer = new SignatureV4({ service: 'execute-api', region: 'us-east-1', credentials, sha256: Hash.bind(null, 'sha256') });
  const req = await signer.sign(
    { method, protocol: 'http:', hostname: '127.0.0.1', port: 8080, path, query, headers: { host: '127.0.0.1:8080', 'content-type': 'application/json' }, body: body || undefined },
    { signingDate: date },
  );
  const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k.toLowerCase(), v]));
  const qs = Object.entries(query).map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&');
  return { method, path, query: qs, headers, body: Buffer.from(body) };
}

describe('verifySigV4', () => {
  it('accepts requests signed by the AWS SDK signer', async () => {
    for (const r of [
      await signed('POST', '/v1/tenants/alpha/jobs', '{"payload":1,"delaySeconds":5}'),
      await signed('GET', '/v1/tenants/alpha/jobs/j1.alpha.3.1795320629774.t.RkjbVMk9RFQEr7QK.ZXtlQJ_rsul-qJdAfeThxg'),
      await signed('DELETE', '/v1/tenants/alpha/jobs/x', '', { b: '2', a: 'x y' }),
    ]) {
      expect(verifySigV4(r, secretOf, NOW)).toEqual({ ok: true, accessKeyId: creds.accessKeyId });
    }
  });

  it('refuses a request changed after signing: body, path, method, query or a signed header', async () => {
    const r = await signed('POST', '/v1/tenants/alpha/jobs', '{"payload":1,"delaySeconds":5}', { q: '1' });
    const changed: SignedRequest[] = [
      { ...r, body: Buffer.from('{"payload":1,"delaySeconds":6}') },
      { ...r, path: '/v1/tenants/beta/jobs' },
      { ...r, method: 'PUT' },
      { ...r, query: 'q=2' },
      { ...r, headers: { ...r.headers, 'content-type': 'text/plain' } },
    ];
    for (const c of changed) {
      const v = verifySigV4(c, secretOf, NOW);
      expect(v.ok).toBe(false);
      expect(v.ok ? '' : v.message).toMatch(/signature we calculated does not match/);
    }
  });

  it('refuses unknown keys, wrong secrets, missing or malformed signatures, and stale dates', async () => {
    const r = await signed('GET', '/v1/tenants/alpha/jobs/x');
    const message = (req: SignedRequest, now = NOW) => {
      const v = verifySigV4(req, secretOf, now);
      return v.ok ? 'ok' : v.message;
    };
    expect(message(await signed('GET', '/x', '', {}, { ...creds, accessKeyId: 'AKIAUNKNOWN000000000' }))).toBe('The security token included in the request is invalid.');
    expect(message(await signed('GET', '/x', '', {}, { ...creds, secretAccessKey: 'wrong' }))).toMatch(/does not match/);
    expect(message({ ...r, headers: { ...r.headers, authorization: undefined } })).toBe('Forbidden');
    expect(message({ ...r, headers: { ...r.headers, authorization: 'Bearer abc' } })).toMatch(/Authorization header requires/);
    expect(message(r, NOW + 5 * 60_000 + 1_000)).toMatch(/^Signature expired/);
    expect(message(r, NOW - 5 * 60_000 - 1_000)).toMatch(/^Signature expired/);
    expect(message(r, NOW + 4 * 60_000)).toBe('ok');
  });
});
