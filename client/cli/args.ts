/** Reading the command line: flags, positional arguments, durations and the files arguments name. */
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { JobRequest } from '../apiTypes.js';
import type { Flags, Values } from './command.js';
import { UsageError } from './errors.js';

const parseOptions = (flags: Flags) =>
  Object.fromEntries(
    Object.entries(flags).map(([name, f]) => [
      name,
      { type: f.type, ...(f.short ? { short: f.short } : {}), ...(f.multiple ? { multiple: true } : {}) },
    ]),
  );

/** parseArgs, with its errors as one-line usage errors that say where the options are listed. */
export function parse(args: readonly string[], flags: Flags, strict: boolean, command?: string) {
  try {
    const { values, positionals } = parseArgs({ args: [...args], options: parseOptions(flags), allowPositionals: true, strict });
    return { values: values as Values, positionals };
  } catch (err) {
    const first = (err as Error).message.split(/\.\s/)[0]!.replace(/\.$/, '');
    throw new UsageError(`${first} (see \`dynein ${command ? `${command} ` : ''}--help\`)`);
  }
}

export function noPositionals(command: string, rest: readonly string[]): void {
  if (rest.length > 0) throw new UsageError(`${command} takes no argument '${rest[0]}'`);
}

/** `{key: value}` when the value is given, else `{}` (for spreading into a readonly object). */
export const optional = <K extends string, V>(key: K, value: V | undefined) =>
  value === undefined ? {} : ({ [key]: value } as Record<K, V>);

const UNITS: Record<string, number> = { ms: 0.001, s: 1, m: 60, h: 3600, d: 86_400 };

/**
 * Seconds in a duration like `30s`, `5m`, `2h`, `3d`, `1h30m` or `1.5h`; `flag` names the flag in the error.
 * @example parseDuration('1h30m') // 5400
 */
export function parseDuration(text: string, flag = '--in'): number {
  const parts = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+$/.test(text.trim()) ? text.trim().match(/\d+(?:\.\d+)?(?:ms|s|m|h|d)/g)! : undefined;
  if (!parts)
    throw new UsageError(`${flag} '${text}' is not a duration: use a number and a unit (ms, s, m, h, d), e.g. 30s, 5m, 2h, 3d, 1h30m`);
  return parts.reduce((sum, p) => {
    const [, n, unit] = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(p)!;
    return sum + Number(n) * UNITS[unit!]!;
  }, 0);
}

export function readText(file: string): string {
  return readBytes(file).toString('utf8');
}

/** A file's bytes, or an error naming the file and why it could not be read. */
export function readBytes(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`);
  }
}

/** The jobs of a JSON Lines file (blank lines skipped); refuses the whole file on a bad line, so nothing is sent. */
export function readJsonl(file: string): { line: number; job: JobRequest }[] {
  const text = readText(file);
  const jobs: { line: number; job: JobRequest }[] = [];
  text.split(/\r?\n/).forEach((raw, i) => {
    if (raw.trim() === '') return;
    let job: unknown;
    try {
      job = JSON.parse(raw);
    } catch (err) {
      throw new UsageError(`${file} line ${i + 1} is not JSON (${(err as Error).message}): nothing was sent`);
    }
    if (typeof job !== 'object' || job === null || Array.isArray(job))
      throw new UsageError(`${file} line ${i + 1} is not a JSON object like {"payload": ..., "delaySeconds": 30}: nothing was sent`);
    jobs.push({ line: i + 1, job: job as JobRequest });
  });
  if (jobs.length === 0) throw new UsageError(`${file} holds no jobs`);
  return jobs;
}
