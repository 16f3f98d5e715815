import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * SigV4 verification as API Gateway's IAM authorization does it, for the local stack: the
 * signature is recomputed from the request and the caller's secret and compared. Failures carry
 * API Gateway's own 403 messages.
 */
export interface SignedRequest {
  readonly method: string;
  /** Path as sent, without the query string. */
  readonly path: string;
  readonly query: string;
  /** Header names lower-cased. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
}

export type VerifyResult = { ok: true; accessKeyId: string } | { ok: false; message: string };

const MAX_SKEW_MS = 5 * 60_000;
const AUTH = /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/([^/,\s]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;._-]+),\s*Signature=([0-9a-f]{64})$/;

/**
 * @param secretOf the secret key of an access key id, or undefined when unknown
 * @param nowMs the verifier's clock (requests more than 5 minutes off are refused)
 */
export function verifySigV4(req: SignedRequest, secretOf: (accessKeyId: string) => string | undefined, nowMs: number, service = 'execute-api'): VerifyResult {
  const header = (name: string): string | undefined => {
    const v = req.headers[name];
    return Array.isArray(v) ? v.join(',') : v;
  };
  const auth = header('authorization');
  if (!auth) return { ok: false, message: 'Forbidden' };
  const m = AUTH.exec(auth.trim());
  if (!m) return { ok: false, message: `Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters in the form AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=....` };
  const [, accessKeyId, day, region, svc, signedHeaders, signature] = m as unknown as string[];
  const secret = secretOf(accessKeyId!);
  if (secret === undefined) return { ok: false, message: 'The security token included in the request is invalid.' };
  if (svc !== service) return { ok: false, message: `Credential should be scoped to correct service: '${service}'.` };
  const amzDate = header('x-amz-date');
  if (!amzDate || !/^\d{8}T\d{6}Z$/.test(amzDate) || !amzDate.startsWith(day!)) {
    return { ok: false, message: 'Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP.' };
  }
  const signedAt = Date.UTC(+amzDate.slice(0, 4), +amzDate.slice(4, 6) - 1, +amzDate.slice(6, 8), +amzDate.slice(9, 11), +amzDate.slice(11, 13), +amzDate.slice(13, 15));
  if (Math.abs(nowMs - signedAt) > MAX_SKEW_MS) {
    return { ok: false, message: `Signature expired: ${amzDate} is now earlier than ${compact(nowMs - MAX_SKEW_MS)} (${compact(nowMs)} - 5 min.)` };
  }
  const names = signedHeaders!.split(';');
  if (!names.includes('host')) return { ok: false, message: "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization." };
  const canonicalHeaders = names.map((n) => `${n}:${(header(n) ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  const payloadHash = header('x-amz-content-sha256') && header('x-amz-content-sha256') !== 'UNSIGNED-PAYLOAD' ? header('x-amz-content-sha256')! : sha256(req.body);
  // A declared payload hash must match the body: a body changed after signing fails here.
  if (payloadHash !== sha256(req.body)) return { ok: false, message: mismatch };
  const canonical = [req.method.toUpperCase(), canonicalPath(req.path), canonicalQuery(req.query), canonicalHeaders, signedHeaders, payloadHash].join('\n');
  const scope = `${day}/${region}/${svc}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(Buffer.from(canonical))].join('\n');
  let key = hmac(`AWS4${secret}`, day!);
  for (const part of [region!, svc!, 'aws4_request']) key = hmac(key, part);
  const expected = Buffer.from(createHmac('sha256', key).update(toSign).digest('hex'));
  const given = Buffer.from(signature!);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return { ok: false, message: mismatch };
  return { ok: true, accessKeyId: accessKeyId! };
}

const mismatch =
  'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.';

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

function compact(ms: number): string {
  return new Date(ms).toISOString().replace(/[-:]/g, '').replace(/\.\d{3}/, '');
}

/** RFC 3986 encoding as SigV4 wants it. */
function encode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

/** Each segment normalized and encoded twice (non-S3 services), as the AWS SDK and curl sign it. */
function canonicalPath(path: string): string {
  return path
    .split('/')
    .map((seg) => encode(encode(safeDecode(seg))))
    .join('/');
}

function canonicalQuery(query: string): string {
  if (!query) return '';
  return query
    .split('&')
    .filter(Boolean)
    .map((kv) => {
      const i = kv.indexOf('=');
      const k = i < 0 ? kv : kv.slice(0, i);
      const v = i < 0 ? '' : kv.slice(i + 1);
      return [encode(safeDecode(k)), encode(safeDecode(v))] as const;
    })
    .sort(([a, av], [b, bv]) => (a === b ? (av < bv ? -1 : 1) : a < b ? -1 : 1))
    .map(([k, v]) => `${k}=${v}`)
    .join('&');
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
