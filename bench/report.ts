/** The benchmark's targets (from the issue) and the Markdown rendering of a result. */
import { CELL } from './sim/run.js';
import { PRICE_REGION, PRICES_CHECKED } from './prices.js';
import type { BenchResult } from './run.js';

export interface Target {
  readonly name: string;
  readonly target: string;
  readonly value: string;
  /** undefined: not measured in this run. */
  readonly met: boolean | undefined;
}

/** The tracing phase compares lateness only when the untraced runs kept up with the load (p95 at most this). */
const TRACING_CARRIED_P95_MS = 1_000;
const carried = (tr: { readonly latenessP95MsOff: number }) => tr.latenessP95MsOff <= TRACING_CARRIED_P95_MS;

export function targets(r: BenchResult): Target[] {
  const t: Target[] = [];
  const l = r.lateness;
  const bq = r.peers.bullmq;
  if (l) {
    t.push({
      name: 'Lateness p95',
      target: bq ? `≤ 50 ms (issue #16) and ≤ BullMQ's (${bq.p95Ms} ms)` : '≤ 50 ms (issue #16)',
      value: `${l.p95Ms} ms`,
      met: l.p95Ms <= 50 && (!bq || l.p95Ms <= bq.p95Ms),
    });
    t.push({ name: 'Lateness p99', target: '≤ 100 ms (issue #16)', value: `${l.p99Ms} ms`, met: l.p99Ms <= 100 });
    t.push({ name: 'Early deliveries', target: '0', value: String(l.early), met: l.early === 0 });
    t.push({ name: 'Delivered', target: `all ${l.expected} accepted`, value: String(l.delivered), met: l.delivered === l.expected });
    if (l.reads && l.reads.jobs > 0)
      t.push({
        name: 'Items read per job at steady load (dispatch.itemsReadPerJobSteady)',
        target: '≤ 2',
        value: `${l.reads.itemsReadPerJobSteady} (${l.reads.itemsRead} items for ${l.reads.jobs} jobs over ${(l.reads.windowMs / 1000).toFixed(0)} s)`,
        met: l.reads.itemsReadPerJobSteady <= 2,
      });
  }
  if (r.dispatch)
    t.push({
      name: 'Dispatch vs storage ceiling',
      target: '≥ 70%',
      value: `${Math.round(r.dispatch.ratioToCeiling * 100)}% (${r.dispatch.jobsPerSec} of ${r.dispatch.ceilingJobsPerSec} jobs/s${r.dispatch.repeats ? `; median of ${r.dispatch.repeats.ratioToCeiling.values.length} interleaved pairs, ${Math.round(r.dispatch.repeats.ratioToCeiling.min * 100)}–${Math.round(r.dispatch.repeats.ratioToCeiling.max * 100)}%` : ''}${r.dispatch.storageCpuRatio !== undefined ? `; storage CPU per job ratio ${r.dispatch.storageCpuRatio}` : ''})`,
      met: r.dispatch.ratioToCeiling >= 0.7,
    });
  if (r.dispatch?.repeats?.storageCpuRatio)
    t.push({
      name: "Dispatch vs storage ceiling, in the storage's CPU per job (does not move with the machine's load)",
      target: '≥ 70%',
      value: `${Math.round(r.dispatch.repeats.storageCpuRatio.median * 100)}% (${r.dispatch.ceiling.storageCpuUsPerJob ?? '?'} µs of dynalite CPU per job for the writes alone, ${r.dispatch.storageCpuUsPerJob ?? '?'} µs per dispatched job; median of ${r.dispatch.repeats.storageCpuRatio.values.length}, ${Math.round(r.dispatch.repeats.storageCpuRatio.min * 100)}–${Math.round(r.dispatch.repeats.storageCpuRatio.max * 100)}%)`,
      met: r.dispatch.repeats.storageCpuRatio.median >= 0.7,
    });
  if (r.requests) {
    const b = r.requests.batch;
    t.push({
      name: 'DynamoDB writes per batch-submitted job',
      target: '≤ 3',
      value: `${b.itemWritesPerJob} item writes (${b.requestsPerJob.dynamodbWrite} requests, ${b.usagePerJob.dynamodbWru} WRU)`,
      met: b.itemWritesPerJob <= 3,
    });
    t.push({
      name: 'SQS requests per batch-submitted job',
      target: '≤ 0.5',
      value: String(b.requestsPerJob.sqs),
      met: b.requestsPerJob.sqs <= 0.5,
    });
  }
  const ours = r.costPerMillionUsd?.ours;
  if (ours !== undefined)
    t.push({
      name: 'Cost per million batch-submitted 1 KB jobs (on demand, `ours`)',
      target: '≤ $2.00 (issue #16; was ≤ $2.50)',
      value: `$${ours.toFixed(2)}`,
      met: ours <= 2,
    });
  const provisioned = r.costPerMillionUsd?.provisionedAt10k;
  if (provisioned !== undefined)
    t.push({
      name: 'Cost per million batch-submitted jobs, provisioned table at a steady 10,000 jobs/s (`provisionedAt10k`)',
      target: '≤ $1.10',
      value: `$${provisioned.toFixed(2)}${r.costPerMillionUsd?.onDemandAt10k !== undefined ? ` (on demand at the same rate $${r.costPerMillionUsd.onDemandAt10k.toFixed(2)})` : ''}`,
      met: provisioned <= 1.1,
    });
  const h = r.history;
  if (h) {
    t.push({
      name: 'Outcome reports per job (history on, steady load)',
      target: '≤ 0.2 requests',
      value: `${h.reportRequestsPerJob} API requests, ${h.batchWriteRequestsPerJob} BatchWriteItem`,
      met: h.reportRequestsPerJob <= 0.2 && h.batchWriteRequestsPerJob <= 0.2,
    });
    const withHistory = r.costPerMillionUsd?.withHistory;
    t.push({
      name: 'Cost per million jobs with history on',
      target: ours !== undefined ? `≤ ours + $1.00 ($${(ours + 1).toFixed(2)})` : '≤ ours + $1.00',
      value: withHistory !== undefined ? `$${withHistory.toFixed(2)}` : `+$${h.costPerMillionIncrementUsd.toFixed(2)} over ours`,
      met: h.costPerMillionIncrementUsd <= 1,
    });
  }
  const wf = r.workflows;
  if (wf) {
    t.push({
      name: `Workflow child latency (fan-out 1 → ${wf.shapes.fanOut - 1}, fan-in ${wf.shapes.fanIn - 1} → 1, chain of ${wf.shapes.chain})`,
      target: 'p95 ≤ 100 ms, early 0, lost 0, duplicates 0',
      value: `p50 ${wf.childLatencyP50Ms} ms, p95 ${wf.childLatencyP95Ms} ms (the emulators' floor for the fan-out alone: p95 ${wf.fanOutFloor.p95Ms} ms); early ${wf.early}, lost ${wf.lost}, duplicates ${wf.duplicates}`,
      met: wf.childLatencyP95Ms <= 100 && wf.early === 0 && wf.lost === 0 && wf.duplicates === 0,
    });
    const later = r.costPerMillionUsd?.workflowJobDueLater;
    t.push({
      name: 'Cost per million jobs run inside workflows',
      target: ours !== undefined ? `≤ ours + $1.50 ($${(ours + 1.5).toFixed(2)})` : '≤ ours + $1.50',
      value: `$${wf.costPerMillionUsd.toFixed(2)} due at once, everything measured${later !== undefined ? `; due later, with ours' path on top: at most $${later.toFixed(2)}` : ''}`,
      // The phase's jobs (the issue's shapes, due at once) decide; a job due later is shown beside.
      met: ours !== undefined && wf.costPerMillionUsd <= ours + 1.5,
    });
  }
  const bc = r.bulkCancel;
  if (bc)
    t.push({
      name: `Bulk cancel of ${bc.jobs.toLocaleString('en-US')} tagged jobs by their tag`,
      target: 'delivered 0, done in ≤ 30 s, every job counted',
      value: `${bc.seconds} s; matched ${bc.matched}, cancelled ${bc.cancelled}, already queued ${bc.alreadyQueued}; delivered ${bc.delivered} (untagged beside them: ${bc.untaggedDelivered} of ${bc.untaggedJobs} delivered)`,
      met: bc.delivered === 0 && bc.seconds <= 30 && bc.matched === bc.jobs && bc.untaggedDelivered === bc.untaggedJobs,
    });
  const fc = r.flowControl;
  if (fc)
    t.push({
      name: `Concurrency by key: ${fc.jobs.toLocaleString('en-US')} jobs due at once over ${fc.keys} keys of limit ${fc.keyLimit}, ${fc.workMs} ms each`,
      target: 'maxConcurrentPerKey ≤ the limit, early 0, lost 0, throughput ≥ 0.8 of keys × limit ÷ work time',
      value: `max ${fc.maxConcurrentPerKey} of a key at once; early ${fc.early}, lost ${fc.lost}; ratio ${fc.throughputRatio} (${fc.jobsPerSec} of ${fc.idealJobsPerSec} jobs/s)`,
      met: fc.maxConcurrentPerKey <= fc.keyLimit && fc.early === 0 && fc.lost === 0 && fc.throughputRatio >= 0.8,
    });
  const fa = fc?.simulatedAws;
  if (fa)
    t.push({
      name: `Concurrency by key, the same load on the simulated AWS deployment (one cell; worker: receive ~20 ms, report ~45 ms)`,
      target: 'as above (a hand-over of its modelled medians allows at most the bound shown)',
      value: `max ${fa.maxConcurrentPerKey} of a key at once; early ${fa.early}, lost ${fa.lost}; ratio ${fa.throughputRatio} (${fa.jobsPerSec} of ${fa.idealJobsPerSec} jobs/s; bound ${fa.ratioBound}, a hand-over of ${fa.handoffFloorMs} ms); hand-over p50 ${fa.handoff.p50Ms} ms, p95 ${fa.handoff.p95Ms} ms`,
      met: fa.maxConcurrentPerKey <= fa.keyLimit && fa.early === 0 && fa.lost === 0 && fa.throughputRatio >= 0.8,
    });
  const tr = r.tracing;
  if (tr)
    t.push({
      name: 'Tracing: the lateness load with every span exported over OTLP/HTTP, against none',
      target: 'tracedJobs = jobs, p95 within 10 ms of untraced, early 0, lost 0, the added cost stated',
      value:
        `${tr.tracedJobs} of ${tr.jobs} traced, ${tr.spansPerJob} spans a job; p95 ${tr.latenessP95Ms} ms traced, ${tr.latenessP95MsOff} ms untraced; early ${tr.early}, lost ${tr.lost}; +$${tr.costPerMillionUsd.total} per million jobs (X-Ray $${tr.costPerMillionUsd.xray}, export time $${tr.costPerMillionUsd.lambdaExport})` +
        (carried(tr) ? '' : `; not compared: untraced, the machine did not carry the load (p95 above ${TRACING_CARRIED_P95_MS} ms)`),
      // The comparison means something only when the load was carried untraced: two backlogged runs are both late.
      met:
        tr.tracedJobs === tr.jobs &&
        tr.jobs > 0 &&
        carried(tr) &&
        tr.latenessP95Ms - tr.latenessP95MsOff <= 10 &&
        tr.early === 0 &&
        tr.lost === 0,
    });
  const db = r.debounce;
  if (db)
    t.push({
      name: `Debounce: ${db.keys.toLocaleString('en-US')} keys × ${db.submitsPerKey} submits`,
      target: 'deliveries = keys, each the last payload (lastPayload = deliveries), early 0',
      value: `${db.deliveries.toLocaleString('en-US')} deliveries, lastPayload ${db.lastPayload.toLocaleString('en-US')}, early ${db.early}; ${db.jobs.toLocaleString('en-US')} jobs (${db.splitKeys} keys split), ${db.duplicates} duplicates, ${db.undelivered} undelivered, ${db.failed} submits failed`,
      met: db.deliveries === db.keys && db.lastPayload === db.deliveries && db.early === 0,
    });
  if (r.backlog)
    t.push({
      name: 'Backlog ratio',
      target: '≥ 0.9',
      value: `${r.backlog.ratio} (${r.backlog.futureRows.toLocaleString('en-US')} future rows${r.backlog.repeats ? `; median of ${r.backlog.repeats.ratio.values.length} pairs, ${r.backlog.repeats.ratio.min}–${r.backlog.repeats.ratio.max}` : ''}${r.backlog.storageCpuRatio !== undefined ? `; storage CPU per job ratio ${r.backlog.storageCpuRatio}` : ''})`,
      met: r.backlog.ratio >= 0.9,
    });
  const rc = r.recovery;
  if (rc) {
    t.push({
      name: 'Outage drain rate vs no backlog',
      target: '≥ 0.8',
      value: `${rc.ratioToEmpty} (${rc.drainJobsPerSec} vs ${rc.empty.jobsPerSec} jobs/s, ${rc.overdueRows.toLocaleString('en-US')} overdue rows${rc.storageCpuRatio !== undefined ? `; storage CPU per job ratio ${rc.storageCpuRatio}` : ''})`,
      met: rc.ratioToEmpty >= 0.8,
    });
    t.push({
      name: 'Outage drain memory',
      target: 'peak ≤ 1.5 × steady RSS',
      value: `${rc.peakRssMb} MB peak, ${rc.steadyRssMb} MB steady (${(rc.peakRssMb / rc.steadyRssMb).toFixed(2)}×)`,
      met: rc.peakRssMb <= 1.5 * rc.steadyRssMb,
    });
    t.push({
      name: 'Outage drain lost / early',
      target: '0 / 0',
      value: `${rc.lost} / ${rc.early} (${rc.duplicates} duplicates)`,
      met: rc.lost === 0 && rc.early === 0,
    });
  }
  const rr = r.recurring;
  if (rr) {
    t.push({
      name: 'Recurring: missing occurrences',
      target: '0',
      value: `${rr.missing} (${rr.delivered}/${rr.expected} delivered, ${rr.schedules} schedules)`,
      met: rr.missing === 0,
    });
    t.push({ name: 'Recurring: early', target: '0', value: String(rr.early), met: rr.early === 0 });
    t.push({
      name: 'Recurring: duplicates',
      target: '0',
      value: `${rr.duplicates}${rr.unexpected ? ` (and ${rr.unexpected} unexpected)` : ''}`,
      met: rr.duplicates === 0,
    });
    t.push({ name: 'Recurring: lateness p95', target: '≤ 100 ms', value: `${rr.p95Ms} ms`, met: rr.p95Ms <= 100 });
  }
  const nn = r.noisyNeighbour;
  if (nn) {
    t.push({
      name: 'Noisy neighbour: B lateness p95 flooded ÷ alone',
      target: '≤ 2.0',
      value: `${nn.ratio} (${nn.floodedP95Ms} ms vs ${nn.quietP95Ms} ms; at the dispatcher ${nn.sent.floodedP95Ms} vs ${nn.sent.quietP95Ms} ms; A due at ${nn.shape.floodPerSec} jobs/s, ${nn.saturation}× what was sent of it)`,
      met: nn.targetMet,
    });
    t.push({
      name: 'Noisy neighbour: early / lost',
      target: '0 / 0',
      value: `${nn.early} / ${nn.lost} (${nn.duplicates} duplicates)`,
      met: nn.early === 0 && nn.lost === 0,
    });
  }
  const pz = r.pause;
  if (pz)
    t.push({
      name: 'Pause: held jobs delivered after resume',
      target: 'delivered = held, 0 while paused, lost 0, early 0',
      value: `${pz.delivered} of ${pz.held}, ${pz.deliveredWhilePaused} while paused, lost ${pz.lost}, early ${pz.early}`,
      met: pz.delivered === pz.held && pz.held === pz.accepted && pz.deliveredWhilePaused === 0 && pz.lost === 0 && pz.early === 0,
    });
  const rl = r.rateLimit;
  if (rl)
    t.push({
      name: 'Delivery rate limit',
      target: `within 10% of ${rl.limitPerSec}/s`,
      value: `${rl.observedPerSec}/s (at most ${rl.maxIn1s} in any second)`,
      met: rl.targetMet,
    });
  const f = r.faults;
  if (f) {
    const pct = `${Math.round(f.faultRate * 100)} %`;
    t.push({
      name: `Under AWS faults (${pct} of every call): lost / early`,
      target: '0 / 0',
      value: `${f.lost} / ${f.early} (${f.jobs.toLocaleString('en-US')} jobs)`,
      met: f.lost === 0 && f.early === 0,
    });
    t.push({
      name: 'Under AWS faults: cancelled jobs delivered',
      target: '0',
      value: `${f.cancelledDelivered} of ${f.cancels.confirmed} cancels answered CANCELLED`,
      met: f.cancelledDelivered === 0,
    });
    t.push({
      name: 'Under AWS faults: paused tenant delivered while paused',
      target: '0',
      value: `${f.pausedDelivered} (${f.pause.directWhilePaused} of ${f.pause.acceptedWhilePaused} jobs accepted while paused went straight to the queue)`,
      met: f.pausedDelivered === 0,
    });
    t.push({
      name: 'Under AWS faults: duplicates',
      target: '≤ 1 %',
      value: `${(f.duplicates * 100).toFixed(2)} % (${f.duplicateDeliveries} extra deliveries from ${f.duplicateSends} send(s); ${f.sqsAppliedThenFailed} SQS attempts failed after being applied)`,
      met: f.duplicates <= 0.01,
    });
    t.push({
      name: 'Under AWS faults: status answers truthful (QUEUED only once sent, CANCELLED never delivered)',
      target: '0 untruthful',
      value: `${f.status.untruthful} of ${f.status.samples} sampled`,
      met: f.status.untruthful === 0,
    });
  }
  const v = r.simulationValidation;
  if (v)
    t.push({
      name: 'Simulation validated against the local stack (dispatch jobs/s, lateness p95)',
      target: `within ${v.withinPct} % of both, nothing lost`,
      value: `${v.dispatchJobsPerSec.simulated} vs ${v.dispatchJobsPerSec.measured} jobs/s (${v.dispatchJobsPerSec.errorPct} %), ${v.latenessP95Ms.simulated} vs ${v.latenessP95Ms.measured} ms (${v.latenessP95Ms.errorPct} %)${v.lost ? `; the simulation lost ${v.lost.burst} (burst) and ${v.lost.steady} (steady)` : ''}`,
      met: v.pass,
    });
  const sc = r.scaleSimulation;
  const one = sc?.find((x) => x.cells === 1);
  if (sc && one) {
    for (const [cells, factor] of [
      [2, 1.8],
      [4, 3.5],
    ] as const) {
      const row = sc.find((x) => x.cells === cells);
      if (row)
        t.push({
          name: `Simulated sustained rate, ${cells} cells vs 1 (scaleSimulation)`,
          target: `≥ ${factor} ×`,
          value: `${(row.jobsPerSec / Math.max(1, one.jobsPerSec)).toFixed(2)} × (${row.jobsPerSec.toLocaleString('en-US')} vs ${one.jobsPerSec.toLocaleString('en-US')} jobs/s)`,
          met: row.jobsPerSec >= factor * one.jobsPerSec,
        });
    }
    const largest = sc.reduce((a, b) => (b.cells > a.cells ? b : a));
    // The full run's sizes (a quick run simulates 1 and 2 cells only: docs/performance.md).
    if (largest.cells >= 4)
      t.push({
        name: 'Simulated sustained rate at the largest size (scaleSimulation)',
        target: '≥ 20,000 jobs/s',
        value: `${largest.jobsPerSec.toLocaleString('en-US')} jobs/s at ${largest.cells} cells (p95 ${largest.p95Ms} ms; stopped by ${largest.binding})`,
        met: largest.jobsPerSec >= 20_000,
      });
  }
  return t;
}

