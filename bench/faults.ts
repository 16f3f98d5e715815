/**
 * Phase 15: the local stack under AWS faults. `npm start` with `DYNEIN_FAULTS` set so that a
 * share (5 % in every mode) of every DynamoDB and SQS call of every process fails as AWS's calls
 * fail (throttles, 500s, timeouts and resets, the last three half the time after the emulator
 * applied the request: local/faults.ts). Through it, as a careful client would (idempotency key
 * per job, 5xx and network errors retried: test/support/retrying.ts):
 *
 * - one-off jobs of two tenants, submitted in batches of 50 over `submitMs`: one in ten due
 *   within the lookahead (sent straight to the queue), the rest through the table;
 * - cancels of a share of the first tenant's table jobs, well before their cut-off;
 * - a pause of the second tenant a quarter into the run, and its resume `pauseMs` later;
 * - a recurring schedule (`rate(1 minute)`) on the first tenant;
 * - status reads (`GET` of a random accepted job) throughout.
 *
 * Every delivered message is checked: `lost` (accepted, not cancelled, never delivered),
 * `early` (received before its runAt, by either clock), `cancelledDelivered` (a cancel answered
 * CANCELLED and the job arrived anyway), `pausedDelivered` (a message of the paused tenant that
 * SQS accepted while the pause was in force: from the pause's answer plus the controls cache's
 * 5 s staleness bound to the resume call), `duplicates` (deliveries beyond the first, as a share
 * of jobs delivered). A status answer is untruthful when `QUEUED` was answered for a job SQS had
 * not accepted by then (SentTimestamp), or `CANCELLED` for one that was delivered.
 */
import { randomUUID } from 'node:crypto';
import { type SQSClient } from '@aws-sdk/client-sqs';
import { CONTROLS_TTL_MS } from '../core/tenants/controls.js';
import { QUEUE_SETTINGS } from '../core/model/schema.js';
import { startLocalStack, type LocalJson, localSqs } from '../test/support/localStack.js';
import { signedRetrying, submitKeyed, type KeyedJob } from '../test/support/retrying.js';
import { consumeQueue, load, progress, realisticPayload, sleep, summarize, type Received, type Summary } from './support.js';

export interface FaultsShape {
  /** Share of every DynamoDB and SQS call that fails. */
  readonly faultRate: number;
  /** One-off jobs, over both tenants. */
  readonly jobs: number;
  /** Submits are spread over this long. */
  readonly submitMs: number;
  /** Share of the first tenant's jobs cancelled (due later than the others, cancelled as soon as accepted). */
  readonly cancelShare: number;
  /** How long the second tenant stays paused (from a quarter into the submits). */
  readonly pauseMs: number;
  /** Status reads during the run. */
  readonly statusSamples: number;
}

export interface FaultsResult {
  faultRate: number;
  /** One-off jobs accepted (both tenants) plus the schedule's occurrences due in the run. */
  jobs: number;
  lost: number;
  /** The lost one-off jobs by tenant, path and the state `GET` answers for them at the end. */
  lostByState: Record<string, number>;
  lostExamples: string[];
  early: number;
  cancelledDelivered: number;
  pausedDelivered: number;
  /** Deliveries beyond the first, ÷ jobs delivered. */
  duplicates: number;
  duplicateDeliveries: number;
  /**
   * Between a duplicate's two sends (SQS SentTimestamp): within a second or so, the SDK retried a
   * send that had been applied (a timeout or reset after it); about a lease later, a row sent whose
   * delivered marker could not be written was sent again once its lease ran out.
   */
  duplicateSendGapMs: Summary;
  /**
   * The sends the duplicates came from: extra copies grouped by tenant and the SentTimestamp of
   * the earlier copy (one `SendMessageBatch` applied, then failed, then retried gives all of its
   * entries the same pair of timestamps).
   */
  duplicateSends: number;
  /**
   * SQS attempts of compute that failed after SQS had applied them (timeouts and resets, `after`;
   * every operation, receives and deletes too): each makes at most one duplicated send (a
   * tenant-queue send retried; an inbound send's copy is absorbed by ingest's conditional put).
   * `duplicateSends` above this would mean jobs sent again by something other than a retry of an
   * applied attempt.
   */
  sqsAppliedThenFailed: number;
  submit: { offered: number; accepted: number; refused: number; direct: number; requests: number; retries: number; firstRefusal?: string };
  cancels: { requested: number; confirmed: number; tooLate: number; unresolved: number };
  pause: {
    tenant: string;
    pausedForMs: number;
    /** Its jobs accepted while it was paused, and of those the ones submit sent straight to the queue. */
    acceptedWhilePaused: number;
    directWhilePaused: number;
    /** Messages of the paused tenant SQS accepted while the pause was in force. */
    deliveredWhilePaused: number;
  };
  recurring: { expression: string; expected: number; delivered: number; lost: number; early: number; duplicates: number };
  status: { samples: number; untruthful: number; queuedNotSent: number; cancelledButDelivered: number; examples: string[] };
  /** Deliveries of job ids this run never had accepted (a submit answered an error but the job was made): not lost, reported. */
  unknownDelivered: number;
  /** Faults injected into compute's calls (local/faults.ts's counts by service.kind[.after]). */
  injected: Record<string, number>;
  injectedTotal: number;
  /** Receive time − runAt of the one-off jobs' first deliveries. */
  lateness: Summary;
  durationMs: number;
  loadAvg: { before: [number, number, number]; after: [number, number, number] };
}

