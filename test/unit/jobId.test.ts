import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { InvalidJobIdError } from '../../core/model/errors.js';
import { JobIdCodec, TENANT_PATTERN, parseSortKey, sortKey, type JobIdParts, type JobPath } from '../../core/model/jobId.js';

// Two deployment keys, fixed so that failures reproduce; 32 bytes is the documented minimum.
const KEY = createHash('sha256').update('unit-test key A').digest();
const OTHER_KEY = createHash('sha256').update('unit-test key B').digest();
const codec = new JobIdCodec(KEY);
const otherCodec = new JobIdCodec(OTHER_KEY);

const TEN_YEARS_MS = 10 * 366 * 24 * 3600 * 1000;
const NOW = Date.now();

/** The documented form `j1.<tenant>.<shard>.<dueMs>.<path>.<random 12 bytes>.<mac 16 bytes>`, base64url without padding. */
const DOCUMENTED_SHAPE = /^j1\.([a-z0-9][a-z0-9-]{0,39})\.(\d+)\.(\d+)\.([tud])\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22})$/;

const tenantArb = fc.stringMatching(/^[a-z0-9][a-z0-9-]{0,39}$/);
const shardArb = fc.integer({ min: 0, max: 9_999 });
const dueArb = fc.integer({ min: 0, max: NOW + TEN_YEARS_MS });
const pathArb = fc.constantFrom<JobPath>('t', 'u', 'd');
/** Valid parts whose random part comes from `placement()`. */
const partsArb: fc.Arbitrary<JobIdParts> = fc
  .record({ tenant: tenantArb, shard: shardArb, dueMs: dueArb, path: pathArb })
  .map(({ tenant, shard, dueMs, path }) => ({ tenant, shard, dueMs, path, random: codec.placement(tenant, 10_000).random }));

const validIdArb = partsArb.map((p) => codec.encode(p));

/** Every character that can appear in an id, plus a few that cannot. */
const ALPHABET = [...'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.', '#', ' ', '/', '+', '=', 'é', '\n', '\u0000'];

function expectRejected(id: unknown): void {
  expect(() => codec.parse(id as string)).toThrow(InvalidJobIdError);
}

function replaceField(id: string, index: number, value: string): string {
  const fields = id.split('.');
  fields[index] = value;
  return fields.join('.');
}