const mark = (met: boolean | undefined) => (met === undefined ? '–' : met ? 'yes' : '**no**');
const usd = (x: number | undefined) => (x === undefined ? '–' : `$${x.toFixed(2)}`);

export function markdown(r: BenchResult): string {
  const lines: string[] = [];
  const m = r.machine;
  lines.push(`# Dynein Serverless benchmark (${r.mode} mode)`, '');
  lines.push(
    `${r.date.slice(0, 10)} · ${m.cpus} × ${m.cpuModel}, ${m.memoryGiB} GiB, ${m.os}, Node ${m.node} · load average ${m.loadAvgAtStart.join(' / ')} at start, ${m.loadAvgAtEnd.join(' / ')} at the end (1/5/15 min; the machine was shared) · ${Math.round(r.durationS)} s · \`npm run bench${r.mode === 'full' ? '' : ` -- --${r.mode}`}\``,
    '',
  );
  if (r.mode === 'quick') lines.push(`Quick mode: ${r.sizes.description}. Its timings are not the published figures.`, '');
  if (r.mode === 'smoke') lines.push(`Smoke mode (CI): ${r.sizes.description}.`, '');

  lines.push('## Targets', '', '| | target | this run | met |', '|---|---|---|---|');
  for (const t of r.targets) lines.push(`| ${t.name} | ${t.target} | ${t.value} | ${mark(t.met)} |`);
  lines.push('');

  const l = r.lateness;
  const bq = r.peers.bullmq;
  if (l) {
    lines.push(
      `## Lateness (${l.load.rate} jobs/s for ${l.load.durationMs / 1000} s, due ${l.load.minAheadMs / 1000}–${l.load.maxAheadMs / 1000} s ahead, ${l.load.payloadBytes}-byte payloads)`,
      '',
    );
    // p99.9: older results have none.
    const top = (s: { p999Ms?: number }) => (s.p999Ms !== undefined ? `${s.p999Ms} ms` : '');
    lines.push('| | p50 | p95 | p99 | p99.9 | max | early | delivered |', '|---|---|---|---|---|---|---|---|');
    lines.push(
      `| Dynein Serverless, local stack (signed POST → … → consumer receive) | ${l.p50Ms} ms | ${l.p95Ms} ms | ${l.p99Ms} ms | ${top(l)} | ${l.maxMs} ms | ${l.early} | ${l.delivered}/${l.expected} |`,
    );
    lines.push(
      `| same jobs, SQS ApproximateFirstReceiveTimestamp | ${l.firstReceive.p50Ms} ms | ${l.firstReceive.p95Ms} ms | ${l.firstReceive.p99Ms} ms | ${top(l.firstReceive)} | ${l.firstReceive.maxMs} ms | | |`,
    );
    if (bq)
      lines.push(
        `| BullMQ ${bq.bullmqVersion} delayed jobs, Redis ${bq.redisVersion} (worker start; ${bq.load.durationMs / 1000} s of the same load) | ${bq.p50Ms} ms | ${bq.p95Ms} ms | ${bq.p99Ms} ms | ${top(bq)} | ${bq.maxMs} ms | ${bq.early} | ${bq.delivered}/${bq.expected} |`,
      );
    else lines.push(`| BullMQ | ${r.peers.bullmqSkipped ?? 'not run'} | | | | | | |`);
    lines.push(
      '',
      `Submit (signed POST acknowledged): p50 ${l.load.report.submitMs.p50Ms} ms, p99 ${l.load.report.submitMs.p99Ms} ms; ${l.direct} job(s) went straight to the queue (due within the lookahead by the time submit ran); duplicates ${l.duplicates}; inbound backlog (accepted, not yet ingested) at most ${l.ingestBacklog.max} jobs.`,
      '',
    );
  }

  if (r.dispatch) {
    const d = r.dispatch;
    lines.push('## Dispatch throughput and backlog', '');
    lines.push('| | jobs | jobs/s |', '|---|---|---|');
    lines.push(
      `| burst, all due at once, ${d.settings.groups} groups × ${d.settings.shards} shards (median of ${d.repeats?.jobsPerSec.values.length ?? 1}${d.repeats ? `: ${d.repeats.jobsPerSec.min}–${d.repeats.jobsPerSec.max}` : ''}) | ${d.jobs.toLocaleString('en-US')} | ${d.jobsPerSec} |`,
    );
    lines.push(
      `| storage ceiling: dynalite doing only a job's ${d.ceiling.writesPerJob} writes (conditional acquire, delivered marker in a batch of 25) at ${d.ceiling.concurrency} in flight (alone: ${d.ceiling.conditionalWritesPerSec} conditional writes/s, ${d.ceiling.batchedMarkersPerSec} batched markers/s) | ${d.ceiling.rows.toLocaleString('en-US')} | ${d.ceilingJobsPerSec} |`,
    );
    if (d.repeats)
      lines.push(
        `| ratio to the ceiling: each burst over the ceiling beside it (median, min–max) | | ${d.repeats.ratioToCeiling.median} (${d.repeats.ratioToCeiling.min}–${d.repeats.ratioToCeiling.max}) |`,
        ...(d.repeats.storageCpuRatio && d.ceiling.storageCpuUsPerJob !== undefined
          ? [
              `| storage CPU per job, the ceiling's over the burst's (dynalite's own CPU time: does not move with the machine's load; median, min–max) | | ${d.repeats.storageCpuRatio.median} (${d.repeats.storageCpuRatio.min}–${d.repeats.storageCpuRatio.max}) |`,
            ]
          : []),
      );
    if (r.backlog) {
      if (r.backlog.repeats)
        lines.push(
          `| backlog ratio: with over without, pair by pair (median, min–max) | | ${r.backlog.repeats.ratio.median} (${r.backlog.repeats.ratio.min}–${r.backlog.repeats.ratio.max})${r.backlog.repeats.storageCpuRatio ? `; storage CPU per job without over with ${r.backlog.repeats.storageCpuRatio.median} (${r.backlog.repeats.storageCpuRatio.min}–${r.backlog.repeats.storageCpuRatio.max})` : ''} |`,
        );
      lines.push(
        `| the same burst with ${r.backlog.futureRows.toLocaleString('en-US')} future rows in the table${r.backlog.repeats ? ` (median of ${r.backlog.repeats.withJobsPerSec.values.length}: ${r.backlog.repeats.withJobsPerSec.min}–${r.backlog.repeats.withJobsPerSec.max})` : ''} | ${r.backlog.with.jobs.toLocaleString('en-US')} | ${r.backlog.repeats?.withJobsPerSec.median ?? r.backlog.with.jobsPerSec} (ratio ${r.backlog.ratio}; ${r.backlog.ratioToPhase2} against the first burst) |`,
      );
      lines.push(
        `| the same burst beside it, on a fresh table (same machine load, same emulator storage)${r.backlog.repeats ? ` (median of ${r.backlog.repeats.withoutJobsPerSec.values.length}: ${r.backlog.repeats.withoutJobsPerSec.min}–${r.backlog.repeats.withoutJobsPerSec.max})` : ''} | ${r.backlog.withoutAdjacent.jobs.toLocaleString('en-US')} | ${r.backlog.repeats?.withoutJobsPerSec.median ?? r.backlog.withoutAdjacent.jobsPerSec} |`,
      );
    }
    lines.push('');
  }

  const rc = r.recovery;
  if (rc) {
    lines.push(
      `## Recovery after an outage (${rc.overdueRows.toLocaleString('en-US')} overdue rows, due over the last hour, ${rc.fresh.jobs} jobs falling due meanwhile)`,
      '',
    );
    lines.push('| | rows | jobs/s | RSS (MB) |', '|---|---|---|---|');
    lines.push(
      `| no backlog: a burst due at once, fresh table, before the load | ${rc.empty.rows.toLocaleString('en-US')} | ${rc.empty.before.jobsPerSec} | ${rc.steadyRssMb} median, ${rc.empty.peakRssMb} max |`,
    );
    lines.push(
      `| no backlog: the same right after the drain (same machine load and emulator storage) | ${rc.empty.rows.toLocaleString('en-US')} | ${rc.empty.jobsPerSec} | |`,
    );
    lines.push(
      `| the outage's backlog, drained oldest first in bounded pages | ${rc.overdueRows.toLocaleString('en-US')} | ${rc.drainJobsPerSec} (ratio ${rc.ratioToEmpty}; ${rc.ratioToEmptyBefore} against the run before) | ${rc.peakRssMb} max (${rc.rssBeforeMb} before) |`,
    );
    lines.push(
      '',
      `Lost ${rc.lost}, early ${rc.early}, duplicates ${rc.duplicates} (every message in the queue received once). Jobs falling due during the drain were sent p50 ${rc.fresh.lateness.p50Ms} ms, p99 ${rc.fresh.lateness.p99Ms} ms, max ${rc.fresh.lateness.maxMs} ms after runAt (at the dispatcher; ${rc.fresh.sentAfterLastBacklogRow} waited for the end of the backlog). ${rc.itemsReadPerJob} items read per job; at most ${rc.maxTracked} rows tracked by a round at once.`,
      '',
    );
  }

  if (r.requests && r.costPerMillionUsd) {
    const b = r.requests.batch;
    const s = r.requests.single;
    const c = r.costPerMillionUsd;
    lines.push(
      `## Requests and dollars per job (${b.jobs} jobs each, ${r.requests.payloadBytes}-byte payloads, prices ${PRICE_REGION} as of ${PRICES_CHECKED})`,
      '',
    );
    lines.push(
      '| per job | DynamoDB write req. | item writes (WRU) | DynamoDB read req. | SQS | Lambda | API Gateway | $ per million |',
      '|---|---|---|---|---|---|---|---|',
    );
    lines.push(
      `| ours, batch submits of 100 | ${b.requestsPerJob.dynamodbWrite} | ${b.itemWritesPerJob} (${b.usagePerJob.dynamodbWru}) | ${b.requestsPerJob.dynamodbRead} | ${b.requestsPerJob.sqs} | ${b.requestsPerJob.lambda} | ${b.requestsPerJob.apiGateway} | ${usd(c.ours)} |`,
    );
    lines.push(
      `| ours, single POSTs | ${s.requestsPerJob.dynamodbWrite} | ${s.itemWritesPerJob} (${s.usagePerJob.dynamodbWru}) | ${s.requestsPerJob.dynamodbRead} | ${s.requestsPerJob.sqs} | ${s.requestsPerJob.lambda} | ${s.requestsPerJob.apiGateway} | ${usd(c.oursSinglePost)} |`,
    );
    lines.push(
      `| Dynein's pattern (servers not included) | 3 | 3 (${c.usage.dyneinPattern?.dynamodbWru}) | 0.1 | 4 | – | – | ${usd(c.dyneinPattern)} |`,
    );
    lines.push(`| EventBridge Scheduler one-time schedules → SQS | – | – | – | 1 | – | – | ${usd(c.eventBridgeScheduler)} |`);
    lines.push('');
    lines.push(
      `Polling is apart: an idle deployment costs ${usd(r.fixedMonthlyUsd.idle.totalUsd)} a month (tick executions, idle dispatch steps, the event source's long polls); at a steady 100 jobs/s the tick plans one dispatcher, which adds ${usd(r.fixedMonthlyUsd.busyAt100PerSec.totalUsd)} a month; at its most (every one of the ${r.fixedMonthlyUsd.model.groups} groups its own dispatch Lambda of ${r.fixedMonthlyUsd.model.dispatchMemoryMb} MB, always busy, from ~${(r.fixedMonthlyUsd.model.groups - 1) * r.fixedMonthlyUsd.model.dispatcherRowsPerSecond} jobs/s) ${usd(r.fixedMonthlyUsd.busy.totalUsd)} a month (${r.fixedMonthlyUsd.model.shards * 2} queries/s). All in at a steady 100 jobs/s: ${usd(c.oursAllInAt100PerSec)} per million batch-submitted jobs. With the payload stored as plain text instead (the design before deflating): ${usd(c.whatIfCompressedPayload)}.`,
      '',
    );
    const s10 = c.steadyAt10k;
    if (s10) {
      const by = Object.entries(s10.provisionedByTargetUtilizationPercent)
        .map(([t, x]) => `${t} % ${usd(x)}`)
        .join(', ');
      const services = (x: Record<string, number>) =>
        Object.entries(x)
          .filter(([, v]) => v > 0)
          .map(([k, v]) => `${k} $${v.toFixed(4)}`)
          .join(', ');
      lines.push(
        `At a steady 10,000 jobs/s, all in (per job plus fixed costs): provisioned table (tableCapacity provisioned, auto scaling at ${s10.provisioned.model.targetUtilizationPercent} %) **${usd(c.provisionedAt10k)}** per million (${services(s10.provisioned.byServiceUsd)}); on demand ${usd(c.onDemandAt10k)} (${services(s10.onDemand.byServiceUsd)}). Provisioned by auto scaling target: ${by}. Assumptions:`,
        '',
        ...s10.assumptions.map((a) => `- ${a}`),
        '',
      );
    }
  }

  const rr = r.recurring;
  if (rr) {
    const w = rr.window;
    lines.push(
      `## Recurring schedules (${rr.schedules} schedules, ${rr.tenants.length} tenants, zones ${rr.zones.join(', ')}; occurrences due ${w.from.slice(11, 19)}–${w.to.slice(11, 19)} UTC, received until ${w.graceMs / 1000} s after)`,
      '',
    );
    lines.push('| | p50 | p95 | p99 | max | early | missing | duplicates | delivered |', '|---|---|---|---|---|---|---|---|---|');
    lines.push(
      `| local stack, Scheduler stand-in as the clock (runAt → consumer receive) | ${rr.p50Ms} ms | ${rr.p95Ms} ms | ${rr.p99Ms} ms | ${rr.maxMs} ms | ${rr.early} | ${rr.missing} | ${rr.duplicates} | ${rr.delivered}/${rr.expected} |`,
    );
    lines.push(
      `| same occurrences, SQS ApproximateFirstReceiveTimestamp | ${rr.firstReceive.p50Ms} ms | ${rr.firstReceive.p95Ms} ms | ${rr.firstReceive.p99Ms} ms | ${rr.firstReceive.maxMs} ms | | | | |`,
    );
    lines.push(
      `| dispatcher, due → tenant send acknowledged (jobs of the dispatch steps ended by then, windows overlap; mean, max) | ${rr.dispatcher.meanMs} ms (mean) | | | ${rr.dispatcher.maxMs} ms | | | | ${rr.dispatcher.count} sent |`,
    );
    lines.push('', '| expression | schedules | expected | delivered | p95 |', '|---|---|---|---|---|');
    for (const [e, x] of Object.entries(rr.byExpression))
      lines.push(`| \`${e}\` | ${x.schedules} | ${x.expected} | ${x.delivered} | ${x.p95Ms} ms |`);
    const u = rr.perOccurrence.usage;
    const byService = r.costPerMillionUsd?.byService.recurring ?? {};
    const requests = Object.entries(rr.perOccurrence.requestsPerOccurrence)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ');
    lines.push(
      '',
      `Expected occurrences are computed apart from the server (cron: a minute-by-minute enumeration of what each zone's clocks show; rate: startAt + k × period); ${rr.unexpected} unexpected occurrence(s), ${rr.scheduleMismatches} schedule attribute/body mismatch(es); at most ${rr.maxDueAtOnce} occurrences due at the same millisecond. Schedule PUT p50 ${rr.createMs.p50Ms} ms, p99 ${rr.createMs.p99Ms} ms.`,
      '',
      `Per occurrence, measured on compute's clients less its idle polling (${rr.perOccurrence.occurrences} occurrences in ${Math.round(rr.perOccurrence.windowMs / 1000)} s; UpdateItem: acquires and watermark advances, the dispatcher's ${rr.perOccurrence.leaseWritesPerSecond} group-lease writes/s and its queries apart): ${requests}. On AWS: ${u.schedulerInvocations} EventBridge Scheduler invocation, ${u.sqsRequests} SQS requests (its SendMessage included), ${u.dynamodbWru} WRU, ${u.dynamodbRru} RRU, ${u.lambdaInvocations} ingest invocations (${u.lambdaGbSeconds} GB-s): ${usd(r.costPerMillionUsd?.recurring)} per million occurrences (${Object.entries(
        byService,
      )
        .filter(([, v]) => v > 0)
        .map(([k, v]) => `${k} $${v.toFixed(2)}`)
        .join(', ')}); polling apart, as for one-off jobs.`,
      '',
    );
  }

  if (r.history) {
    const h = r.history;
    const u = h.usagePerJob;
    lines.push(
      `## Job history (phase 10: ${h.jobs.toLocaleString('en-US')} jobs at ${h.ratePerSec} jobs/s, the Worker reporting each outcome)`,
      '',
      `Per job: ${h.reportRequestsPerJob} outcome reports (API requests and status-function invocations, ${h.handlerMsPerReport} ms each here), ${h.batchWriteRequestsPerJob} BatchWriteItem requests, ${h.recordWritesPerJob} outcome records of ${h.recordBytes} bytes (${h.recordWru} WRU each); ${h.reported} of ${h.jobs} outcomes stored. On AWS that adds ${u.dynamodbWru} WRU, ${u.apiRequests} API requests, ${u.lambdaInvocations} invocations (${u.lambdaGbSeconds} GB-s): +${usd(h.costPerMillionIncrementUsd)} per million jobs${r.costPerMillionUsd?.withHistory !== undefined ? `, ${usd(r.costPerMillionUsd.withHistory)} with ours` : ''}.`,
      '',
    );
  }

  if (r.workflows) {
    const w = r.workflows;
    const u = w.usagePerJob;
    lines.push(
      `## Workflows (phase 16: a fan-out of 1 → ${w.shapes.fanOut - 1}, a fan-in of ${w.shapes.fanIn - 1} → 1, a chain of ${w.shapes.chain}; ${w.jobs.toLocaleString('en-US')} jobs, the Worker reporting each outcome)`,
      '',
      `Child latency (the child's send, SQS's SentTimestamp, minus its last parent's report reaching the handler), ${w.children.toLocaleString('en-US')} children: p50 ${w.childLatencyP50Ms} ms, p95 ${w.childLatencyP95Ms} ms, p99 ${w.childLatencyP99Ms} ms, max ${w.childLatencyMaxMs} ms (by shape: ${Object.entries(
        w.byShape,
      )
        .map(([k, v]) => `${k} p50 ${v.p50Ms} / p95 ${v.p95Ms} ms`)
        .join(
          ', ',
        )}; received by the Worker: p50 ${w.childReceiveP50Ms} ms, p95 ${w.childReceiveP95Ms} ms; the emulators' floor for the fan-out, its specs read and its messages sent with nothing else running and nothing written: p50 ${w.fanOutFloor.p50Ms} ms, p95 ${w.fanOutFloor.p95Ms} ms); early ${w.early}, lost ${w.lost}, duplicates ${w.duplicates}. Per job, everything the system did for it (each job here due at once, so none took ours' path): ${u.dynamodbWru} WRU, ${u.dynamodbRru} RRU, ${u.sqsRequests} SQS requests, ${u.apiRequests} API requests and invocations (${u.lambdaGbSeconds} GB-s): ${usd(w.costPerMillionUsd)} per million jobs${r.costPerMillionUsd?.workflowJobDueLater !== undefined ? `; a job due later also takes ours' path: at most ${usd(r.costPerMillionUsd.workflowJobDueLater)}` : ''}.`,
      '',
    );
  }

  if (r.bulkCancel) {
    const b = r.bulkCancel;
    lines.push(
      `## Bulk cancel (phase 17: ${b.jobs.toLocaleString('en-US')} tagged jobs and ${b.untaggedJobs} untagged, cancelled by tag once stored)`,
      '',
      `Submitted and stored in ${b.storedSeconds} s; from the request until the operation was DONE with every tagged job counted: ${b.seconds} s. Matched ${b.matched}, cancelled ${b.cancelled}, already queued ${b.alreadyQueued}, not cancellable ${b.notCancellable}. At their due time, with the dispatchers running: ${b.delivered} tagged jobs delivered, ${b.untaggedDelivered} of the ${b.untaggedJobs} untagged ones.`,
      '',
    );
  }

  if (r.flowControl) {
    const f = r.flowControl;
    const h = f.handoff;
    const cpu = f.cpuShareWhileRunning;
    lines.push(
      `## Concurrency by key (phase 18: ${f.jobs.toLocaleString('en-US')} jobs due at once over ${f.keys} keys of limit ${f.keyLimit}, a worker with no cap of its own taking ${f.workMs} ms per job)`,
      '',
      `Delivered ${f.delivered.toLocaleString('en-US')} (lost ${f.lost}, early ${f.early}, duplicates ${f.duplicates}); at most ${f.maxConcurrentPerKey} runs of one key at once. All ran ${f.drainSeconds} s after their due time (the first ${f.firstStartMs} ms after it): ${f.jobsPerSec} jobs/s against the ideal ${f.idealJobsPerSec} (keys × limit ÷ work time), ratio ${f.throughputRatio}. A slot between two jobs of its key: the report answered ${h.report.p50Ms} ms after the work (p95 ${h.report.p95Ms}), the next take ${h.wait.p50Ms} ms after that (p95 ${h.wait.p95Ms}), the job received ${h.delivery.p50Ms} ms after its take (p95 ${h.delivery.p95Ms}). The dispatchers' takes: ${f.takes.granted.toLocaleString('en-US')} granted, ${f.takes.refused.toLocaleString('en-US')} refused, ${f.takes.evicted} holders evicted, ${f.takes.meanMs} ms each; ${f.reports.requests.toLocaleString('en-US')} outcome report requests (${f.reports.handlerMsMean} ms each, ${f.reports.failed} given up). While the jobs ran: ${f.requestsWhileRunning.dynamodbPerSec} DynamoDB requests/s (${f.requestsWhileRunning.dynamodbPerJob ?? '?'} per job delivered); CPU (share of one core) dynalite ${cpu.dynalite ?? '?'}, fauxqs ${cpu.fauxqs ?? '?'}, the bench's process ${cpu.bench}.${
        f.lostJobs.length > 0
          ? ` Lost at the timeout (${f.timeoutSeconds} s after the due time): ${f.lostJobs.map((j) => `${j.jobId} (${j.key}, ${j.state}${j.holdsSlot ? ', holding its slot' : ''})`).join(', ')}.`
          : ''
      }`,
      '',
    );
    const a = f.simulatedAws;
    if (a)
      lines.push(
        `On the simulated AWS deployment (bench/sim: one cell at its defaults, the real dispatch code against the simulated table's key items; a worker receiving each job ~20 ms after its send and freeing its slot ~45 ms after the work): ${a.finished.toLocaleString('en-US')} ran (lost ${a.lost}, early ${a.early}, duplicates ${a.duplicates}), at most ${a.maxConcurrentPerKey} of a key at once, the first ${a.firstStartMs} ms after the due time, all within ${a.drainMs} ms: ${a.jobsPerSec} jobs/s, ratio ${a.throughputRatio} (runs started per second: ${a.startsPerSec.join(', ')}). A slot between two jobs of its key: p50 ${a.handoff.p50Ms} ms, p95 ${a.handoff.p95Ms} ms from a run's end to the next run's start, against ${a.handoffFloorMs} ms at best (the report, the take and the renewal, the send, the receive: ratio ${a.ratioBound} at most). Key item requests: ${a.requests.take.toLocaleString('en-US')} takes (granted or refused), ${a.requests.release.toLocaleString('en-US')} releases, ${a.requests.evict} evictions; slots still held at the end: ${a.slotsHeldAtEnd}.`,
        '',
      );
  }

  if (r.tracing) {
    const tr = r.tracing;
    lines.push(
      '## Tracing (phase 20: the lateness load with no span, and with every span exported over OTLP/HTTP JSON to a receiver)',
      '',
      `${tr.tracedJobs} of ${tr.jobs} jobs of the traced runs have their \`dynein.dispatch\` span at the receiver; ${tr.spansPerJob} spans a job (${Object.entries(
        tr.spansByName,
      )
        .map(([k, v]) => `${k} ${v}`)
        .join(
          ', ',
        )}) in ${tr.exportRequests} requests (${tr.spansPerRequest} spans each). Lateness p95 ${tr.latenessP95Ms} ms traced (repeats ${tr.repeats.on.join(', ')}), ${tr.latenessP95MsOff} ms untraced (${tr.repeats.off.join(', ')}); early ${tr.early}, lost ${tr.lost}. Added cost per million jobs: $${tr.costPerMillionUsd.total} (${tr.costPerMillionUsd.note})`,
      '',
    );
  }

  if (r.debounce) {
    const d = r.debounce;
    const ops = Object.entries(d.dynamodbRequestsPerSubmit.byOperation)
      .map(([op, n]) => `${op} ${n}`)
      .join(', ');
    lines.push(
      `## Debounce (phase 19: ${d.keys.toLocaleString('en-US')} keys × ${d.submitsPerKey} submits in rounds through the batch route, periodSeconds ${d.periodSeconds})`,
      '',
      `${d.submits.toLocaleString('en-US')} submits accepted (${d.failed} failed${d.firstError ? `, the first: ${d.firstError}` : ''}) in ${d.seconds} s (${d.submitsPerSecond} submits/s; ${d.dynamodbRequestsPerSubmit.total} DynamoDB requests a submit: ${ops}); ${d.started.toLocaleString('en-US')} started a job, the others replaced their key's pending one; the largest gap between two submits of a key ${d.maxGapSeconds} s. The replies named ${d.jobs.toLocaleString('en-US')} jobs (${d.splitKeys} keys delivered before their last submit, each then starting a new job). Delivered: ${d.deliveries.toLocaleString('en-US')} messages (target ${d.keys.toLocaleString('en-US')}), ${d.lastPayload.toLocaleString('en-US')} with their key's last payload, ${d.duplicates} duplicates, ${d.undelivered} jobs undelivered ${d.timeoutSeconds} s after the last one's due time, ${d.early} early; received after the job's last runAt p50 ${d.latenessMs.p50Ms} ms, p95 ${d.latenessMs.p95Ms} ms, max ${d.latenessMs.maxMs} ms.`,
      '',
    );
  }

  if (r.idle) {
    const i = r.idle;
    const calls = Object.entries(i.requestsPerMinute)
      .map(([op, n]) => `${op} ${n}`)
      .join(', ');
    const services = Object.entries(i.byServiceUsd)
      .map(([k, v]) => `${k} ${usd(v)}`)
      .join(', ');
    lines.push(
      `## Idle (phase 21: the local stack left alone with 2 tenants, a schedule 6 h away and ${i.rows.toLocaleString('en-US')} jobs due next week)`,
      '',
      `Its groups asleep ${i.settleS} s after the last job was stored; then, over ${i.windowS} s: ${i.executions} tick executions (${i.executionsAsleep} planned no dispatcher); calls a minute: ${calls || 'none'}. As a month at list prices: **${usd(i.monthlyUsd)}** (target ≤ $1.00; ${services}). Not included: the job id secret, alarms and dashboard (docs/constructs.md, "Idle cost").`,
      '',
    );
    const wake = (w: NonNullable<typeof i.wake>) =>
      `p50 ${w.p50Ms} ms, p95 ${w.p95Ms} ms, p99 ${w.p99Ms} ms, max ${w.maxMs} ms; early ${w.early}, lost ${w.lost}` +
      (w.byPath && w.byPath.direct.jobs > 0
        ? ` (the ${w.byPath.table.jobs} through the table: p50 ${w.byPath.table.p50Ms} ms, p95 ${w.byPath.table.p95Ms} ms, max ${w.byPath.table.maxMs} ms; the ${w.byPath.direct.jobs} due within the lookahead, sent straight to the queue with SQS's whole-second delay rounded up: p50 ${w.byPath.direct.p50Ms} ms, p95 ${w.byPath.direct.p95Ms} ms, max ${w.byPath.direct.maxMs} ms)`
        : '');
    if (i.wake)
      lines.push(
        `Wake: ${i.wake.jobs} jobs submitted at once into the sleeping deployment, due 1 to 30 s ahead, received after their runAt ${wake(i.wake)} (targets: p95 ≤ 100 ms, early 0, lost 0).${i.wakeFar ? ` ${i.wakeFar.jobs} due ${i.wakeFar.aheadMinutes} minutes after their submit (the deployment asleep again meanwhile): ${wake(i.wakeFar)}.` : ''}`,
        '',
      );
  }

  if (r.noisyNeighbour || r.pause || r.rateLimit) {
    lines.push(
      '## Tenant controls (local stack, controls through the operator API and a 5 s cache)',
      '',
      '| phase | figures | lost / early / duplicates |',
      '|---|---|---|',
    );
    const nn = r.noisyNeighbour;
    if (nn) {
      const a = nn.flooded.a;
      lines.push(
        `| noisy neighbour: B ${nn.shape.quiet.rate} jobs/s for ${nn.shape.quiet.durationMs / 1000} s, alone, then with A's ${nn.shape.floodJobs.toLocaleString('en-US')} jobs (submitted before) falling due in the same ${nn.shape.windowMs / 1000} s at ${nn.shape.floodPerSec} jobs/s: 1.5× what dispatch sent of ${nn.dispatchRate.jobs.toLocaleString('en-US')} jobs due at once (${nn.dispatchRate.sentPerSec} jobs/s) | B lateness p95 ${nn.quietP95Ms} ms alone, ${nn.floodedP95Ms} ms flooded: ratio ${nn.ratio} (target ≤ 2.0); at the dispatcher (SentTimestamp) ${nn.sent.quietP95Ms} → ${nn.sent.floodedP95Ms} ms${a ? `; A ${a.delivered.toLocaleString('en-US')} jobs sent at ${a.deliveredPerSec} jobs/s (due ${nn.saturation}× faster), p95 ${a.lateness.p95Ms} ms` : ''}; inbound backlog at most ${nn.flooded.ingestBacklogMax}; load average ${nn.flooded.loadAvg.before[0]} → ${nn.flooded.loadAvg.after[0]} | ${nn.lost} / ${nn.early} / ${nn.duplicates} |`,
      );
    }
    const pz = r.pause;
    if (pz)
      lines.push(
        `| pause: ${pz.accepted.toLocaleString('en-US')} jobs due while paused | held ${pz.held.toLocaleString('en-US')}, ${pz.deliveredWhilePaused} delivered while paused; after resume ${pz.delivered.toLocaleString('en-US')} delivered, first after ${pz.firstDeliveryMs} ms, all after ${pz.drainMs} ms (${pz.drainPerSec} jobs/s) | ${pz.lost} / ${pz.early} / ${pz.duplicates} |`,
      );
    const rl = r.rateLimit;
    if (rl)
      lines.push(
        `| rate limit: ${rl.offered.toLocaleString('en-US')} jobs due at once, maxDeliveriesPerSecond ${rl.limitPerSec} | ${rl.observedPerSec} jobs/s over ${(rl.spanMs / 1000).toFixed(1)} s (${rl.clock}), at most ${rl.maxIn1s} in any 1-s window | ${rl.lost} / ${rl.early} / ${rl.duplicates} |`,
      );
    lines.push('');
  }

  const f = r.faults;
  if (f) {
    const injected = Object.entries(f.injected)
      .map(([k, n]) => `${k} ${n}`)
      .join(', ');
    lines.push(
      `## Under AWS faults (local stack, DYNEIN_FAULTS=dynamodb=${f.faultRate},sqs=${f.faultRate})`,
      '',
      `${f.submit.offered.toLocaleString('en-US')} one-off jobs offered by a client that retries with idempotency keys (${f.submit.accepted.toLocaleString('en-US')} accepted, ${f.submit.direct} straight to the queue, ${f.submit.refused} refused; ${f.submit.retries} of ${f.submit.requests} requests were retries), ${f.cancels.requested} cancels (${f.cancels.confirmed} CANCELLED, ${f.cancels.tooLate} too late, ${f.cancels.unresolved} unresolved), tenant '${f.pause.tenant}' paused for ${(f.pause.pausedForMs / 1000).toFixed(0)} s (${f.pause.acceptedWhilePaused} of its jobs accepted meanwhile), a ${f.recurring.expression} schedule (${f.recurring.delivered} of ${f.recurring.expected} occurrences). ${f.injectedTotal.toLocaleString('en-US')} faults injected into compute's calls${injected ? ` (${injected})` : ''}.`,
      '',
      '| lost | early | cancelled delivered | paused delivered | duplicates | untruthful status | lateness p50 / p95 / max |',
      '|---|---|---|---|---|---|---|',
      `| ${f.lost} | ${f.early} | ${f.cancelledDelivered} | ${f.pausedDelivered} | ${(f.duplicates * 100).toFixed(2)} % | ${f.status.untruthful} of ${f.status.samples} | ${f.lateness.p50Ms} / ${f.lateness.p95Ms} / ${f.lateness.maxMs} ms |`,
      '',
    );
    if (f.duplicateDeliveries > 0)
      lines.push(
        `Between the two sends of a duplicate (SentTimestamp): p50 ${f.duplicateSendGapMs.p50Ms} ms, max ${f.duplicateSendGapMs.maxMs} ms (within a second or so: the SDK retried a send that had been applied; about a lease: a row re-sent after its delivered marker could not be written). The ${f.duplicateDeliveries} extra deliveries came from ${f.duplicateSends} send(s), against ${f.sqsAppliedThenFailed} SQS attempts that failed after SQS had applied them: one such SendMessageBatch duplicates all of its entries (up to 10), so the share varies widely from run to run around its expected ≈ 0.5 % at 5 % faults (docs/performance.md).`,
        '',
      );
    if (f.status.examples.length > 0) lines.push(`Untruthful status answers: ${f.status.examples.join('; ')}.`, '');
    if (f.lost > 0)
      lines.push(
        `Lost jobs by tenant, path and the state GET answered at the end: ${Object.entries(f.lostByState)
          .map(([k, n]) => `${k} ${n}`)
          .join(', ')}${f.recurring.lost ? `; occurrences ${f.recurring.lost}` : ''}. For example ${f.lostExamples.join('; ')}.`,
        '',
      );
  }

  const cpu = r.capacity?.cpuUsPerJob;
  if (cpu) {
    lines.push(
      '## CPU per job per stage (measured here, each stage alone in process; docs/capacity.md)',
      '',
      '| stage | CPU per job |',
      '|---|---|',
      `| submit (API, batch requests of 100) | ${cpu.submitBatch} µs |`,
      `| submit (API, single POSTs) | ${cpu.submitSingle} µs |`,
      `| ingest (10 inbound messages per invocation) | ${cpu.ingest} µs |`,
      `| tick (one execution's plan) | ${cpu.planPerExecution} µs per execution (${cpu.planAt1kPerSec} µs per job at 1,000 jobs/s) |`,
      `| acquire (the conditional UpdateItem alone) | ${cpu.acquire} µs |`,
      `| dispatch round (read, acquire, send, marker) | ${cpu.dispatch} µs (release and reads: ${cpu.release} µs) |`,
      '',
    );
  }

  if (r.capacity?.basis && r.capacity.asBuilt && r.capacity.compressedPayload) {
    lines.push(
      `## Capacity model on AWS (steady batch-submitted 1 KB jobs; dispatch CPU ${r.capacity.basis.dispatchCpuUsPerJob} µs per job measured here)`,
      '',
    );
    lines.push(
      '| jobs/s | table WRU/s | shards | dispatch groups | Lambda concurrency (submit / ingest / dispatch) | $ a month | $ per million | to change |',
      '|---|---|---|---|---|---|---|---|',
    );
    for (const [label, rows] of [
      ['as built', r.capacity.asBuilt],
      ['payload as plain text', r.capacity.compressedPayload],
    ] as const) {
      for (const c of rows) {
        lines.push(
          `| ${c.jobsPerSec.toLocaleString('en-US')} (${label}) | ${c.tableWruPerSec.toLocaleString('en-US')} | ${c.shardsNeeded} | ${c.groupsNeeded}${c.withinGroupCap ? '' : ' (> 40)'} | ${c.lambdaConcurrency.submit} / ${c.lambdaConcurrency.ingest} / ${c.lambdaConcurrency.dispatch} | $${c.monthlyUsd.toLocaleString('en-US')} | ${usd(c.perMillionUsd)} | ${c.notes.join('; ') || '–'} |`,
        );
      }
    }
    lines.push('');
  }

  if (r.scaleSimulation) {
    lines.push(
      '## Scale simulation (virtual time; the real plan, dispatch loop, acquirer and releaser on a simulated AWS deployment: docs/capacity.md "Simulation")',
      '',
      '| cells | groups / shards | sustained jobs/s | p95 lateness | stopped by | table write quota | runs |',
      '|---|---|---|---|---|---|---|',
    );
    const rows = [...r.scaleSimulation, ...(r.scaleSimulationAtDefaultQuota ? [r.scaleSimulationAtDefaultQuota] : [])];
    for (const x of rows)
      lines.push(
        `| ${x.cells} | ${CELL.groups * x.cells} / ${CELL.shards * x.cells} | ${x.jobsPerSec.toLocaleString('en-US')} | ${x.p95Ms} ms | ${x.binding}${x.failedAt ? ` (at ${x.failedAt.toLocaleString('en-US')} jobs/s)` : ''} | ${x.tableWruQuota.toLocaleString('en-US')} WRU/s | ${x.runs} |`,
      );
    const v = r.simulationValidation;
    if (v)
      lines.push(
        '',
        `Validation at the local stack's settings: dispatch burst ${v.dispatchJobsPerSec.simulated} jobs/s simulated vs ${v.dispatchJobsPerSec.measured} measured (${v.dispatchJobsPerSec.errorPct} %); steady-load lateness p95 ${v.latenessP95Ms.simulated} ms vs ${v.latenessP95Ms.measured} ms (${v.latenessP95Ms.errorPct} %); measured figures from ${v.measuredFrom}.`,
      );
    lines.push('');
  }

  if (r.bundles) {
    lines.push(
      '## Lambda bundles (esbuild, the CDK options)',
      '',
      '| function | bundle | import in a fresh process (median) |',
      '|---|---|---|',
    );
    for (const [name, b] of Object.entries(r.bundles)) lines.push(`| ${name} | ${(b.bytes / 1024).toFixed(1)} KiB | ${b.loadMs} ms |`);
    lines.push('');
  }
  if (r.notes.length > 0) {
    lines.push('## Notes', '');
    for (const n of r.notes) lines.push(`- ${n}`);
    lines.push('');
  }
  return lines.join('\n');
}
