/**
 * Aligns fauxqs's message-body character check with SQS's documented set.
 *
 * SQS accepts `#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF` in a
 * message body. fauxqs (1.9.2, and 2.4.1 still) tests bodies with a regex that lacks the `u`
 * flag, so it sees the two UTF-16 halves of every character above U+FFFF and refuses an emoji
 * (U+1F600) that SQS would carry. The local stack and the integration tests stand in for SQS, so
 * they apply SQS's rule instead: the module's shared RegExp gets a `test` that checks code points.
 * Submit checks the same set itself (core/sqsChars.ts), tested against the documentation, not
 * against the emulator.
 *
 * Idempotent; does nothing when fauxqs no longer exports the regex (a fixed or reorganised
 * release).
 */
export async function alignFauxqsCharset(): Promise<void> {
  const url = new URL('./sqs/sqsTypes.js', import.meta.resolve('fauxqs'));
  let mod: { INVALID_MESSAGE_BODY_CHAR?: unknown };
  try {
    mod = (await import(url.href)) as typeof mod;
  } catch {
    return;
  }
  const re = mod.INVALID_MESSAGE_BODY_CHAR;
  if (!(re instanceof RegExp)) return;
  const documented = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
  Object.defineProperty(re, 'test', { value: (s: string) => documented.test(s), configurable: true });
}
