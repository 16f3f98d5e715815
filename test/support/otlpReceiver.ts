import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A span as an OTLP/HTTP JSON request carries it (the fields the tests read). */
export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly kind: number;
  readonly startTimeUnixNano: string;
  readonly endTimeUnixNano: string;
  readonly attributes: { key: string; value: Record<string, unknown> }[];
  readonly links?: { traceId: string; spanId: string }[];
  readonly status?: { code: number; message?: string };
}

/**
 * A local OTLP/HTTP receiver (what a collector listens on at :4318): takes `POST /v1/traces` with
 * a JSON `ExportTraceServiceRequest` and keeps its spans (with their resource's attributes);
 * anything else is a 404, a body that is not JSON a 400.
 */
export async function startOtlpReceiver(): Promise<{
  readonly endpoint: string;
  readonly spans: ReceivedSpan[];
  readonly requests: { contentType: string | undefined; resource: Record<string, unknown> }[];
  attribute(span: ReceivedSpan, key: string): unknown;
  stop(): Promise<void>;
}> {
  const spans: ReceivedSpan[] = [];
  const requests: { contentType: string | undefined; resource: Record<string, unknown> }[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/traces') return void res.writeHead(404).end();
      let body: { resourceSpans?: { resource?: { attributes?: ReceivedSpan['attributes'] }; scopeSpans?: { spans?: ReceivedSpan[] }[] }[] };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch {
        return void res.writeHead(400).end();
      }
      for (const rs of body.resourceSpans ?? []) {
        const resource = Object.fromEntries((rs.resource?.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]]));
        requests.push({ contentType: req.headers['content-type'], resource });
        for (const ss of rs.scopeSpans ?? []) spans.push(...(ss.spans ?? []));
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    requests,
    attribute: (span, key) => {
      const v = span.attributes.find((a) => a.key === key)?.value;
      return v === undefined ? undefined : Object.values(v)[0];
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
