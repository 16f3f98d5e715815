/**
 * Shell completion scripts for `dynein`, generated from the same command table that prints
 * `--help` (client/cli/index.ts): a command or flag added there completes without another edit.
 *
 *   source <(dynein completion bash)                      # ~/.bashrc
 *   source <(dynein completion zsh)                       # ~/.zshrc (through bashcompinit)
 *   dynein completion fish > ~/.config/fish/completions/dynein.fish
 */

/** A flag as completion sees it. */
export interface CompletionFlag {
  readonly name: string;
  readonly short?: string;
  /** Takes a value (`--tenant <name>`): the next word is not a flag or a command. */
  readonly takesValue: boolean;
  /** Completes with a path (`--data-dir`, a file argument). */
  readonly path?: 'file' | 'dir';
  readonly help: string;
}

/** A command (or a subcommand of a group) as completion sees it. */
export interface CompletionCommand {
  readonly name: string;
  readonly brief: string;
  readonly flags: readonly CompletionFlag[];
  readonly subcommands?: readonly CompletionCommand[];
  /** A group that also runs without a subcommand (`dynein jobs`): `flags` are what it then takes. */
  readonly runsAlone?: boolean;
  /** The words an argument may be (`completion <bash|zsh|fish>`); without them, paths. */
  readonly args?: readonly string[];
}

export const SHELLS = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof SHELLS)[number];

export function completionScript(shell: Shell, commands: readonly CompletionCommand[]): string {
  if (shell === 'fish') return fishScript(commands);
  const bash = bashScript(commands);
  if (shell === 'bash') return bash;
  return ['# dynein completion for zsh: source <(dynein completion zsh)', 'autoload -U +X bashcompinit && bashcompinit', bash].join('\n');
}

const words = (names: readonly string[]) => names.join(' ');
const flagWords = (flags: readonly CompletionFlag[]) => words(flags.flatMap((f) => [`--${f.name}`, ...(f.short ? [`-${f.short}`] : [])]));

/** The bash `case` arm that sets `opts`, `valued` and `paths` for one command's flags. */
function bashArm(pattern: string, flags: readonly CompletionFlag[], indent: string, args?: readonly string[]): string[] {
  const valued = flags.filter((f) => f.takesValue).flatMap((f) => [`--${f.name}`, ...(f.short ? [`-${f.short}`] : [])]);
  const dirs = flags.filter((f) => f.path === 'dir').map((f) => `--${f.name}`);
  const files = flags.filter((f) => f.path === 'file').map((f) => `--${f.name}`);
  return [
    `${indent}${pattern})`,
    `${indent}  opts="${flagWords(flags)}"`,
    `${indent}  valued=" ${words(valued)} "`,
    `${indent}  dirs=" ${words(dirs)} "`,
    `${indent}  files=" ${words(files)} "`,
    ...(args ? [`${indent}  args="${words(args)}"`] : []),
    `${indent}  ;;`,
  ];
}

