/**
 * The operator API on a tenant's controls (docs/tenant-controls.md, "Operator API"): show, pause,
 * resume and set the limits, weight and key lease of a registered tenant. Each change is one
 * conditional write on the controls item's `rev` (retried on a lost race), kept in the item's audit
 * trail (the last {@link MAX_AUDIT} changes, with who made it) and logged.
 */
import {
  DEFAULT_CONTROLS,
  MAX_AUDIT,
  MAX_KEY_LEASE_SECONDS,
  MAX_RATE_LIMIT,
  MAX_WEIGHT,
  MIN_KEY_LEASE_SECONDS,
  type ControlChange,
  type ControlsStore,
  type TenantControls,
  type TenantSettings,
} from './controls.js';
import {
  type Clock,
  ConcurrentModificationError,
  DEFAULT_KEY_LEASE_SECONDS,
  parseJsonBody,
  systemClock,
  ValidationError,
} from '../model/index.js';
import type { TenantRegistry } from './registry.js';

/** A change as the API shows it (`at` in RFC 3339). */
export interface ControlChangeReply {
  readonly at: string;
  readonly by: string;
  readonly action: ControlChange['action'];
  readonly settings?: TenantSettings;
}

/** The reply of every admin route: the tenant's controls after the call. */
export interface ControlsReply {
  readonly tenant: string;
  readonly paused: boolean;
  /** When the current pause began (RFC 3339); only while paused. */
  readonly pausedAt?: string;
  readonly settings: TenantSettings;
  /** The controls' revision (0: never changed). */
  readonly rev: number;
  /** The last changes, oldest first (at most {@link MAX_AUDIT}). */
  readonly changes: readonly ControlChangeReply[];
}

/** What a settings body may change: a limit or the key lease set to `null` is cleared. */
export interface SettingsChange {
  readonly maxDeliveriesPerSecond?: number | null;
  readonly maxSubmitsPerSecond?: number | null;
  readonly weight?: number;
  /** `null`: back to the default lease. */
  readonly keyLeaseSeconds?: number | null;
}

/** One line per change (the Lambda's Powertools logger; the local stack's console). */
export type ChangeLog = (message: string, fields: Record<string, unknown>) => void;

export interface TenantAdminDeps {
  readonly controls: ControlsStore;
  readonly tenants: Pick<TenantRegistry, 'require'>;
  readonly clock?: Clock;
  readonly log?: ChangeLog;
  /** Writes tried before a lost race answers 409. @default 3 */
  readonly attempts?: number;
}

const LIMITS = ['maxDeliveriesPerSecond', 'maxSubmitsPerSecond'] as const;
/** The settings that null clears (back to no limit, or to the default lease). */
const CLEARABLE = [...LIMITS, 'keyLeaseSeconds'] as const;
const FIELDS = new Set<string>([...CLEARABLE, 'weight']);
const FIELD_LIST = 'maxDeliveriesPerSecond, maxSubmitsPerSecond, weight and/or keyLeaseSeconds';

/**
 * Checks a `PUT .../settings` body: a JSON object with at least one of `maxDeliveriesPerSecond`,
 * `maxSubmitsPerSecond` (integers 1 to 100,000, or null to clear), `weight` (integer 1 to
 * 1,000) and `keyLeaseSeconds` (integer 10 to 86,400, or null for the default), nothing else.
 * @throws ValidationError naming the field
 * @example parseSettingsChange('{"maxDeliveriesPerSecond": 50, "maxSubmitsPerSecond": null}')
 */
export function parseSettingsChange(body: string | undefined): SettingsChange {
  if (body === undefined || body.trim() === '') throw new ValidationError(`request body is required: a JSON object with ${FIELD_LIST}`);
  const value = parseJsonBody(body, Number.POSITIVE_INFINITY, undefined, 'a JSON object like {"maxDeliveriesPerSecond": 100, "weight": 2}');
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw new ValidationError('request body must be a JSON object like {"maxDeliveriesPerSecond": 100, "weight": 2}');
  const fields = value as Record<string, unknown>;
  for (const name of Object.keys(fields))
    if (!FIELDS.has(name))
      throw new ValidationError(
        `unknown field '${name}': the settings are maxDeliveriesPerSecond, maxSubmitsPerSecond, weight and keyLeaseSeconds`,
      );
  if (Object.keys(fields).length === 0)
    throw new ValidationError('give at least one of maxDeliveriesPerSecond, maxSubmitsPerSecond, weight or keyLeaseSeconds');
  const change: { -readonly [K in keyof SettingsChange]: SettingsChange[K] } = {};
  for (const name of LIMITS) {
    if (!(name in fields)) continue;
    const v = fields[name];
    if (v !== null && !isIntegerIn(v, 1, MAX_RATE_LIMIT))
      throw new ValidationError(
        `${name} must be a whole number of jobs per second from 1 to ${MAX_RATE_LIMIT}, or null for no limit, got ${JSON.stringify(v)}`,
      );
    change[name] = v as number | null;
  }
  if ('weight' in fields) {
    if (!isIntegerIn(fields.weight, 1, MAX_WEIGHT))
      throw new ValidationError(`weight must be a whole number from 1 to ${MAX_WEIGHT} (default 1), got ${JSON.stringify(fields.weight)}`);
    change.weight = fields.weight as number;
  }
  if ('keyLeaseSeconds' in fields) {
    const v = fields.keyLeaseSeconds;
    if (v !== null && !isIntegerIn(v, MIN_KEY_LEASE_SECONDS, MAX_KEY_LEASE_SECONDS))
      throw new ValidationError(
        `keyLeaseSeconds must be a whole number of seconds from ${MIN_KEY_LEASE_SECONDS} to ${MAX_KEY_LEASE_SECONDS}, or null for the default (${DEFAULT_KEY_LEASE_SECONDS}), got ${JSON.stringify(v)}`,
      );
    change.keyLeaseSeconds = v;
  }
  return change;
}

