import type { RowKey } from '../model/index.js';

/**
 * Where a debounced job stands (docs/flow-control.md#debounce): `OPEN` while submits may replace
 * it (until a dispatcher takes it to send it, at its due time), `SENDING` once one did,
 * `CANCELLED` by a `DELETE` or a bulk cancel.
 */
export type GenerationState = 'OPEN' | 'SENDING' | 'CANCELLED';

/**
 * A debounced job's generation item (`pk = dg#<jobId>`): the authority on the job. Its row moves
 * (a replace writes the row of a new version at the new due time, then moves the generation to
 * it), and only the row whose version the generation names is ever sent.
 */
export interface Generation {
  readonly jobId: string;
  readonly tenant: string;
  readonly key: string;
  readonly shard: number;
  readonly state: GenerationState;
  /** The version of the job's current row (random). */
  readonly ver: string;
  /** The current row's due time, epoch ms. */
  readonly dueMs: number;
  /** When its first submit was accepted, epoch ms: `maxWaitSeconds` counts from it, and a bulk cancel reaches it only when it is before the request. */
  readonly firstMs: number;
  /** Never due later than this (first submit + `maxWaitSeconds`), when given. */
  readonly capMs?: number;
  /** Bulk cancels that counted the job: operation id → `c|<claimer>|<dueMs>` or `q|<claimer>|<dueMs>`. */
  readonly marks?: Readonly<Record<string, string>>;
}

/**
 * The debounce items of the scheduler table (adapters/dynamoDebounces.ts): a pointer per tenant
 * and key to its pending job (`pk = db#<tenant>#<key>`), and a generation item per debounced job.
 * Every change is one conditional write.
 */
export interface Debounces {
  /** The job the key's pointer names and when the pointer was written (strongly consistent), if any. */
  pointer(tenant: string, key: string): Promise<{ readonly jobId: string; readonly atMs: number } | undefined>;
  /** Points the key at `jobId` if it still names `expected` (undefined: no pointer): false when another submit moved it first. */
  setPointer(tenant: string, key: string, jobId: string, expected: string | undefined, atMs: number, expiresAtMs: number): Promise<boolean>;
  /** The job's generation item (strongly consistent), if any. */
  generation(jobId: string): Promise<Generation | undefined>;
  /** Writes a new job's generation item unless one is there: false when another submit wrote it first. */
  create(gen: Generation, expiresAtMs: number): Promise<boolean>;
  /** Moves an `OPEN` job from version `fromVer` to a new row: false when it is no longer `OPEN` at that version. */
  move(jobId: string, fromVer: string, to: { readonly ver: string; readonly dueMs: number }, expiresAtMs: number): Promise<boolean>;
  /**
   * A dispatcher takes the job to send the row of version `ver`: `OPEN` or already `SENDING` (a
   * send a crash interrupted) at that version becomes `SENDING`; false for any other row.
   */
  claim(jobId: string, ver: string): Promise<boolean>;
  /** `OPEN` becomes `CANCELLED`: the generation as it is afterwards (or as it was, when it was not `OPEN`), undefined when there is none. */
  cancel(jobId: string): Promise<Generation | undefined>;
  /**
   * A bulk cancel's mark: `OPEN` (first submitted before `beforeMs`) becomes `CANCELLED` with the
   * mark `c|...` (`how` `cancel`), or a `SENDING` job unmarked by the operation takes the mark
   * `q|...` (`how` `count`). False when the condition failed (read the generation again).
   */
  markForOperation(jobId: string, operationId: string, mark: string, how: 'cancel' | 'count', beforeMs: number): Promise<boolean>;
  /** Deletes the row of version `ver` at `key` while it is `SCHEDULED` (a replaced or unused row): best effort. */
  deleteRow(key: RowKey, ver: string): Promise<void>;
  /** Deletes a row a dispatcher holds with the lease `heldLeaseUntil` and may not send (its generation names another version). */
  dropAcquired(key: RowKey, heldLeaseUntil: number): Promise<boolean>;
}
