/** The page's state: which tenant, tab, page and job it shows. One object, read by every tab. */

/** The page's tabs, as their `data-tab` names them. */
export type Tab = 'jobs' | 'schedules' | 'dlq' | 'workflows';

export interface PageState {
  tenant: string;
  tab: Tab;
  /** How often the live refresh runs (from the server's config). */
  refreshMs: number;
  /** Live refresh paused with the Pause button. */
  paused: boolean;
  /** A live refresh is in flight: the next tick skips rather than pile requests up. */
  busy: boolean;
  /** The filters as a query string, fixed when Show is pressed so that paging keeps them. */
  query: string;
  /** The cursor of each page seen (`null`: the first page), so that Previous can go back. */
  cursors: (string | null)[];
  /** The page of the list shown, from 0. */
  page: number;
  /** The cursor of the page after this one; `null` on the last page. */
  nextCursor: string | null;
  /** The job open in the detail panel. */
  selected: string | null;
  /** The workflow open in the Workflows tab. */
  workflow: string | null;
  /** The cursor of the schedules after those shown. */
  scheduleCursor: string | null;
  /** The dead letters shown, by handle, in row order, and whether each is ticked. */
  dlqChecked: Map<string, boolean>;
  /** When the dead letters were last read (ms): each read counts as a receive of every message. */
  dlqAt: number;
  /**
   * Dead letters sent to the queue whose delete from the DLQ failed (a redrive's or an edit's): in
   * both, to be deleted and never edited or redriven again. Their Edit is disabled.
   */
  dlqStuck: Set<string>;
  /** The dead letter whose payload the editor is open on. */
  dlqEdit: { readonly handle: string; readonly jobId: string } | null;
  /** The list of the tenant's edits is shown (Show edits). */
  dlqEditsShown: boolean;
}

export const state: PageState = {
  tenant: '',
  tab: 'jobs',
  refreshMs: 2_000,
  paused: false,
  busy: false,
  query: '',
  cursors: [null],
  page: 0,
  nextCursor: null,
  selected: null,
  workflow: null,
  scheduleCursor: null,
  dlqChecked: new Map(),
  dlqAt: 0,
  dlqStuck: new Set(),
  dlqEdit: null,
  dlqEditsShown: false,
};
