import { createHash, createHmac } from 'node:crypto';

/**
 * A SigV4 signer written from the specification ("Create a canonical request" in the IAM user
 * guide), sharing no code with the local stack's verifier nor with the AWS SDK: an independent
 * client for the SigV4 tests. `wirePath` is the path exactly as it goes on the wire; the
 * canonical URI encodes each of its segments once more (for non-S3 services, the raw value ends
 * up encoded twice). Header signing only; the payload is always hashed.
 */
export function specSign(req: {
  method: string;
  host: string;
  wirePath: string;
  body?: string | Buffer;
  headers?: Record<string, string>;
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
  region: string;
  service?: string;
  date?: Date;
}): Record<string, string> {
  const service = req.service ?? 'execute-api';
  const unreserved = /[A-Za-z0-9\-_.~]/;
  const enc = (s: string) =>
    [...Buffer.from(s, 'utf8')]
      .map((b) => (unreserved.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`))
      .join('');
  const hex = (d: string | Buffer) => createHash('sha256').update(d).digest('hex');
  const mac = (k: string | Buffer, d: string) => createHmac('sha256', k).update(d).digest();
  const amzDate = (req.date ?? new Date()).toISOString().replace(/[-:]|\.\d{3}/g, '');
  const day = amzDate.slice(0, 8);
  const headers: Record<string, string> = {
    ...lower(req.headers ?? {}),
    host: req.host,
    'x-amz-date': amzDate,
    ...(req.sessionToken ? { 'x-amz-security-token': req.sessionToken } : {}),
  };
  const names = Object.keys(headers).sort();
  const signedHeaders = names.join(';');
  const canonicalRequest = [
    req.method,
    req.wirePath.split('/').map(enc).join('/'),
    '',
    ...names.map((h) => `${h}:${headers[h]!.trim().replace(/\s+/g, ' ')}`),
    '',
    signedHeaders,
    hex(req.body ?? ''),
  ].join('\n');
  const scope = `${day}/${req.region}/${service}/aws4_request`;
  const stringToSign = ['AWS4-HMAC-SHA256', amzDate, scope, hex(canonicalRequest)].join('\n');
  let key: Buffer | string = `AWS4${req.secretAccessKey}`;
  for (const part of [day, req.region, service, 'aws4_request']) key = mac(key, part);
  const signature = createHmac('sha256', key).update(stringToSign).digest('hex');
  return {
    ...headers,
    authorization: `AWS4-HMAC-SHA256 Credential=${req.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`,
  };
}

function lower(h: Record<string, string>): Record<string, string> {
  return Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));
}