function bashScript(commands: readonly CompletionCommand[]): string {
  const lines = [
    '# dynein completion for bash: source <(dynein completion bash)',
    '_dynein() {',
    '  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}',
    '  local cmd=${COMP_WORDS[1]} sub=${COMP_WORDS[2]} opts="" valued="" dirs="" files="" args=- depth=2',
    '  COMPREPLY=()',
    '  if ((COMP_CWORD == 1)); then',
    `    COMPREPLY=($(compgen -W "${words(commands.map((c) => c.name))} --help --version" -- "$cur"))`,
    '    return',
    '  fi',
    '  case "$cmd" in',
  ];
  for (const c of commands) {
    if (!c.subcommands) {
      lines.push(...bashArm(c.name, c.flags, '    ', c.args));
      continue;
    }
    lines.push(
      `    ${c.name})`,
      '      depth=3',
      '      if ((COMP_CWORD == 2)); then',
      `        COMPREPLY=($(compgen -W "${words(c.subcommands.map((s) => s.name))} ${c.runsAlone ? flagWords(c.flags) : '--help'}" -- "$cur"))`,
      '        return',
      '      fi',
      '      case "$sub" in',
    );
    for (const s of c.subcommands) lines.push(...bashArm(s.name, s.flags, '        ', s.args));
    // A group run without a subcommand: the word after it is a flag or a flag's value.
    if (c.runsAlone) lines.push(...bashArm('*', c.flags, '        '));
    lines.push('      esac', '      ;;');
  }
  lines.push(
    '  esac',
    '  if [[ $dirs == *" $prev "* ]]; then',
    '    COMPREPLY=($(compgen -d -- "$cur"))',
    '  elif [[ $files == *" $prev "* ]]; then',
    '    COMPREPLY=($(compgen -f -- "$cur"))',
    '  elif [[ $valued == *" $prev "* ]]; then',
    '    COMPREPLY=()',
    '  elif [[ $cur == -* ]]; then',
    '    COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
    '  elif [[ $args != - ]]; then',
    '    COMPREPLY=($(compgen -W "$args" -- "$cur"))',
    '  elif ((COMP_CWORD >= depth)); then',
    '    COMPREPLY=($(compgen -f -- "$cur"))',
    '  fi',
    '}',
    'complete -o filenames -F _dynein dynein',
    '',
  );
  return lines.join('\n');
}

/** Single quotes for fish: a `'` inside becomes `\'`. */
const fishQuote = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

function fishFlags(condition: string, flags: readonly CompletionFlag[]): string[] {
  return flags.map((f) => {
    const parts = ['complete -c dynein', `-n ${fishQuote(condition)}`, `-l ${f.name}`];
    if (f.short) parts.push(`-s ${f.short}`);
    if (f.path === 'dir') parts.push("-r -a '(__fish_complete_directories)'");
    else if (f.path === 'file') parts.push('-r -F');
    else if (f.takesValue) parts.push('-x');
    parts.push(`-d ${fishQuote(f.help)}`);
    return parts.join(' ');
  });
}

/** A command's argument words, or paths (fish completes no files unless told: `complete -c dynein -f`). */
function fishArgs(condition: string, c: CompletionCommand): string[] {
  const what = c.args ? `-a ${fishQuote(words(c.args))}` : '-F';
  return [`complete -c dynein -n ${fishQuote(condition)} ${what}`];
}

function fishScript(commands: readonly CompletionCommand[]): string {
  const names = words(commands.map((c) => c.name));
  const lines = [
    '# dynein completion for fish: dynein completion fish > ~/.config/fish/completions/dynein.fish',
    'complete -c dynein -f',
    `complete -c dynein -n '__fish_use_subcommand' -l help -s h -d 'print the usage'`,
    `complete -c dynein -n '__fish_use_subcommand' -l version -d 'print the version of dynein-serverless'`,
  ];
  for (const c of commands) {
    lines.push(`complete -c dynein -n ${fishQuote(`not __fish_seen_subcommand_from ${names}`)} -a ${c.name} -d ${fishQuote(c.brief)}`);
    if (!c.subcommands) {
      lines.push(...fishFlags(`__fish_seen_subcommand_from ${c.name}`, c.flags), ...fishArgs(`__fish_seen_subcommand_from ${c.name}`, c));
      continue;
    }
    const subs = words(c.subcommands.map((s) => s.name));
    if (c.runsAlone)
      lines.push(...fishFlags(`__fish_seen_subcommand_from ${c.name}; and not __fish_seen_subcommand_from ${subs}`, c.flags));
    for (const s of c.subcommands) {
      lines.push(
        `complete -c dynein -n ${fishQuote(`__fish_seen_subcommand_from ${c.name}; and not __fish_seen_subcommand_from ${subs}`)} -a ${s.name} -d ${fishQuote(s.brief)}`,
        ...fishFlags(`__fish_seen_subcommand_from ${c.name}; and __fish_seen_subcommand_from ${s.name}`, s.flags),
        ...fishArgs(`__fish_seen_subcommand_from ${c.name}; and __fish_seen_subcommand_from ${s.name}`, s),
      );
    }
  }
  lines.push('');
  return lines.join('\n');
}
