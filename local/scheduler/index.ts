/**
 * A local stand-in for Amazon EventBridge Scheduler: an HTTP server speaking the service's
 * restJson1 protocol as `@aws-sdk/client-scheduler` sends it (so the product's SDK code runs
 * against it unchanged), a clock that sends each occurrence's Target.Input to its SQS queue, and
 * a JSON file that keeps the schedules across restarts. What it implements and how it differs
 * from the real service: docs/local-scheduler.md.
 *
 * @example
 * const scheduler = await startLocalScheduler({
 *   port: 0, dataDir: '.dynein/scheduler', region: 'us-east-1', accountId: '000000000000',
 *   sqs, resolveQueueUrl: sqsQueueUrlResolver(sqs),
 * });
 * const client = new SchedulerClient({ endpoint: scheduler.endpoint, region: 'us-east-1', credentials });
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { GetQueueUrlCommand, type SQSClient } from '@aws-sdk/client-sqs';
import { ScheduleClock, systemClock, type Firing, type QueueUrlResolver, type SchedulerClock } from './clock.js';
import {
  checkName,
  conflict,
  notFound,
  parseDefinition,
  SchedulerApiError,
  validation,
  type StoredGroup,
  type StoredSchedule,
} from './model.js';
import { scheduleKey, ScheduleStore } from './store.js';

export type { Firing, QueueUrlResolver, SchedulerClock } from './clock.js';

export interface LocalSchedulerOptions {
  /** TCP port (0: a free one). */
  readonly port: number;
  /** Defaults to 127.0.0.1. */
  readonly host?: string;
  /** Where `scheduler.json` lives. */
  readonly dataDir: string;
  readonly region: string;
  readonly accountId: string;
  /** The SQS client the clock sends with (pointed at fauxqs locally). */
  readonly sqs: SQSClient;
  /** Maps a target's queue ARN to its URL; `sqsQueueUrlResolver(sqs)` asks SQS by queue name. */
  readonly resolveQueueUrl: QueueUrlResolver;
  readonly clock?: SchedulerClock;
  /**
   * Occurrences that fell while the stand-in was not running: `skip` (default, what EventBridge
   * Scheduler does: it never replays) or `fire` (each once, late, at start).
   */
  readonly missedOccurrences?: 'skip' | 'fire';
  /** Where delivery failures are reported (default console.error). */
  readonly log?: (message: string) => void;
  /** Longest timer sleep (ms, default 1000): how soon a jumping injected clock is noticed. */
  readonly maxSleepMs?: number;
  /** First retry delay after a failed send (ms, default 1000, doubling up to 60 s). */
  readonly retryBaseMs?: number;
}

export interface LocalScheduler {
  /** `http://host:port`, for `new SchedulerClient({ endpoint })`. */
  readonly endpoint: string;
  readonly port: number;
  /** Called after each firing's send (and retries) finished. */
  onFiring(listener: (f: Firing) => void): void;
  stop(): Promise<void>;
}

/** Resolves `arn:aws:sqs:<region>:<account>:<name>` with GetQueueUrl by name, cached. */
export function sqsQueueUrlResolver(sqs: SQSClient): QueueUrlResolver {
  const cache = new Map<string, Promise<string>>();
  return (arn) => {
    let url = cache.get(arn);
    if (url === undefined) {
      const [, , , , account, name] = arn.split(':');
      url = sqs.send(new GetQueueUrlCommand({ QueueName: name, QueueOwnerAWSAccountId: account })).then((r) => {
        if (r.QueueUrl === undefined) throw new Error(`no queue URL for ${arn}`);
        return r.QueueUrl;
      });
      url.catch(() => cache.delete(arn));
      cache.set(arn, url);
    }
    return url;
  };
}

const MAX_BODY_BYTES = 1_048_576;

const seconds = (ms: number) => ms / 1000;

