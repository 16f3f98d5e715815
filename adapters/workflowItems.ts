import type { AttributeValue } from '@aws-sdk/client-dynamodb';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import { DEFAULT_PRIORITY, type RowKey } from '../core/model/index.js';
import type { WorkflowJobSpec, WorkflowTiming } from '../core/workflows/index.js';
import {
  concurrencyAttributes,
  concurrencyOf,
  payloadAttribute,
  payloadOf,
  prioAttribute,
  tagsAttribute,
  tagsOf,
  traceAttributes,
  traceOf,
} from './dynamoJobStore.js';

/**
 * How workflow items encode what both a job's spec and its waiting record hold (the same
 * attributes on either: a small spec is kept on its record): its timing, and the spec itself.
 */

type Item = Record<string, AttributeValue>;

/** A job's timing as items keep it (waiting records, and specs: adapters/dynamoWorkflowStore.ts). */
export function timingItem(timing: WorkflowTiming): Item {
  if (timing.kind === 'at') return { tk: { S: 'at' }, tv: { N: String(timing.atMs) } };
  if (timing.kind === 'delay') return { tk: { S: 'delay' }, tv: { N: String(timing.delayMs) } };
  return { tk: { S: 'now' } };
}

export function timingOf(item: Item): WorkflowTiming {
  const value = Number(item.tv?.N ?? 0);
  if (item.tk?.S === 'at') return { kind: 'at', atMs: value };
  if (item.tk?.S === 'delay') return { kind: 'delay', delayMs: value };
  return { kind: 'now' };
}

/**
 * A job's spec as item attributes (without its key): on its own item (`wp#<shard>`), or on its
 * waiting record when small (one write at submit, not two).
 */
export function specAttributes(s: WorkflowJobSpec): Item {
  const links = { p: s.parents, c: s.children.map((c) => [c.jobKey, c.index]) };
  return {
    tenant: { S: s.tenant },
    wf: { S: s.workflowId },
    key: { S: s.jobKey },
    ...payloadAttribute(s.payload),
    ...prioAttribute(s.priority),
    ...tagsAttribute(s.tags),
    ...concurrencyAttributes(s.concurrency),
    ...(s.cancellable ? {} : { nc: { BOOL: true } }),
    ...(s.shardCount !== undefined ? { shards: { N: String(s.shardCount) } } : {}),
    links: { B: deflateRawSync(JSON.stringify(links)) },
    ...(s.release ? { ...timingItem(s.release.timing), pol: { S: s.release.onParentFailure } } : {}),
    ...(s.endsPerItem !== undefined ? { eb: { N: String(s.endsPerItem) } } : {}),
    ...traceAttributes(s.trace),
  };
}

/** The spec an item holds (its own, or a waiting record with one); undefined when it holds none. */
export function specOf(key: RowKey, item: Item): WorkflowJobSpec | undefined {
  if (!item.tenant?.S || !item.wf?.S || !item.key?.S || !item.links?.B) return undefined;
  const links = JSON.parse(inflateRawSync(item.links.B).toString('utf8')) as { p: string[]; c: [string, number][] };
  return {
    key,
    tenant: item.tenant.S,
    workflowId: item.wf.S,
    jobKey: item.key.S,
    payload: payloadOf(item),
    priority: item.prio?.N !== undefined ? Number(item.prio.N) : DEFAULT_PRIORITY,
    ...tagsOf(item),
    ...concurrencyOf(item),
    cancellable: item.nc?.BOOL !== true,
    parents: links.p,
    children: links.c.map(([jobKey, index]) => ({ jobKey, index })),
    ...(item.shards?.N !== undefined ? { shardCount: Number(item.shards.N) } : {}),
    ...(item.pol?.S !== undefined ? { release: { timing: timingOf(item), onParentFailure: item.pol.S === 'run' ? 'run' : 'cancel' } } : {}),
    ...(item.eb?.N !== undefined ? { endsPerItem: Number(item.eb.N) } : {}),
    ...traceOf(item),
  };
}
