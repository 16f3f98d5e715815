/**
 * The `dynein` command line (bin/dynein.js runs {@link main}): finds the command in argv, prints
 * the usage asked for, and runs the command. The commands live in commands/, one file per group;
 * the command table below is what `--help` and `dynein completion` list, in this order.
 */
import { parse } from './args.js';
import type { Command, CommandTable, Group } from './command.js';
import { completionCommand } from './commands/completion.js';
import { dlqCommand } from './commands/dlq.js';
import { jobCommands } from './commands/jobs.js';
import { localCommand } from './commands/local.js';
import { redriveCommand } from './commands/redrive.js';
import { schedulesCommand } from './commands/schedules.js';
import { tenantCommand } from './commands/tenant.js';
import { uiCommand } from './commands/ui.js';
import { workerCommand } from './commands/worker.js';
import { workflowsCommand } from './commands/workflows.js';
import { runCommand } from './context.js';
import { UsageError, oneLine } from './errors.js';
import { HELP, VERSION } from './flags.js';
import { stdio, type Io } from './output.js';
import { packageJson } from './target.js';
import { generalUsage, groupUsage, usageOf } from './usage.js';

export type { Io } from './output.js';

const COMMANDS: CommandTable = {
  ...jobCommands,
  schedules: schedulesCommand,
  workflows: workflowsCommand,
  worker: workerCommand,
  redrive: redriveCommand,
  ui: uiCommand,
  dlq: dlqCommand,
  tenant: tenantCommand,
  local: localCommand,
  completion: completionCommand(() => COMMANDS),
};

/** Every flag any command takes, for the first pass that finds the command. */
const ALL_FLAGS = () =>
  Object.assign(
    {},
    VERSION,
    HELP,
    ...Object.values(COMMANDS).flatMap((c) =>
      ('subcommands' in c ? [...Object.values(c.subcommands), ...(c.default ? [c.default] : [])] : [c]).map((x) => x.flags),
    ),
  );

/** The command of that name (own properties only: `dynein constructor` is an unknown command). */
const commandOf = (name: string): Command | Group | undefined => (Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined);

const unknownCommand = (name: string) =>
  new UsageError(`unknown command '${name}': one of ${Object.keys(COMMANDS).join(', ')} (see \`dynein --help\`)`);

/** A group's subcommand of that name, or a usage error listing them. */
function subcommandOf(group: string, spec: Group, name: string | undefined): Command {
  if (name !== undefined && Object.hasOwn(spec.subcommands, name)) return spec.subcommands[name]!;
  const choices = Object.keys(spec.subcommands).join(', ');
  throw new UsageError(
    name === undefined
      ? `${group} needs a command: one of ${choices} (see \`dynein ${group} --help\`)`
      : `unknown ${group} command '${name}': one of ${choices} (see \`dynein ${group} --help\`)`,
  );
}

/** `dynein`, `dynein help [<command> [<subcommand>]]`, `dynein --help`, `dynein --version`. */
function noCommand(args: readonly string[], positionals: readonly string[], io: Io): number {
  const [command, topic, sub] = positionals;
  if (topic !== undefined && command === 'help') {
    const spec = commandOf(topic);
    if (!spec) throw unknownCommand(topic);
    if (!('subcommands' in spec)) io.out(usageOf(topic, spec));
    else if (sub === undefined) io.out(groupUsage(topic, spec));
    else io.out(usageOf(`${topic} ${sub}`, subcommandOf(topic, spec, sub)));
    return 0;
  }
  const { values } = parse(args, { ...HELP, ...VERSION }, true);
  if (values.version) {
    io.out(packageJson().version);
    return 0;
  }
  if (values.help || command === 'help') {
    io.out(generalUsage(COMMANDS));
    return 0;
  }
  io.err(generalUsage(COMMANDS));
  return 2;
}

/** Runs the CLI; resolves with the process exit code (0 ok, 1 failed, 2 usage). */
export async function main(args: readonly string[], io: Io = stdio, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  try {
    // First pass: find the command (flags may come before it). Second: that command's own flags, strictly.
    const first = parse(args, ALL_FLAGS(), false);
    const [command, topic] = first.positionals;
    if (command === undefined || command === 'help') return noCommand(args, first.positionals, io);
    const found = commandOf(command);
    if (!found) throw unknownCommand(command);
    if ('subcommands' in found && topic === undefined && first.values.help) {
      io.out(groupUsage(command, found));
      return 0;
    }
    const [name, spec]: [string, Command] = !('subcommands' in found)
      ? [command, found]
      : topic === undefined && found.default
        ? [command, found.default]
        : [`${command} ${topic}`, subcommandOf(command, found, topic)];
    const parsed = parse(args, spec.flags, true, name);
    if (parsed.values.help) {
      io.out(usageOf(name, spec));
      return 0;
    }
    return await runCommand(name, spec, parsed, io, env);
  } catch (err) {
    io.err(`dynein: ${oneLine(err)}`);
    return err instanceof UsageError ? 2 : 1;
  }
}
