/**
 * A JSON parser (RFC 8259, exactly what `JSON.parse` accepts) that can keep chosen values as the
 * source text they were written in, byte for byte, instead of building them. The API uses it to
 * read a request's small envelope fields (`runAt`, `delaySeconds`...) normally while the
 * `payload` stays the JSON text the client sent: 9007199254740993, 1e400, -0, 1.0, duplicate
 * keys, key order and whitespace inside the value all survive, because the payload is never
 * turned into a JavaScript value and back.
 *
 * @example
 * const body = parseJson('{"payload": {"n": 1.0}, "delaySeconds": 30}', { raw: (path) => path.length === 1 && path[0] === 'payload' });
 * // body.payload is a RawJson whose text is '{"n": 1.0}'; body.delaySeconds is 30
 */

/** A JSON value kept as its exact source text. */
export class RawJson {
  constructor(
    /** The value's source text: from its first to its last character, no surrounding whitespace. */
    readonly text: string,
    /** Offset of `text` in the parsed string (UTF-16 code units). */
    readonly start: number,
    /** Nesting depth: 0 for a scalar, 1 for `[]` or `{"a":1}`, 2 for `[[1]]`... */
    readonly depth: number,
  ) {}
}

/** Where a value sits: member names and array indexes from the top. */
export type JsonPath = readonly (string | number)[];

export interface ParseJsonOptions {
  /** Values at the paths this accepts are kept as {@link RawJson}, never built. */
  readonly raw?: (path: JsonPath) => boolean;
  /**
   * Values nested deeper than this are kept as {@link RawJson} too, so that building never
   * recurses without bound (the raw scan is iterative). The top value is at depth 1.
   * @default 64
   */
  readonly maxBuildDepth?: number;
  /**
   * What becomes of a value nested deeper than `maxBuildDepth` outside the `raw` paths: kept as
   * {@link RawJson} (`'raw'`), or refused with a {@link JsonTooDeepError} (`'refuse'`: a request
   * body whose fields must all be built, so that nothing later recurses over a deep value).
   * @default 'raw'
   */
  readonly deeper?: 'raw' | 'refuse';
}

/** The text is not JSON; `position` is the offset (UTF-16 code units) where it stops being JSON. */
export class JsonSyntaxError extends Error {
  constructor(
    message: string,
    readonly position: number,
  ) {
    super(message);
    this.name = 'JsonSyntaxError';
  }
}

/** The text nests deeper than the parse allows (`deeper: 'refuse'`); `path` is where it goes too deep. */
export class JsonTooDeepError extends Error {
  constructor(
    readonly maxDepth: number,
    readonly path: JsonPath,
  ) {
    super(`the JSON nests more than ${maxDepth} levels deep (at ${pathText(path)})`);
    this.name = 'JsonTooDeepError';
  }
}

/** A path as JSONPath-like text: `$.jobs[0].runAt`. */
export function pathText(path: JsonPath): string {
  return `$${path.map((p) => (typeof p === 'number' ? `[${p}]` : /^[A-Za-z_]\w*$/.test(p) ? `.${p}` : `[${JSON.stringify(p)}]`)).join('')}`;
}

const duplicates = new WeakMap<object, string[]>();

/**
 * Member names that occurred more than once in an object {@link parseJson} built (the last value
 * wins, as with `JSON.parse`); empty for any other object.
 */
export function duplicateKeysOf(obj: object): readonly string[] {
  return duplicates.get(obj) ?? [];
}

/**
 * Parses JSON text. Values at the paths `opts.raw` selects, and values nested deeper than
 * `opts.maxBuildDepth`, are {@link RawJson}; everything else is built as `JSON.parse` builds it
 * (objects with own properties, `__proto__` included; duplicate keys: the last wins, see
 * {@link duplicateKeysOf}).
 * @throws JsonSyntaxError, JsonTooDeepError (only with `deeper: 'refuse'`)
 */
export function parseJson(text: string, opts: ParseJsonOptions = {}): unknown {
  const p = new Parser(text, opts.raw, opts.maxBuildDepth ?? 64, opts.deeper === 'refuse');
  p.ws();
  const value = p.value([], 1);
  p.ws();
  if (p.i < text.length) p.fail('unexpected text after the JSON value');
  return value;
}

/** Whether `text` is one JSON value (with optional surrounding whitespace), as `JSON.parse` decides. */
export function isJson(text: string): boolean {
  try {
    parseJson(text, { maxBuildDepth: 0 });
    return true;
  } catch (err) {
    if (err instanceof JsonSyntaxError) return false;
    throw err;
  }
}

const NUMBER = /-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?/y;
const HEX4 = /^[0-9a-fA-F]{4}$/;
const ARRAY = 1;
const OBJECT = 2;

