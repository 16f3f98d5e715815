import { createHash, randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { JobIdCodec } from '../../core/model/jobId.js';
import { deflateRawSync } from 'node:zlib';
import {
  compactInbound,
  deliveryMessage,
  inboundBody,
  inboundMatchesId,
  inboundMessageBody,
  MAX_INBOUND_MESSAGE_BYTES,
  packBatches,
  packInbound,
  parseInboundBody,
  parseInboundJobs,
  SQS_BILLING_CHUNK_BYTES,
  type InboundJob,
} from '../../core/model/messages.js';
import type { OutgoingMessage } from '../../core/model/ports.js';
import { jobTrace } from '../../core/model/traceContext.js';
import { ALTERED_BY_PARSE } from '../support/payloads.js';

const KIB = 1024;
/** SendMessageBatch limits: 10 entries, 256 KiB in total. */
const BATCH_ENTRIES = 10;
const BATCH_BYTES = 256 * KIB;

/** What SQS counts toward the size of a message: the body plus each attribute's name, type ("String") and value, in UTF-8. */
function sqsBytes(m: OutgoingMessage): number {
  let n = new TextEncoder().encode(m.body).length;
  for (const [name, value] of Object.entries(m.attributes ?? {})) n += new TextEncoder().encode(name + 'String' + value).length;
  return n;
}

const codec = new JobIdCodec(createHash('sha256').update('messages test key').digest());
const tenantArb = fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,39}$/);
const dueArb = fc.integer({ min: 0, max: Date.UTC(2040, 0, 1) });
/** Any JSON value, as the JSON text validateJob stores (JSON.stringify of a parsed value). */
const payloadTextArb = fc.jsonValue().map((v) => JSON.stringify(v));
const jobIdArb = fc
  .record({
    tenant: tenantArb,
    shard: fc.integer({ min: 0, max: 9_999 }),
    dueMs: dueArb,
    path: fc.constantFrom('t' as const, 'u' as const, 'd' as const),
  })
  .map((p) => codec.encode({ ...p, random: codec.placement(p.tenant, 64).random }));

/** Bodies from empty to ~200 KB, in 1- to 4-byte characters, so that both batch limits come into play. */
const bodyArb = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc
    .constantFrom('a', 'é', '€', '😀')
    .chain((ch) => fc.integer({ min: 0, max: Math.floor(200_000 / Buffer.byteLength(ch)) }).map((n) => ch.repeat(n))),
);
const messageArb = fc.record(
  {
    body: bodyArb,
    attributes: fc.dictionary(fc.string({ minLength: 1, maxLength: 20 }), fc.string({ maxLength: 40 }), { maxKeys: 3 }),
    delaySeconds: fc.integer({ min: 0, max: 900 }),
  },
  { requiredKeys: ['body'] },
);
const messagesArb = fc.array(messageArb, { maxLength: 40 }).map((ms) => ms.map((m, i): OutgoingMessage => ({ id: String(i), ...m })));

