import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

/**
 * SigV4 verification as API Gateway's IAM authorization does it, for the local stack: the
 * signature is recomputed from the request as it arrived and the caller's secret, and compared.
 * Failures carry API Gateway's own 403 messages (trailing space included, as AWS sends them).
 */
export interface SignedRequest {
  readonly method: string;
  /** Path exactly as sent on the wire (percent-encoding untouched), without the query string. */
  readonly path: string;
  /** Query string as sent, without the `?`. */
  readonly query: string;
  /** Header names lower-cased. */
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
}

export interface VerifyOptions {
  /** The secret key of an access key id, or undefined when the key is unknown. */
  readonly secretOf: (accessKeyId: string) => string | undefined;
  /** The verifier's clock, epoch ms (requests signed more than 5 minutes away are refused). */
  readonly now: number;
  /** The API's region: a credential scoped to any other region is refused. */
  readonly region: string;
  /** @default 'execute-api' */
  readonly service?: string;
  /**
   * Whether a session token (`X-Amz-Security-Token`) is one this deployment issued. The local
   * stack issues none (its keys are long-term keys), so by default every token is unknown and
   * refused, as IAM refuses a token it cannot find.
   * @default () => false
   */
  readonly knownSessionToken?: (token: string, accessKeyId: string) => boolean;
}

export type VerifyResult = { ok: true; accessKeyId: string } | { ok: false; message: string };

const MAX_SKEW_MS = 5 * 60_000;
const AUTH =
  /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/(\d{8})\/([^/,\s]+)\/([^/,\s]+)\/aws4_request,\s*SignedHeaders=([a-z0-9;._-]+),\s*Signature=([0-9a-f]{64})$/;

/** API Gateway's messages, verbatim. */
export const SIGV4_MESSAGES = {
  missing: 'Forbidden',
  malformed:
    "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' parameters in the form AWS4-HMAC-SHA256 Credential=..., SignedHeaders=..., Signature=....",
  invalidToken: 'The security token included in the request is invalid.',
  wrongService: (service: string) => `Credential should be scoped to correct service: '${service}'. `,
  wrongRegion: (region: string) => `Credential should be scoped to a valid region, not '${region}'. `,
  badDate: 'Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP.',
  noHost: "'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.",
  mismatch:
    'The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details.',
} as const;

/**
 * Verifies a request signed with SigV4 (header form). The canonical URI is the wire path with
 * each segment URI-encoded once more, exactly as API Gateway (execute-api) forms it: a client
 * that percent-encodes a path segment once for the wire and signs it encoded once more (the
 * SDKs' "double encoding" of the raw value) verifies, whatever characters the path holds.
 *
 * @example
 * verifySigV4(req, { secretOf: (id) => keys.get(id), now: Date.now(), region: 'us-east-1' })
 */
