/** The operator API on a tenant's controls: show, pause, resume, change its limits and weight. */
import type { TenantControls, TenantSettingsUpdate } from '../apiTypes.js';
import type { CallOptions } from '../callOptions.js';
import type { ApiTransport } from '../transport.js';
import { enc } from './encode.js';

/** The operator API's path of a tenant. */
const adminPath = (tenant: string): string => `v1/admin/tenants/${enc(tenant)}`;

export function getTenantControls(api: ApiTransport, tenant: string, opts: CallOptions): Promise<TenantControls> {
  return api.request<TenantControls>('GET', adminPath(tenant), undefined, opts.signal);
}

/** `pauseTenant` and `resumeTenant`. */
export function setTenantPaused(api: ApiTransport, tenant: string, action: 'pause' | 'resume', opts: CallOptions): Promise<TenantControls> {
  return api.request<TenantControls>('POST', `${adminPath(tenant)}/${action}`, undefined, opts.signal);
}

export function setTenantSettings(
  api: ApiTransport,
  tenant: string,
  settings: TenantSettingsUpdate,
  opts: CallOptions,
): Promise<TenantControls> {
  return api.request<TenantControls>('PUT', `${adminPath(tenant)}/settings`, JSON.stringify(settings), opts.signal);
}