describe('packBatches', () => {
  it('never exceeds 10 entries or 256 KiB per batch, keeps order, loses and duplicates nothing (property)', () => {
    fc.assert(
      fc.property(messagesArb, (messages) => {
        const batches = packBatches(messages);
        for (const b of batches) {
          expect(b.length).toBeGreaterThan(0);
          expect(b.length).toBeLessThanOrEqual(BATCH_ENTRIES);
          expect(b.reduce((n, m) => n + sqsBytes(m), 0)).toBeLessThanOrEqual(BATCH_BYTES);
        }
        // Same objects, same order, nothing lost or repeated.
        const flat = batches.flat();
        expect(flat).toHaveLength(messages.length);
        flat.forEach((m, i) => expect(m).toBe(messages[i]));
      }),
      { numRuns: 300 },
    );
  });

  it('starts a new batch only when the next message would not fit (no needless calls) (property)', () => {
    fc.assert(
      fc.property(messagesArb, (messages) => {
        const batches = packBatches(messages);
        for (let i = 0; i + 1 < batches.length; i++) {
          const full = batches[i]!.length === BATCH_ENTRIES;
          const wouldOverflow = batches[i]!.reduce((n, m) => n + sqsBytes(m), 0) + sqsBytes(batches[i + 1]![0]!) > BATCH_BYTES;
          expect(full || wouldOverflow).toBe(true);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('packs nothing into no batch', () => {
    expect(packBatches([])).toEqual([]);
  });

  it('splits by count: 25 small messages give 10, 10 and 5', () => {
    const messages = Array.from({ length: 25 }, (_, i): OutgoingMessage => ({ id: String(i), body: `m${i}` }));
    expect(packBatches(messages).map((b) => b.map((m) => m.id))).toEqual([
      messages.slice(0, 10).map((m) => m.id),
      messages.slice(10, 20).map((m) => m.id),
      messages.slice(20).map((m) => m.id),
    ]);
  });

  it('splits by bytes at exactly 256 KiB, counting attributes', () => {
    const half = 'x'.repeat(128 * KIB);
    // Two halves fill a batch exactly.
    expect(
      packBatches([
        { id: 'a', body: half },
        { id: 'b', body: half },
      ]).map((b) => b.length),
    ).toEqual([2]);
    // One byte more does not fit.
    expect(
      packBatches([
        { id: 'a', body: half },
        { id: 'b', body: half + 'x' },
      ]).map((b) => b.length),
    ).toEqual([1, 1]);
    // Nor does an attribute on top: name "k" (1) + type "String" (6) + value "v" (1).
    expect(
      packBatches([
        { id: 'a', body: half },
        { id: 'b', body: half, attributes: { k: 'v' } },
      ]).map((b) => b.length),
    ).toEqual([1, 1]);
    // The type name counts: a 2-byte body cut does not make room for an 8-byte attribute.
    expect(
      packBatches([
        { id: 'a', body: half },
        { id: 'b', body: 'x'.repeat(128 * KIB - 2), attributes: { k: 'v' } },
      ]).map((b) => b.length),
    ).toEqual([1, 1]);
    const shorter = 'x'.repeat(128 * KIB - 8);
    expect(
      packBatches([
        { id: 'a', body: half },
        { id: 'b', body: shorter, attributes: { k: 'v' } },
      ]).map((b) => b.length),
    ).toEqual([2]);
    // Bytes, not characters: 64 Ki "é" are 128 KiB.
    const halfE = 'é'.repeat(64 * KIB);
    expect(
      packBatches([
        { id: 'a', body: halfE },
        { id: 'b', body: halfE },
        { id: 'c', body: 'x' },
      ]).map((b) => b.length),
    ).toEqual([2, 1]);
  });

  it('sends a message of exactly 256 KiB alone', () => {
    const batches = packBatches([
      { id: 'a', body: 'x' },
      { id: 'b', body: 'x'.repeat(BATCH_BYTES) },
      { id: 'c', body: 'x' },
    ]);
    expect(batches.map((b) => b.map((m) => m.id))).toEqual([['a'], ['b'], ['c']]);
  });
});

describe('deliveryMessage', () => {
  it('is {"jobId", "tenant", "runAt" (RFC 3339, ms), "payload"} with the original payload (property)', () => {
    fc.assert(
      fc.property(
        jobIdArb,
        tenantArb,
        dueArb,
        payloadTextArb,
        fc.option(fc.integer({ min: 0, max: 900 }), { nil: undefined }),
        (jobId, tenant, dueMs, payload, delaySeconds) => {
          const m = deliveryMessage('7', { jobId, tenant, dueMs, payload }, delaySeconds);
          const body = JSON.parse(m.body) as Record<string, unknown>;
          expect(Object.keys(body).sort()).toEqual(['jobId', 'payload', 'runAt', 'tenant']);
          expect(body.jobId).toBe(jobId);
          expect(body.tenant).toBe(tenant);
          expect(body.payload).toEqual(JSON.parse(payload));
          expect(body.runAt).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/);
          expect(Date.parse(body.runAt as string)).toBe(dueMs);
          // The attribute carries the same value, so that a consumer need not parse the body.
          // And the job's trace (docs/tracing.md): the one its id derives, the send as parent span.
          expect(m.attributes).toEqual({
            runAt: body.runAt,
            traceparent: `00-${jobTrace(jobId).traceId}-${m.attributes!.traceparent!.slice(36, 52)}-01`,
          });
          expect(m.attributes!.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
          expect(m.id).toBe('7');
          if (delaySeconds === undefined) expect('delaySeconds' in m).toBe(false);
          else expect(m.delaySeconds).toBe(delaySeconds);
        },
      ),
      { numRuns: 500 },
    );
  });

  it('stays valid JSON whatever the strings hold', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), fc.string({ unit: 'binary' }), (jobId, tenant, s) => {
        const m = deliveryMessage('0', { jobId, tenant, dueMs: 1_000, payload: JSON.stringify(s) });
        expect(JSON.parse(m.body)).toEqual({ jobId, tenant, runAt: '1970-01-01T00:00:01.000Z', payload: s });
      }),
    );
  });

  it('writes a concrete example as documented', () => {
    const m = deliveryMessage('0', {
      jobId: 'j1.demo.3.1893456000250.d.abc.def',
      tenant: 'demo',
      dueMs: Date.UTC(2030, 0, 1, 0, 0, 0, 250),
      payload: '{"a":[1,"x"]}',
    });
    expect(JSON.parse(m.body)).toEqual({
      jobId: 'j1.demo.3.1893456000250.d.abc.def',
      tenant: 'demo',
      runAt: '2030-01-01T00:00:00.250Z',
      payload: { a: [1, 'x'] },
    });
    expect(m.attributes).toEqual({
      runAt: '2030-01-01T00:00:00.250Z',
      traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/),
    });
  });

  it("carries a workflow job's workflow id and its parents' summary, as text, between runAt and the payload", () => {
    const parents = '[{"key":"extract","jobId":"j1.x","outcome":"SUCCEEDED","result": {"rows" : 1.50}}]';
    const m = deliveryMessage('0', {
      jobId: 'j1.demo.3.1893456000000.w.abc.def',
      tenant: 'demo',
      dueMs: Date.UTC(2030, 0, 1),
      workflow: 'wf1.demo.1.abc.def',
      parents,
      payload: '{"b" : 2}',
    });
    expect(m.body).toBe(
      `{"jobId":"j1.demo.3.1893456000000.w.abc.def","tenant":"demo","runAt":"2030-01-01T00:00:00.000Z","workflow":"wf1.demo.1.abc.def","parents":${parents},"payload":{"b" : 2}}`,
    );
    expect(m.attributes).toEqual({
      runAt: '2030-01-01T00:00:00.000Z',
      workflow: 'wf1.demo.1.abc.def',
      traceparent: expect.stringMatching(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/),
    });
    // A root job of a workflow: the id and the attribute, no parents.
    const root = deliveryMessage('0', { jobId: 'j', tenant: 'demo', dueMs: 0, workflow: 'wf1.x', payload: 'null' });
    expect(JSON.parse(root.body)).toEqual({
      jobId: 'j',
      tenant: 'demo',
      runAt: '1970-01-01T00:00:00.000Z',
      workflow: 'wf1.x',
      payload: null,
    });
  });
});

describe('inboundMatchesId', () => {
  const codec = new JobIdCodec(randomBytes(32));
  const random = 'AAAAAAAAAAAAAAAA';
  const job = (extra: Partial<InboundJob> = {}): InboundJob => ({
    jobId: '',
    tenant: 'demo',
    shard: 2,
    dueMs: 5_000,
    payload: 'null',
    ...extra,
  });
  const id = (path: 't' | 'u' | 'd' | 'w', dueMs = 5_000) => codec.parse(codec.encode({ tenant: 'demo', shard: 2, dueMs, path, random }));

  it("takes a job at its id's tenant, shard and due time; never one sent straight to its queue", () => {
    expect(inboundMatchesId(id('t'), job())).toBe(true);
    expect(inboundMatchesId(id('u'), job())).toBe(true);
    expect(inboundMatchesId(id('t'), job({ dueMs: 5_001 }))).toBe(false);
    expect(inboundMatchesId(id('t'), job({ shard: 3 }))).toBe(false);
    expect(inboundMatchesId(id('t'), job({ tenant: 'other' }))).toBe(false);
    expect(inboundMatchesId(id('d'), job())).toBe(false);
  });

  it("takes a workflow job (path w) at any due time, but only as a workflow's job", () => {
    expect(inboundMatchesId(id('w', 1_000), job({ dueMs: 99_000, workflow: 'wf1.demo' }))).toBe(true);
    expect(inboundMatchesId(id('w', 1_000), job({ dueMs: 99_000 }))).toBe(false);
    expect(inboundMatchesId(id('w', 1_000), job({ shard: 3, workflow: 'wf1.demo' }))).toBe(false);
  });
});

describe('inbound messages', () => {
  const inboundArb = fc.record({
    jobId: fc.oneof(jobIdArb, fc.string({ unit: 'binary' })),
    tenant: fc.oneof(tenantArb, fc.string({ unit: 'binary' })),
    shard: fc.integer({ min: 0, max: 9_999 }),
    dueMs: fc.integer({ min: 0, max: Number.MAX_SAFE_INTEGER }),
    payload: payloadTextArb,
  });

  it('round-trip through inboundBody and parseInboundBody (property)', () => {
    fc.assert(
      fc.property(fc.array(inboundArb, { minLength: 1, maxLength: 20 }), (jobs: InboundJob[]) => {
        expect(parseInboundBody(inboundBody(jobs))).toEqual(jobs);
      }),
      { numRuns: 500 },
    );
  });

  it("round-trip a workflow job's id and parents' summary as text, also deflated (version 4)", () => {
    const parents = `[{"key":"a","jobId":"j1.x","outcome":"SUCCEEDED","result": ${JSON.stringify('r'.repeat(70_000))} }]`;
    const jobs: InboundJob[] = [
      { jobId: 'j1', tenant: 'demo', shard: 1, dueMs: 5, payload: '{"x" : 1}', workflow: 'wf1.demo.1.a.b', parents },
      { jobId: 'j2', tenant: 'demo', shard: 2, dueMs: 6, payload: 'null', workflow: 'wf1.demo.1.a.b' },
      { jobId: 'j3', tenant: 'demo', shard: 3, dueMs: 7, payload: '[]' },
    ];
    expect(parseInboundBody(inboundBody(jobs))).toEqual(jobs);
    const deflated = inboundMessageBody(jobs);
    expect(deflated.startsWith('{"v":4,')).toBe(true);
    expect(parseInboundBody(deflated)).toEqual(jobs);
    // parents that are not an array's text, or a workflow that is not a string: not one submit wrote.
    expect(parseInboundJobs('{"v":2,"jobs":[{"jobId":"j","tenant":"t","shard":0,"dueMs":1,"parents":{},"payload":1}]}')).toEqual([
      undefined,
    ]);
    expect(parseInboundJobs('{"v":2,"jobs":[{"jobId":"j","tenant":"t","shard":0,"dueMs":1,"workflow":7,"payload":1}]}')).toEqual([
      undefined,
    ]);
  });

  it('keep a null payload', () => {
    const job: InboundJob = { jobId: 'j', tenant: 'demo', shard: 0, dueMs: 5, payload: 'null' };
    expect(parseInboundBody(inboundBody([job]))).toEqual([job]);
  });

  it('read the one-job version 1 that earlier releases left in the queue', () => {
    const v1 = '{"v":1,"jobId":"j","tenant":"demo","shard":3,"dueMs":7,"payload":{"a":[1]}}';
    expect(parseInboundBody(v1)).toEqual([{ jobId: 'j', tenant: 'demo', shard: 3, dueMs: 7, payload: '{"a":[1]}' }]);
  });

  it('pack jobs into as few messages as fit, in order, each under the limit (property)', () => {
    const sized = fc.record({
      jobId: jobIdArb,
      tenant: tenantArb,
      shard: fc.integer({ min: 0, max: 63 }),
      dueMs: fc.integer({ min: 0, max: 2 ** 45 }),
      // Up to 240 KiB, as submit allows; mostly small.
      payload: fc
        .oneof(
          { weight: 5, arbitrary: fc.integer({ min: 2, max: 2_000 }) },
          { weight: 1, arbitrary: fc.integer({ min: 2, max: 240 * 1024 }) },
        )
        .map((n) => JSON.stringify('x'.repeat(n - 2))),
    });
    fc.assert(
      fc.property(fc.array(sized, { minLength: 1, maxLength: 100 }), (jobs: InboundJob[]) => {
        const packed = packInbound(jobs);
        expect(packed.flatMap((m) => m.indexes)).toEqual(jobs.map((_, i) => i));
        for (const m of packed) {
          expect(Buffer.byteLength(m.body)).toBeLessThanOrEqual(MAX_INBOUND_MESSAGE_BYTES);
          expect(parseInboundBody(m.body)).toEqual(m.indexes.map((i) => jobs[i]));
        }
        // Greedy: no two neighbouring messages would have fitted in one.
        for (let k = 1; k < packed.length; k++) {
          expect(
            Buffer.byteLength(packed[k - 1]!.body) +
              Buffer.byteLength(inboundBody([jobs[packed[k]!.indexes[0]!]!])) -
              Buffer.byteLength(inboundBody([])),
          ).toBeGreaterThan(MAX_INBOUND_MESSAGE_BYTES - 2);
        }
      }),
      { numRuns: 200 },
    );
    // A hundred 1 KB jobs: one message.
    const small = Array.from({ length: 100 }, (_, i): InboundJob => ({
      jobId: `j${i}`,
      tenant: 'demo',
      shard: i % 64,
      dueMs: 1e12 + i,
      payload: JSON.stringify('p'.repeat(1_000)),
    }));
    expect(packInbound(small)).toHaveLength(1);
  });

  it('carry every payload as the exact text submit stored, never parsed again', () => {
    const texts = [...ALTERED_BY_PARSE, 'null'];
    const jobs = texts.map((payload, i): InboundJob => ({ jobId: `j${i}`, tenant: 'demo', shard: i, dueMs: 1e12 + i, payload }));
    expect(parseInboundBody(inboundBody(jobs))).toEqual(jobs);
    for (const { body, indexes } of packInbound(jobs))
      expect(parseInboundBody(body)?.map((j) => j.payload)).toEqual(indexes.map((i) => texts[i]));
  });

  it('deflate a body (version 4) only when that saves a billed 64 KiB chunk, and read it back byte for byte', () => {
    const chunks = (body: string) => Math.ceil(Buffer.byteLength(body) / SQS_BILLING_CHUNK_BYTES);
    // A hundred 1 KB jobs of varied JSON (about 110 KB: two chunks) travel in one chunk.
    const hundred = Array.from({ length: 100 }, (_, i): InboundJob => ({
      jobId: `j${i}`,
      tenant: 'demo',
      shard: i % 64,
      dueMs: 1e12 + i,
      payload: JSON.stringify({ seq: i, kind: ['invoice', 'reminder', 'renewal'][i % 3], note: `customer ${i * 7919} `.repeat(40) }),
      ...(i % 10 === 0 ? { priority: 9 } : {}),
    }));
    const v2 = inboundBody(hundred);
    expect(chunks(v2)).toBe(2);
    const body = inboundMessageBody(hundred);
    expect(body.startsWith('{"v":4,"z":"')).toBe(true);
    expect(chunks(body)).toBe(1);
    expect(parseInboundBody(body)).toEqual(hundred);
    expect(parseInboundJobs(body)).toEqual(hundred);
    // Small bodies, and bodies deflate cannot bring under a chunk less, stay version 2.
    expect(inboundMessageBody(hundred.slice(0, 5))).toBe(inboundBody(hundred.slice(0, 5)));
    const noise = Array.from({ length: 3 }, (_, i): InboundJob => ({
      jobId: `n${i}`,
      tenant: 'demo',
      shard: i,
      dueMs: 1e12,
      payload: JSON.stringify(randomBytes(30_000).toString('base64')), // incompressible
    }));
    expect(chunks(inboundBody(noise))).toBe(2);
    expect(compactInbound(inboundBody(noise))).toBe(inboundBody(noise));
  });

  it('keep every payload byte for byte through a deflated body (property)', () => {
    const texts = [...ALTERED_BY_PARSE, 'null'];
    fc.assert(
      fc.property(fc.array(payloadTextArb, { minLength: 1, maxLength: 30 }), fc.integer({ min: 0, max: 50 }), (extra, pad) => {
        // Padding takes the body over a chunk, so that it is deflated.
        const payloads = [...texts, ...extra, JSON.stringify('x'.repeat(70_000 + pad))];
        const jobs = payloads.map((payload, i): InboundJob => ({ jobId: `j${i}`, tenant: 'demo', shard: i, dueMs: 1e12 + i, payload }));
        const body = inboundMessageBody(jobs);
        expect(body.startsWith('{"v":4,')).toBe(true);
        expect(parseInboundBody(body)?.map((j) => j.payload)).toEqual(payloads);
      }),
      { numRuns: 50 },
    );
  });

  it('refuse a version 4 body that is not one submit wrote', () => {
    const z = (text: string) => deflateRawSync(Buffer.from(text)).toString('base64');
    const job = '{"jobId":"j","tenant":"demo","shard":1,"dueMs":2,"payload":1}';
    expect(parseInboundBody(`{"v":4,"z":"${z(`{"v":2,"jobs":[${job}]}`)}"}`)).toHaveLength(1);
    for (const bad of [
      '{"v":4,"z":"not base64!"}',
      '{"v":4,"z":"AAAA"}', // not deflate
      `{"v":4,"z":"${z('{"v":1,"jobId":"j"}')}"}`, // not version 2 inside
      `{"v":4,"z":"${z(`{"v":4,"z":"${z(`{"v":2,"jobs":[${job}]}`)}"}`)}"}`, // nested
      `{"v":4,"z":"${z(`{"v":2,"jobs":[${job}]`)}"}`, // truncated JSON
      `{"v":4,"z":"${z(`{"v":2,"jobs":[${job}]}`)}","x":1}`,
      `{"v":4,"z":"${deflateRawSync(Buffer.alloc(2 * 1024 * 1024, 32)).toString('base64')}"}`, // inflates past the bound
    ])
      expect(parseInboundJobs(bad)).toBeUndefined();
  });

  it('parse each job on its own: a malformed entry is undefined in its place, the others are kept', () => {
    const job = { jobId: 'j', tenant: 'demo', shard: 1, dueMs: 2, payload: 1.0 };
    const body = `{"v":2,"jobs":[{"jobId":"a","tenant":"demo","shard":1,"dueMs":2,"payload":1.0},{"jobId":"b","tenant":"demo","shard":"x","dueMs":2,"payload":1},null]}`;
    expect(parseInboundJobs(body)).toEqual([{ jobId: 'a', tenant: 'demo', shard: 1, dueMs: 2, payload: '1.0' }, undefined, undefined]);
    expect(parseInboundBody(body)).toBeUndefined();
    expect(parseInboundJobs(JSON.stringify({ v: 2, jobs: [job] }))).toHaveLength(1);
    for (const bad of ['', '{', '[]', '{"v":2,"jobs":[]}', '{"v":3,"jobs":[{}]}']) expect(parseInboundJobs(bad)).toBeUndefined();
  });

  it('refuse garbage', () => {
    const good = { v: 1, jobId: 'j', tenant: 'demo', shard: 1, dueMs: 2, payload: { a: 1 } };
    expect(parseInboundBody(JSON.stringify(good))).toEqual([{ jobId: 'j', tenant: 'demo', shard: 1, dueMs: 2, payload: '{"a":1}' }]);
    const { v: _v, ...job } = good;
    expect(parseInboundBody(JSON.stringify({ v: 2, jobs: [job, job] }))).toHaveLength(2);
    const without = (k: keyof typeof good) => JSON.stringify(Object.fromEntries(Object.entries(good).filter(([key]) => key !== k)));
    const bad = [
      '',
      'not json',
      '{',
      'null',
      'true',
      '42',
      '"text"',
      '[]',
      JSON.stringify([good]),
      '{}',
      without('v'),
      without('jobId'),
      without('tenant'),
      without('shard'),
      without('dueMs'),
      without('payload'),
      JSON.stringify({ ...good, v: 2 }),
      JSON.stringify({ ...good, v: 3 }),
      JSON.stringify({ v: 2, jobs: [] }),
      JSON.stringify({ v: 2, jobs: job }),
      JSON.stringify({ v: 2, jobs: [job, { ...job, shard: 'x' }] }),
      JSON.stringify({ v: 2, jobs: [job, null] }),
      JSON.stringify({ v: 2, jobs: [[job]] }),
      JSON.stringify({ ...good, v: '1' }),
      JSON.stringify({ ...good, jobId: 5 }),
      JSON.stringify({ ...good, tenant: null }),
      JSON.stringify({ ...good, shard: '1' }),
      JSON.stringify({ ...good, shard: 1.5 }),
      JSON.stringify({ ...good, dueMs: '2' }),
      JSON.stringify({ ...good, dueMs: 2.5 }),
      JSON.stringify({ ...good, dueMs: 2 ** 60 }),
      // A delivery message is not an inbound message.
      deliveryMessage('0', { jobId: 'j', tenant: 'demo', dueMs: 2, payload: '1' }).body,
    ];
    for (const body of bad) expect(parseInboundBody(body)).toBeUndefined();
  });

  it('never throw, whatever the body (property)', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string({ unit: 'binary' }), fc.json()), (body) => {
        expect(() => parseInboundBody(body)).not.toThrow();
      }),
      { numRuns: 1_000 },
    );
  });
});
