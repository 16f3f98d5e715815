import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { main } from '../../client/cli/index.js';

/**
 * `dynein completion bash|zsh|fish`: scripts generated from the command table that prints
 * `--help`, run in the real shells. bash is everywhere; zsh and fish where installed
 * (`apt-get install -y zsh fish`), skipped elsewhere with the reason.
 */
async function dynein(...args: string[]): Promise<{ code: number; out: string; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(args, { out: (l) => out.push(l), err: (l) => err.push(l) }, {});
  return { code, out: out.join('\n'), err };
}

const dir = mkdtempSync(join(tmpdir(), 'dynein-completion-'));
mkdirSync(join(dir, 'data'));
writeFileSync(join(dir, 'jobs.jsonl'), '');
const script = (shell: string) => {
  const file = join(dir, `dynein.${shell}`);
  return dynein('completion', shell).then(({ code, out }) => {
    expect(code).toBe(0);
    writeFileSync(file, `${out}\n`);
    return file;
  });
};

/** What bash offers for the words typed so far (the last one is being completed). */
function bashCompletes(file: string, ...typed: string[]): string[] {
  const words = typed.map((w) => `'${w}'`).join(' ');
  const run = `source '${file}'; COMP_WORDS=(dynein ${words}); COMP_CWORD=${typed.length}; _dynein; printf '%s\\n' "\${COMPREPLY[@]}"`;
  return execFileSync('bash', ['-c', run], { cwd: dir, encoding: 'utf8' }).split('\n').filter(Boolean).sort();
}

const has = (shell: string) => spawnSync(shell, ['-c', 'exit 0']).status === 0;

/** The commands `dynein --help` lists. */
async function helpCommands(): Promise<string[]> {
  const { out } = await dynein('--help');
  const section = out.split('Commands:\n')[1]!.split('\n\n')[0]!;
  return section
    .split('\n')
    .map((l) => l.trim().split(/\s+/)[0]!)
    .sort();
}

describe('dynein completion', () => {
  it('bash: every command --help lists, subcommands, a command’s flags, directories and files where they go', async () => {
    const file = await script('bash');
    const commands = await helpCommands();
    expect(commands).toContain('completion');
    expect(bashCompletes(file, '')).toEqual([...commands, '--help', '--version'].sort());
    expect(bashCompletes(file, 'sch')).toEqual(['schedule', 'schedules']);
    expect(bashCompletes(file, 'schedules', '')).toEqual(['--help', 'delete', 'get', 'list', 'pause', 'put', 'resume']);
    expect(bashCompletes(file, 'schedules', 'put', '--pay')).toEqual(['--payload', '--payload-file']);
    expect(bashCompletes(file, 'schedule', '--te')).toEqual(['--tenant']);
    // A group that also runs alone (`dynein jobs` lists): its subcommand and its own flags, then each one's.
    expect(bashCompletes(file, 'jobs', 'c')).toEqual(['cancel']);
    expect(bashCompletes(file, 'jobs', '--li')).toEqual(['--limit']);
    expect(bashCompletes(file, 'jobs', '--tenant', 'demo', '--or')).toEqual(['--order']);
    expect(bashCompletes(file, 'jobs', 'cancel', '--debounce-key', '')).toEqual([]);
    expect(bashCompletes(file, 'jobs', 'cancel', '--sch')).toEqual(['--scheduled']);
    // A flag's value: nothing for a name, directories for --data-dir, files for a file.
    expect(bashCompletes(file, 'get', '--tenant', '')).toEqual([]);
    expect(bashCompletes(file, 'get', '--data-dir', '')).toEqual(['data']);
    expect(bashCompletes(file, 'schedules', 'put', '--payload-file', 'jo')).toEqual(['jobs.jsonl']);
    expect(bashCompletes(file, 'batch', '--tenant', 'billing', 'jo')).toEqual(['jobs.jsonl']);
    expect(bashCompletes(file, 'completion', '')).toEqual(['bash', 'fish', 'zsh']);
  });

  it.skipIf(!has('zsh'))('zsh: the script loads through bashcompinit and registers the function', async () => {
    const file = await script('zsh');
    const out = execFileSync(
      'zsh',
      ['-c', `autoload -U compinit && compinit -u; source '${file}'; complete -p dynein; whence -w _dynein`],
      {
        cwd: dir,
        encoding: 'utf8',
      },
    );
    expect(out).toContain('complete -o filenames -F _dynein dynein');
    expect(out).toContain('_dynein: function');
  });

  it.skipIf(!has('fish'))('fish: commands with their briefs, subcommands, flags, and the shells', async () => {
    const file = await script('fish');
    const completes = (line: string) =>
      execFileSync('fish', ['-c', `source '${file}'; complete -C '${line}'`], { cwd: dir, encoding: 'utf8' })
        .split('\n')
        .filter(Boolean)
        .map((l) => l.split('\t')[0]!)
        .sort();
    expect(completes('dynein ')).toEqual(await helpCommands());
    expect(completes('dynein schedules p')).toEqual(['pause', 'put']);
    expect(completes('dynein schedule --te')).toEqual(['--tenant']);
    expect(completes('dynein jobs --li')).toEqual(['--limit']);
    expect(completes('dynein jobs cancel --sch')).toEqual(['--scheduled']);
    expect(completes('dynein completion ')).toEqual(['bash', 'fish', 'zsh']);
  });

  it('refuses a shell it does not know, or none, with one line and exit 2', async () => {
    for (const args of [['completion', 'tcsh'], ['completion'], ['completion', 'bash', 'zsh']]) {
      const run = await dynein(...args);
      expect([run.code, run.out, run.err.length]).toEqual([2, '', 1]);
      expect(run.err[0]).toMatch(/^dynein: completion needs one shell: dynein completion bash\|zsh\|fish$/);
    }
  });
});

if (!has('zsh') || !has('fish')) console.warn('completion.test.ts: zsh or fish is not installed: their checks are skipped');