const MAIN = 'steady';
const PAUSED = 'pausable';
const BATCH = 50;
const DIRECT_SHARE = 0.1;
/** Table jobs fall due this long after their batch is sent, plus up to `spreadMs`. */
const TABLE_AHEAD_MS = 8_000;
/** The jobs to be cancelled fall due this long after their batch is sent, plus up to `spreadMs`. */
const CANCEL_AHEAD_MS = 30_000;
/** Only jobs due this long after they were accepted are cancelled (the cut-off is 5 s before runAt). */
const CANCEL_LEAD_MS = 11_000;

interface Job {
  readonly tenant: string;
  readonly runAtMs: number;
  readonly acceptedAt: number;
  readonly state: string;
}

/** Phase 15: see the module comment. */
export async function runFaults(shape: FaultsShape): Promise<FaultsResult> {
  const faults = `dynamodb=${shape.faultRate},sqs=${shape.faultRate}`;
  progress(`faults: starting the local stack with DYNEIN_FAULTS=${faults} (tenants ${MAIN}, ${PAUSED})`);
  const stack = await startLocalStack({ DYNEIN_TENANTS: `${MAIN},${PAUSED}`, DYNEIN_FAULTS: faults });
  try {
    const local = await stack.waitForLocalJson((l) => l.admin !== undefined && !!l.tenants[MAIN] && !!l.tenants[PAUSED], 90_000);
    const sqs = localSqs(local);
    try {
      await sleep(2_000); // the first tick execution has started with compute
      return await run(local, sqs, shape);
    } finally {
      sqs.destroy();
    }
  } catch (err) {
    console.error(stack.output().slice(-4_000));
    throw err;
  } finally {
    await stack.stop();
  }
}