class Parser {
  i = 0;

  constructor(
    private readonly text: string,
    private readonly raw: ((path: JsonPath) => boolean) | undefined,
    private readonly maxBuildDepth: number,
    private readonly refuseDeeper = false,
  ) {}

  fail(message: string, at = this.i): never {
    const found = at < this.text.length ? `${JSON.stringify(this.text[at])} at position ${at}` : 'the end of the text';
    throw new JsonSyntaxError(`${message}: found ${found}`, at);
  }

  ws(): void {
    const t = this.text;
    let i = this.i;
    for (let c = t.charCodeAt(i); c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09; c = t.charCodeAt(++i));
    this.i = i;
  }

  /** One value at `this.i` (no leading whitespace), built or raw. */
  value(path: JsonPath, depth: number): unknown {
    const rawPath = this.raw?.(path) ?? false;
    const c = this.text.charCodeAt(this.i);
    const container = c === 0x7b /* { */ || c === 0x5b; /* [ */
    // Refusing, only a container is too deep: a scalar inside the deepest one is built.
    if (!rawPath && depth > this.maxBuildDepth && this.refuseDeeper && container) throw new JsonTooDeepError(this.maxBuildDepth, path);
    if (rawPath || (depth > this.maxBuildDepth && !this.refuseDeeper)) {
      const start = this.i;
      const nesting = this.skip();
      return new RawJson(this.text.slice(start, this.i), start, nesting);
    }
    if (c === 0x7b /* { */) return this.object(path, depth);
    if (c === 0x5b /* [ */) return this.array(path, depth);
    if (c === 0x22 /* " */) return this.string();
    return this.scalar();
  }

  object(path: JsonPath, depth: number): Record<string, unknown> {
    const t = this.text;
    const obj: Record<string, unknown> = {};
    this.i++;
    this.ws();
    if (t.charCodeAt(this.i) === 0x7d /* } */) {
      this.i++;
      return obj;
    }
    for (;;) {
      if (t.charCodeAt(this.i) !== 0x22) this.fail('expected a member name in double quotes');
      const key = this.string();
      this.ws();
      if (t.charCodeAt(this.i) !== 0x3a /* : */) this.fail("expected ':' after a member name");
      this.i++;
      this.ws();
      const value = this.value([...path, key], depth + 1);
      if (Object.prototype.hasOwnProperty.call(obj, key)) {
        const seen = duplicates.get(obj) ?? [];
        if (!seen.includes(key)) seen.push(key);
        duplicates.set(obj, seen);
      }
      // defineProperty, not assignment: "__proto__" is an own member, as JSON.parse makes it.
      Object.defineProperty(obj, key, { value, writable: true, enumerable: true, configurable: true });
      this.ws();
      const c = t.charCodeAt(this.i);
      this.i++;
      if (c === 0x7d /* } */) return obj;
      if (c !== 0x2c /* , */) this.fail("expected ',' or '}' in an object", this.i - 1);
      this.ws();
    }
  }

  array(path: JsonPath, depth: number): unknown[] {
    const t = this.text;
    const out: unknown[] = [];
    this.i++;
    this.ws();
    if (t.charCodeAt(this.i) === 0x5d /* ] */) {
      this.i++;
      return out;
    }
    for (;;) {
      out.push(this.value([...path, out.length], depth + 1));
      this.ws();
      const c = t.charCodeAt(this.i);
      this.i++;
      if (c === 0x5d /* ] */) return out;
      if (c !== 0x2c /* , */) this.fail("expected ',' or ']' in an array", this.i - 1);
      this.ws();
    }
  }

  /** A string at `this.i` (its opening quote), unescaped. */
  string(): string {
    const start = this.i + 1;
    const end = this.skipString();
    const body = this.text.slice(start, end - 1);
    return body.includes('\\') ? unescape(body) : body;
  }

  /** `true`, `false`, `null` or a number at `this.i`. */
  scalar(): unknown {
    const t = this.text;
    if (t.startsWith('true', this.i)) return ((this.i += 4), true);
    if (t.startsWith('false', this.i)) return ((this.i += 5), false);
    if (t.startsWith('null', this.i)) return ((this.i += 4), null);
    const start = this.i;
    this.skipNumber();
    // JSON's number grammar is a subset of JavaScript's: Number() reads it as JSON.parse does.
    return Number(t.slice(start, this.i));
  }

