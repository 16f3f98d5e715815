/** What a command of the CLI is: its flags, its usage text and its run function. */
import { DyneinClient } from '../client.js';
import type { Io } from './output.js';
import type { Target } from './target.js';

/** One command-line flag: its parseArgs type and the line `--help` prints for it. */
export interface Flag {
  readonly type: 'string' | 'boolean';
  readonly short?: string;
  /** A string flag given any number of times (`--tag a --tag b`): its values in order. */
  readonly multiple?: boolean;
  /** The value's placeholder, e.g. `<name>` (string flags). */
  readonly arg?: string;
  readonly help: string;
}

export type Flags = Readonly<Record<string, Flag>>;

/** The parsed flags of a command line. */
export type Values = Record<string, string | boolean | string[] | undefined>;

/** What a command's run function is given. */
export interface Ctx {
  readonly values: Values;
  /** A string flag's value (undefined when absent). */
  readonly str: (name: string) => string | undefined;
  readonly rest: readonly string[];
  /** Where to talk to, resolved on first use (after the command line was checked). */
  readonly target: () => Target;
  readonly tenant: string;
  readonly io: Io;
}

/** A command: its usage line, what it does, its flags, and its run function. */
export interface Command {
  readonly usage: string;
  /** One line in `dynein --help`. */
  readonly brief: string;
  /** The paragraph of `dynein <command> --help` (default: the brief). */
  readonly summary?: string;
  readonly flags: Flags;
  /** Needs `--tenant` and talks to a scheduler (the local stack or `--endpoint`). */
  readonly targeted: boolean;
  readonly run: (c: Ctx) => Promise<number>;
}

/** A command with subcommands (`dynein schedules put ...`): the second word picks one. */
export interface Group {
  readonly brief: string;
  readonly summary: string;
  readonly subcommands: Readonly<Record<string, Command>>;
  /**
   * What the group runs when no subcommand is named (`dynein jobs --tenant T` lists the jobs,
   * `dynein jobs cancel ...` is a subcommand); without it, a subcommand is required.
   */
  readonly default?: Command;
}

/** Every command by name, in the order `dynein --help` lists them. */
export type CommandTable = Readonly<Record<string, Command | Group>>;

/** The API client of a target. */
export const client = (t: Target) => new DyneinClient({ endpoint: t.endpoint, region: t.region, credentials: t.credentials });
