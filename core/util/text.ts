/**
 * Cutting text to a length limit without breaking characters. A JavaScript string counts UTF-16
 * code units: a character outside the Basic Multilingual Plane (most emoji) is two of them, a
 * surrogate pair, and `s.slice(0, n)` can keep the first half alone. A lone surrogate has no
 * UTF-8 form: DynamoDB, SQS and JSON parsers refuse it or turn it into U+FFFD.
 */

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;

/**
 * `s` cut to at most `maxUnits` UTF-16 code units, never inside a surrogate pair (the pair is
 * left out whole), and well-formed: a lone surrogate already in `s` becomes U+FFFD.
 *
 * @example cutText('ab😀', 3) // 'ab' (not 'ab\uD83D')
 */
export function cutText(s: string, maxUnits: number): string {
  let end = Math.max(0, Math.min(s.length, Math.floor(maxUnits)));
  const last = s.charCodeAt(end - 1);
  const next = s.charCodeAt(end);
  // A high surrogate kept whose low half is cut off: leave the pair out.
  if (end < s.length && last >= 0xd800 && last <= 0xdbff && next >= 0xdc00 && next <= 0xdfff) end--;
  return wellFormed(s.slice(0, end));
}

/** `s` with each lone surrogate replaced by U+FFFD (what `String.prototype.toWellFormed` does). */
export function wellFormed(s: string): string {
  return s.replace(LONE_SURROGATE, '\uFFFD');
}

/** `s` cut to `maxUnits` with `…` after it when something was cut (for error messages and displays). */
export function shortText(s: string, maxUnits: number): string {
  return s.length > maxUnits ? `${cutText(s, maxUnits)}…` : wellFormed(s);
}
