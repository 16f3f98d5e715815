/** `dynein tenant ...`: the operator's controls of a tenant (show, pause, resume, set). */
import type { TenantControls, TenantSettingsUpdate } from '../../apiTypes.js';
import { DyneinClient } from '../../client.js';
import type { Command, Ctx, Flags, Group, Values } from '../command.js';
import { UsageError } from '../errors.js';
import { HELP, JSON_OUT, WHERE } from '../flags.js';
import { resolveAdminTarget } from '../target.js';

/** What an operator command asks the API, for one tenant. */
type AdminCall = (c: DyneinClient, tenant: string, values: Values) => Promise<TenantControls>;

/** A `dynein tenant <name> <tenant>` command: one tenant, the operator's target, the controls printed. */
function adminCommand(name: string, brief: string, call: AdminCall, flags: Flags = {}): Command {
  return {
    brief,
    usage: `<tenant>${Object.keys(flags).length > 0 ? ' [--max-deliveries-per-second <n|none>] [--max-submits-per-second <n|none>] [--weight <n>] [--key-lease-seconds <n|default>]' : ''} [options]`,
    summary: `${brief.charAt(0).toUpperCase()}${brief.slice(1)}.`,
    targeted: false,
    flags: { ...flags, ...JSON_OUT, ...WHERE, ...HELP },
    run: (ctx) => runAdmin(name, call, ctx),
  };
}

async function runAdmin(name: string, call: AdminCall, { values, str, rest, io }: Ctx): Promise<number> {
  if (rest.length !== 1) throw new UsageError(`tenant ${name} needs one tenant name: dynein tenant ${name} <tenant>`);
  if (name === 'set') settingsOptions(values); // checked before anything is read
  const where = resolveAdminTarget({
    endpoint: str('endpoint'),
    region: str('region'),
    profile: str('profile'),
    dataDir: str('data-dir'),
  });
  const controls = await call(new DyneinClient(where), rest[0]!, values);
  if (values.json) io.out(JSON.stringify(controls));
  else for (const line of describeControls(controls)) io.out(line);
  return 0;
}

export const tenantCommand: Group = {
  brief: "operators: pause, resume, show or set a tenant's limits and weight",
  summary:
    'Tenant controls through the operator API (docs/tenant-controls.md; IAM: DyneinScheduler.grantAdmin). Locally it\n' +
    'uses local.json\'s operator key ("admin"); with --endpoint, your AWS credentials. Every change is recorded with who made it.',
  subcommands: {
    show: adminCommand('show', "print the tenant's controls: paused or not, limits, weight, last changes", (c, t) =>
      c.getTenantControls(t),
    ),
    pause: adminCommand('pause', 'pause the tenant: its jobs are accepted and held, none delivered until resume', (c, t) =>
      c.pauseTenant(t),
    ),
    resume: adminCommand('resume', 'resume the tenant: its held jobs are delivered in due order', (c, t) => c.resumeTenant(t)),
    set: adminCommand(
      'set',
      "set the tenant's rate limits and weight (only the options given change)",
      (c, t, values) => c.setTenantSettings(t, settingsOptions(values)),
      {
        'max-deliveries-per-second': { type: 'string', arg: '<n|none>', help: 'deliveries per second, 1 to 100000, or none (no limit)' },
        'max-submits-per-second': { type: 'string', arg: '<n|none>', help: 'submitted jobs per second, 1 to 100000, or none (no limit)' },
        weight: { type: 'string', arg: '<n>', help: 'share of dispatch relative to other tenants, 1 to 1000 (default 1)' },
        'key-lease-seconds': {
          type: 'string',
          arg: '<n|default>',
          help: "how long a concurrency key's slot outlives a silent worker, 10 to 86400 s, or default (900)",
        },
      },
    ),
  },
};

/** The settings `dynein tenant set` changes, from its options; a usage error naming the option otherwise. */
function settingsOptions(values: Values): TenantSettingsUpdate {
  const limit = (flag: string): number | null | undefined => {
    const v = values[flag];
    if (typeof v !== 'string') return undefined;
    if (v === 'none') return null;
    if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 100_000)
      throw new UsageError(`--${flag} must be a whole number from 1 to 100000, or none, got '${v}'`);
    return Number(v);
  };
  const update: { -readonly [K in keyof TenantSettingsUpdate]: TenantSettingsUpdate[K] } = {};
  const deliveries = limit('max-deliveries-per-second');
  const submits = limit('max-submits-per-second');
  if (deliveries !== undefined) update.maxDeliveriesPerSecond = deliveries;
  if (submits !== undefined) update.maxSubmitsPerSecond = submits;
  const weight = values.weight;
  if (typeof weight === 'string') {
    if (!/^\d+$/.test(weight) || Number(weight) < 1 || Number(weight) > 1000)
      throw new UsageError(`--weight must be a whole number from 1 to 1000, got '${weight}'`);
    update.weight = Number(weight);
  }
  const lease = values['key-lease-seconds'];
  if (typeof lease === 'string') {
    if (lease !== 'default' && (!/^\d+$/.test(lease) || Number(lease) < 10 || Number(lease) > 86_400))
      throw new UsageError(`--key-lease-seconds must be a whole number from 10 to 86400, or default, got '${lease}'`);
    update.keyLeaseSeconds = lease === 'default' ? null : Number(lease);
  }
  if (Object.keys(update).length === 0)
    throw new UsageError(
      'tenant set needs at least one of --max-deliveries-per-second, --max-submits-per-second, --weight, --key-lease-seconds',
    );
  return update;
}

/** `billing  PAUSED since <time>` / `billing  running`, the settings, then the changes (latest last). */
function describeControls(c: TenantControls): string[] {
  const s = c.settings;
  return [
    `${c.tenant}  ${c.paused ? `PAUSED since ${c.pausedAt ?? '?'}` : 'running'}`,
    `  maxDeliveriesPerSecond ${s.maxDeliveriesPerSecond ?? 'none'}  maxSubmitsPerSecond ${s.maxSubmitsPerSecond ?? 'none'}  weight ${s.weight}` +
      (s.keyLeaseSeconds !== undefined ? `  keyLeaseSeconds ${s.keyLeaseSeconds}` : ''),
    ...(c.changes.length > 0 ? ['  changes (latest last):'] : []),
    ...c.changes.map((ch) => `    ${ch.at}  ${ch.action}${ch.settings ? ` ${JSON.stringify(ch.settings)}` : ''}  by ${ch.by}`),
  ];
}