  skipNumber(): void {
    NUMBER.lastIndex = this.i;
    if (!NUMBER.test(this.text)) this.fail('expected a JSON value');
    this.i = NUMBER.lastIndex;
    // "01", "1.", "1e", "-": the regex stops early; what follows must not continue a number.
    const c = this.text.charCodeAt(this.i);
    if ((c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x65 || c === 0x45 || c === 0x2b || c === 0x2d) this.fail('malformed number');
  }

  /** Validates a string at `this.i` (its opening quote); returns and moves to the offset after its closing quote. */
  skipString(): number {
    const t = this.text;
    let i = this.i + 1;
    for (;;) {
      const c = t.charCodeAt(i);
      if (c === 0x22) break;
      if (Number.isNaN(c)) this.fail('unterminated string', i);
      if (c < 0x20) this.fail('control character in a string (escape it)', i);
      if (c === 0x5c /* \ */) {
        const e = t.charCodeAt(i + 1);
        if (e === 0x75 /* u */) {
          if (!HEX4.test(t.slice(i + 2, i + 6))) this.fail('malformed \\u escape', i);
          i += 6;
          continue;
        }
        // " \ / b f n r t
        if (e !== 0x22 && e !== 0x5c && e !== 0x2f && e !== 0x62 && e !== 0x66 && e !== 0x6e && e !== 0x72 && e !== 0x74)
          this.fail('invalid escape in a string', i);
        i += 2;
        continue;
      }
      i++;
    }
    this.i = i + 1;
    return this.i;
  }

  /**
   * Validates one value at `this.i` without building it, iteratively (any depth), and moves past
   * it. Returns its nesting depth.
   */
  skip(): number {
    const t = this.text;
    const stack: number[] = [];
    let deepest = 0;
    for (;;) {
      // A value is expected here.
      const c = t.charCodeAt(this.i);
      let opened = false;
      if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
        this.i++;
        stack.push(c === 0x7b ? OBJECT : ARRAY);
        if (stack.length > deepest) deepest = stack.length;
        this.ws();
        const close = c === 0x7b ? 0x7d : 0x5d;
        if (t.charCodeAt(this.i) === close) {
          this.i++;
          stack.pop();
        } else {
          opened = true;
          if (c === 0x7b) this.memberName();
        }
      } else if (c === 0x22) {
        this.skipString();
      } else if (t.startsWith('true', this.i) || t.startsWith('null', this.i)) {
        this.i += 4;
      } else if (t.startsWith('false', this.i)) {
        this.i += 5;
      } else {
        this.skipNumber();
      }
      if (opened) continue;
      // After a value: close containers until one takes another element.
      for (;;) {
        if (stack.length === 0) return deepest;
        this.ws();
        const top = stack[stack.length - 1];
        const d = t.charCodeAt(this.i);
        if (d === 0x2c /* , */) {
          this.i++;
          this.ws();
          if (top === OBJECT) this.memberName();
          break;
        }
        if ((top === ARRAY && d === 0x5d) || (top === OBJECT && d === 0x7d)) {
          this.i++;
          stack.pop();
          continue;
        }
        this.fail(top === ARRAY ? "expected ',' or ']' in an array" : "expected ',' or '}' in an object");
      }
    }
  }

  /** `"name"` then `:` and whitespace, in an object being skipped. */
  memberName(): void {
    if (this.text.charCodeAt(this.i) !== 0x22) this.fail('expected a member name in double quotes');
    this.skipString();
    this.ws();
    if (this.text.charCodeAt(this.i) !== 0x3a) this.fail("expected ':' after a member name");
    this.i++;
    this.ws();
  }
}

const ESCAPES: Record<string, string> = { '"': '"', '\\': '\\', '/': '/', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t' };

/** The value of a validated string body that holds escapes. */
function unescape(body: string): string {
  return body.replace(/\\(?:u([0-9a-fA-F]{4})|(["\\/bfnrt]))/g, (_, hex: string | undefined, ch: string | undefined) =>
    hex !== undefined ? String.fromCharCode(parseInt(hex, 16)) : ESCAPES[ch as string]!,
  );
}

/**
 * `JSON.stringify`, with every {@link RawJson} in `value` written as its source text, byte for
 * byte (a stored payload goes back out exactly as it came in).
 */
export function stringifyWithRaw(value: unknown): string {
  const raws: string[] = [];
  const tag = `\u0000raw${Math.random().toString(36).slice(2)}:`;
  const text = JSON.stringify(value, (_key, v: unknown) => {
    if (!(v instanceof RawJson)) return v;
    raws.push(v.text);
    return `${tag}${raws.length - 1}`;
  });
  if (raws.length === 0) return text;
  const quoted = JSON.stringify(tag).slice(1, -1);
  return text.replace(new RegExp(`"${quoted.replace(/[\\^$.*+?()[\]{}|]/g, '\\$&')}(\\d+)"`, 'g'), (_m, i: string) => raws[Number(i)]!);
}
