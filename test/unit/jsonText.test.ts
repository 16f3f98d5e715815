import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { duplicateKeysOf, isJson, JsonSyntaxError, parseJson, RawJson, type JsonPath } from '../../core/util/jsonText.js';
import { ALTERED_BY_PARSE } from '../support/payloads.js';

/** What JSON.parse says about `text`: its value, or that it is not JSON. */
function reference(text: string): { ok: true; value: unknown } | { ok: false } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch {
    return { ok: false };
  }
}

/** Build everything (no raw value), as JSON.parse does. */
const buildAll = (text: string) => parseJson(text, { maxBuildDepth: Number.POSITIVE_INFINITY });

const payloadPath = (path: JsonPath) => path.length === 1 && path[0] === 'payload';

// ---- generators --------------------------------------------------------------------------------

const wsArb = fc.constantFrom('', '', ' ', '\n', '\t', '\r\n  ', '  \t ');
/** Numbers as people and programs write them, including what JSON.parse would alter. */
const numberTextArb = fc.oneof(
  fc.constantFrom(
    '0',
    '-0',
    '1.0',
    '-0.0',
    '1e400',
    '-1e400',
    '1E-400',
    '9007199254740993',
    '18446744073709551616',
    '0.1000000000000000055511151231257827',
    '1e+2',
    '2E-0',
    '123456789012345678901234567890',
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }).map((d) => JSON.stringify(d)),
  fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
);
/** Strings as JSON text: raw characters of every kind (emoji, é, U+2028), and escapes. */
const stringTextArb = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 8 }).map((s) => JSON.stringify(s)),
  fc.constantFrom(
    '"\\u0041"',
    '"\\uFFFF"',
    '"\\ud83d\\ude00"',
    '"\\uD800"',
    '"é"',
    '"😀"',
    '"\u2028"',
    '"\\/"',
    '"a\\"b"',
    '"\\\\u0041"',
    '""',
  ),
);
const keyArb = fc.oneof(fc.constantFrom('"a"', '"b"', '"__proto__"', '"payload"', '"1"', '"\\u0061"', '""'), stringTextArb);

/** JSON text with arbitrary formatting: whitespace anywhere, duplicate keys, any key order. */
const jsonTextArb: fc.Arbitrary<string> = fc.letrec<{ value: string }>((tie) => ({
  value: fc.oneof(
    { maxDepth: 4, depthSize: 'small' },
    numberTextArb,
    stringTextArb,
    fc.constantFrom('true', 'false', 'null'),
    fc
      .tuple(fc.array(fc.tuple(wsArb, tie('value'), wsArb), { maxLength: 4 }), wsArb)
      .map(([items, ws]) => (items.length === 0 ? `[${ws}]` : `[${items.map(([a, v, b]) => a + v + b).join(',')}]`)),
    fc
      .tuple(fc.array(fc.tuple(wsArb, keyArb, wsArb, wsArb, tie('value'), wsArb), { maxLength: 4 }), wsArb)
      .map(([members, ws]) =>
        members.length === 0 ? `{${ws}}` : `{${members.map(([a, k, b, c, v, d]) => `${a}${k}${b}:${c}${v}${d}`).join(',')}}`,
      ),
  ),
})).value;

/** Characters that make up (and break) JSON. */
const jsonishArb = fc
  .array(fc.constantFrom(...'{}[]":,.-+eE0123456789 \t\n\r\\/ubfnrtalsxAF\u0000\u001f\u00e9\ud83d\ude00\ud800\ufeff'.split('')), {
    maxLength: 30,
  })
  .map((cs) => cs.join(''));

/** Valid JSON text with one random edit: often invalid, sometimes still valid. */
const mutatedArb = fc
  .tuple(
    jsonTextArb,
    fc.nat(),
    fc.constantFrom('insert', 'delete', 'replace'),
    fc.constantFrom(...'{}[]":,.-+eE019 \\ut\u0000\u001fx\t'.split('')),
  )
  .map(([text, at, op, ch]) => {
    const i = text.length === 0 ? 0 : at % text.length;
    if (op === 'insert') return text.slice(0, i) + ch + text.slice(i);
    if (op === 'delete') return text.slice(0, i) + text.slice(i + 1);
    return text.slice(0, i) + ch + text.slice(i + 1);
  });

// ---- tests -------------------------------------------------------------------------------------

