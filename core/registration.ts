import { TENANT_PATTERN } from './jobId.js';

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