describe('JobIdCodec', () => {
  it('refuses keys shorter than 32 bytes', () => {
    expect(() => new JobIdCodec(Buffer.alloc(31, 1))).toThrow(RangeError);
    expect(() => new JobIdCodec(Buffer.alloc(32, 1))).not.toThrow();
  });

  it('the tenant generator only produces names the contract allows', () => {
    fc.assert(
      fc.property(tenantArb, (t) => {
        expect(t).toMatch(TENANT_PATTERN);
      }),
    );
  });

  describe('encode/parse round trip', () => {
    it('parses back every valid set of parts, in the documented form', () => {
      fc.assert(
        fc.property(partsArb, (parts) => {
          const id = codec.encode(parts);
          const m = DOCUMENTED_SHAPE.exec(id);
          expect(m).not.toBeNull();
          expect(m!.slice(1, 6)).toEqual([parts.tenant, String(parts.shard), String(parts.dueMs), parts.path, parts.random]);
          expect(codec.parse(id)).toEqual({ jobId: id, ...parts });
        }),
        { numRuns: 500 },
      );
    });

    it('is deterministic and verifies with another codec built from the same key bytes', () => {
      const twin = new JobIdCodec(Buffer.from(KEY));
      fc.assert(
        fc.property(partsArb, (parts) => {
          const id = codec.encode(parts);
          expect(twin.encode(parts)).toBe(id);
          expect(twin.parse(id)).toEqual({ jobId: id, ...parts });
        }),
      );
    });

    it('handles the extremes of each field', () => {
      const extremes: JobIdParts[] = [
        { tenant: '0', shard: 0, dueMs: 0, path: 't', random: 'AAAAAAAAAAAAAAAA' },
        { tenant: 'z'.repeat(40), shard: 9_999, dueMs: NOW + TEN_YEARS_MS, path: 'd', random: '________________' },
        { tenant: 'a-', shard: 10, dueMs: 1, path: 'u', random: '-_-_-_-_-_-_-_-_' },
      ];
      for (const parts of extremes) {
        const id = codec.encode(parts);
        expect(codec.parse(id)).toEqual({ jobId: id, ...parts });
      }
    });
  });

  describe('rejection', () => {
    it('rejects every single-character substitution of a valid id', () => {
      fc.assert(
        fc.property(validIdArb, (id) => {
          for (let i = 0; i < id.length; i++) {
            for (const c of ALPHABET) {
              if (c === id[i]) continue;
              expectRejected(id.slice(0, i) + c + id.slice(i + 1));
            }
          }
        }),
        { numRuns: 15 },
      );
    });

    it('rejects every single-character insertion and deletion', () => {
      fc.assert(
        fc.property(validIdArb, fc.constantFrom(...ALPHABET), (id, c) => {
          for (let i = 0; i < id.length; i++) expectRejected(id.slice(0, i) + id.slice(i + 1));
          for (let i = 0; i <= id.length; i++) expectRejected(id.slice(0, i) + c + id.slice(i));
        }),
        { numRuns: 30 },
      );
    });

    it('rejects every truncation (prefixes and suffixes)', () => {
      fc.assert(
        fc.property(validIdArb, (id) => {
          for (let n = 0; n < id.length; n++) {
            expectRejected(id.slice(0, n));
            expectRejected(id.slice(id.length - n));
          }
        }),
        { numRuns: 50 },
      );
    });

    it('rejects ids signed with another key (forged), in both directions', () => {
      fc.assert(
        fc.property(partsArb, (parts) => {
          const forged = otherCodec.encode(parts);
          expect(forged).toMatch(DOCUMENTED_SHAPE);
          expectRejected(forged);
          expect(() => otherCodec.parse(codec.encode(parts))).toThrow(InvalidJobIdError);
        }),
      );
    });

    it('rejects a well-formed id with a made-up mac', () => {
      fc.assert(
        fc.property(validIdArb, fc.stringMatching(/^[A-Za-z0-9_-]{22}$/), (id, mac) => {
          fc.pre(mac !== id.split('.')[6]);
          expectRejected(replaceField(id, 6, mac));
        }),
      );
    });

    it('rejects an id whose tenant, shard, dueMs or path was changed, even when it stays well-formed', () => {
      const changed = fc.oneof(
        fc.tuple(fc.constant(1), tenantArb.map(String)),
        fc.tuple(fc.constant(2), shardArb.map(String)),
        fc.tuple(fc.constant(3), dueArb.map(String)),
        fc.tuple(fc.constant(4), pathArb.map(String)),
        fc.tuple(fc.constant(5), fc.stringMatching(/^[A-Za-z0-9_-]{16}$/)),
      );
      fc.assert(
        fc.property(validIdArb, changed, (id, [field, value]) => {
          fc.pre(id.split('.')[field] !== value);
          const altered = replaceField(id, field, value);
          expect(altered).toMatch(DOCUMENTED_SHAPE);
          expectRejected(altered);
        }),
        { numRuns: 500 },
      );
    });

    it('rejects another tenant stamped onto a valid id, in particular a prefix or extension of the tenant', () => {
      const id = codec.encode({ tenant: 'acme', shard: 3, dueMs: 1_900_000_000_000, path: 't', random: 'abcdefghijklmnop' });
      expect(codec.parse(id).tenant).toBe('acme');
      for (const tenant of ['acm', 'acme1', 'acme-', 'bcme', 'demo']) expectRejected(replaceField(id, 1, tenant));
    });

    it('rejects non-canonical spellings of the same numbers', () => {
      const id = codec.encode({ tenant: 'demo', shard: 7, dueMs: 1_900_000_000_000, path: 't', random: 'abcdefghijklmnop' });
      expect(codec.parse(id).shard).toBe(7);
      for (const shard of ['07', '007', '+7', '7.0', '7e0', ' 7', '0x7']) expectRejected(replaceField(id, 2, shard));
      for (const due of ['01900000000000', '+1900000000000', '1.9e12', '1900000000000.0']) expectRejected(replaceField(id, 3, due));
      for (const path of ['T', 'x', 'tt', '']) expectRejected(replaceField(id, 4, path));
      expectRejected(replaceField(id, 0, 'j2'));
      expectRejected(id.toUpperCase());
      expectRejected(` ${id}`);
      expectRejected(`${id}\n`);
    });

    it('rejects non-strings', () => {
      const id = codec.encode({ tenant: 'demo', shard: 1, dueMs: 2, path: 'd', random: 'abcdefghijklmnop' });
      expect(codec.parse(id).jobId).toBe(id);
      for (const v of [
        undefined,
        null,
        0,
        42,
        1n,
        true,
        {},
        [],
        [id],
        { toString: () => id },
        new String(id),
        Buffer.from(id),
        Symbol('id'),
        () => id,
      ]) {
        expectRejected(v);
      }
    });

    it('rejects overly long strings, including a valid id padded out', () => {
      const id = codec.encode({ tenant: 'a'.repeat(40), shard: 9_999, dueMs: 999_999_999_999_999, path: 'u', random: 'abcdefghijklmnop' });
      expect(codec.parse(id).jobId).toBe(id);
      expectRejected(id + '.'.repeat(121 - id.length));
      expectRejected(id + 'A'.repeat(1_000));
      expectRejected('j1.'.repeat(100_000));
      expectRejected('a'.repeat(10_000_000));
    });

    it('rejects arbitrary strings', () => {
      fc.assert(fc.property(fc.string({ maxLength: 200, unit: 'binary' }), (s) => expectRejected(s)));
    });

    it('answers a 400 InvalidJobId', () => {
      const err = (() => {
        try {
          codec.parse('nope');
        } catch (e) {
          return e;
        }
        return undefined;
      })();
      expect(err).toBeInstanceOf(InvalidJobIdError);
      expect(err).toMatchObject({ status: 400, code: 'InvalidJobId', name: 'InvalidJobIdError' });
    });
  });

  describe('placement', () => {
    it('fresh random parts, shards in range', () => {
      const randoms = new Set<string>();
      for (let i = 0; i < 2_000; i++) {
        const p = codec.placement('demo', 7);
        expect(p.random).toMatch(/^[A-Za-z0-9_-]{16}$/);
        expect(Number.isInteger(p.shard)).toBe(true);
        expect(p.shard).toBeGreaterThanOrEqual(0);
        expect(p.shard).toBeLessThan(7);
        randoms.add(p.random);
      }
      expect(randoms.size).toBe(2_000);
    });

    it('spreads jobs over every shard', () => {
      // 6,400 draws over 64 shards: the chance that a fair draw misses a shard is below 1e-40.
      const shards = new Set<number>();
      for (let i = 0; i < 6_400; i++) shards.add(codec.placement('demo', 64).shard);
      expect(shards.size).toBe(64);
    });
  });

  describe('keyId', () => {
    const keyArb = fc.string({ minLength: 1, maxLength: 128, unit: 'binary' });

    it('is the same for the same tenant and key, across codecs with the same deployment key', () => {
      const twin = new JobIdCodec(Buffer.from(KEY));
      fc.assert(
        fc.property(tenantArb, keyArb, (tenant, key) => {
          const a = codec.keyId(tenant, key);
          expect(codec.keyId(tenant, key)).toBe(a);
          expect(twin.keyId(tenant, key)).toBe(a);
          expect(a).toMatch(/^[A-Za-z0-9_-]{22}$/);
        }),
      );
    });

    it('differs for another tenant or key', () => {
      fc.assert(
        fc.property(tenantArb, keyArb, tenantArb, keyArb, (t1, k1, t2, k2) => {
          fc.pre(t1 !== t2 || k1 !== k2);
          expect(codec.keyId(t1, k1)).not.toBe(codec.keyId(t2, k2));
        }),
        { numRuns: 1_000 },
      );
    });

    it('keeps tenant and key apart (no ambiguity where one ends and the other begins)', () => {
      const pairs: [string, string][] = [
        ['ab', 'c'],
        ['a', 'bc'],
        ['a', 'b\nc'],
        ['a', '\nbc'],
      ];
      expect(new Set(pairs.map(([t, k]) => codec.keyId(t, k))).size).toBe(pairs.length);
    });

    it('differs under another deployment key', () => {
      fc.assert(
        fc.property(tenantArb, fc.string({ minLength: 1, maxLength: 128 }), (tenant, key) => {
          expect(otherCodec.keyId(tenant, key)).not.toBe(codec.keyId(tenant, key));
        }),
      );
    });
  });
});

