/**
 * The Workflows tab: one workflow (`GET .../workflows/{workflowId}`) drawn as a graph, each job a
 * box with its key and state, placed in the column of its depth (a job without parents in the
 * first, a job in the column after its deepest parent's), an arrow from each parent to its child.
 * A click on a job opens it in the Jobs tab's detail panel.
 */
import { callApi, errorText } from './api.js';
import type { Workflow } from './apiTypes.js';
import { $, showMessage } from './dom.js';
import { state } from './state.js';

const SVG = 'http://www.w3.org/2000/svg';
/** The reply last drawn: the live refresh redraws only what changed (a box under the pointer stays put). */
let drawn = '';
const BOX = { width: 150, height: 38, columnGap: 70, rowGap: 14 };

/** Opens `workflowId` in the tab (the form's submit) and loads it. */
export function openWorkflow(workflowId: string): Promise<void> {
  state.workflow = workflowId;
  drawn = '';
  showMessage('#workflow-msg', 'info');
  return loadWorkflow();
}

/** Loads the open workflow and draws it. A reply for a workflow left meanwhile is dropped. */
export async function loadWorkflow(): Promise<void> {
  const workflowId = state.workflow;
  if (!workflowId) return;
  const reply = await callApi<Workflow>('GET', `/workflows/${encodeURIComponent(workflowId)}`);
  if (workflowId !== state.workflow) return;
  if (!reply.ok || !reply.data) {
    drawn = '';
    $('#workflow-head').textContent = workflowId;
    $('#workflow-graph').replaceChildren();
    showMessage('#workflow-msg', 'err', reply.ok ? 'no workflow in the reply' : errorText(reply));
    return;
  }
  const wf = reply.data;
  const text = JSON.stringify(wf);
  if (text === drawn) return;
  drawn = text;
  $('#workflow-head').textContent = `${wf.workflowId}  ${wf.state}  created ${wf.createdAt}  (${wf.jobs.length} jobs)`;
  $('#workflow-graph').replaceChildren(graph(wf));
}

/** Each job's column: 0 without parents, else one past its deepest parent's (the graph has no cycle). */
export function depths(jobs: Workflow['jobs']): Map<string, number> {
  const byKey = new Map(jobs.map((j) => [j.key, j]));
  const depth = new Map<string, number>();
  const of = (key: string, seen: Set<string>): number => {
    const known = depth.get(key);
    if (known !== undefined) return known;
    if (seen.has(key)) return 0; // never for what the API accepted; a guard, not a layout
    seen.add(key);
    const parents = byKey.get(key)?.after ?? [];
    const d = parents.length === 0 ? 0 : 1 + Math.max(...parents.map((p) => of(p, seen)));
    depth.set(key, d);
    return d;
  };
  for (const j of jobs) of(j.key, new Set());
  return depth;
}

function graph(wf: Workflow): SVGSVGElement {
  const depth = depths(wf.jobs);
  const rows = new Map<number, number>();
  const at = new Map<string, { x: number; y: number }>();
  for (const j of wf.jobs) {
    const column = depth.get(j.key) ?? 0;
    const row = rows.get(column) ?? 0;
    rows.set(column, row + 1);
    at.set(j.key, { x: column * (BOX.width + BOX.columnGap) + 4, y: row * (BOX.height + BOX.rowGap) + 4 });
  }
  const width = (Math.max(0, ...depth.values()) + 1) * (BOX.width + BOX.columnGap);
  const height = Math.max(1, ...rows.values()) * (BOX.height + BOX.rowGap) + 8;
  const svg = node('svg', { width: String(width), height: String(height), viewBox: `0 0 ${width} ${height}`, class: 'workflow' });
  svg.append(arrowHead());
  for (const j of wf.jobs)
    for (const parent of j.after ?? []) {
      const from = at.get(parent);
      const to = at.get(j.key)!;
      if (!from) continue;
      svg.append(
        node('line', {
          x1: String(from.x + BOX.width),
          y1: String(from.y + BOX.height / 2),
          x2: String(to.x - 2),
          y2: String(to.y + BOX.height / 2),
          class: 'edge',
          'marker-end': 'url(#arrow)',
          'data-from': parent,
          'data-to': j.key,
        }),
      );
    }
  for (const j of wf.jobs) svg.append(box(j, at.get(j.key)!));
  return svg;
}

function box(job: Workflow['jobs'][number], p: { x: number; y: number }): SVGGElement {
  const g = node('g', { class: `job ${job.state}`, 'data-key': job.key, 'data-state': job.state, transform: `translate(${p.x},${p.y})` });
  const title = node('title');
  title.textContent = `${job.key} ${job.state}${job.runAt ? ` runAt ${job.runAt}` : ''}${job.message ? ` — ${job.message}` : ''}\n${job.jobId}`;
  const key = node('text', { x: '8', y: '16', class: 'key' });
  key.textContent = job.key.length > 20 ? `${job.key.slice(0, 19)}…` : job.key;
  const label = node('text', { x: '8', y: '31', class: 'state-label' });
  label.textContent = job.state;
  g.append(title, node('rect', { width: String(BOX.width), height: String(BOX.height), rx: '5' }), key, label);
  g.addEventListener('click', () => window.dispatchEvent(new CustomEvent('dynein:open-job', { detail: job.jobId })));
  return g;
}

function arrowHead(): SVGDefsElement {
  const defs = node('defs');
  const marker = node('marker', {
    id: 'arrow',
    viewBox: '0 0 10 10',
    refX: '10',
    refY: '5',
    markerWidth: '7',
    markerHeight: '7',
    orient: 'auto',
  });
  marker.append(node('path', { d: 'M0,0 L10,5 L0,10 z', class: 'arrow' }));
  defs.append(marker);
  return defs;
}

function node<K extends keyof SVGElementTagNameMap>(tag: K, attrs: Record<string, string> = {}): SVGElementTagNameMap[K] {
  const e = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) e.setAttribute(name, value);
  return e;
}