export async function startLocalScheduler(options: LocalSchedulerOptions): Promise<LocalScheduler> {
  const clock = options.clock ?? systemClock;
  const { region, accountId } = options;
  const store = new ScheduleStore(options.dataDir, clock.now());
  const scheduleArn = (s: Pick<StoredSchedule, 'GroupName' | 'Name'>) =>
    `arn:aws:scheduler:${region}:${accountId}:schedule/${s.GroupName}/${s.Name}`;
  const groupArn = (name: string) => `arn:aws:scheduler:${region}:${accountId}:schedule-group/${name}`;

  // Missed occurrences: with `skip`, whatever fell before this start is done.
  if ((options.missedOccurrences ?? 'skip') === 'skip') {
    const now = clock.now();
    for (const [key, s] of store.schedules) if (s.cursor < now) store.schedules.set(key, { ...s, cursor: now });
  }
  store.save();

  const firing = new ScheduleClock({
    store,
    clock,
    sqs: options.sqs,
    resolveQueueUrl: options.resolveQueueUrl,
    scheduleArn,
    log: options.log ?? ((m) => console.error(m)),
    maxSleepMs: options.maxSleepMs,
    retryBaseMs: options.retryBaseMs,
  });

  const describe = (s: StoredSchedule) => ({
    Arn: scheduleArn(s),
    GroupName: s.GroupName,
    Name: s.Name,
    ScheduleExpression: s.ScheduleExpression,
    ScheduleExpressionTimezone: s.ScheduleExpressionTimezone,
    StartDate: s.StartDate === undefined ? undefined : seconds(s.StartDate),
    EndDate: s.EndDate === undefined ? undefined : seconds(s.EndDate),
    Description: s.Description,
    State: s.State,
    CreationDate: seconds(s.CreationDate),
    LastModificationDate: seconds(s.LastModificationDate),
    KmsKeyArn: s.KmsKeyArn,
    Target: s.Target,
    FlexibleTimeWindow: s.FlexibleTimeWindow,
    ActionAfterCompletion: s.ActionAfterCompletion,
  });

  const describeGroup = (g: StoredGroup) => ({
    Arn: groupArn(g.Name),
    Name: g.Name,
    State: 'ACTIVE',
    CreationDate: seconds(g.CreationDate),
    LastModificationDate: seconds(g.LastModificationDate),
  });

  const requireGroup = (name: string) => {
    if (!store.groups.has(name)) throw notFound(`Schedule group ${name} does not exist.`);
  };

  const getStored = (group: string, name: string): StoredSchedule => {
    const s = store.schedules.get(scheduleKey(group, name));
    if (s === undefined) throw notFound(`Schedule ${name} does not exist.`);
    return s;
  };

  const groupQuery = (q: URLSearchParams, key: string) => {
    const g = q.get(key);
    return g === null ? 'default' : checkName(g, 'groupName');
  };

  function createSchedule(name: string, body: unknown): object {
    const now = clock.now();
    const def = parseDefinition(body, now);
    requireGroup(def.GroupName);
    const key = scheduleKey(def.GroupName, name);
    const existing = store.schedules.get(key);
    if (existing !== undefined) {
      // The SDK reuses one ClientToken across its retries: a retried create that already
      // succeeded answers as the first did.
      if (def.ClientToken !== undefined && existing.ClientToken === def.ClientToken) return { ScheduleArn: scheduleArn(existing) };
      throw conflict(`Schedule ${name} already exists.`);
    }
    const s: StoredSchedule = { ...def, Name: name, CreationDate: now, LastModificationDate: now, anchor: now, cursor: now };
    store.schedules.set(key, s);
    store.save();
    firing.changed(key);
    return { ScheduleArn: scheduleArn(s) };
  }

  function updateSchedule(name: string, body: unknown): object {
    const now = clock.now();
    const def = parseDefinition(body, now);
    const key = scheduleKey(def.GroupName, name);
    const old = getStored(def.GroupName, name);
    // The new definition applies from now: nothing earlier fires (a resumed schedule does not
    // deliver what fell while it was disabled). A rate() keeps its phase unless it changed.
    const anchor = old.ScheduleExpression === def.ScheduleExpression ? old.anchor : now;
    const s: StoredSchedule = {
      ...def,
      Name: name,
      CreationDate: old.CreationDate,
      LastModificationDate: now,
      anchor,
      cursor: Math.max(old.cursor, now),
    };
    store.schedules.set(key, s);
    store.save();
    firing.changed(key);
    return { ScheduleArn: scheduleArn(s) };
  }

  function deleteSchedule(name: string, q: URLSearchParams): object {
    const group = groupQuery(q, 'groupName');
    getStored(group, name);
    const key = scheduleKey(group, name);
    store.schedules.delete(key);
    store.save();
    firing.changed(key);
    return {};
  }

  function listSchedules(q: URLSearchParams): object {
    const group = q.get('ScheduleGroup');
    if (group !== null) checkName(group, 'groupName');
    const prefix = q.get('NamePrefix');
    if (prefix !== null && !/^[0-9a-zA-Z\-_.]{1,64}$/.test(prefix))
      throw validation(
        `1 validation error detected: Value '${prefix}' at 'namePrefix' failed to satisfy constraint: Member must have length between 1 and 64 and match pattern ^[0-9a-zA-Z-_.]+$`,
      );
    const state = q.get('State');
    if (state !== null && state !== 'ENABLED' && state !== 'DISABLED')
      throw validation(
        `1 validation error detected: Value '${state}' at 'state' failed to satisfy constraint: Member must satisfy enum value set: [ENABLED, DISABLED]`,
      );
    const maxText = q.get('MaxResults');
    const max = maxText === null ? 100 : Number(maxText);
    if (!Number.isInteger(max) || max < 1 || max > 100)
      throw validation(
        `1 validation error detected: Value '${maxText}' at 'maxResults' failed to satisfy constraint: Member must be a whole number from 1 to 100`,
      );
    const token = q.get('NextToken');
    let after = '';
    if (token !== null) {
      after = Buffer.from(token, 'base64url').toString('utf8');
      if (!after.includes('/'))
        throw validation('The NextToken is not valid: pass the NextToken of the previous ListSchedules answer unchanged');
    }
    const keys = [...store.schedules.keys()].filter((k) => k > after).sort();
    const page: StoredSchedule[] = [];
    let last: string | undefined;
    for (const k of keys) {
      const s = store.schedules.get(k);
      if (s === undefined) continue;
      if (group !== null && s.GroupName !== group) continue;
      if (prefix !== null && !s.Name.startsWith(prefix)) continue;
      if (state !== null && s.State !== state) continue;
      if (page.length === max) break;
      page.push(s);
      last = k;
    }
    const more = last !== undefined && page.length === max && keys.some((k) => k > (last ?? ''));
    return {
      Schedules: page.map((s) => ({
        Arn: scheduleArn(s),
        Name: s.Name,
        GroupName: s.GroupName,
        State: s.State,
        CreationDate: seconds(s.CreationDate),
        LastModificationDate: seconds(s.LastModificationDate),
        Target: { Arn: s.Target.Arn },
      })),
      NextToken: more && last !== undefined ? Buffer.from(last, 'utf8').toString('base64url') : undefined,
    };
  }

  function createGroup(name: string, body: unknown): object {
    const token =
      typeof body === 'object' && body !== null && 'ClientToken' in body && typeof body.ClientToken === 'string'
        ? body.ClientToken
        : undefined;
    const existing = store.groups.get(name);
    if (existing !== undefined) {
      if (token !== undefined && existing.ClientToken === token) return { ScheduleGroupArn: groupArn(name) };
      throw conflict(`Schedule group ${name} already exists.`);
    }
    const now = clock.now();
    store.groups.set(name, {
      Name: name,
      CreationDate: now,
      LastModificationDate: now,
      ...(token === undefined ? {} : { ClientToken: token }),
    });
    store.save();
    return { ScheduleGroupArn: groupArn(name) };
  }

  function deleteGroup(name: string): object {
    if (name === 'default') throw validation('The default schedule group cannot be deleted.');
    requireGroup(name);
    store.groups.delete(name);
    for (const [key, s] of [...store.schedules]) {
      if (s.GroupName === name) {
        store.schedules.delete(key);
        firing.changed(key);
      }
    }
    store.save();
    return {};
  }

  function route(method: string, url: URL, body: unknown): object {
    const parts = url.pathname
      .split('/')
      .filter((p) => p !== '')
      .map((p) => decodeURIComponent(p));
    const q = url.searchParams;
    const [collection, rawName, ...rest] = parts;
    if (rest.length === 0 && collection === 'schedules') {
      if (rawName === undefined) {
        if (method === 'GET') return listSchedules(q);
      } else {
        const name = checkName(rawName, 'name');
        if (method === 'POST') return createSchedule(name, body);
        if (method === 'PUT') return updateSchedule(name, body);
        if (method === 'GET') return describe(getStored(groupQuery(q, 'groupName'), name));
        if (method === 'DELETE') return deleteSchedule(name, q);
      }
    }
    if (rest.length === 0 && collection === 'schedule-groups') {
      if (rawName === undefined) {
        if (method === 'GET') {
          const prefix = q.get('NamePrefix');
          const groups = [...store.groups.values()]
            .filter((g) => prefix === null || g.Name.startsWith(prefix))
            .sort((a, b) => (a.Name < b.Name ? -1 : 1));
          return { ScheduleGroups: groups.map(describeGroup) };
        }
      } else {
        const name = checkName(rawName, 'name');
        if (method === 'POST') return createGroup(name, body);
        if (method === 'GET') {
          const g = store.groups.get(name);
          if (g === undefined) throw notFound(`Schedule group ${name} does not exist.`);
          return describeGroup(g);
        }
        if (method === 'DELETE') return deleteGroup(name);
      }
    }
    throw new SchedulerApiError(
      'UnknownOperationException',
      404,
      `The local Scheduler stand-in has no operation ${method} ${url.pathname}: it implements CreateSchedule, GetSchedule, UpdateSchedule, DeleteSchedule, ListSchedules and the schedule group operations`,
    );
  }

  async function readBody(req: IncomingMessage): Promise<unknown> {
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req) {
      size += (chunk as Buffer).length;
      if (size > MAX_BODY_BYTES) throw validation(`The request body is larger than ${MAX_BODY_BYTES} bytes`);
      chunks.push(chunk as Buffer);
    }
    const text = Buffer.concat(chunks).toString('utf8');
    if (text.trim() === '') return {};
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw new SchedulerApiError('SerializationException', 400, 'The request body is not valid JSON');
    }
  }

  function reply(res: ServerResponse, status: number, payload: object, errorType?: string): void {
    const text = JSON.stringify(payload);
    const headers: Record<string, string | number> = {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(text),
      'x-amzn-requestid': randomUUID(),
    };
    if (errorType !== undefined) headers['x-amzn-errortype'] = errorType;
    res.writeHead(status, headers).end(text);
  }

  const server = createServer((req, res) => {
    void (async () => {
      try {
        const url = new URL(req.url ?? '/', 'http://localhost');
        const body = await readBody(req);
        reply(res, 200, route(req.method ?? 'GET', url, body));
      } catch (err) {
        if (err instanceof SchedulerApiError) reply(res, err.status, { Message: err.message }, err.type);
        else {
          (options.log ?? console.error)(`scheduler: internal error: ${(err as Error).stack ?? String(err)}`);
          reply(res, 500, { Message: `Internal error: ${(err as Error).message}` }, 'InternalServerException');
        }
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  firing.start();

  return {
    endpoint: `http://${options.host ?? '127.0.0.1'}:${port}`,
    port,
    onFiring: (listener) => firing.onFiring(listener),
    async stop() {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await firing.stop();
    },
  };
}
