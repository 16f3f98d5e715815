/**
 * Aligns fauxqs's message-body character check with SQS's documented set, until a fauxqs release
 * carries the upstream fix.
 *
 * SQS accepts `#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF` in a
 * message body. fauxqs 2.4.1 (the newest release) tests bodies with a regex that lacks the `u`
 * flag, so it sees the two UTF-16 halves of every character above U+FFFF and refuses an emoji
 * (U+1F600) that SQS would carry. The fix is upstream (kibertoad/fauxqs pull request 278: the
 * documented ranges with the `u` flag), merged after 2.4.1 was published.
 *
 * fauxqs has no hook for its validation, so until then the local stack and the integration tests
 * give the module's shared RegExp the same test as that fix. Submit checks the same set itself
 * (core/util/sqsChars.ts), tested against the documentation, not against the emulator.
 *
 * Does nothing when the installed fauxqs already accepts an emoji and refuses a lone surrogate
 * (a release with the fix), or no longer exports the regex (a reorganised release); idempotent.
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
  if (!re.test('\u{1F600}') && re.test('\uD83D')) return;
  const documented = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;
  Object.defineProperty(re, 'test', { value: (s: string) => documented.test(s), configurable: true });
}
