/**
 * Running one command: its flags' values (the command line's, else the environment's, else the
 * `--stack`'s outputs), the `--tenant` check, and the target it talks to, resolved on first use.
 */
import type { Command, Flags, Values } from './command.js';
import { UsageError } from './errors.js';
import { FLAG_ENV } from './flags.js';
import type { Io } from './output.js';
import { describeStackOutputs, stackTarget } from './stack.js';
import { awsCredentials, resolveTarget, type Target } from './target.js';

/** A string flag's value: the command line's, else (for a flag the command takes) its environment variable's, else undefined. */
function flagValue(values: Values, flag: string, flags: Flags, env: NodeJS.ProcessEnv): string | undefined {
  const given = values[flag];
  if (typeof given === 'string') return given;
  const variable = FLAG_ENV[flag];
  if (variable === undefined || !(flag in flags)) return undefined;
  const value = env[variable]?.trim();
  return value ? value : undefined;
}

/**
 * With `--stack`: the endpoint and the tenant's queue URLs from the stack's outputs, by flag name
 * (a `--queue-url` or `--dlq-url` given still wins); without it, undefined.
 */
async function stackOf(
  given: (flag: string) => string | undefined,
  values: Values,
  env: NodeJS.ProcessEnv,
): Promise<Record<string, string | undefined> | undefined> {
  const stack = given('stack');
  if (stack === undefined) return undefined;
  if (typeof values.endpoint === 'string') throw new UsageError('give --stack or --endpoint, not both');
  const region = given('region') ?? env.AWS_REGION ?? env.AWS_DEFAULT_REGION;
  if (!region) throw new UsageError('--stack needs the region of the stack: --region, DYNEIN_REGION or AWS_REGION');
  const outputs = await describeStackOutputs(stack, region, awsCredentials(given('profile')), env);
  const target = stackTarget(stack, outputs, given('tenant'));
  return { endpoint: target.endpoint, 'queue-url': target.queueUrl, 'dlq-url': target.dlqUrl };
}

/** Runs command `name` (`schedules put` for a subcommand) on its parsed command line; resolves with its exit code. */
export async function runCommand(
  name: string,
  spec: Command,
  parsed: { values: Values; positionals: readonly string[] },
  io: Io,
  env: NodeJS.ProcessEnv,
): Promise<number> {
  const { values, positionals } = parsed;
  const rest = positionals.slice(name.split(' ').length);
  const given = (flag: string) => flagValue(values, flag, spec.flags, env);
  const fromStack = await stackOf(given, values, env);
  // The stack's endpoint beats DYNEIN_ENDPOINT (a flag beats the environment); a queue URL given beats the stack's.
  const str = (flag: string) =>
    fromStack && flag in fromStack ? (flag === 'endpoint' ? fromStack[flag] : (given(flag) ?? fromStack[flag])) : given(flag);
  const tenant = str('tenant');
  if (spec.targeted && !tenant) throw new UsageError(`${name} needs --tenant <name> (or DYNEIN_TENANT)`);
  let resolved: Target | undefined;
  const target = () =>
    (resolved ??= resolveTarget({
      tenant: tenant ?? '',
      endpoint: str('endpoint'),
      region: str('region'),
      profile: str('profile'),
      dataDir: str('data-dir'),
      queueUrl: str('queue-url'),
      dlqUrl: str('dlq-url'),
    }));
  try {
    return await spec.run({ values, str, rest, target, tenant: tenant ?? '', io });
  } finally {
    resolved?.close();
  }
}
