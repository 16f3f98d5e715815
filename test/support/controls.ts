import { ControlsCache, DEFAULT_CONTROLS, type TenantControls } from '../../core/tenants/controls.js';

/** Controls set by the test, read through the dispatch's cache (a short TTL to keep the test quick). */
export function controlsOf(initial: Record<string, Partial<TenantControls>>) {
  const set = new Map(Object.entries(initial).map(([t, c]) => [t, { ...DEFAULT_CONTROLS, ...c }]));
  const cache = new ControlsCache({ getControls: async (t) => set.get(t) }, { ttlMs: 200 });
  return { cache, update: (t: string, c: Partial<TenantControls>) => set.set(t, { ...(set.get(t) ?? DEFAULT_CONTROLS), ...c }) };
}
