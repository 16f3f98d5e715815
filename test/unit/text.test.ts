import { describe, expect, it } from 'vitest';
import { cutText, shortText, wellFormed } from '../../core/util/text.js';

const isWellFormed = (s: string) => !/\p{Surrogate}/u.test(s);

describe('cutText', () => {
  it('leaves out a surrogate pair the limit falls inside, whole', () => {
    const s = `${'a'.repeat(1023)}😀tail`; // the emoji is code units 1023 and 1024
    const cut = cutText(s, 1024);
    expect(cut).toBe('a'.repeat(1023));
    expect(isWellFormed(cut)).toBe(true);
    // One more unit keeps the emoji whole.
    expect(cutText(s, 1025)).toBe(`${'a'.repeat(1023)}😀`);
  });

  it('is well-formed at every limit, whatever the text', () => {
    const s = '😀a😀😀b🇫🇷é𝄞';
    for (let n = 0; n <= s.length + 1; n++) {
      const cut = cutText(s, n);
      expect(isWellFormed(cut), `limit ${n}`).toBe(true);
      expect(cut.length).toBeLessThanOrEqual(n);
      expect(s.startsWith(cut), `limit ${n}`).toBe(true);
      expect(cut.length).toBeGreaterThanOrEqual(Math.min(s.length, n) - 1);
    }
  });

  it('replaces a lone surrogate already in the text', () => {
    expect(cutText('a\uD83Db\uDE00', 10)).toBe('a\uFFFDb\uFFFD');
    expect(wellFormed('ok 😀')).toBe('ok 😀');
  });

  it('shortText marks a cut with an ellipsis, never after half a pair', () => {
    expect(shortText(`${'x'.repeat(39)}😀`, 40)).toBe(`${'x'.repeat(39)}…`);
    expect(shortText('short', 40)).toBe('short');
  });
});
