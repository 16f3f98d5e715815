/**
 * What the `dynein ui` server answers at `ui/config` (server.ts) and the page starts from
 * (browser/main.ts). Types only, no DOM and no Node: both programs, tsconfig.json and
 * tsconfig.browser.json, read this file.
 */
export interface UiConfig {
  /** The API the server forwards to, shown in the header. */
  readonly endpoint: string;
  /** The local stack (a picker of its tenants) rather than a deployed API (a free text field). */
  readonly local: boolean;
  readonly tenants: readonly string[];
  /** The tenant shown first; empty when none is known yet. */
  readonly tenant: string;
  /** How often the page refreshes what it shows, ms. */
  readonly refreshMs: number;
}