describe('sortKey / parseSortKey', () => {
  const rowArb = fc.tuple(dueArb, validIdArb);

  it('round-trips', () => {
    fc.assert(
      fc.property(rowArb, ([dueMs, jobId]) => {
        const sk = sortKey(dueMs, jobId);
        expect(sk.indexOf('#')).toBe(13);
        expect(sk.endsWith(`#${jobId}`)).toBe(true);
        expect(parseSortKey(sk)).toEqual({ dueMs, jobId });
      }),
      { numRuns: 500 },
    );
  });

  it('zero-pads to 13 digits', () => {
    expect(sortKey(0, 'x')).toBe('0000000000000#x');
    expect(sortKey(42, 'x')).toBe('0000000000042#x');
    expect(sortKey(1_900_000_000_123, 'x')).toBe('1900000000123#x');
  });

  it('orders byte-wise (as DynamoDB compares strings) exactly as the due times order', () => {
    fc.assert(
      fc.property(rowArb, rowArb, ([d1, id1], [d2, id2]) => {
        fc.pre(d1 !== d2);
        const cmp = Buffer.compare(Buffer.from(sortKey(d1, id1)), Buffer.from(sortKey(d2, id2)));
        expect(cmp).toBe(d1 < d2 ? -1 : 1);
      }),
      { numRuns: 2_000 },
    );
  });

  it('sorting keys as strings sorts rows by due time', () => {
    fc.assert(
      fc.property(fc.array(rowArb, { maxLength: 50 }), (rows) => {
        const byKey = rows.map(([d, id]) => sortKey(d, id)).sort();
        const dues = byKey.map((sk) => parseSortKey(sk)!.dueMs);
        const numeric = rows.map(([d]) => d).sort((a, b) => a - b);
        expect(dues).toEqual(numeric);
      }),
    );
  });

  it('returns undefined for keys that are not job rows', () => {
    for (const sk of ['', 'lease', 'tenant', '#x', '123#x', '00000000000000#x', 'abcdefghijklm#x', '0000000000000']) {
      expect(parseSortKey(sk)).toBeUndefined();
    }
  });
});