async function run(local: LocalJson, sqs: SQSClient, shape: FaultsShape): Promise<FaultsResult> {
  const loadBefore = load();
  const t0 = Date.now();
  const consumers = {
    [MAIN]: consumeQueue(sqs, local.tenants[MAIN]!.queueUrl),
    [PAUSED]: consumeQueue(sqs, local.tenants[PAUSED]!.queueUrl),
  };
  const jobs = new Map<string, Job>();
  const payloads = Array.from({ length: 50 }, (_, i) => realisticPayload(i, 256));
  const submit: FaultsResult['submit'] = { offered: 0, accepted: 0, refused: 0, direct: 0, requests: 0, retries: 0 };
  const cancels: FaultsResult['cancels'] = { requested: 0, confirmed: 0, tooLate: 0, unresolved: 0 };
  const cancelled = new Set<string>();
  const cancelUnresolved = new Set<string>();
  const pending = new Set<Promise<void>>();
  const track = (p: Promise<void>) => {
    const q = p.finally(() => pending.delete(q));
    pending.add(q);
  };
  const spreadMs = Math.max(10_000, Math.round(shape.submitMs / 2));

  // The recurring schedule: rate(1 minute) from a whole second 10 s ahead.
  const scheduleName = `faults-${randomUUID().slice(0, 8)}`;
  const startAtMs = Math.ceil((Date.now() + 10_000) / 1_000) * 1_000;
  const put = await signedRetrying(
    local.endpoint,
    local.tenants[MAIN]!,
    'PUT',
    `/v1/tenants/${MAIN}/schedules/${scheduleName}`,
    JSON.stringify({ expression: 'rate(1 minute)', startAt: new Date(startAtMs).toISOString(), payload: { bench: 'faults' } }),
  );
  if (put.status !== 201 && put.status !== 200) throw new Error(`schedule PUT answered ${put.status}: ${JSON.stringify(put.json)}`);

  // The pause window: from a quarter into the submits, for pauseMs.
  const pause = { requestedAt: 0, answeredAt: 0, resumeAt: 0 };
  const pauser = (async () => {
    await sleep(t0 + shape.submitMs / 4 - Date.now());
    pause.requestedAt = Date.now();
    const p = await signedRetrying(local.endpoint, local.admin!, 'POST', `/v1/admin/tenants/${PAUSED}/pause`);
    if (p.status !== 200) throw new Error(`pause answered ${p.status}: ${JSON.stringify(p.json)}`);
    pause.answeredAt = Date.now();
    progress(`faults: tenant '${PAUSED}' paused (${p.attempts} attempt(s)); resuming in ${shape.pauseMs / 1000} s`);
    await sleep(pause.answeredAt + shape.pauseMs - Date.now());
    pause.resumeAt = Date.now();
    const r = await signedRetrying(local.endpoint, local.admin!, 'POST', `/v1/admin/tenants/${PAUSED}/resume`);
    if (r.status !== 200) throw new Error(`resume answered ${r.status}: ${JSON.stringify(r.json)}`);
    progress(`faults: tenant '${PAUSED}' resumed (${r.attempts} attempt(s))`);
  })();
  const paused = (at: number) => pause.requestedAt > 0 && at >= pause.requestedAt && (pause.resumeAt === 0 || at < pause.resumeAt);

  // Status reads through the run: a random accepted job each time.
  const samples: { jobId: string; tenant: string; state: string; at: number }[] = [];
  let sampling = true;
  const sampler = (async () => {
    const every = Math.max(50, Math.round((shape.submitMs + spreadMs) / shape.statusSamples));
    const reads = new Set<Promise<void>>();
    while (sampling) {
      await sleep(every);
      const ids = [...jobs.keys()];
      if (ids.length === 0 || reads.size >= 4) continue;
      const jobId = ids[Math.floor(Math.random() * ids.length)]!;
      const { tenant } = jobs.get(jobId)!;
      const read = signedRetrying(local.endpoint, local.tenants[tenant]!, 'GET', `/v1/tenants/${tenant}/jobs/${jobId}`)
        .then((r) => {
          // The answer's time: a state is true of the moment it was answered (or later).
          if (r.status === 200) samples.push({ jobId, tenant, state: r.json.state as string, at: Date.now() });
        })
        .catch(() => undefined)
        .finally(() => reads.delete(read));
      reads.add(read);
    }
    await Promise.all([...reads]);
  })();

  const cancel = async (jobId: string) => {
    cancels.requested++;
    const r = await signedRetrying(local.endpoint, local.tenants[MAIN]!, 'DELETE', `/v1/tenants/${MAIN}/jobs/${jobId}`).catch(
      () => undefined,
    );
    if (r?.status === 200 && r.json.state === 'CANCELLED') {
      cancels.confirmed++;
      cancelled.add(jobId);
    } else if (r?.status === 409) cancels.tooLate++;
    else {
      cancels.unresolved++;
      cancelUnresolved.add(jobId);
    }
  };

  const submitBatch = async (tenant: string, k: number) => {
    const sentAt = Date.now();
    // One in ten due within the lookahead; of the first tenant's, cancelShare due later, to be cancelled.
    const targets = new Set<number>();
    const batch: KeyedJob[] = Array.from({ length: BATCH }, (_, i) => {
      const roll = Math.random();
      const target = tenant === MAIN && roll >= DIRECT_SHARE && roll < DIRECT_SHARE + shape.cancelShare;
      if (target) targets.add(i);
      const aheadMs =
        roll < DIRECT_SHARE
          ? 1_000 + Math.floor(Math.random() * 2_000)
          : (target ? CANCEL_AHEAD_MS : TABLE_AHEAD_MS) + Math.floor(Math.random() * spreadMs);
      return { key: `faults-${tenant}-${k}-${i}`, payload: payloads[(k + i) % payloads.length], runAtMs: sentAt + aheadMs };
    });
    submit.offered += batch.length;
    const out = await submitKeyed(local, tenant, batch);
    const acceptedAt = Date.now();
    submit.requests += 1 + out.retries;
    submit.retries += out.retries;
    submit.refused += out.refused.length;
    if (out.refused[0]) submit.firstRefusal ??= `${out.refused[0].code}: ${out.refused[0].message}`;
    for (const a of out.accepted) {
      const runAtMs = batch[a.index]!.runAtMs;
      jobs.set(a.jobId, { tenant, runAtMs, acceptedAt, state: a.state });
      submit.accepted++;
      if (a.state !== 'SCHEDULED') submit.direct++;
      // Cancelled only well before the cut-off (5 s before runAt), so that CANCELLED is the answer to expect.
      if (targets.has(a.index) && a.state === 'SCHEDULED' && runAtMs - acceptedAt >= CANCEL_LEAD_MS) track(cancel(a.jobId));
    }
  };

  // The submits: batches alternating between the tenants, at an even pace, up to 4 requests at once.
  const batches = Math.ceil(shape.jobs / BATCH);
  progress(
    `faults: ${batches} batches of ${BATCH} over ${shape.submitMs / 1000} s (two tenants; ${DIRECT_SHARE * 100} % direct, the rest due ${TABLE_AHEAD_MS / 1000}–${(TABLE_AHEAD_MS + spreadMs) / 1000} s ahead), ${shape.cancelShare * 100} % of ${MAIN}'s cancelled, ${PAUSED} paused for ${shape.pauseMs / 1000} s, schedule ${scheduleName} rate(1 minute)`,
  );
  for (let k = 0; k < batches; k++) {
    await sleep(t0 + (k * shape.submitMs) / batches - Date.now());
    while (pending.size >= 8) await Promise.race(pending);
    track(submitBatch(k % 2 === 0 ? MAIN : PAUSED, k));
  }
  while (pending.size > 0) await Promise.all([...pending]);
  await pauser;
  progress(
    `faults: ${submit.accepted}/${submit.offered} accepted (${submit.retries} retried requests, ${submit.refused} refused), ${cancels.confirmed} cancelled; waiting for deliveries`,
  );

  // Wait for every job that should arrive (and the schedule's occurrences due by then).
  const lastDue = Math.max(...[...jobs.values()].map((j) => j.runAtMs));
  const expectedOccurrences: number[] = [];
  for (let t = startAtMs; t <= lastDue; t += 60_000) expectedOccurrences.push(t);
  const shouldArrive = [...jobs.keys()].filter((id) => !cancelled.has(id) && !cancelUnresolved.has(id));
  const received = () => [...consumers[MAIN].received, ...consumers[PAUSED].received];
  // An inbound message whose ingest failed comes back after the inbound queue's visibility
  // timeout (6 × ingest's timeout, as Lambda advises): late, not lost. Wait that out too.
  const until = lastDue + QUEUE_SETTINGS.inbound.visibilityTimeoutSeconds * 1_000 + 60_000;
  for (;;) {
    const got = new Set(received().map((r) => r.jobId));
    const occ = new Set(consumers[MAIN].received.filter((r) => r.schedule !== undefined).map((r) => r.runAtMs));
    if (shouldArrive.every((id) => got.has(id)) && expectedOccurrences.every((t) => occ.has(t))) break;
    if (Date.now() > until) {
      progress('faults: not everything arrived in time; counting what did');
      break;
    }
    await sleep(500);
  }
  await sleep(Math.max(3_000, lastDue + 6_000 - Date.now())); // a cancelled job or a duplicate arriving late
  sampling = false;
  await sampler;
  const metrics = (await (await fetch(new URL('/local/metrics', local.endpoint))).json()) as { faults?: Record<string, number> };
  await Promise.all([consumers[MAIN].stop(), consumers[PAUSED].stop()]);
  // What the API says of each job that did not arrive (where it is stuck, or that it was dead-lettered).
  const arrived = new Set(received().map((r) => r.jobId));
  const missing = shouldArrive.filter((id) => !arrived.has(id));
  const lostStates: Record<string, number> = {};
  const lostExamples: string[] = [];
  for (const jobId of missing) {
    const j = jobs.get(jobId)!;
    const g = await signedRetrying(local.endpoint, local.tenants[j.tenant]!, 'GET', `/v1/tenants/${j.tenant}/jobs/${jobId}`).catch(
      (e: Error) => ({ status: 0, json: { state: e.message } }),
    );
    const state = `${j.tenant} ${j.state === 'SCHEDULED' ? 'table' : 'direct'} ${g.status === 200 ? g.json.state : `HTTP ${g.status}`}`;
    lostStates[state] = (lostStates[state] ?? 0) + 1;
    if (lostExamples.length < 5)
      lostExamples.push(`${jobId} (${state}, runAt ${new Date(j.runAtMs).toISOString()}): ${JSON.stringify(g.json).slice(0, 200)}`);
  }
  return tallyRun({ jobs, received: received(), cancelled, cancelUnresolved, samples, pause, expectedOccurrences, paused });

  function tallyRun(x: {
    jobs: Map<string, Job>;
    received: Received[];
    cancelled: Set<string>;
    cancelUnresolved: Set<string>;
    samples: typeof samples;
    pause: typeof pause;
    expectedOccurrences: number[];
    paused: (at: number) => boolean;
  }): FaultsResult {
    const first = new Map<string, Received>();
    const gaps: number[] = [];
    const dupSends = new Map<string, number[]>();
    let duplicateDeliveries = 0;
    let unknownDelivered = 0;
    let early = 0;
    for (const r of x.received) {
      if (r.schedule !== undefined) continue;
      const job = x.jobs.get(r.jobId);
      if (!job) {
        unknownDelivered++;
        continue;
      }
      if (first.has(r.jobId)) {
        duplicateDeliveries++;
        if (r.sentAt > 0 && first.get(r.jobId)!.sentAt > 0) gaps.push(Math.abs(r.sentAt - first.get(r.jobId)!.sentAt));
        const times = dupSends.get(job.tenant) ?? [];
        times.push(Math.min(r.sentAt, first.get(r.jobId)!.sentAt));
        dupSends.set(job.tenant, times);
      } else first.set(r.jobId, r);
      if (r.receivedAt < job.runAtMs || r.firstReceiveAt < job.runAtMs) early++;
    }
    const lost = [...x.jobs.keys()].filter((id) => !x.cancelled.has(id) && !x.cancelUnresolved.has(id) && !first.has(id)).length;
    const cancelledDelivered = [...x.cancelled].filter((id) => first.has(id)).length;
    // In force from the pause's answer plus the cache's staleness bound, to the resume call.
    const inForceFrom = x.pause.answeredAt + CONTROLS_TTL_MS;
    const pausedDelivered = x.received.filter(
      (r) => x.jobs.get(r.jobId)?.tenant === PAUSED && r.sentAt >= inForceFrom && r.sentAt < x.pause.resumeAt,
    ).length;
    const pausedJobs = [...x.jobs.values()].filter((j) => j.tenant === PAUSED && x.paused(j.acceptedAt));
    // The occurrences: one delivery per expected runAt, none early, none twice.
    const window = x.expectedOccurrences.at(-1) ?? 0;
    const occ = x.received.filter((r) => r.schedule !== undefined && r.runAtMs <= window);
    const byRunAt = new Map<number, number>();
    for (const r of occ) byRunAt.set(r.runAtMs, (byRunAt.get(r.runAtMs) ?? 0) + 1);
    const occLost = x.expectedOccurrences.filter((t) => !byRunAt.has(t)).length;
    const occEarly = occ.filter((r) => r.receivedAt < r.runAtMs || r.firstReceiveAt < r.runAtMs).length;
    const occDup = [...byRunAt.values()].reduce((n, c) => n + c - 1, 0);
    // Status answers against what happened.
    const firstSent = new Map<string, number>();
    for (const r of x.received) if (r.sentAt > 0 && !(firstSent.get(r.jobId)! <= r.sentAt)) firstSent.set(r.jobId, r.sentAt);
    const examples: string[] = [];
    let queuedNotSent = 0;
    let cancelledButDelivered = 0;
    for (const s of x.samples) {
      const sent = firstSent.get(s.jobId);
      if (s.state === 'QUEUED' && (sent === undefined || sent > s.at)) {
        queuedNotSent++;
        if (examples.length < 5)
          examples.push(`${s.jobId} QUEUED at ${new Date(s.at).toISOString()}, ${sent ? `sent ${sent - s.at} ms later` : 'never sent'}`);
      }
      if (s.state === 'CANCELLED' && first.has(s.jobId)) {
        cancelledButDelivered++;
        if (examples.length < 5) examples.push(`${s.jobId} CANCELLED at ${new Date(s.at).toISOString()}, delivered`);
      }
    }
    const delivered = first.size + byRunAt.size;
    const injected = metrics.faults ?? {};
    // Entries of one batch get SentTimestamps a few ms apart at most: one send per cluster.
    const duplicateSends = [...dupSends.values()].reduce((n, times) => {
      times.sort((a, b) => a - b);
      return n + times.filter((t, i) => i === 0 || t - times[i - 1]! > 5).length;
    }, 0);
    const result: FaultsResult = {
      faultRate: shape.faultRate,
      jobs: x.jobs.size + x.expectedOccurrences.length,
      lost: lost + occLost,
      lostByState: lostStates,
      lostExamples,
      early: early + occEarly,
      cancelledDelivered,
      pausedDelivered,
      duplicates: delivered > 0 ? +((duplicateDeliveries + occDup) / delivered).toFixed(4) : 0,
      duplicateDeliveries: duplicateDeliveries + occDup,
      duplicateSendGapMs: summarize(gaps),
      duplicateSends,
      sqsAppliedThenFailed: (injected['sqs.timeout.after'] ?? 0) + (injected['sqs.reset.after'] ?? 0),
      submit,
      cancels,
      pause: {
        tenant: PAUSED,
        pausedForMs: x.pause.resumeAt - x.pause.answeredAt,
        acceptedWhilePaused: pausedJobs.length,
        directWhilePaused: pausedJobs.filter((j) => j.state !== 'SCHEDULED').length,
        deliveredWhilePaused: pausedDelivered,
      },
      recurring: {
        expression: 'rate(1 minute)',
        expected: x.expectedOccurrences.length,
        delivered: byRunAt.size,
        lost: occLost,
        early: occEarly,
        duplicates: occDup,
      },
      status: {
        samples: x.samples.length,
        untruthful: queuedNotSent + cancelledButDelivered,
        queuedNotSent,
        cancelledButDelivered,
        examples,
      },
      unknownDelivered,
      injected,
      injectedTotal: Object.values(injected).reduce((a, b) => a + b, 0),
      lateness: summarize([...first].map(([id, r]) => r.receivedAt - x.jobs.get(id)!.runAtMs)),
      durationMs: Date.now() - t0,
      loadAvg: { before: loadBefore, after: load() },
    };
    progress(
      `faults: ${result.jobs} jobs, lost ${result.lost}, early ${result.early}, cancelledDelivered ${cancelledDelivered}, pausedDelivered ${pausedDelivered} (${result.pause.directWhilePaused} of ${result.pause.acceptedWhilePaused} accepted while paused went straight to the queue), duplicates ${(result.duplicates * 100).toFixed(2)} %, status ${result.status.untruthful} untruthful of ${result.status.samples}; ${result.injectedTotal} faults injected into compute's calls`,
    );
    return result;
  }
}
