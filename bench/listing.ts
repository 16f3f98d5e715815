/**
 * Phase 9: the read cost of listing a tenant's jobs (`GET /v1/tenants/{tenant}/jobs`), which
 * reads the shards directly (no index: docs/listing.md). Rows are written as ingest writes them
 * (realistic payloads, which a Query pays for even though it does not return them) over the
 * default 64 shards, spread evenly over `tenants` tenants; one tenant's jobs are then listed
 * page by page to the end, counting the items the Queries evaluated and the read units
 * DynamoDB (dynalite) reports for them, averaged over the pages.
 */
import type { Emulators } from '../test/support/emulators.js';
import { createSystem } from '../test/support/system.js';
import { runListingIndex, type IndexListingResult } from './listingIndex.js';
import { PRICES } from './prices.js';
import { progress, writeListingRows } from './support.js';

export interface ListingCase {
  pageSize: number;
  /** Tenants sharing the table evenly: the listed one holds 1/tenants of the rows. */
  tenants: number;
  rows: number;
  shards: number;
  /** Pages to list the tenant's jobs to the end (the last one partial). */
  pages: number;
  /** Jobs per page: below pageSize where pages stop at their read cap (10 × pageSize, at least 5,000 items). */
  jobsPerPage: number;
  itemsReadPerPage: number;
  queriesPerPage: number;
  /** Strongly consistent read units per page, as DynamoDB (dynalite) reports them. */
  rruPerPage: number;
  /** Dollars per million jobs listed (read units only). */
  usdPerMillionListed: number;
}

export interface ListingResult {
  cases: ListingCase[];
  /**
   * The alternative, measured (bench/listingIndex.ts): a tenant index's write units per job on
   * the real pipeline, and the same listings read from it.
   */
  index?: IndexListingResult;
  /** Why `index` is missing, when its measurement failed. */
  indexError?: string;
}

export async function runListing(em: Emulators, opts: { rows: number; indexJobs?: number }): Promise<ListingResult> {
  const cases: ListingCase[] = [];
  for (const tenants of [1, 10]) {
    const names = Array.from({ length: tenants }, (_, i) => `t${i}`);
    const sys = await createSystem(em, { tenants: names });
    const { shardCount } = sys.w.config.settings;
    const due = Date.now() + 24 * 3_600_000;
    await writeListingRows(sys, names, opts.rows, due);
    for (const pageSize of [100, 1000]) {
      const start = { ...sys.w.store.stats };
      let items = 0;
      let queries = 0;
      let pages = 0;
      let listed = 0;
      let cursor: string | undefined;
      do {
        const page = await sys.w.lister.list('t0', { limit: String(pageSize), ...(cursor ? { cursor } : {}) });
        cursor = page.nextCursor;
        listed += page.jobs.length;
        pages++;
        items += sys.w.lister.lastPage.items;
        queries += sys.w.lister.lastPage.queries;
      } while (cursor);
      if (listed !== Math.ceil(opts.rows / tenants)) throw new Error(`listed ${listed} jobs of ${Math.ceil(opts.rows / tenants)}`);
      const units = (sys.w.store.stats.listingReadUnits ?? 0) - (start.listingReadUnits ?? 0);
      const c: ListingCase = {
        pageSize,
        tenants,
        rows: opts.rows,
        shards: shardCount,
        pages,
        jobsPerPage: +(listed / pages).toFixed(1),
        itemsReadPerPage: +(items / pages).toFixed(1),
        queriesPerPage: +(queries / pages).toFixed(1),
        rruPerPage: +(units / pages).toFixed(1),
        usdPerMillionListed: +(((units / listed) * 1e6 * PRICES.dynamodbRead.usd) / PRICES.dynamodbRead.per).toFixed(4),
      };
      progress(`listing: ${JSON.stringify(c)}`);
      cases.push(c);
    }
  }
  if (!opts.indexJobs) return { cases };
  try {
    return { cases, index: await runListingIndex(em, { rows: opts.rows, jobs: opts.indexJobs }) };
  } catch (err) {
    progress(`listing.index: FAILED: ${(err as Error).message}`);
    return { cases, indexError: (err as Error).message };
  }
}
