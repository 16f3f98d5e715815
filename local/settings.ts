import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { TENANT_PATTERN } from '../core/model/index.js';
import { StartupError } from './dataDir.js';
import { parseFaults, type FaultSettings } from './faults.js';

/**
 * The local stack's settings, from the environment of DESIGN.md's "Local stack" section:
 * `DYNEIN_PORT`, `DYNEIN_TENANTS`, `DYNEIN_DATA_DIR`, `DYNEIN_LOOKAHEAD_MS`, `DYNEIN_LEASE_MS`.
 */
export interface LocalSettings {
  readonly port: number;
  readonly tenants: readonly string[];
  readonly dataDir: string;
  readonly region: string;
  readonly lookaheadMs?: number;
  readonly leaseMs?: number;
  /** How long each tick execution runs and how often one starts (as on AWS: 90 s every 60 s). */
  readonly tickRunMs: number;
  readonly tickEveryMs: number;
  /** The never-fired check's period (the rule's 5 minutes on AWS); 0: off. */
  readonly auditEveryMs: number;
  /** Cells (`DYNEIN_CELLS`): compute runs one tick loop per cell, as each cell has its own state machine on AWS. */
  readonly cells: number;
  /** Whether the inbound event source runs (an event source mapping's `Enabled`; `DYNEIN_INGEST_ENABLED`). */
  readonly ingestEnabled: boolean;
  /** The last 10,000 spans kept in memory (`DYNEIN_SPANS`, default true; docs/tracing.md#locally). */
  readonly keepSpans: boolean;
  /**
   * Tenants with history on and their retention, ms (`DYNEIN_HISTORY=<tenant,tenant>`,
   * `DYNEIN_HISTORY_DAYS`, default 7; docs/history.md).
   */
  readonly history?: Readonly<Record<string, number>>;
  /** Fault injection (`DYNEIN_FAULTS`, a test facility: local/faults.ts, docs/local.md). */
  readonly faults?: FaultSettings;
}

/** Exit code of a compute process that a restart cannot fix (port in use, bad configuration). */
export const EXIT_CONFIG = 78;

export const TABLE_NAME = 'dynein-scheduler';
export const INBOUND_QUEUE = 'dynein-inbound';
/** The account id of the local stand-ins' ARNs. */
export const LOCAL_ACCOUNT = '000000000000';
/** The recurring schedules' group in the local EventBridge Scheduler stand-in. */
export const SCHEDULE_GROUP = 'dynein-schedules';
/** The execution role the local clock is given (the stand-in checks its form, not its permissions). */
export const SCHEDULER_ROLE_ARN = `arn:aws:iam::${LOCAL_ACCOUNT}:role/dynein-scheduler`;
export const tenantQueueName = (tenant: string) => `dynein-tenant-${tenant}`;

/** Reads and checks the environment; throws one error listing every problem. */
export function localSettings(env: NodeJS.ProcessEnv = process.env): LocalSettings {
  const problems: string[] = [];
  const int = (name: string, fallback: number | undefined, min: number, max: number): number | undefined => {
    const raw = env[name]?.trim();
    if (!raw) return fallback;
    const v = Number(raw);
    if (!Number.isInteger(v) || v < min || v > max) {
      problems.push(`${name} must be a whole number from ${min} to ${max}, got '${raw}'`);
      return fallback;
    }
    return v;
  };
  const bool = (name: string, fallback: boolean): boolean => {
    const raw = env[name]?.trim().toLowerCase();
    if (!raw) return fallback;
    if (raw === 'true' || raw === '1') return true;
    if (raw === 'false' || raw === '0') return false;
    problems.push(`${name} must be true or false, got '${env[name]}'`);
    return fallback;
  };
  // 0: any free port (local.json and the banner give the one taken).
  const port = int('DYNEIN_PORT', 8080, 0, 65_535)!;
  const tenants = (env.DYNEIN_TENANTS?.trim() || 'demo')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
  for (const t of tenants)
    if (!TENANT_PATTERN.test(t)) problems.push(`DYNEIN_TENANTS: '${t}' is not a valid tenant name (1-40 lowercase letters, digits or '-')`);
  if (new Set(tenants).size !== tenants.length) problems.push('DYNEIN_TENANTS lists a tenant twice');
  const historyDays = int('DYNEIN_HISTORY_DAYS', 7, 1, 365)!;
  const history: Record<string, number> = {};
  for (const t of (env.DYNEIN_HISTORY ?? '')
    .split(',')
    .map((x) => x.trim())
    .filter(Boolean)) {
    if (!tenants.includes(t)) problems.push(`DYNEIN_HISTORY: '${t}' is not one of DYNEIN_TENANTS (${tenants.join(', ')})`);
    else history[t] = historyDays * 86_400_000;
  }
  // The groups (DYNEIN_GROUPS, default 8) are the total over the cells: a multiple of them.
  const cells = int('DYNEIN_CELLS', 1, 1, 20)!;
  const groups = Number(env.DYNEIN_GROUPS?.trim() || 8);
  if (Number.isInteger(groups) && groups % cells !== 0)
    problems.push(
      `DYNEIN_CELLS (${cells}) must divide the shard groups (DYNEIN_GROUPS, default 8; got ${groups}): each cell dispatches as many groups`,
    );
  let faults: FaultSettings | undefined;
  try {
    faults = parseFaults(env.DYNEIN_FAULTS);
  } catch (err) {
    problems.push((err as Error).message);
  }
  const settings: LocalSettings = {
    port,
    tenants,
    dataDir: resolve(env.DYNEIN_DATA_DIR?.trim() || '.dynein'),
    region: env.AWS_REGION?.trim() || 'us-east-1',
    lookaheadMs: int('DYNEIN_LOOKAHEAD_MS', undefined, 1_000, 60_000),
    leaseMs: int('DYNEIN_LEASE_MS', undefined, 2_000, 900_000),
    tickRunMs: int('DYNEIN_TICK_RUN_MS', 90_000, 5_000, 240_000)!,
    tickEveryMs: int('DYNEIN_TICK_EVERY_MS', 60_000, 1_000, 600_000)!,
    auditEveryMs: int('DYNEIN_AUDIT_EVERY_MS', 300_000, 0, 3_600_000)!,
    cells,
    ingestEnabled: bool('DYNEIN_INGEST_ENABLED', true),
    keepSpans: bool('DYNEIN_SPANS', true),
    ...(Object.keys(history).length > 0 ? { history } : {}),
    ...(faults ? { faults } : {}),
  };
  // One problem is one line; several are listed one a line.
  if (problems.length === 1) throw new Error(`invalid local stack settings: ${problems[0]}`);
  if (problems.length > 0) throw new Error(`invalid local stack settings:\n- ${problems.join('\n- ')}`);
  return settings;
}