function isIntegerIn(v: unknown, min: number, max: number): v is number {
  return typeof v === 'number' && Number.isInteger(v) && v >= min && v <= max;
}

/** The settings part of a tenant's controls (absent limits and a default key lease left out). */
export function settingsOf(c: TenantSettings): TenantSettings {
  return {
    ...(c.maxDeliveriesPerSecond !== undefined ? { maxDeliveriesPerSecond: c.maxDeliveriesPerSecond } : {}),
    ...(c.maxSubmitsPerSecond !== undefined ? { maxSubmitsPerSecond: c.maxSubmitsPerSecond } : {}),
    weight: c.weight,
    ...(c.keyLeaseSeconds !== undefined ? { keyLeaseSeconds: c.keyLeaseSeconds } : {}),
  };
}

/**
 * The admin API's operations. Pausing a paused tenant, resuming a running one and a settings
 * body that changes nothing answer 200 with the controls as they are, and write nothing (no
 * change is recorded: the audit trail holds changes only).
 *
 * @example
 * const admin = new TenantAdmin({ controls: new DynamoControlsStore(table), tenants });
 * await admin.pause('billing', 'arn:aws:iam::123456789012:user/ops');
 */
export class TenantAdmin {
  readonly #clock: Clock;
  readonly #attempts: number;

  constructor(private readonly deps: TenantAdminDeps) {
    this.#clock = deps.clock ?? systemClock;
    this.#attempts = deps.attempts ?? 3;
  }

  /** `GET /v1/admin/tenants/{tenant}`. @throws ValidationError, TenantNotFoundError */
  async get(tenant: string): Promise<ControlsReply> {
    await this.deps.tenants.require(tenant);
    return reply(tenant, (await this.deps.controls.getControls(tenant)) ?? DEFAULT_CONTROLS);
  }

  /** `POST .../pause`: sets `pausedAt` (kept while paused). */
  pause(tenant: string, by: string): Promise<ControlsReply> {
    return this.#change(tenant, by, 'pause', (c, now) => (c.paused ? undefined : { ...c, paused: true, pausedAtMs: now }));
  }

  /** `POST .../resume`. */
  resume(tenant: string, by: string): Promise<ControlsReply> {
    return this.#change(tenant, by, 'resume', (c) => {
      if (!c.paused) return undefined;
      const { pausedAtMs: _dropped, ...rest } = c;
      return { ...rest, paused: false };
    });
  }

  /** `PUT .../settings` with the request body (validated before anything is read). */
  async setSettings(tenant: string, body: string | undefined, by: string): Promise<ControlsReply> {
    const change = parseSettingsChange(body);
    return this.#change(tenant, by, 'settings', (c) => {
      const next: Record<string, unknown> = { ...c };
      for (const name of CLEARABLE) {
        if (change[name] === null) delete next[name];
        else if (change[name] !== undefined) next[name] = change[name];
      }
      if (change.weight !== undefined) next.weight = change.weight;
      const after = next as unknown as TenantControls;
      const same =
        after.weight === c.weight &&
        after.maxDeliveriesPerSecond === c.maxDeliveriesPerSecond &&
        after.maxSubmitsPerSecond === c.maxSubmitsPerSecond &&
        after.keyLeaseSeconds === c.keyLeaseSeconds;
      return same ? undefined : after;
    });
  }

  /**
   * Read (strongly consistent), apply, write on the revision read; a lost race reads again, up
   * to `attempts` writes, then answers {@link ConcurrentModificationError}. `apply` answers
   * undefined for a no-op (nothing written).
   */
  async #change(
    tenant: string,
    by: string,
    action: ControlChange['action'],
    apply: (c: TenantControls, now: number) => TenantControls | undefined,
  ): Promise<ControlsReply> {
    await this.deps.tenants.require(tenant);
    for (let attempt = 1; attempt <= this.#attempts; attempt++) {
      const before = (await this.deps.controls.getControls(tenant)) ?? DEFAULT_CONTROLS;
      const now = this.#clock.now();
      const applied = apply(before, now);
      if (!applied) {
        this.deps.log?.('tenant controls unchanged', { tenant, action, by });
        return reply(tenant, before);
      }
      const entry: ControlChange = { at: now, by, action, ...(action === 'settings' ? { settings: settingsOf(applied) } : {}) };
      const after: TenantControls = { ...applied, rev: before.rev + 1, changes: [...before.changes, entry].slice(-MAX_AUDIT) };
      if (await this.deps.controls.putControls(tenant, after, before.rev)) {
        this.deps.log?.('tenant controls changed', {
          tenant,
          action,
          by,
          before: stateOf(before),
          after: stateOf(after),
          rev: after.rev,
        });
        return reply(tenant, after);
      }
    }
    throw new ConcurrentModificationError(`tenant '${tenant}''s controls`);
  }
}

function stateOf(c: TenantControls): Record<string, unknown> {
  return { paused: c.paused, ...settingsOf(c) };
}

function reply(tenant: string, c: TenantControls): ControlsReply {
  return {
    tenant,
    paused: c.paused,
    ...(c.paused && c.pausedAtMs !== undefined ? { pausedAt: new Date(c.pausedAtMs).toISOString() } : {}),
    settings: settingsOf(c),
    rev: c.rev,
    changes: c.changes.map((ch) => ({ ...ch, at: new Date(ch.at).toISOString() })),
  };
}
