/** Recurring schedules: put (or dry-run), get, list, delete, pause and resume. */
import type { DeletedSchedule, PutScheduleResult, Schedule, ScheduleDefinition, SchedulePage } from '../apiTypes.js';
import type { CallOptions, ListSchedulesOptions, PutScheduleOptions } from '../callOptions.js';
import { ValidationError } from '../errors.js';
import type { ApiTransport } from '../transport.js';
import { enc, payloadText, tenantPath, wholeNumber, withQuery } from './encode.js';

/** `putSchedule`: the definition's body, a dry run's query; `created` from the reply's status (201). */
export async function putSchedule<P>(
  api: ApiTransport,
  tenant: string,
  name: string,
  definition: ScheduleDefinition<P>,
  opts: PutScheduleOptions,
): Promise<PutScheduleResult<P>> {
  const query: string[] = [];
  if (opts.dryRun) query.push('dryRun=true');
  if (opts.count !== undefined) {
    if (!opts.dryRun) throw new ValidationError({ source: 'client', message: 'count applies to a dry run only: give dryRun: true' });
    query.push(`count=${wholeNumber('count', opts.count, 1, 100)}`);
  }
  const body = scheduleBody(definition);
  const path = withQuery(schedulePath(tenant, name), query);
  const { status, value } = await api.call<Schedule<P> & { dryRun?: true }>('PUT', path, body, opts.signal);
  return { ...value, created: status === 201 && !value.dryRun };
}

export function getSchedule<P>(api: ApiTransport, tenant: string, name: string, opts: CallOptions): Promise<Schedule<P>> {
  return api.request<Schedule<P>>('GET', schedulePath(tenant, name), undefined, opts.signal);
}

export function listSchedules<P>(api: ApiTransport, tenant: string, opts: ListSchedulesOptions): Promise<SchedulePage<P>> {
  const query: string[] = [];
  if (opts.limit !== undefined) query.push(`limit=${wholeNumber('limit', opts.limit, 1, 100)}`);
  if (opts.cursor !== undefined) query.push(`cursor=${enc(opts.cursor)}`);
  return api.request<SchedulePage<P>>('GET', withQuery(`${tenantPath(tenant)}/schedules`, query), undefined, opts.signal);
}

export function deleteSchedule(api: ApiTransport, tenant: string, name: string, opts: CallOptions): Promise<DeletedSchedule> {
  return api.request<DeletedSchedule>('DELETE', schedulePath(tenant, name), undefined, opts.signal);
}

/** `pauseSchedule` and `resumeSchedule`. */
export function setScheduleState<P>(
  api: ApiTransport,
  tenant: string,
  name: string,
  action: 'pause' | 'resume',
  opts: CallOptions,
): Promise<Schedule<P>> {
  return api.request<Schedule<P>>('POST', `${schedulePath(tenant, name)}/${action}`, undefined, opts.signal);
}

/** Schedule names the API accepts; `.` and `..` also match the pattern but no URL can address them. */
const SCHEDULE_NAME = /^[0-9A-Za-z_.-]{1,64}$/;

/** Why `name` cannot be a schedule name, or undefined when it can (for the CLI; not exported from the package). */
export function scheduleNameProblem(name: unknown): string | undefined {
  if (typeof name === 'string' && SCHEDULE_NAME.test(name) && name !== '.' && name !== '..') return undefined;
  return `name ${JSON.stringify(name)} is not a schedule name: 1 to 64 characters of A-Z a-z 0-9 _ . - (not . or ..)`;
}

/** The path of one schedule; refuses a name the API would refuse or no URL could address, before sending. */
function schedulePath(tenant: string, name: string): string {
  const problem = scheduleNameProblem(name);
  if (problem) throw new ValidationError({ source: 'client', message: problem });
  return `${tenantPath(tenant)}/schedules/${name}`;
}

/** The PUT body of a definition, as JSON text: times as RFC 3339, the payload spliced in as text. */
function scheduleBody<P>(d: ScheduleDefinition<P>): string {
  if (typeof d !== 'object' || d === null)
    throw new ValidationError({ source: 'client', message: 'the schedule definition must be an object' });
  const time = (field: 'startAt' | 'endAt'): string | undefined => {
    const v = d[field];
    if (!(v instanceof Date)) return v;
    if (Number.isNaN(v.getTime())) throw new ValidationError({ source: 'client', message: `${field} is an invalid Date` });
    return v.toISOString();
  };
  const [startAt, endAt] = [time('startAt'), time('endAt')];
  const fields = JSON.stringify({
    expression: d.expression,
    ...(d.timezone !== undefined ? { timezone: d.timezone } : {}),
    ...(startAt !== undefined ? { startAt } : {}),
    ...(endAt !== undefined ? { endAt } : {}),
    ...(d.state !== undefined ? { state: d.state } : {}),
  });
  if (d.payload === undefined && d.payloadJson === undefined) return fields;
  return `${fields.slice(0, -1)},"payload":${payloadText(d)}}`;
}
