import { describe, expect, it } from 'vitest';
import { jobTrace, packTrace, parseTraceparent, sampled, traceparent, unpackTrace } from '../../core/model/index.js';

/** W3C Trace Context as jobs carry it (docs/tracing.md). */
describe('parseTraceparent', () => {
  const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
  const SPAN = '00f067aa0ba902b7';

  it('reads version 00 and keeps the flags and a tracestate', () => {
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-01`, 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE')).toEqual({
      traceId: TRACE,
      spanId: SPAN,
      flags: 1,
      state: 'rojo=00f067aa0ba902b7,congo=t61rcWkgMzE',
    });
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-00`)).toEqual({ traceId: TRACE, spanId: SPAN, flags: 0 });
    expect(sampled(parseTraceparent(`00-${TRACE}-${SPAN}-00`)!)).toBe(false);
    expect(sampled(parseTraceparent(`00-${TRACE}-${SPAN}-03`)!)).toBe(true);
  });

  it('reads a later version by its first four fields', () => {
    expect(parseTraceparent(`cc-${TRACE}-${SPAN}-01-what-the-future-holds`)).toMatchObject({ traceId: TRACE, spanId: SPAN });
  });

  it.each([
    [undefined],
    [''],
    ['garbage'],
    [`ff-${TRACE}-${SPAN}-01`],
    [`00-${TRACE}-${SPAN}-01-extra`],
    [`00-${'0'.repeat(32)}-${SPAN}-01`],
    [`00-${TRACE}-${'0'.repeat(16)}-01`],
    [`00-${TRACE.toUpperCase()}-${SPAN}-01`],
    [`00-${TRACE.slice(1)}-${SPAN}-01`],
    [`00-${TRACE}-${SPAN}-1`],
  ])('ignores %j (the scheduler starts a trace of its own)', (header) => {
    expect(parseTraceparent(header)).toBeUndefined();
  });

  it('drops a tracestate that is too long or not printable ASCII, and keeps the trace', () => {
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-01`, 'a='.padEnd(600, 'x'))).toEqual({ traceId: TRACE, spanId: SPAN, flags: 1 });
    expect(parseTraceparent(`00-${TRACE}-${SPAN}-01`, 'a=\u00e9')).toEqual({ traceId: TRACE, spanId: SPAN, flags: 1 });
  });
});

describe('a job trace', () => {
  it('packs into 50 hex digits and back, and formats a traceparent', () => {
    const ctx = { traceId: 'a'.repeat(32), spanId: 'b'.repeat(16), flags: 1, state: 'k=v' };
    expect(packTrace(ctx)).toMatch(/^[0-9a-f]{50}$/);
    expect(unpackTrace(packTrace(ctx), 'k=v')).toEqual(ctx);
    expect(unpackTrace('nope')).toBeUndefined();
    expect(traceparent(ctx, 'c'.repeat(16))).toBe(`00-${'a'.repeat(32)}-${'c'.repeat(16)}-01`);
  });

  it('is derived from a job id the same way everywhere, sampled, and differs between jobs', () => {
    const a = jobTrace('j1.alpha.1.2.t.AAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBBBBBBBB');
    expect(jobTrace('j1.alpha.1.2.t.AAAAAAAAAAAAAAAA.BBBBBBBBBBBBBBBBBBBBBB')).toEqual(a);
    expect(a.traceId).toMatch(/^[0-9a-f]{32}$/);
    expect(a.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(a.flags).toBe(1);
    expect(jobTrace('j1.alpha.1.2.t.AAAAAAAAAAAAAAAB.BBBBBBBBBBBBBBBBBBBBBB').traceId).not.toBe(a.traceId);
  });
});