export interface TenantKeys {
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
}

/** Per-deployment secrets kept in the data directory, so job ids and keys survive restarts. */
export interface LocalSecrets {
  /** Job id HMAC key, base64. */
  readonly idKey: string;
  readonly tenants: Record<string, TenantKeys>;
  /** The operator key: the admin routes only (docs/tenant-controls.md). */
  readonly admin: TenantKeys;
}

/**
 * Loads `secrets.json` from the data directory, adding what is missing (new tenants). A file it
 * cannot use is never overwritten: it throws {@link StartupError}, one line naming the file and
 * the fix (replacing the keys would invalidate every job id and tenant key issued so far).
 */
export function loadSecrets(dataDir: string, tenants: readonly string[]): LocalSecrets {
  mkdirSync(dataDir, { recursive: true });
  const file = join(dataDir, 'secrets.json');
  const existing = existsSync(file) ? readSecrets(file) : {};
  const newKeys = (): TenantKeys => ({
    accessKeyId: `AKIA${randomBytes(8).toString('hex').toUpperCase()}`,
    secretAccessKey: randomBytes(30).toString('base64url'),
  });
  const secrets: LocalSecrets = {
    idKey: existing.idKey ?? randomBytes(32).toString('base64'),
    tenants: { ...existing.tenants },
    admin: existing.admin ?? newKeys(),
  };
  let added = existing.idKey === undefined || existing.admin === undefined;
  for (const t of tenants) {
    if (secrets.tenants[t]) continue;
    added = true;
    secrets.tenants[t] = newKeys();
  }
  // Written only when something was added: a start that adds nothing leaves the file untouched.
  if (added) writeAtomic(file, JSON.stringify(secrets, null, 2), 0o600);
  return secrets;
}

/** Parses and checks an existing `secrets.json`. */
function readSecrets(file: string): Partial<LocalSecrets> {
  const fix = 'restore it from a backup, or delete it to generate new keys (job ids and tenant keys issued so far then stop working)';
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new StartupError(`${file} is not valid JSON (${(err as Error).message}): ${fix}`);
  }
  const problem = secretsProblem(parsed);
  if (problem) throw new StartupError(`${file} is not usable (${problem}): ${fix}`);
  return parsed as Partial<LocalSecrets>;
}

function secretsProblem(v: unknown): string | undefined {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return 'expected an object {"idKey", "tenants"}';
  const o = v as Record<string, unknown>;
  if (o.idKey !== undefined && (typeof o.idKey !== 'string' || Buffer.from(o.idKey, 'base64').length < 32))
    return '"idKey" must be base64 of at least 32 bytes';
  if (o.admin !== undefined && keysProblem(o.admin)) return '"admin" needs "accessKeyId" and "secretAccessKey" strings';
  if (o.tenants === undefined) return undefined;
  if (typeof o.tenants !== 'object' || o.tenants === null || Array.isArray(o.tenants)) return '"tenants" must be an object';
  for (const [name, k] of Object.entries(o.tenants as Record<string, unknown>)) {
    if (keysProblem(k)) return `tenant '${name}' needs "accessKeyId" and "secretAccessKey" strings`;
  }
  return undefined;
}

function keysProblem(k: unknown): boolean {
  const keys = k as Partial<Record<keyof TenantKeys, unknown>> | null;
  return (
    typeof keys !== 'object' ||
    keys === null ||
    typeof keys.accessKeyId !== 'string' ||
    !keys.accessKeyId ||
    typeof keys.secretAccessKey !== 'string' ||
    !keys.secretAccessKey
  );
}

/** Writes a file atomically: a temporary file, then a rename. */
export function writeAtomic(file: string, content: string, mode = 0o644): void {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, content, { mode });
  renameSync(tmp, file);
}
