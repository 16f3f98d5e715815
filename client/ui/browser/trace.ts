/**
 * The job panel's waterfall (docs/tracing.md): the spans the local stack kept of the open job's
 * trace (`traces/<traceId>`, through the `dynein ui` server), one row each on a common time axis:
 * submit, ingest, dispatch (with its lateness), and for a workflow's or a schedule's job the
 * spans around it. A deployment on AWS keeps none: the panel names the trace id to look up in the
 * team's tracing tool.
 */
import { jobSpans } from '../../traceSpans.js';
import { el } from './dom.js';

/** A span as the local stack keeps it (core/model's SpanRecord). */
export interface ShownSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId?: string;
  readonly name: string;
  readonly startMs: number;
  readonly endMs: number;
  readonly attributes: Readonly<Record<string, string | number | boolean>>;
}

/** Fetches the trace's spans; `undefined` when none are kept here (AWS) or the call failed. */
export async function fetchTrace(traceId: string): Promise<ShownSpan[] | undefined> {
  try {
    const res = await fetch(`traces/${encodeURIComponent(traceId)}`, { headers: { 'x-dynein-ui': '1' } });
    if (!res.ok) return undefined;
    const body = (await res.json()) as { spans?: ShownSpan[] };
    return body.spans;
  } catch {
    return undefined;
  }
}

/**
 * The spans of the job `jobId` and those of its trace without a job (a workflow's submit), in
 * start order; a span of another job of the same trace (a workflow's sibling) is left out.
 */
export function spansOfJob(spans: readonly ShownSpan[], jobId: string): ShownSpan[] {
  return jobSpans(spans, jobId).sort((a, b) => a.startMs - b.startMs);
}

/** The waterfall: a heading with the trace id, then per span its name, a bar on the common axis and its duration. */
export function waterfall(traceId: string, spans: readonly ShownSpan[] | undefined): HTMLElement[] {
  const head = el('b', { text: 'Trace' });
  const id = el('div', { class: 'mono small', text: traceId });
  if (!spans || spans.length === 0)
    return [
      head,
      id,
      el('p', {
        class: 'muted small',
        text: spans
          ? 'No span of this trace is kept (the local stack keeps the last 10,000).'
          : 'Its spans are in the tracing tool they are exported to.',
      }),
    ];
  const start = Math.min(...spans.map((s) => s.startMs));
  const total = Math.max(1, Math.max(...spans.map((s) => s.endMs)) - start);
  const rows = spans.flatMap((s) => {
    const left = ((s.startMs - start) / total) * 100;
    const width = ((s.endMs - s.startMs) / total) * 100;
    const lateness = s.attributes['dynein.lateness_ms'];
    return [
      el('span', { class: 'mono', text: s.name, title: `+${formatMs(s.startMs - start)} from the first span` }),
      el('div', { class: 'track' }, [el('div', { class: 'span', style: `left:${left.toFixed(2)}%;width:${width.toFixed(2)}%` })]),
      el('span', {
        class: 'mono small',
        text: formatMs(s.endMs - s.startMs) + (lateness !== undefined ? ` · late ${formatMs(Number(lateness))}` : ''),
      }),
    ];
  });
  return [head, id, el('div', { class: 'wf' }, rows)];
}

/** `12 ms`, `3.4 s`, `2.0 min`. */
export function formatMs(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1_000).toFixed(1)} s`;
  return `${(ms / 60_000).toFixed(1)} min`;
}
