import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * What `npm start` checks in its data directory before it touches anything: one stack per
 * directory (a lock), a `local.json` left by a stack that no longer runs, and files it cannot
 * read. Every refusal is a {@link StartupError}: one line naming the file and the fix.
 */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'StartupError';
  }
}

/** The lock's content: the holder's pid and, where the OS tells it, the process's start time (so a reused pid is not mistaken for the holder). */
interface LockRecord {
  readonly pid: number;
  readonly startTime?: string;
}

/**
 * Takes `<dataDir>/start.lock` for this process: created whole (written to a temporary file,
 * then hard-linked into place, which fails if the lock exists), so no reader ever sees a partial
 * lock. A lock whose process is gone (or whose pid now belongs to another process) is stale and
 * taken over. Released at exit (a SIGKILL leaves it stale, to be taken over next time).
 *
 * @throws StartupError when another live `npm start` holds the directory
 */
export function acquireDataDirLock(dataDir: string): { readonly file: string; release(): void } {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, 'start.lock');
  const mine: LockRecord = { pid: process.pid, startTime: processStartTime(process.pid) };
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, JSON.stringify(mine));
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        linkSync(tmp, file);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || attempt >= 5) throw err;
      }
      const raw = readIfExists(file);
      if (raw === undefined) continue; // released meanwhile: try again
      const holder = parseLock(raw);
      if (holder && isRunning(holder)) {
        throw new StartupError(
          `another \`npm start\` (pid ${holder.pid}) is running on the data directory ${dataDir}: stop it first (Ctrl-C in its terminal, or kill ${holder.pid}), or give this one another DYNEIN_DATA_DIR`,
        );
      }
      // Stale. Remove it only if it is still the very lock judged stale (another starter may
      // have taken it over a moment ago), then try again.
      if (readIfExists(file) === raw) rmSync(file, { force: true });
    }
  } finally {
    rmSync(tmp, { force: true });
  }
  const release = () => {
    // Only our own lock: never one a later start took over.
    const raw = readIfExists(file);
    if (raw !== undefined && parseLock(raw)?.pid === process.pid) rmSync(file, { force: true });
  };
  process.once('exit', release);
  return { file, release };
}

/** The pids a `local.json` names, as `npm start` writes them. */
export interface LocalJsonPids {
  readonly services?: number;
  readonly compute?: number;
}

/**
 * Deals with a `local.json` left in the data directory (called with the lock held, so no other
 * start is running): none → nothing to do; its processes gone → stale, removed (returns the
 * line to print); unreadable → refused, since nobody can tell what it described; its processes
 * still running (a stack started without the lock, or children of a killed start still exiting)
 * → waited for a few seconds, then refused.
 */
export async function clearStaleLocalJson(file: string, waitMs = 5_000): Promise<string | undefined> {
  const raw = readIfExists(file);
  if (raw === undefined) return undefined;
  const fix = `delete it and run npm start again (npm start writes it anew when ready)`;
  let pids: LocalJsonPids;
  try {
    pids = (JSON.parse(raw) as { pids?: LocalJsonPids }).pids ?? {};
  } catch (err) {
    throw new StartupError(`${file} is not valid JSON (${(err as Error).message}): ${fix}`);
  }
  const listed = [pids.services, pids.compute].filter((p): p is number => typeof p === 'number' && Number.isInteger(p) && p > 0);
  if (listed.length === 0) throw new StartupError(`${file} names no processes (expected "pids": {"services", "compute"}): ${fix}`);
  const ours = (pid: number) => pid !== process.pid && isAlive(pid) && looksLikeStackProcess(pid);
  for (const until = Date.now() + waitMs; listed.some(ours) && Date.now() < until;) await new Promise((r) => setTimeout(r, 100));
  const running = listed.filter(ours);
  if (running.length > 0) {
    throw new StartupError(
      `processes of an earlier local stack still run on this data directory (pids ${running.join(', ')}, listed in ${file}): stop them (kill ${running.join(' ')}) and run npm start again`,
    );
  }
  rmSync(file, { force: true });
  return `replaced a stale ${file} (its processes, pids ${listed.join(' and ')}, no longer run)`;
}

function readIfExists(file: string): string | undefined {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function parseLock(raw: string): LockRecord | undefined {
  try {
    const r = JSON.parse(raw) as Partial<LockRecord>;
    return typeof r.pid === 'number' && Number.isInteger(r.pid) && r.pid > 0
      ? { pid: r.pid, startTime: typeof r.startTime === 'string' ? r.startTime : undefined }
      : undefined;
  } catch {
    return undefined; // not ours to read: stale
  }
}

function isRunning(holder: LockRecord): boolean {
  if (holder.pid === process.pid || !isAlive(holder.pid)) return false;
  // Where the OS tells a process's start time, a pid reused by another process is told apart.
  const now = processStartTime(holder.pid);
  return holder.startTime === undefined || now === undefined || now === holder.startTime;
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'; // exists, belongs to someone else
  }
  // A zombie (exited, not yet reaped) is gone for our purposes.
  const stat = procStat(pid);
  return stat === undefined || stat[0] !== 'Z';
}

/** Linux: fields of /proc/<pid>/stat after the command name (state first); undefined elsewhere. */
function procStat(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/** Linux: the process's start time in clock ticks since boot (field 22 of /proc/<pid>/stat). */
function processStartTime(pid: number): string | undefined {
  return procStat(pid)?.[19];
}

/** Linux: whether a live pid runs the local stack's services or compute (else it is a reused pid). Elsewhere: assume so. */
function looksLikeStackProcess(pid: number): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    return /(services|compute)\.(ts|js|mjs)/.test(cmdline);
  } catch {
    return true;
  }
}
