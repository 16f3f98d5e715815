/** `dynein completion <shell>`: the shell completion script of the command table. */
import type { Command, CommandTable, Ctx, Flags } from '../command.js';
import { SHELLS, completionScript, type CompletionCommand, type CompletionFlag, type Shell } from '../completion.js';
import { UsageError } from '../errors.js';
import { HELP } from '../flags.js';

/** The `completion` command, for the command table `commands` answers (it lists this command too). */
export function completionCommand(commands: () => CommandTable): Command {
  return {
    brief: 'print the shell completion script (bash, zsh or fish)',
    usage: '<bash|zsh|fish>',
    summary:
      'Print the completion script of a shell, for its commands, subcommands and options:\n' +
      '  bash: source <(dynein completion bash)   (in ~/.bashrc)\n' +
      '  zsh:  source <(dynein completion zsh)    (in ~/.zshrc)\n' +
      '  fish: dynein completion fish > ~/.config/fish/completions/dynein.fish',
    targeted: false,
    flags: { ...HELP },
    run: (ctx) => runCompletion(ctx, commands()),
  };
}

async function runCompletion({ rest, io }: Ctx, commands: CommandTable): Promise<number> {
  const shell = rest[0];
  if (rest.length !== 1 || !SHELLS.includes(shell as Shell))
    throw new UsageError(`completion needs one shell: dynein completion ${SHELLS.join('|')}`);
  io.out(completionScript(shell as Shell, completionTable(commands)).trimEnd());
  return 0;
}

/** The command table as completion sees it: the same commands and flags `--help` prints. */
function completionTable(commands: CommandTable): CompletionCommand[] {
  const flagsOf = (flags: Flags): CompletionFlag[] =>
    Object.entries(flags).map(([name, f]) => ({
      name,
      short: f.short,
      takesValue: f.type === 'string',
      path: f.arg === '<dir>' ? 'dir' : f.arg?.includes('file') ? 'file' : undefined,
      help: f.help,
    }));
  return Object.entries(commands).map(([name, c]) =>
    'subcommands' in c
      ? {
          name,
          brief: c.brief,
          flags: flagsOf(c.default ? c.default.flags : HELP),
          ...(c.default ? { runsAlone: true } : {}),
          subcommands: Object.entries(c.subcommands).map(([sub, s]) => ({ name: sub, brief: s.brief, flags: flagsOf(s.flags) })),
        }
      : { name, brief: c.brief, flags: flagsOf(c.flags), ...(name === 'completion' ? { args: SHELLS } : {}) },
  );
}
