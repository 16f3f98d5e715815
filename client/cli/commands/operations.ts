/**
 * Bulk cancel (docs/flow-control.md "Bulk cancel"): `dynein jobs cancel` starts one and follows it
 * until `DONE`, `dynein operation` prints one.
 */
import type { CancelJobsFilter, Operation } from '../../apiTypes.js';
import { noPositionals } from '../args.js';
import { client, type Command, type Ctx, type Values } from '../command.js';
import { UsageError } from '../errors.js';
import { HELP, TENANT, WHERE } from '../flags.js';

/** How often `jobs cancel` reads its operation. */
export const OPERATION_POLL_MS = 1_000;

const WHAT = '--tag <tag>, --key <key>, --debounce-key <key> or --scheduled [--from <time>] [--to <time>]';

export const cancelJobsCommand: Command = {
  brief: 'cancel every job with a tag, a key, or pending in a due-time range (bulk cancel)',
  usage:
    '--tenant <name> (--tag <tag> | --key <key> | --debounce-key <key> | --scheduled [--from <time>] [--to <time>]) [--no-wait] [options]',
  summary:
    'Cancel every job of the tenant that matches, accepted before this request: stored or still on its way to the\n' +
    'table. Prints the operation id on stderr, then its counts there while it runs (a line each time they change; on a\n' +
    'terminal one line redrawn), and once DONE one summary line on stdout: matched, cancelled, already queued (being\n' +
    "dispatched), not cancellable (`cancellable: false` or a workflow's job). --no-wait prints the operation id only.",
  targeted: true,
  flags: {
    ...TENANT,
    tag: { type: 'string', arg: '<tag>', help: 'the jobs submitted with this tag' },
    key: { type: 'string', arg: '<key>', help: 'or the jobs submitted with this concurrency key' },
    'debounce-key': { type: 'string', arg: '<key>', help: 'or the jobs submitted with this debounce key' },
    scheduled: { type: 'boolean', help: 'or every pending (SCHEDULED) job of the tenant, within --from and --to when given' },
    from: { type: 'string', arg: '<time>', help: 'with --scheduled: due at or after this RFC 3339 time' },
    to: { type: 'string', arg: '<time>', help: 'with --scheduled: due at or before this RFC 3339 time' },
    'no-wait': { type: 'boolean', help: 'print the operation id once it started, without waiting for it' },
    json: { type: 'boolean', help: 'print the operation once DONE (with --no-wait, {"operationId", "state"}) as one JSON line' },
    ...WHERE,
    ...HELP,
  },
  run: runCancelJobs,
};

export const operationCommand: Command = {
  brief: 'print a bulk cancel: its state and counts',
  usage: '--tenant <name> <operationId> [options]',
  summary:
    'Print a bulk cancel (`dynein jobs cancel`): RUNNING or DONE, its operation id, filter and start, and its counts:\n' +
    'matched, cancelled, already queued, not cancellable. Operations are kept 21 days.',
  targeted: true,
  flags: { ...TENANT, json: { type: 'boolean', help: 'print the reply as one JSON line' }, ...WHERE, ...HELP },
  run: runOperation,
};

/** The filter the flags name: exactly one selector, `--from`/`--to` with `--scheduled` only. */
export function cancelFilter(values: Values, str: (name: string) => string | undefined): CancelJobsFilter {
  const [tag, key, debounceKey, from, to] = [str('tag'), str('key'), str('debounce-key'), str('from'), str('to')];
  const given = [
    ...(tag !== undefined ? ['--tag'] : []),
    ...(key !== undefined ? ['--key'] : []),
    ...(debounceKey !== undefined ? ['--debounce-key'] : []),
    ...(values.scheduled ? ['--scheduled'] : []),
  ];
  if (given.length === 0) throw new UsageError(`jobs cancel needs what to cancel: ${WHAT}; nothing was sent`);
  if (given.length > 1)
    throw new UsageError(
      `jobs cancel takes one of --tag, --key, --debounce-key or --scheduled, not ${given.join(' and ')}; nothing was sent`,
    );
  if (!values.scheduled && (from !== undefined || to !== undefined))
    throw new UsageError(`--from and --to go with --scheduled only (the due times of the pending jobs to cancel); nothing was sent`);
  for (const [flag, time] of [
    ['--from', from],
    ['--to', to],
  ] as const)
    if (time !== undefined && Number.isNaN(Date.parse(time)))
      throw new UsageError(`${flag} '${time}' is not an RFC 3339 time: use a form like 2030-01-31T09:00:00Z; nothing was sent`);
  if (tag !== undefined) return { tag };
  if (key !== undefined) return { concurrencyKey: key };
  if (debounceKey !== undefined) return { debounceKey };
  return { state: 'SCHEDULED', ...(from !== undefined ? { from } : {}), ...(to !== undefined ? { to } : {}) };
}

/** `matched 160, cancelled 150, already queued 0, not cancellable 10` */
export const countsText = (op: Operation): string =>
  `matched ${op.matched}, cancelled ${op.cancelled}, already queued ${op.alreadyQueued}, not cancellable ${op.notCancellable}`;

/** `tag order-42`, `state SCHEDULED from <time> to <time>` */
const filterText = (op: Operation): string =>
  Object.entries(op.filter)
    .map(([k, v]) => `${k} ${String(v)}`)
    .join(' ');

async function runCancelJobs({ values, str, rest, target, tenant, io }: Ctx): Promise<number> {
  noPositionals('jobs cancel', rest);
  const filter = cancelFilter(values, str);
  const api = client(target());
  const started = await api.cancelJobs(tenant, filter);
  if (values['no-wait']) {
    io.out(values.json ? JSON.stringify(started) : started.operationId);
    return 0;
  }
  io.err(`started ${started.operationId} (dynein operation --tenant ${tenant} ${started.operationId} shows it)`);
  let shown = '';
  let drawn = false;
  for (;;) {
    const op = await api.operation(tenant, started.operationId);
    if (op.state === 'DONE') {
      if (drawn) io.err('');
      io.out(values.json ? JSON.stringify(op) : `${op.state}  ${op.operationId}  ${countsText(op)}`);
      return 0;
    }
    const line = `cancelling: ${countsText(op)}`;
    if (io.progress) {
      io.progress(line);
      drawn = true;
    } else if (line !== shown) io.err(line);
    shown = line;
    await new Promise((r) => setTimeout(r, OPERATION_POLL_MS));
  }
}

async function runOperation({ values, rest, target, tenant, io }: Ctx): Promise<number> {
  if (rest.length !== 1)
    throw new UsageError(
      `operation needs one operation id (as dynein jobs cancel printed it)${rest.length > 1 ? `, got ${rest.length}` : ''}: dynein operation --tenant ${tenant} <operationId>`,
    );
  const op = await client(target()).operation(tenant, rest[0]!);
  io.out(
    values.json ? JSON.stringify(op) : `${op.state}  ${op.operationId}  ${filterText(op)}  created ${op.createdAt}  ${countsText(op)}`,
  );
  return 0;
}
