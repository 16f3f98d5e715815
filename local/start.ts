/**
 * `npm start`: the whole system on one machine. Starts the services process (dynalite, fauxqs:
 * the state) and the compute process (API, inbound event source, tick), restarts compute when it
 * dies (as Lambda starts a new instance), writes `$DYNEIN_DATA_DIR/local.json` atomically when
 * ready, and stops everything on Ctrl-C.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { acquireDataDirLock, clearStaleLocalJson } from './dataDir.js';
import type { ServicesReady } from './services.js';
import { EXIT_CONFIG, loadSecrets, localSettings, writeAtomic, type LocalSecrets, type LocalSettings } from './settings.js';

let settings: LocalSettings;
try {
  settings = localSettings();
} catch (err) {
  console.error(`dynein: ${(err as Error).message}`);
  process.exit(2);
}
const localJson = join(settings.dataDir, 'local.json');
const secrets = await prepareDataDir(settings, localJson);
const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));
const started = Date.now();
let stopping = false;
/** The services process once started (a signal may stop everything before it exists). */
const spawned: { services?: ChildProcess } = {};
let compute: ChildProcess | undefined;
installSignalHandlers();

/**
 * Before anything is touched: takes the data directory's lock (a second start stops here), then
 * replaces a stale local.json and loads the secrets. Any refusal is one line and exit code 2.
 */
async function prepareDataDir(s: LocalSettings, localJsonFile: string): Promise<LocalSecrets> {
  try {
    acquireDataDirLock(s.dataDir);
    const replaced = await clearStaleLocalJson(localJsonFile);
    if (replaced) console.log(`dynein: ${replaced}`);
    return loadSecrets(s.dataDir, s.tenants);
  } catch (err) {
    console.error(`dynein: ${(err as Error).message}`);
    process.exit(2);
  }
}

// `npm start` runs the .ts files through tsx; `dynein local` (this file bundled as dist/local/start.mjs) forks the bundles beside it on plain node.
const fromSource = import.meta.url.endsWith('.ts');

function spawn(file: string, env: Record<string, string | undefined>): ChildProcess {
  const execArgv = fromSource ? ['--import', 'tsx'] : ['--enable-source-maps'];
  return fork(here(fromSource ? file : file.replace(/\.ts$/, '.mjs')), [], { execArgv, env: { ...process.env, ...env }, stdio: 'inherit' });
}

function ready<T>(child: ChildProcess, what: string): Promise<T> {
  return new Promise((resolve, reject) => {
    child.once('message', (m) => resolve(m as T));
    child.once('exit', (code, signal) => reject(new Error(`${what} exited before it was ready (${signal ?? `code ${code}`})`)));
  });
}

const services = (spawned.services = spawn('./services.ts', {}));
const svc = await ready<ServicesReady>(services, 'the services process').catch((err: Error) => {
  if (!stopping) console.error(`dynein: ${err.message}`);
  return shutdown(1); // during a Ctrl-C at start-up, the shutdown under way exits (with 0)
});
services.on('exit', (code, signal) => {
  if (stopping) return;
  console.error(`dynein: the services process died (${signal ?? `code ${code}`}); stopping`);
  void shutdown(1);
});

const computeEnv: Record<string, string | undefined> = {
  DYNEIN_TABLE: svc.tableName,
  DYNEIN_INBOUND_QUEUE_URL: svc.inboundQueueUrl,
  DYNEIN_ID_KEY: secrets.idKey,
  DYNEIN_DYNAMODB_ENDPOINT: svc.dynamodbEndpoint,
  DYNEIN_SQS_ENDPOINT: svc.sqsEndpoint,
  DYNEIN_DATA_DIR: settings.dataDir,
  DYNEIN_SCHEDULER_ENDPOINT: svc.scheduler.endpoint,
  DYNEIN_SCHEDULE_GROUP: svc.scheduler.groupName,
  DYNEIN_SCHEDULER_ROLE_ARN: svc.scheduler.roleArn,
  DYNEIN_INBOUND_QUEUE_ARN: svc.scheduler.targetArn,
  DYNEIN_TENANT_QUEUE_URL: svc.tenantQueues.queueUrl,
  DYNEIN_TENANT_DLQ_URL: svc.tenantQueues.dlqUrl,
  // Idle shard groups sleep, as on AWS (docs/design-dispatch.md#sleep); a writer starts the tick.
  DYNEIN_GROUPS_SLEEP: process.env.DYNEIN_GROUPS_SLEEP ?? 'true',
};
/** The API's port: DYNEIN_PORT, or the one the first compute took when it is 0. */
let apiPort = settings.port;
const recentDeaths: number[] = [];

