import { describe, expect, it } from 'vitest';
import { deadLetterBytes, packDeadLetters } from '../../core/deadLetters/deadLetterService.js';

/** SQS's limits on one SendMessageBatch call: 10 entries, 262,144 bytes of bodies and attributes. */
const LIMIT = 262_144;

const copy = (id: string, body: string, attributes: Record<string, { dataType: string; value: string }> = {}) => ({ id, body, attributes });

describe('dead-letter copies packed for SendMessageBatch', () => {
  it('counts bytes, not characters: ten bodies of 240 KiB in two-byte characters go one a call', () => {
    const copies = Array.from({ length: 10 }, (_, i) =>
      copy(String(i), 'é'.repeat(120 * 1024), { runAt: { dataType: 'String', value: 'x' } }),
    );
    expect(deadLetterBytes(copies[0]!)).toBe(240 * 1024 + 'runAt'.length + 'String'.length + 1);
    const batches = packDeadLetters(copies);
    expect(batches).toHaveLength(10);
    expect(batches.flat().map((c) => c.id)).toEqual(copies.map((c) => c.id));
  });

  it('fills calls up to 10 entries and 256 KiB, in order, counting attribute names, types and values (binary as its bytes)', () => {
    const binary = Buffer.alloc(30_000, 7).toString('base64'); // 40,000 characters of base64
    const copies = Array.from({ length: 25 }, (_, i) =>
      copy(String(i), 'x'.repeat(i % 3 === 0 ? 100_000 : 1_000), {
        blob: { dataType: 'Binary', value: binary },
        'custom.tag': { dataType: 'String.tag', value: 'ü'.repeat(10) },
      }),
    );
    expect(deadLetterBytes(copies[1]!)).toBe(
      1_000 + 'blob'.length + 'Binary'.length + 30_000 + 'custom.tag'.length + 'String.tag'.length + 20,
    );
    const batches = packDeadLetters(copies);
    expect(batches.flat()).toEqual(copies);
    for (const b of batches) {
      expect(b.length).toBeLessThanOrEqual(10);
      expect(b.reduce((n, c) => n + deadLetterBytes(c), 0)).toBeLessThanOrEqual(LIMIT);
    }
    // Greedy: each call but the last would overflow with the next copy.
    for (let i = 0; i + 1 < batches.length; i++) {
      const bytes = batches[i]!.reduce((n, c) => n + deadLetterBytes(c), 0);
      expect(batches[i]!.length === 10 || bytes + deadLetterBytes(batches[i + 1]![0]!) > LIMIT).toBe(true);
    }
  });
});
