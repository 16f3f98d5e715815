import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../client/cli/index.js';
import { installCommand, missingPeers } from '../../client/cli/local.js';

/**
 * The CLI's command line as a user meets it: --version, --help and `<command> --help`, one-line
 * usage errors with exit code 2, and docs/install.md listing every command and flag the CLI has.
 * In process (the same main() as bin/dynein.js); none of these reach the network.
 */
async function run(...args: string[]): Promise<{ code: number; out: string; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l) });
  return { code, out: out.join('\n'), err };
}

const COMMANDS = ['schedule', 'batch', 'get', 'cancel', 'jobs', 'operation', 'worker', 'redrive', 'local', 'completion'];
/** Subcommands of a command that also runs alone (`dynein jobs` lists, `dynein jobs cancel` cancels). */
const SUBCOMMANDS = [['jobs', 'cancel']] as const;
const pkg = JSON.parse(readFileSync('package.json', 'utf8')) as { version: string };
const flagsOf = (usage: string) => [...new Set([...usage.matchAll(/^\s+(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1]!))];

describe('dynein --version and --help', () => {
  it('--version prints the package version', async () => {
    expect(await run('--version')).toEqual({ code: 0, out: pkg.version, err: [] });
  });

  it('--help lists every command, and each command has its own usage', async () => {
    const help = await run('--help');
    expect(help.code).toBe(0);
    expect(help.out).toMatch(/^Usage: dynein <command>/);
    for (const c of COMMANDS) expect(help.out).toMatch(new RegExp(`^  ${c} `, 'm'));
    for (const c of COMMANDS) {
      const usage = await run(c, '--help');
      expect(usage.code).toBe(0);
      expect(usage.err).toEqual([]);
      expect(usage.out).toMatch(new RegExp(`^Usage: dynein ${c} `));
      expect(usage.out).toContain('--help');
      expect(await run('help', c)).toEqual(usage);
      expect((await run(c, '-h')).out).toBe(usage.out);
    }
    // Each command lists its own flags: a flag of one command is not in another's usage.
    expect(flagsOf((await run('schedule', '--help')).out)).toContain('--idempotency-key');
    expect(flagsOf((await run('get', '--help')).out)).not.toContain('--idempotency-key');
    expect(flagsOf((await run('local', '--help')).out)).toEqual(['--port', '--tenants', '--data-dir', '--help']);
  });

  it('every flag a usage lists is accepted by that command', async () => {
    for (const c of COMMANDS) {
      for (const flag of flagsOf((await run(c, '--help')).out)) {
        // `--flag --help`: a known flag is parsed (a string flag takes '--help' as its value, then
        // the command fails on its own terms); an unknown one fails as "Unknown option".
        const r = await run(c, flag, 'x', '--help');
        expect(r.err.join('\n'), `${c} ${flag}`).not.toMatch(/Unknown option/);
      }
    }
  });

  it('a bad command line is one line on stderr and exit code 2', async () => {
    const cases: [string[], RegExp][] = [
      [['frobnicate'], /^dynein: unknown command 'frobnicate': one of schedule, .*local, completion \(see `dynein --help`\)$/],
      [['help', 'frobnicate'], /unknown command 'frobnicate'/],
      [['constructor'], /unknown command 'constructor'/],
      [['help', 'toString'], /unknown command 'toString'/],
      [['--colour'], /^dynein: Unknown option '--colour' \(see `dynein --help`\)$/],
      [['get', '--tenant', 'demo', 'j1', '--at', 'now'], /^dynein: Unknown option '--at' \(see `dynein get --help`\)$/],
      [['local', '--tenant', 'demo'], /Unknown option '--tenant' \(see `dynein local --help`\)/],
      [['schedule', '--tenant'], /argument missing \(see `dynein schedule --help`\)/],
      [['local', 'extra'], /local takes no argument 'extra'/],
    ];
    for (const [args, pattern] of cases) {
      const r = await run(...args);
      expect([r.code, r.out, r.err.length], args.join(' ')).toEqual([2, '', 1]);
      expect(r.err[0]).toMatch(pattern);
    }
  });

  it('no command prints the usage on stderr with exit code 2', async () => {
    const r = await run();
    expect(r.code).toBe(2);
    expect(r.out).toBe('');
    expect(r.err.join('\n')).toMatch(/^Usage: dynein <command>/);
  });
});

describe('dynein local from an installed package', () => {
  const dir = mkdtempSync(join(tmpdir(), 'dynein-peers-'));
  const peersFile = join(dir, 'peers.json');
  writeFileSync(
    peersFile,
    JSON.stringify({
      packages: [
        { name: '@aws-sdk/client-dynamodb', range: '^3.1162.0' },
        { name: 'dynalite', range: '^4.0.0' },
        { name: 'fauxqs', range: '^2.4.1' },
      ],
    }),
  );

  it('names the missing peers and the exact npm install -D command', () => {
    const installed = new Set(['dynalite']);
    const missing = missingPeers(new URL(`file://${peersFile}`), (name) => {
      if (!installed.has(name)) throw new Error(`Cannot find package '${name}'`);
    });
    expect(missing.map((p) => p.name)).toEqual(['@aws-sdk/client-dynamodb', 'fauxqs']);
    expect(installCommand(missing)).toBe("npm install -D '@aws-sdk/client-dynamodb@^3.1162.0' 'fauxqs@^2.4.1'");
  });

  it('finds nothing missing when every peer resolves', () => {
    expect(missingPeers(new URL(`file://${peersFile}`), () => 'file:///x')).toEqual([]);
  });
});

describe('docs/install.md', () => {
  const doc = readFileSync('docs/install.md', 'utf8');

  it('documents every command and every flag of the CLI', async () => {
    for (const c of COMMANDS) {
      const section = doc.split(/^### /m).find((s) => s.startsWith(`\`dynein ${c}\``));
      expect(section, `docs/install.md has no "### \`dynein ${c}\`" section`).toBeDefined();
      for (const flag of flagsOf((await run(c, '--help')).out)) expect(section, `dynein ${c} ${flag}`).toContain(flag);
    }
    for (const [c, sub] of SUBCOMMANDS) {
      const section = doc.split(/^### /m).find((s) => s.startsWith(`\`dynein ${c} ${sub}\``));
      expect(section, `docs/install.md has no "### \`dynein ${c} ${sub}\`" section`).toBeDefined();
      const usage = await run(c, sub, '--help');
      expect(usage.out).toMatch(new RegExp(`^Usage: dynein ${c} ${sub} `));
      for (const flag of flagsOf(usage.out)) expect(section, `dynein ${c} ${sub} ${flag}`).toContain(flag);
    }
  });
});