async function startCompute(): Promise<void> {
  if (stopping) return;
  const child = spawn('./compute.ts', computeEnv);
  compute = child;
  child.on('exit', (code, signal) => {
    if (stopping || child !== compute) return;
    if (code === EXIT_CONFIG) {
      console.error('dynein: compute cannot start (see above); stopping');
      void shutdown(1);
      return;
    }
    const now = Date.now();
    recentDeaths.push(now);
    while (recentDeaths.length > 0 && recentDeaths[0]! < now - 60_000) recentDeaths.shift();
    if (recentDeaths.length >= 5) {
      console.error('dynein: compute died 5 times within a minute; stopping');
      void shutdown(1);
      return;
    }
    console.log(`dynein: compute died (${signal ?? `code ${code}`}); starting a new one, as Lambda would`);
    void startCompute().catch((err) => console.error(`dynein: ${(err as Error).message}`));
  });
  const { port } = await ready<{ port: number }>(child, 'compute');
  // With DYNEIN_PORT=0 the first compute takes any free port; a restarted one takes the same.
  if (apiPort === 0) {
    apiPort = port;
    computeEnv.DYNEIN_PORT = String(port);
  }
  if (!stopping) writeLocalJson();
}

function writeLocalJson(): void {
  const endpoint = `http://127.0.0.1:${apiPort}`;
  const tenants = Object.fromEntries(
    settings.tenants.map((t) => [t, { ...secrets.tenants[t]!, queueUrl: svc.tenants[t]!.queueUrl, dlqUrl: svc.tenants[t]!.dlqUrl }]),
  );
  writeAtomic(
    localJson,
    JSON.stringify(
      {
        endpoint,
        region: settings.region,
        sqsEndpoint: svc.sqsEndpoint,
        dynamodbEndpoint: svc.dynamodbEndpoint,
        schedulerEndpoint: svc.scheduler.endpoint,
        pids: { services: services.pid, compute: compute?.pid },
        tenants,
        // The operator key: the admin routes only (`dynein tenant pause|resume|show|set`).
        admin: secrets.admin,
      },
      null,
      2,
    ),
    0o600,
  );
}

await startCompute().catch((err: Error) => {
  if (!stopping) console.error(`dynein: ${err.message}`);
  return shutdown(1);
});

const endpoint = `http://127.0.0.1:${apiPort}`;
console.log(
  [
    '',
    `Dynein Serverless is running locally (ready in ${((Date.now() - started) / 1000).toFixed(1)} s)`,
    `  API         ${endpoint}   (SigV4, service execute-api, region ${settings.region})`,
    `  dashboard   ${endpoint}/   metrics ${endpoint}/local/metrics`,
    `  DynamoDB    ${svc.dynamodbEndpoint}   (data in ${join(settings.dataDir, 'dynamodb')})`,
    `  SQS         ${svc.sqsEndpoint}   (in memory; the inbound queue is journaled, tenant queues empty at restart)`,
    `  Scheduler   ${svc.scheduler.endpoint}   (EventBridge Scheduler stand-in: the recurring schedules' clock; data in ${join(settings.dataDir, 'scheduler')})`,
    ...settings.tenants.map((t) => `  tenant ${t.padEnd(12)} queue ${svc.tenants[t]!.queueUrl}`),
    `  keys        ${localJson}`,
    '',
    'Schedule a job (see README):',
    `  curl --aws-sigv4 "aws:amz:${settings.region}:execute-api" --user "$KEY:$SECRET" -H 'content-type: application/json' \\`,
    `    -d '{"payload":{"hello":"world"},"delaySeconds":30}' ${endpoint}/v1/tenants/${settings.tenants[0]}/jobs`,
    'or a recurring one: npx dynein schedules put <name> --tenant <tenant> --expression "cron(0 9 ? * MON-FRI *)"',
    'Ctrl-C stops everything.',
    '',
  ].join('\n'),
);

let shuttingDown: Promise<never> | undefined;

/**
 * Stops compute first (its event source and tick still talk to the services), then the services,
 * each with SIGTERM and up to 5 s before SIGKILL, removes local.json, and exits; the lock goes at
 * exit. Idempotent: a second Ctrl-C waits for the first.
 */
function shutdown(code: number): Promise<never> {
  shuttingDown ??= (async () => {
    stopping = true;
    rmSync(localJson, { force: true });
    for (const child of [compute, spawned.services]) await stopChild(child);
    process.exit(code);
  })();
  return shuttingDown;
}

async function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once('exit', r));
  child.kill('SIGTERM');
  await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000).unref())]);
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL');
    await exited;
  }
}

/** Ctrl-C (SIGINT, sent to the whole process group by a terminal) and SIGTERM stop everything; installed before any child starts. */
function installSignalHandlers(): void {
  process.on('SIGINT', () => {
    if (!stopping) console.log('\ndynein: stopping');
    void shutdown(0);
  });
  process.on('SIGTERM', () => void shutdown(0));
}
