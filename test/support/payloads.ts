/** Payload texts that JSON.parse/JSON.stringify would alter: they must travel exactly as written. */
export const ALTERED_BY_PARSE = [
  '9007199254740993',
  '1e400',
  '-0',
  '1.0',
  '{"a":1,"a":2}',
  '{"b":1,"a":2}',
  '[ 1 ,\n\t2 ]',
  '"\\uFFFF"',
  '"😀"',
  '{"__proto__":{"x":1}}',
] as const;
