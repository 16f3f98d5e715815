/** `dynein ui`: serves the job browser on localhost. */
import { noPositionals } from '../args.js';
import type { Command, Ctx } from '../command.js';
import { UsageError } from '../errors.js';
import { HELP, WHERE } from '../flags.js';
import { readLocalJson, resolveTarget } from '../target.js';
import { startUiServer } from '../../ui/server.js';

export const uiCommand: Command = {
  brief: 'open the job browser: a web page on localhost (jobs, schedules, dead letters)',
  usage: '[--port <n>] [--tenant <name>] [--endpoint <url> --region <r> --profile <p>]',
  summary:
    'Serve the job browser on http://127.0.0.1:<port>/<token>/ until Ctrl-C (a new random token each run: open the URL\n' +
    'it prints; anything without the token is refused): list jobs by state and time, a job and its\n' +
    'timeline, cancel, recurring schedules and their next runs, the dead-letter queue and redrive, refreshed live.\n' +
    "The server signs every API call itself (the local stack's tenant keys, or your AWS credentials with --endpoint):\n" +
    'the page holds no secret. See docs/ui.md.',
  targeted: false,
  flags: {
    port: { type: 'string', arg: '<n>', help: 'the port on 127.0.0.1 (default 8090; 0 picks a free one)' },
    tenant: { type: 'string', short: 't', arg: '<name>', help: 'the tenant shown first (default: the first of the local stack)' },
    ...WHERE,
    ...HELP,
  },
  run: runUi,
};

async function runUi({ str, rest, io }: Ctx): Promise<number> {
  noPositionals('ui', rest);
  const portText = str('port') ?? '8090';
  if (!/^\d+$/.test(portText) || Number(portText) > 65_535)
    throw new UsageError(`--port must be a port number from 0 to 65535, got '${portText}'`);
  const tenant = str('tenant');
  const endpoint = str('endpoint');
  const listen = (opts: Parameters<typeof startUiServer>[0]) =>
    startUiServer(opts).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') throw new Error(`port ${portText} is in use: pass another with --port (0 picks a free one)`);
      throw err;
    });
  let server: Awaited<ReturnType<typeof startUiServer>>;
  if (endpoint) {
    const target = resolveTarget({ tenant: tenant ?? '', endpoint, region: str('region'), profile: str('profile') });
    server = await listen({
      endpoint: target.endpoint,
      region: target.region,
      credentialsFor: () => target.credentials,
      tenants: tenant ? [tenant] : [],
      ...(tenant ? { tenant } : {}),
      local: false,
      port: Number(portText),
    });
  } else {
    if (str('region') || str('profile')) throw new UsageError('--region and --profile go with --endpoint');
    const local = readLocalJson(str('data-dir'));
    const tenants = Object.keys(local.tenants ?? {});
    if (tenant !== undefined && !tenants.includes(tenant))
      throw new Error(`tenant '${tenant}' is not in the local stack (it has ${tenants.join(', ') || 'none'})`);
    server = await listen({
      endpoint: local.endpoint,
      region: local.region,
      credentialsFor: (t) => {
        const k = Object.hasOwn(local.tenants, t) ? local.tenants[t] : undefined;
        return k ? { accessKeyId: k.accessKeyId, secretAccessKey: k.secretAccessKey } : undefined;
      },
      tenants,
      ...(tenant ? { tenant } : {}),
      local: true,
      port: Number(portText),
    });
  }
  io.out(`dynein ui: the job browser is at ${server.url} (Ctrl-C stops; the URL holds this run's token: do not share it)`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return 0;
}
