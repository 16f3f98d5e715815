import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startScheduleStub, type StubApi } from './scheduleStub.js';
import { runMain, stubDataDir } from './support.js';

/**
 * `dynein schedules ...` in process (the same main() as bin/dynein.js), against the in-memory
 * schedules stand-in through a local.json that points at it: output, exit codes, one-line errors,
 * and the command lines refused before anything is sent. End to end on the local stack:
 * schedules-e2e.test.ts.
 */
let api: StubApi;
let dataDir = '';
const empty = mkdtempSync(join(tmpdir(), 'dynein-schedules-none-'));

beforeAll(async () => {
  api = await startScheduleStub(['alpha']);
  dataDir = stubDataDir('dynein-schedules-cli-', api.endpoint, 'alpha');
});
afterAll(() => api?.close());

const run = (args: string[], dir: string | null = dataDir) => runMain(dir === null ? args : [...args, '--data-dir', dir]);

const S = (...args: string[]) => ['schedules', ...args, '--tenant', 'alpha'];

describe('dynein schedules', () => {
  it('lists its commands in the general and its own help', async () => {
    const general = await run(['--help'], null);
    expect(general.out.join('\n')).toMatch(/^ {2}schedules +recurring schedules: put, get, list, delete, pause, resume$/m);
    for (const args of [
      ['schedules', '--help'],
      ['help', 'schedules'],
    ]) {
      const help = await run(args);
      expect(help.code).toBe(0);
      const text = help.out.join('\n');
      expect(text).toMatch(/^Usage: dynein schedules <command> \[options\]/);
      for (const c of ['put', 'get', 'list', 'delete', 'pause', 'resume']) expect(text).toMatch(new RegExp(`^  ${c} `, 'm'));
    }
    for (const args of [
      ['schedules', 'put', '--help'],
      ['help', 'schedules', 'put'],
    ]) {
      const help = await run(args);
      expect(help.code).toBe(0);
      const text = help.out.join('\n');
      expect(text).toMatch(/^Usage: dynein schedules put <name> --tenant <name> --expression <expr>/);
      for (const f of [
        '--expression',
        '--timezone',
        '--start-at',
        '--end-at',
        '--payload',
        '--payload-file',
        '--disabled',
        '--dry-run',
        '--count',
        '--json',
        '--endpoint',
      ])
        expect(text).toContain(f);
    }
  });

  it('every flag a subcommand lists is accepted, and documented in docs/install.md', async () => {
    const section = readFileSync('docs/install.md', 'utf8')
      .split(/^### /m)
      .find((s) => s.startsWith('`dynein schedules`'));
    expect(section, 'docs/install.md has a "### `dynein schedules`" section').toBeDefined();
    for (const sub of ['put', 'get', 'list', 'delete', 'pause', 'resume']) {
      const usage = (await run(['schedules', sub, '--help'], null)).out.join('\n');
      const flags = [...new Set([...usage.matchAll(/^\s+(?:-\w, )?(--[\w-]+)/gm)].map((m) => m[1]!))];
      expect(flags).toEqual(expect.arrayContaining(['--tenant', '--json', '--endpoint', '--help']));
      for (const flag of flags) {
        expect(section, `dynein schedules ${sub} ${flag}`).toContain(flag);
        const r = await run(['schedules', sub, flag, 'x', '--help'], null);
        expect(r.err.join('\n'), `schedules ${sub} ${flag}`).not.toMatch(/Unknown option/);
      }
      expect(section).toContain(`dynein schedules ${sub}`);
    }
  });

  it('put prints what it did and the next runs; get, pause, resume, delete', async () => {
    const put = await run(S('put', 'nightly', '--expression', 'cron(0 2 * * ? *)', '--timezone', 'Europe/Paris', '--payload', '{"r": 1}'));
    expect(put).toMatchObject({ code: 0, err: [] });
    expect(put.out[0]).toBe('created nightly  ENABLED  cron(0 2 * * ? *)  Europe/Paris');
    expect(put.out[1]).toBe('  next 5 runs:');
    expect(put.out.slice(2)).toHaveLength(5);
    for (const l of put.out.slice(2)) expect(l).toMatch(/^ {4}\d{4}-\d\d-\d\dT\d\d:\d\d:00\.000Z$/);
    expect(JSON.parse(api.requests.at(-1)!.body)).toEqual({ expression: 'cron(0 2 * * ? *)', timezone: 'Europe/Paris', payload: { r: 1 } });
    expect(api.requests.at(-1)!.body).toContain('"payload":{"r": 1}'); // the text as given

    const again = await run(S('put', 'nightly', '--expression', 'rate(1 hour)', '--disabled', '--start-at', '2030-01-01T00:00:00Z'));
    expect(again.out).toEqual(['replaced nightly  DISABLED  rate(1 hour)  UTC', '  no next runs: paused (dynein schedules resume)']);
    expect(JSON.parse(api.requests.at(-1)!.body)).toEqual({
      expression: 'rate(1 hour)',
      startAt: '2030-01-01T00:00:00Z',
      state: 'DISABLED',
    });

    const got = await run(S('get', 'nightly'));
    expect(got.code).toBe(0);
    expect(got.out).toEqual([
      'nightly  DISABLED  rate(1 hour)  UTC',
      '  from 2030-01-01T00:00:00Z until (no end)',
      '  payload null',
      expect.stringMatching(/^ {2}created \S+Z, updated \S+Z$/),
      '  no next runs: paused (dynein schedules resume)',
    ]);
    const json = await run(S('get', 'nightly', '--json'));
    expect(json.out).toHaveLength(1);
    expect(JSON.parse(json.out[0]!)).toMatchObject({ tenant: 'alpha', name: 'nightly', state: 'DISABLED', nextRuns: [] });

    const resumed = await run(S('resume', 'nightly'));
    expect(resumed.out[0]).toBe('resumed nightly  ENABLED  rate(1 hour)  UTC');
    expect(resumed.out[1]).toBe('  next 5 runs:');
    const paused = await run(S('pause', 'nightly'));
    expect(paused.out).toEqual(['paused nightly  DISABLED  rate(1 hour)  UTC']);
    expect(JSON.parse((await run(S('pause', 'nightly', '--json'))).out[0]!)).toMatchObject({ state: 'DISABLED' });

    expect((await run(S('delete', 'nightly'))).out).toEqual(['deleted nightly: its occurrences due more than 5 s from now are cancelled']);
    const gone = await run(S('get', 'nightly'));
    expect(gone).toMatchObject({ code: 1, out: [] });
    expect(gone.err).toHaveLength(1);
    expect(gone.err[0]).toMatch(/^dynein: ScheduleNotFound \(HTTP 404\): tenant alpha has no schedule nightly \[request req-\d+\]$/);
  });

  it('put --dry-run --count prints the runs and stores nothing; --json prints the reply', async () => {
    const dry = await run(S('put', 'preview', '--expression', 'rate(1 minute)', '--dry-run', '--count', '3'));
    expect(dry.code).toBe(0);
    expect(dry.out).toEqual([
      'dry run (nothing stored): preview  ENABLED  rate(1 minute)  UTC',
      '  next 3 runs:',
      ...Array(3).fill(expect.stringMatching(/^ {4}\S+Z$/)),
    ]);
    expect(api.requests.at(-1)!.url).toBe('/v1/tenants/alpha/schedules/preview?dryRun=true&count=3');
    expect((await run(S('get', 'preview'))).code).toBe(1);
    const json = await run(S('put', 'preview', '--expression', 'rate(1 minute)', '--dry-run', '--json'));
    const reply = JSON.parse(json.out[0]!);
    expect(reply).toMatchObject({ dryRun: true, name: 'preview' });
    expect(reply.nextRuns).toHaveLength(100);
    expect(reply).not.toHaveProperty('created');
  });

  it('list prints one line per schedule over every page, or one page with --limit and the next command on stderr', async () => {
    for (const n of ['c-three', 'a-one', 'b-two']) expect((await run(S('put', n, '--expression', 'rate(1 day)'))).code).toBe(0);
    const all = await run(S('list'));
    expect(all.code).toBe(0);
    expect(all.out).toEqual([
      expect.stringMatching(/^a-one {4}ENABLED {2}rate\(1 day\) {2}UTC {2}\S+Z$/),
      expect.stringMatching(/^b-two {4}ENABLED/),
      expect.stringMatching(/^c-three {2}ENABLED/),
    ]);
    expect(all.err).toEqual([]);

    const page = await run(S('list', '--limit', '2'));
    expect(page.out.map((l) => l.split(' ')[0])).toEqual(['a-one', 'b-two']);
    expect(page.err).toHaveLength(1);
    const cursor = /--cursor '([^']+)' --limit 2$/.exec(page.err[0]!)![1]!;
    expect(page.err[0]).toMatch(/^more: dynein schedules list --tenant alpha --cursor '/);
    const next = await run(S('list', '--limit', '2', '--cursor', cursor, '--json'));
    expect(JSON.parse(next.out[0]!).schedules.map((s: { name: string }) => s.name)).toEqual(['c-three']);
    expect(JSON.parse(next.out[0]!)).not.toHaveProperty('nextCursor');
    expect(next.err).toEqual([]);

    const json = await run(S('list', '--json'));
    expect(json.out).toHaveLength(1);
    expect(JSON.parse(json.out[0]!).schedules).toHaveLength(3);
    for (const n of ['a-one', 'b-two', 'c-three']) await run(S('delete', n));
    const none = await run(S('list'));
    expect(none).toMatchObject({ code: 0, out: [], err: ['tenant alpha has no schedules'] });
  });

  it('answers API refusals with one line and exit 1', async () => {
    const cases: [string[], RegExp][] = [
      [
        S('put', 'bad', '--expression', 'every day'),
        /^dynein: ValidationError \(HTTP 400\): expression "every day" is not cron\(\), rate\(\) or at\(\)/,
      ],
      [S('put', 'busy', '--expression', 'rate(1 day)'), /^dynein: ConcurrentModification \(HTTP 409\): /],
      [S('delete', 'missing'), /^dynein: ScheduleNotFound \(HTTP 404\)/],
      [S('list', '--cursor', 'forged'), /^dynein: ValidationError \(HTTP 400\): cursor/],
      [['schedules', 'get', 'x', '--tenant', 'alpha'], /^dynein: ScheduleNotFound/],
    ];
    for (const [args, pattern] of cases) {
      const r = await run(args);
      expect([r.code, r.out, r.err.length]).toEqual([1, [], 1]);
      expect(r.err[0]).toMatch(pattern);
    }
    const file = join(dataDir, 'missing.json');
    const unreadable = await run(S('put', 'p', '--expression', 'rate(1 day)', '--payload-file', file));
    expect([unreadable.code, unreadable.err]).toEqual([1, [`dynein: cannot read ${file}: ENOENT`]]);
  });

  it('refuses a bad command line with exit 2 and one line, before looking for the stack', async () => {
    const payload = join(empty, 'payload.json');
    writeFileSync(payload, '{"from": "file"');
    const usage: [string[], RegExp][] = [
      [['schedules'], /schedules needs a command: one of put, get, list, delete, pause, resume/],
      [['schedules', 'run', 'x', '--tenant', 'alpha'], /unknown schedules command 'run': one of put, get/],
      [['schedules', 'get', 'x'], /schedules get needs --tenant/],
      [S('get'), /schedules get needs one schedule name/],
      [S('delete', 'a', 'b'), /schedules delete needs one schedule name/],
      [S('pause', 'x'.repeat(65)), /is not a schedule name: 1 to 64 characters/],
      [S('resume', '..'), /is not a schedule name/],
      [S('put', 'x'), /schedules put needs --expression/],
      [S('put', 'x', '--expression', 'rate(1 day)', '--count', '5'), /--count goes with --dry-run/],
      [
        S('put', 'x', '--expression', 'rate(1 day)', '--dry-run', '--count', '101'),
        /--count must be a whole number from 1 to 100, got '101'/,
      ],
      [S('put', 'x', '--expression', 'rate(1 day)', '--dry-run', '--count', 'many'), /--count must be a whole number/],
      [S('put', 'x', '--expression', 'rate(1 day)', '--payload', '{nope'), /--payload is not JSON/],
      [S('put', 'x', '--expression', 'rate(1 day)', '--payload', '1', '--payload-file', payload), /--payload or --payload-file, not both/],
      [S('put', 'x', '--expression', 'rate(1 day)', '--payload-file', payload), /payload\.json does not hold one JSON value/],
      [S('put', 'x', '--expression'), /argument missing|--expression/],
      [S('put', 'x', '--expression', 'rate(1 day)', '--every', '5m'), /Unknown option '--every' \(see `dynein schedules put --help`\)/],
      [S('get', 'x', '--expression', 'rate(1 day)'), /Unknown option '--expression'/],
      [S('list', '--limit', '0'), /--limit must be a whole number from 1 to 100, got '0'/],
      [S('list', 'extra'), /schedules list takes no argument 'extra'/],
    ];
    for (const [args, pattern] of usage) {
      const r = await run(args, empty);
      expect([args, r.code, r.out, r.err.length]).toEqual([args, 2, [], 1]);
      expect(r.err[0]).toMatch(/^dynein: /);
      expect(r.err[0]).toMatch(pattern);
    }
    // A good command line does look for the stack.
    const noStack = await run(S('list'), empty);
    expect([noStack.code, noStack.err]).toEqual([1, [expect.stringMatching(/no local stack running/)]]);
  });
});