describe('workflow ids', () => {
  const SHAPE = /^wf1\.([a-z0-9][a-z0-9-]{0,39})\.(\d+)\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{22})$/;

  it('round-trips the tenant and creation time of any id it issues, in the documented shape, each id new', () => {
    fc.assert(
      fc.property(tenantArb, dueArb, (tenant, createdMs) => {
        const id = codec.workflowId(tenant, createdMs);
        expect(id).toMatch(SHAPE);
        expect(codec.parseWorkflowId(id)).toEqual({ workflowId: id, tenant, createdMs });
        expect(codec.workflowId(tenant, createdMs)).not.toBe(id);
      }),
    );
  });

  it('knows nothing of an id altered in any character, signed with another key, or a job id', () => {
    fc.assert(
      fc.property(tenantArb, dueArb, fc.nat(), fc.constantFrom(...ALPHABET), (tenant, createdMs, at, ch) => {
        const id = codec.workflowId(tenant, createdMs);
        const i = at % id.length;
        if (id[i] === ch) return;
        expect(codec.parseWorkflowId(id.slice(0, i) + ch + id.slice(i + 1))).toBeUndefined();
        expect(otherCodec.parseWorkflowId(id)).toBeUndefined();
      }),
    );
    // Another tenant's id, rewritten to name this tenant: the mac no longer matches.
    expect(codec.parseWorkflowId(replaceField(codec.workflowId('alpha', NOW), 1, 'beta'))).toBeUndefined();
    // A job id's body and mac, with the workflow prefix: the prefix is signed too.
    const job = codec.encode({ tenant: 'alpha', shard: 1, dueMs: NOW, path: 't', random: codec.placement('alpha', 8).random });
    expect(codec.parseWorkflowId(job)).toBeUndefined();
    expect(() => codec.parse(codec.workflowId('alpha', NOW))).toThrow(InvalidJobIdError);
    for (const bad of ['', 'wf1', 'wf1.alpha.1.x.y', `${codec.workflowId('alpha', NOW)}x`, 42, null, 'wf1.' + 'a'.repeat(200)])
      expect(codec.parseWorkflowId(bad as string)).toBeUndefined();
  });

  it("names each job of a workflow by the workflow and its key: path w, the workflow's creation time, the same on a retry", () => {
    fc.assert(
      fc.property(
        tenantArb,
        dueArb,
        fc.string({ minLength: 1, maxLength: 64 }),
        fc.integer({ min: 1, max: 10_000 }),
        (tenant, createdMs, key, shards) => {
          const wf = codec.parseWorkflowId(codec.workflowId(tenant, createdMs))!;
          const id = codec.workflowJobId(wf, key, shards);
          const parsed = codec.parse(id);
          expect(parsed).toMatchObject({ tenant, dueMs: createdMs, path: 'w' });
          expect(parsed.shard).toBeLessThan(shards);
          expect(codec.workflowJobId(wf, key, shards)).toBe(id);
          expect(codec.workflowJobId(wf, `${key}x`, shards)).not.toBe(id);
          // Another workflow of the same tenant and time names other jobs.
          expect(codec.workflowJobId(codec.parseWorkflowId(codec.workflowId(tenant, createdMs))!, key, shards)).not.toBe(id);
        },
      ),
    );
  });
});
