/**
 * The stand-in's state: schedules and groups in memory, written after every change to one JSON
 * file under the data directory (temp file, fsync, rename: a crash leaves the old or the new
 * file, never half of one) and read back at start.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { StoredGroup, StoredSchedule } from './model.js';

const FILE = 'scheduler.json';
const VERSION = 1;

interface FileShape {
  readonly version: number;
  readonly groups: StoredGroup[];
  readonly schedules: StoredSchedule[];
}

export const scheduleKey = (group: string, name: string) => `${group}/${name}`;

export class ScheduleStore {
  readonly schedules = new Map<string, StoredSchedule>();
  readonly groups = new Map<string, StoredGroup>();
  private readonly file: string;

  constructor(
    private readonly dataDir: string,
    now: number,
  ) {
    mkdirSync(dataDir, { recursive: true });
    this.file = join(dataDir, FILE);
    let text: string | undefined;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    if (text !== undefined) {
      const data = JSON.parse(text) as FileShape;
      if (data.version !== VERSION)
        throw new Error(`${this.file}: unknown version ${String(data.version)}; move the file away to start with no schedules`);
      for (const g of data.groups) this.groups.set(g.Name, g);
      for (const s of data.schedules) this.schedules.set(scheduleKey(s.GroupName, s.Name), s);
    }
    // The default group always exists, as in every account.
    if (!this.groups.has('default')) this.groups.set('default', { Name: 'default', CreationDate: now, LastModificationDate: now });
  }

  get path(): string {
    return this.file;
  }

  /** Writes the whole state atomically. */
  save(): void {
    const data: FileShape = { version: VERSION, groups: [...this.groups.values()], schedules: [...this.schedules.values()] };
    const tmp = join(this.dataDir, `${FILE}.${process.pid}.tmp`);
    const fd = openSync(tmp, 'w');
    try {
      writeSync(fd, JSON.stringify(data, null, 1));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.file);
  }
}
