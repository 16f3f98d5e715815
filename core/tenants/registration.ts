import { TENANT_PATTERN } from '../model/index.js';

/**
 * The tenant registration custom resource's properties (DyneinTenant writes them, the `register`
 * function reads them). Key names are CloudFormation's PascalCase.
 */
export interface RegistrationProperties {
  readonly TableName: string;
  readonly TenantName: string;
  readonly QueueUrl: string;
  readonly DlqUrl: string;
  /** History on: the outcome records' retention, ms, as a string (CloudFormation passes strings). */
  readonly HistoryTtlMs?: string;
}

/** The properties, checked: a malformed request fails the deploy with every problem named. */
export function registrationRequest(p: Partial<Record<keyof RegistrationProperties, unknown>> | undefined): {
  tableName: string;
  tenantName: string;
  queueUrl: string;
  dlqUrl: string;
  historyTtlMs?: number;
} {
  const problems: string[] = [];
  const text = (k: keyof RegistrationProperties) => {
    const v = p?.[k];
    if (typeof v !== 'string' || v === '') problems.push(`${k} must be a non-empty string`);
    return typeof v === 'string' ? v : '';
  };
  const out = { tableName: text('TableName'), tenantName: text('TenantName'), queueUrl: text('QueueUrl'), dlqUrl: text('DlqUrl') };
  const history = p?.HistoryTtlMs;
  const historyTtlMs = history === undefined || history === '' ? undefined : Number(history);
  if (historyTtlMs !== undefined && !(Number.isSafeInteger(historyTtlMs) && historyTtlMs > 0))
    problems.push(`HistoryTtlMs must be a positive whole number of milliseconds, got ${JSON.stringify(history)}`);
  if (out.tenantName && !TENANT_PATTERN.test(out.tenantName)) problems.push(`TenantName '${out.tenantName}' must match ${TENANT_PATTERN}`);
  if (problems.length > 0) throw new Error(`invalid Dynein tenant registration: ${problems.join('; ')}`);
  return historyTtlMs !== undefined ? { ...out, historyTtlMs } : out;
}

/** The deploy error when another stack owns the tenant name. */
export function registrationConflictMessage(tenantName: string, owner: string): string {
  return (
    `Dynein tenant '${tenantName}' is already registered by ${owner}. A tenant name belongs to one stack: ` +
    `choose another tenantName, or remove the tenant from that stack (deploy it without the tenant) before adding it here.`
  );
}

/**
 * Where a deployment's tenant queues are: the URL of each tenant's queue and DLQ, with `{tenant}`
 * standing for the tenant's name. Derived from the deployment's configuration, never from a
 * registration: on AWS `https://sqs.<region>.<domain>/<account>/<prefix>-t-{tenant}` and
 * `.../<prefix>-d-{tenant}` (lib/naming.ts), locally the emulator's URLs of the local stack's names.
 */
export interface TenantQueueUrls {
  readonly queueUrl: string;
  readonly dlqUrl: string;
}

export const TENANT_PLACEHOLDER = '{tenant}';

/** The URLs of `tenant`'s own queue and DLQ. */
export function tenantQueueUrls(urls: TenantQueueUrls, tenant: string): TenantQueueUrls {
  return { queueUrl: urls.queueUrl.replaceAll(TENANT_PLACEHOLDER, tenant), dlqUrl: urls.dlqUrl.replaceAll(TENANT_PLACEHOLDER, tenant) };
}

/**
 * Why a registration of `tenant` naming these URLs does not name the tenant's own queue and DLQ
 * (one line), or undefined when it does. The URLs are compared whole, so another tenant's
 * queue, another prefix's, account's or region's is refused alike.
 *
 * @example
 * foreignQueues({ queueUrl: 'https://sqs.eu-west-1.amazonaws.com/111/p-t-{tenant}', dlqUrl: '…/p-d-{tenant}' }, 'a',
 *   { queueUrl: 'https://sqs.eu-west-1.amazonaws.com/111/p-t-b', dlqUrl: '…' })
 * // → "tenant 'a' names queue https://…/p-t-b, not its own queue https://…/p-t-a"
 */
export function foreignQueues(urls: TenantQueueUrls, tenant: string, given: TenantQueueUrls): string | undefined {
  const own = tenantQueueUrls(urls, tenant);
  const problems: string[] = [];
  if (given.queueUrl !== own.queueUrl) problems.push(`queue ${given.queueUrl || "''"}, not its own queue ${own.queueUrl}`);
  if (given.dlqUrl !== own.dlqUrl) problems.push(`DLQ ${given.dlqUrl || "''"}, not its own DLQ ${own.dlqUrl}`);
  return problems.length > 0 ? `tenant '${tenant}' names ${problems.join(' and ')}` : undefined;
}

/** Problems with URL templates (none: both name `{tenant}`). */
export function tenantQueueUrlProblems(urls: Partial<TenantQueueUrls>): string[] {
  const problems: string[] = [];
  for (const k of ['queueUrl', 'dlqUrl'] as const) {
    const v = urls[k];
    if (typeof v !== 'string' || !/^https?:\/\/[^/]+\/.+/.test(v) || !v.includes(TENANT_PLACEHOLDER))
      problems.push(`${k} must be an http(s) URL naming ${TENANT_PLACEHOLDER}, got ${JSON.stringify(v)}`);
  }
  return problems;
}
