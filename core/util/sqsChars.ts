/**
 * The characters SQS accepts in a message body (SendMessage, "MessageBody"):
 * `#x9 | #xA | #xD | #x20 to #xD7FF | #xE000 to #xFFFD | #x10000 to #x10FFFF`. SQS refuses a
 * message holding any other character, and the local emulator does not, so submit checks this
 * itself: a job SQS could not carry is refused with a 400 before anything is written.
 *
 * In valid JSON text the only characters this can find are U+FFFE and U+FFFF inside strings
 * (control characters must be escaped in JSON; text decoded from UTF-8 holds no lone
 * surrogate). Written as escapes (`"\uFFFF"`, six ASCII characters) they travel fine.
 */
const OUTSIDE_SQS_SET = /[^\t\n\r\x20-\uD7FF\uE000-\uFFFD\u{10000}-\u{10FFFF}]/u;

/** The first character of `text` SQS would refuse: its offset (UTF-16 code units) and code point. */
export function findSqsUnsafeChar(text: string): { index: number; codePoint: number } | undefined {
  const m = OUTSIDE_SQS_SET.exec(text);
  if (!m) return undefined;
  return { index: m.index, codePoint: text.codePointAt(m.index)! };
}

/** `U+FFFF`, `U+001F`, `U+1F600`. */
export function codePointName(cp: number): string {
  return `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
}

/** One line for an error message: what the character is and what to do about it. */
export function describeSqsUnsafeChar(cp: number): string {
  const what =
    cp >= 0xd800 && cp <= 0xdfff
      ? 'an unpaired surrogate'
      : cp === 0xfffe || cp === 0xffff
        ? 'a noncharacter'
        : cp < 0x20
          ? 'a control character'
          : 'a character';
  return `${codePointName(cp)} (${what} SQS does not accept in a message: it carries only #x9, #xA, #xD, #x20-#xD7FF, #xE000-#xFFFD and #x10000-#x10FFFF)`;
}
