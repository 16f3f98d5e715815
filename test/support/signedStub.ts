import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifySigV4 } from '../../local/sigv4.js';

/** The key the stubs accept (and nothing else), in the region they check. */
export const STUB_CREDENTIALS = { accessKeyId: 'AKIDSTUBSTUBSTUB', secretAccessKey: 'stub-secret' };
export const STUB_REGION = 'eu-west-1';

export interface StubRequest {
  readonly method: string;
  readonly url: string;
  readonly body: string;
}

/** One signed request as a stub's routes see it, and how they answer. */
export interface StubCall {
  readonly method: string;
  readonly path: string;
  readonly params: URLSearchParams;
  readonly raw: string;
  reply(status: number, body: unknown, headers?: Record<string, string>): void;
  /** `{"error": {"code", "message"}}`, as the API's handlers answer (with `headers`, e.g. a 429's `retry-after`). */
  error(status: number, code: string, message: string, headers?: Record<string, string>): void;
}

/**
 * An HTTP server for client tests standing in for the API: it records every request, checks
 * SigV4 (query string included) as the local gateway does (403 `{"message"}` otherwise), and
 * hands the rest to `route`.
 */
export async function startSignedStub(
  route: (call: StubCall) => void | Promise<void>,
): Promise<{ endpoint: string; requests: StubRequest[]; close(): Promise<void> }> {
  const requests: StubRequest[] = [];
  const server: Server = createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const url = req.url!;
    requests.push({ method: req.method!, url, body: raw });
    const reply = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      res.writeHead(status, { 'content-type': 'application/json', 'apigw-requestid': `req-${requests.length}`, ...headers });
      res.end(JSON.stringify(body));
    };
    const q = url.indexOf('?');
    const [path, query] = q < 0 ? [url, ''] : [url.slice(0, q), url.slice(q + 1)];
    // The local stack's own routes (`/local/...`) are unsigned, as there.
    const verified = path.startsWith('/local/')
      ? { ok: true as const }
      : verifySigV4(
          { method: req.method!, path, query, headers: req.headers, body: Buffer.from(raw) },
          {
            secretOf: (id) => (id === STUB_CREDENTIALS.accessKeyId ? STUB_CREDENTIALS.secretAccessKey : undefined),
            now: Date.now(),
            region: STUB_REGION,
          },
        );
    if (!verified.ok) return reply(403, { message: verified.message });
    await route({
      method: req.method!,
      path,
      params: new URLSearchParams(query),
      raw,
      reply,
      error: (status, code, message, headers) => reply(status, { error: { code, message } }, headers),
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}
