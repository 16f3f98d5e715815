import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { codePointName, describeSqsUnsafeChar, findSqsUnsafeChar } from '../../core/util/sqsChars.js';

/**
 * SQS's documented message-body character set (SendMessage, MessageBody):
 * #x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF.
 * Written out here from the documentation, independently of the regex under test.
 */
function allowedBySqs(cp: number): boolean {
  return (
    cp === 0x9 ||
    cp === 0xa ||
    cp === 0xd ||
    (cp >= 0x20 && cp <= 0xd7ff) ||
    (cp >= 0xe000 && cp <= 0xfffd) ||
    (cp >= 0x10000 && cp <= 0x10ffff)
  );
}

describe('findSqsUnsafeChar', () => {
  it('follows the documented set at every boundary', () => {
    const boundaries = [
      0x0, 0x8, 0x9, 0xa, 0xb, 0xc, 0xd, 0xe, 0x1f, 0x20, 0x7f, 0xff, 0xd7ff, 0xe000, 0xfdd0, 0xfffd, 0xfffe, 0xffff, 0x10000, 0x1f600,
      0x1fffe, 0x10fffe, 0x10ffff,
    ];
    for (const cp of boundaries) {
      const text = `ab${String.fromCodePoint(cp)}cd`;
      expect({ cp: codePointName(cp), found: findSqsUnsafeChar(text) }).toEqual({
        cp: codePointName(cp),
        found: allowedBySqs(cp) ? undefined : { index: 2, codePoint: cp },
      });
    }
  });

  it('refuses unpaired surrogates (which no UTF-8 text holds) and accepts paired ones', () => {
    for (const lone of [0xd800, 0xdbff, 0xdc00, 0xdfff]) {
      expect(findSqsUnsafeChar(`x${String.fromCharCode(lone)}y`)).toEqual({ index: 1, codePoint: lone });
    }
    expect(findSqsUnsafeChar('x\ud83dy')).toEqual({ index: 1, codePoint: 0xd83d });
    expect(findSqsUnsafeChar('x\ude00')).toEqual({ index: 1, codePoint: 0xde00 });
    expect(findSqsUnsafeChar('\ud83d\ude00')).toBeUndefined(); // U+1F600
    expect(findSqsUnsafeChar('\ude00\ud83d')).toEqual({ index: 0, codePoint: 0xde00 });
  });

  it('accepts escapes as text: "\\uFFFF" is six ASCII characters', () => {
    expect(findSqsUnsafeChar('{"a":"\\uFFFF","b":"\\u0000"}')).toBeUndefined();
    expect(findSqsUnsafeChar('{"a":"\uFFFF"}')).toEqual({ index: 6, codePoint: 0xffff });
  });

  it('finds the first refused character (property over all code points)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0x10ffff }), { maxLength: 20 }), (cps) => {
        const text = cps.map((cp) => String.fromCodePoint(cp)).join('');
        // Build code points back from UTF-16: adjacent lone surrogates may pair up.
        const points = [...text].map((ch) => ch.codePointAt(0)!);
        const firstBad = points.findIndex((cp) => !allowedBySqs(cp));
        const found = findSqsUnsafeChar(text);
        if (firstBad < 0) expect(found).toBeUndefined();
        else expect(found).toEqual({ index: [...text].slice(0, firstBad).join('').length, codePoint: points[firstBad] });
      }),
      { numRuns: 2_000 },
    );
  });

  it('names the character in messages', () => {
    expect(codePointName(0xffff)).toBe('U+FFFF');
    expect(codePointName(0x1f)).toBe('U+001F');
    expect(codePointName(0x1f600)).toBe('U+1F600');
    expect(describeSqsUnsafeChar(0xffff)).toMatch(/U\+FFFF.*noncharacter.*#x10000-#x10FFFF/);
    expect(describeSqsUnsafeChar(0xd800)).toMatch(/unpaired surrogate/);
  });
});
