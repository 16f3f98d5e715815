/** The usage texts `--help` prints: of the CLI, of a command group, of one command. */
import type { Command, CommandTable, Group } from './command.js';

export function groupUsage(name: string, g: Group): string {
  const width = Math.max(...Object.keys(g.subcommands).map((n) => n.length));
  const commands = [
    'Commands:',
    ...Object.entries(g.subcommands).map(([n, c]) => `  ${n.padEnd(width)}  ${c.brief}`),
    '',
    `  dynein ${name} <command> --help   that command's usage and options`,
    '',
  ];
  // A group that runs without a subcommand: its own usage and options, then its subcommands.
  if (g.default) return [usageOf(name, g.default), ...commands].join('\n');
  return [`Usage: dynein ${name} <command> [options]`, '', g.summary, '', ...commands].join('\n');
}

export function usageOf(name: string, c: Command): string {
  const rows = Object.entries(c.flags).map(
    ([flag, f]) => [`${f.short ? `-${f.short}, ` : '    '}--${flag}${f.arg ? ` ${f.arg}` : ''}`, f.help] as const,
  );
  const width = Math.max(...rows.map(([l]) => l.length));
  return [
    `Usage: dynein ${name} ${c.usage}`,
    '',
    c.summary ?? c.brief,
    '',
    'Options:',
    ...rows.map(([l, h]) => `  ${l.padEnd(width)}  ${h}`),
    '',
  ].join('\n');
}

export function generalUsage(commands: CommandTable): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  return [
    'Usage: dynein <command> [options]',
    '',
    'Commands:',
    ...Object.entries(commands).map(([n, c]) => `  ${n.padEnd(width)}  ${c.brief}`),
    '',
    'Every command but local talks to the local stack by default ($DYNEIN_DATA_DIR/local.json, or',
    '--data-dir); --endpoint <url> talks to the API on AWS instead (--profile, --region).',
    'DYNEIN_ENDPOINT, DYNEIN_REGION, DYNEIN_PROFILE and DYNEIN_TENANT stand in for the flags not given.',
    '',
    "  dynein <command> --help   that command's usage and options",
    '  dynein --version          the version of dynein-serverless',
    '',
  ].join('\n');
}
