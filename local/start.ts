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
import type { ServicesReady } from './services.js';
import { EXIT_CONFIG, loadSecrets, localSettings, writeAtomic, type LocalSettings } from './settings.js';

let settings: LocalSettings;
try {
  settings = localSettings();
} catch (err) {
  console.error(`dynein: ${(err as Error).message}`);
  process.exit(2);
}
const localJson = join(settings.dataDir, 'local.json');
rmSync(localJson, { force: true });
const secrets = loadSecrets(settings.dataDir, settings.tenants);
const here = (f: string) => fileURLToPath(new URL(f, import.meta.url));
const started = Date.now();
let stopping = false;

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

const services = spawn('./services.ts', {});
let svc: ServicesReady;
try {
  svc = await ready<ServicesReady>(services, 'the services process');
} catch (err) {
  console.error(`dynein: ${(err as Error).message}`);
  process.exit(1);
}
services.on('exit', (code, signal) => {
  if (stopping) return;
  console.error(`dynein: the services process died (${signal ?? `code ${code}`}); stopping`);
  void shutdown(1);
});

const computeEnv = {
  DYNEIN_TABLE: svc.tableName,
  DYNEIN_INBOUND_QUEUE_URL: svc.inboundQueueUrl,
  DYNEIN_ID_KEY: secrets.idKey,
  DYNEIN_DYNAMODB_ENDPOINT: svc.dynamodbEndpoint,
  DYNEIN_SQS_ENDPOINT: svc.sqsEndpoint,
  DYNEIN_DATA_DIR: settings.dataDir,
};
let compute: ChildProcess;
const recentDeaths: number[] = [];

async function startCompute(): Promise<void> {
  compute = spawn('./compute.ts', computeEnv);
  const child = compute;
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
  await ready(child, 'compute');
  writeLocalJson();
}

function writeLocalJson(): void {
  const endpoint = `http://127.0.0.1:${settings.port}`;
  const tenants = Object.fromEntries(settings.tenants.map((t) => [t, { ...secrets.tenants[t]!, queueUrl: svc.tenants[t]!.queueUrl, dlqUrl: svc.tenants[t]!.dlqUrl }]));
  writeAtomic(
    localJson,
    JSON.stringify({ endpoint, region: settings.region, sqsEndpoint: svc.sqsEndpoint, dynamodbEndpoint: svc.dynamodbEndpoint, pids: { services: services.pid, compute: compute.pid }, tenants }, null, 2),
    0o600,
  );
}

try {
  await startCompute();
} catch (err) {
  console.error(`dynein: ${(err as Error).message}`);
  await shutdown(1);
}

const endpoint = `http://127.0.0.1:${settings.port}`;
console.log(
  [
    '',
    `Dynein Serverless is running locally (ready in ${((Date.now() - started) / 1000).toFixed(1)} s)`,
    `  API         ${endpoint}   (SigV4, service execute-api, region ${settings.region})`,
    `  dashboard   ${endpoint}/   metrics ${endpoint}/local/metrics`,
    `  DynamoDB    ${svc.dynamodbEndpoint}   (data in ${join(settings.dataDir, 'dynamodb')})`,
    `  SQS         ${svc.sqsEndpoint}   (in memory: a restart empties the queues)`,
    ...settings.tenants.map((t) => `  tenant ${t.padEnd(12)} queue ${svc.tenants[t]!.queueUrl}`),
    `  keys        ${localJson}`,
    '',
    'Schedule a job (see README):',
    `  curl --aws-sigv4 "aws:amz:${settings.region}:execute-api" --user "$KEY:$SECRET" -H 'content-type: application/json' \\`,
    `    -d '{"payload":{"hello":"world"},"delaySeconds":30}' ${endpoint}/v1/tenants/${settings.tenants[0]}/jobs`,
    'Ctrl-C stops everything.',
    '',
  ].join('\n'),
);

async function shutdown(code: number): Promise<never> {
  stopping = true;
  rmSync(localJson, { force: true });
  const exited = (c: ChildProcess | undefined) => (c && c.exitCode === null && c.signalCode === null ? new Promise((r) => c.once('exit', r)) : Promise.resolve());
  const children = [compute, services];
  for (const c of children) c?.kill('SIGTERM');
  await Promise.race([Promise.all(children.map(exited)), new Promise((r) => setTimeout(r, 5_000))]);
  for (const c of children) if (c && c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  process.exit(code);
}

process.on('SIGINT', () => {
  console.log('\ndynein: stopping');
  void shutdown(0);
});
process.on('SIGTERM', () => void shutdown(0));