export function verifySigV4(req: SignedRequest, opts: VerifyOptions): VerifyResult {
  const service = opts.service ?? 'execute-api';
  const header = (name: string): string | undefined => {
    const v = req.headers[name];
    return Array.isArray(v) ? v.join(',') : v;
  };
  const auth = header('authorization');
  if (!auth) return { ok: false, message: SIGV4_MESSAGES.missing };
  const m = AUTH.exec(auth.trim());
  if (!m) return { ok: false, message: SIGV4_MESSAGES.malformed };
  const [, accessKeyId = '', day = '', region = '', svc = '', signedHeaders = '', signature = ''] = m;
  if (svc !== service) return { ok: false, message: SIGV4_MESSAGES.wrongService(service) };
  if (region !== opts.region) return { ok: false, message: SIGV4_MESSAGES.wrongRegion(region) };
  const token = header('x-amz-security-token');
  // The local keys are long-term IAM user keys: a session token is only valid if it was issued
  // (by STS, for temporary keys). A made-up one is an invalid token, whatever the signature.
  if (token !== undefined && !(opts.knownSessionToken?.(token, accessKeyId) ?? false))
    return { ok: false, message: SIGV4_MESSAGES.invalidToken };
  const secret = opts.secretOf(accessKeyId);
  if (secret === undefined) return { ok: false, message: SIGV4_MESSAGES.invalidToken };
  const amzDate = header('x-amz-date');
  if (!amzDate || !/^\d{8}T\d{6}Z$/.test(amzDate) || !amzDate.startsWith(day)) return { ok: false, message: SIGV4_MESSAGES.badDate };
  const signedAt = Date.UTC(
    +amzDate.slice(0, 4),
    +amzDate.slice(4, 6) - 1,
    +amzDate.slice(6, 8),
    +amzDate.slice(9, 11),
    +amzDate.slice(11, 13),
    +amzDate.slice(13, 15),
  );
  if (Math.abs(opts.now - signedAt) > MAX_SKEW_MS) {
    return {
      ok: false,
      message: `Signature expired: ${amzDate} is now earlier than ${compact(opts.now - MAX_SKEW_MS)} (${compact(opts.now)} - 5 min.)`,
    };
  }
  const names = signedHeaders.split(';');
  if (!names.includes('host')) return { ok: false, message: SIGV4_MESSAGES.noHost };
  const canonicalHeaders = names.map((n) => `${n}:${(header(n) ?? '').trim().replace(/\s+/g, ' ')}\n`).join('');
  // The payload hash is always the body's own: a declared x-amz-content-sha256 that differs, or
  // a body changed after signing, fails the comparison below.
  const canonical = [
    req.method.toUpperCase(),
    canonicalUri(req.path),
    canonicalQuery(req.query),
    canonicalHeaders,
    signedHeaders,
    sha256(req.body),
  ].join('\n');
  const scope = `${day}/${region}/${svc}/aws4_request`;
  const toSign = ['AWS4-HMAC-SHA256', amzDate, scope, sha256(Buffer.from(canonical))].join('\n');
  let key = hmac(`AWS4${secret}`, day);
  for (const part of [region, svc, 'aws4_request']) key = hmac(key, part);
  const expected = Buffer.from(createHmac('sha256', key).update(toSign).digest('hex'));
  const given = Buffer.from(signature);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return { ok: false, message: SIGV4_MESSAGES.mismatch };
  return { ok: true, accessKeyId };
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

function hmac(key: string | Buffer, data: string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

function compact(ms: number): string {
  return new Date(ms)
    .toISOString()
    .replace(/[-:]/g, '')
    .replace(/\.\d{3}/, '');
}

/** SigV4's URI encoding: every byte except the unreserved characters `A-Z a-z 0-9 - _ . ~` as `%XX`, upper-case hex. */
export function uriEncode(s: string): string {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-_.~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/**
 * The canonical URI as API Gateway forms it: the path as it arrived, each segment URI-encoded
 * once (a `%` of the wire encoding becomes `%25`), nothing decoded or normalized first. So
 * `/jobs/a%20b` is signed as `/jobs/a%2520b` and `/jobs/a:b` as `/jobs/a%3Ab`.
 */
export function canonicalUri(wirePath: string): string {
  if (wirePath === '') return '/';
  return wirePath.split('/').map(uriEncode).join('/');
}

/** Parameters decoded from the wire, encoded once, sorted by name then value. */
function canonicalQuery(query: string): string {
  if (!query) return '';
  return query
    .split('&')
    .filter(Boolean)
    .map((kv) => {
      const i = kv.indexOf('=');
      const k = i < 0 ? kv : kv.slice(0, i);
      const v = i < 0 ? '' : kv.slice(i + 1);
      return [uriEncode(safeDecode(k)), uriEncode(safeDecode(v))] as const;
    })
    .sort(([a, av], [b, bv]) => (a === b ? (av < bv ? -1 : av > bv ? 1 : 0) : a < b ? -1 : 1))
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