describe('parseJson agrees with JSON.parse', () => {
  it('accepts exactly what JSON.parse accepts, and builds the same value (property)', () => {
    fc.assert(
      fc.property(fc.oneof(jsonTextArb, mutatedArb, jsonishArb, fc.json(), fc.string({ unit: 'binary', maxLength: 20 })), (text) => {
        const ref = reference(text);
        expect(isJson(text)).toBe(ref.ok);
        if (ref.ok) {
          // toEqual compares numbers with Object.is: -0 stays -0, 1e400 is Infinity in both.
          expect(buildAll(text)).toEqual(ref.value);
          expect(parseJson(text, { maxBuildDepth: 3 })).toBeDefined();
        } else {
          expect(() => buildAll(text)).toThrow(JsonSyntaxError);
        }
      }),
      { numRuns: 5_000 },
    );
  });

  it('agrees on hand-picked edge cases', () => {
    const cases = [
      '',
      ' ',
      '\ufeff{}',
      '{}',
      '[]',
      '[,]',
      '[1,]',
      '{"a":1,}',
      '{"a" 1}',
      '{a:1}',
      "{'a':1}",
      '01',
      '-01',
      '1.',
      '.5',
      '-',
      '+1',
      '1e',
      '1e+',
      '1.e3',
      '0x10',
      'NaN',
      'Infinity',
      '-Infinity',
      'tru',
      'truex',
      'nul',
      '"\\x"',
      '"\\u12"',
      '"\\u12G4"',
      '"\t"',
      '"\u0000"',
      '"\u001f"',
      '" "',
      '"\u007f"',
      '"a',
      '"\\"',
      '[1 2]',
      '{"a":1 "b":2}',
      '1 2',
      ' 1 ',
      '\u00a01',
      '\u20281',
      '[-0]',
      '-0',
      '1E400',
      '{"__proto__":{"x":1}}',
      '{"a":1,"a":2}',
      '[[[[[]]]]]',
      '{"":""}',
      '"\ud800"',
      '"\\ud800"',
      '[1]]',
      '[[1]',
      '{"a":{}}}',
    ];
    for (const text of cases) {
      const ref = reference(text);
      expect({ text, ok: isJson(text) }).toEqual({ text, ok: ref.ok });
      if (ref.ok) expect(buildAll(text)).toEqual(ref.value);
    }
  });

  it('makes "__proto__" an own member, like JSON.parse, not a prototype', () => {
    const v = buildAll('{"__proto__":{"x":1},"a":2}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
    expect(Object.keys(v)).toEqual(['__proto__', 'a']);
    expect(v).toEqual(JSON.parse('{"__proto__":{"x":1},"a":2}'));
  });

  it('reports duplicate member names of built objects (the last value wins)', () => {
    const v = buildAll('{"a":1,"b":2,"a":3,"a":4,"c":{"d":1,"d":2}}') as Record<string, Record<string, unknown>>;
    expect(v.a).toBe(4);
    expect(duplicateKeysOf(v)).toEqual(['a']);
    expect(duplicateKeysOf(v.c!)).toEqual(['d']);
    expect(duplicateKeysOf(buildAll('{"a":1}') as object)).toEqual([]);
  });

  it('says where the text stops being JSON', () => {
    const err = (() => {
      try {
        parseJson('{"payload": [1, 2,, 3]}');
      } catch (e) {
        return e;
      }
    })();
    expect(err).toBeInstanceOf(JsonSyntaxError);
    expect((err as JsonSyntaxError).position).toBe(18);
    expect((err as Error).message).toMatch(/position 18/);
    expect(() => parseJson('{"a": 1')).toThrow(/end of the text/);
  });
});

describe('raw values', () => {
  it('keep the exact source slice of the payload member, whatever its formatting (property)', () => {
    fc.assert(
      fc.property(jsonTextArb, wsArb, wsArb, wsArb, wsArb, fc.boolean(), (payload, a, b, c, d, payloadFirst) => {
        const member = `${a}"payload"${b}:${c}${payload}${d}`;
        const other = `${d}"delaySeconds"${c}:${b}5${a}`;
        const body = `{${payloadFirst ? `${member},${other}` : `${other},${member}`}}`;
        const parsed = parseJson(body, { raw: payloadPath }) as { payload: RawJson; delaySeconds: number };
        expect(parsed.payload).toBeInstanceOf(RawJson);
        expect(parsed.payload.text).toBe(payload);
        expect(body.slice(parsed.payload.start, parsed.payload.start + payload.length)).toBe(payload);
        expect(parsed.delaySeconds).toBe(5);
        // The slice is a JSON text with the value JSON.parse sees in the body.
        expect(isJson(parsed.payload.text)).toBe(true);
        expect(JSON.parse(parsed.payload.text)).toEqual((JSON.parse(body) as { payload: unknown }).payload);
      }),
      { numRuns: 3_000 },
    );
  });

  it('keep each job payload of a batch body (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.tuple(jsonTextArb, wsArb), { minLength: 1, maxLength: 5 }), (jobs) => {
        const body = `{"jobs":[${jobs.map(([p, w]) => `{"payload":${w}${p}${w},"delaySeconds":1}`).join(`,`)}]}`;
        const parsed = parseJson(body, { raw: (path) => path.length === 3 && path[0] === 'jobs' && path[2] === 'payload' }) as {
          jobs: { payload: RawJson }[];
        };
        expect(parsed.jobs.map((j) => j.payload.text)).toEqual(jobs.map(([p]) => p));
      }),
      { numRuns: 1_000 },
    );
  });

  it('keep the values JSON.parse would alter exactly as written', () => {
    for (const payload of ALTERED_BY_PARSE) {
      const parsed = parseJson(`{"payload":${payload}}`, { raw: payloadPath }) as { payload: RawJson };
      expect(parsed.payload.text).toBe(payload);
    }
  });

  it('measure the nesting depth, iteratively (a million levels do not overflow the stack)', () => {
    const depthOf = (t: string) => (parseJson(`{"payload":${t}}`, { raw: payloadPath }) as { payload: RawJson }).payload.depth;
    expect(depthOf('1')).toBe(0);
    expect(depthOf('[]')).toBe(1);
    expect(depthOf('{"a":[1,{"b":[]}]}')).toBe(4);
    expect(depthOf('[[1],[[2]],3]')).toBe(3);
    const n = 1_000_000;
    expect(depthOf('['.repeat(n) + ']'.repeat(n))).toBe(n);
    expect(() => parseJson(`{"payload":${'['.repeat(n)}${']'.repeat(n - 1)}}`, { raw: payloadPath })).toThrow(JsonSyntaxError);
  });

  it('stand in for values nested deeper than maxBuildDepth, so building never recurses without bound', () => {
    const n = 200_000;
    const v = parseJson(`{"x":${'['.repeat(n)}${']'.repeat(n)}}`) as { x: unknown };
    let node: unknown = v.x;
    let levels = 0;
    while (Array.isArray(node)) {
      node = node[0];
      levels++;
    }
    expect(node).toBeInstanceOf(RawJson);
    expect(levels).toBe(63); // the top object is depth 1; depth 65 onwards stays raw
  });
});
