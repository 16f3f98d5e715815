/**
 * The simulated deployment (docs/capacity.md, "Simulation"): cells of tick executions (Step
 * Functions Express, one a minute per cell, each running `runMs`), each planning its groups with
 * the real core/dispatch/plan.ts `planDispatchers` and running one Map iteration per planned dispatcher (at
 * most 40 at once) as the real core/dispatch/loop.ts `dispatchLoop` (dispatch steps: group leases, then
 * core/dispatch/round.ts `dispatchRound` with its Acquirer and Releaser) inside a modelled Lambda
 * instance, against ./store.ts's table and queues, in virtual time (./clock.ts).
 */
import { isLateRow } from '../../core/model/lanes.js';
import { resolveSettings, type SchedulerSettings } from '../../core/model/config.js';
import { dispatchLoop } from '../../core/dispatch/loop.js';
import { planDispatchers } from '../../core/dispatch/plan.js';
import { ProcessFlow, type DispatchDeps } from '../../core/dispatch/deps.js';
import { ControlsCache } from '../../core/tenants/controls.js';
import { TenantRegistry } from '../../core/tenants/registry.js';
import { seededRandom, VirtualTime } from './clock.js';
import {
  Cpu,
  SimJobStore,
  SimKeySlots,
  SimNetwork,
  SimSender,
  SimTable,
  SimThrottle,
  type CallModel,
  type CpuModel,
  type Latency,
  type TableLimits,
  type ThrottleKind,
} from './store.js';

export interface LambdaModel {
  /** Dispatch function memory, MB: its vCPU share is memory / 1,769. */
  readonly dispatchMemoryMb: number;
  /** Tick (plan) function memory, MB. */
  readonly tickMemoryMb: number;
  /** Account concurrency quota. */
  readonly concurrency: number;
  /** Init duration of a new instance, ms. */
  readonly coldStartMs: number;
}

export interface SimConfig {
  readonly settings: Partial<SchedulerSettings>;
  /**
   * `aws`: each Map iteration runs in a Lambda instance of its own (its own CPU share, cold
   * starts, the account's concurrency). `local`: every dispatcher shares one process's CPU, as
   * the local stack runs them.
   */
  readonly mode: 'aws' | 'local';
  readonly limits: TableLimits;
  readonly calls: CallModel;
  readonly cpu: CpuModel;
  readonly lambda: LambdaModel;
  /** CPU of one plan (µs at 1 vCPU): capacity.cpuUsPerJob.planPerExecution. */
  readonly planUs: number;
  /** Step Functions: delay of each state transition, ms. */
  readonly transitionMs: number;
  readonly tick: { readonly everyMs: number; readonly runMs: number; readonly firstAtMs: number };
  /** Steady load: jobs due at `ratePerSec` for `windowMs`, from `dueStartMs`, each written `minAheadMs`–`maxAheadMs` before it is due. */
  readonly load: {
    readonly ratePerSec: number;
    readonly windowMs: number;
    readonly dueStartMs: number;
    readonly minAheadMs: number;
    readonly maxAheadMs: number;
    /** All due within `windowMs` (a burst): not extended by a lookahead as a steady load is. */
    readonly burst?: boolean;
  };
  /**
   * Other tenants' loads beside `load` (which is tenant `demo`'s), each due over its own window:
   * a noisy neighbour's flood, for the fair-share checks (docs/tenant-controls.md). Their jobs
   * count in the totals; `byTenant` gives each tenant's figures. Their due times may fall past
   * `load`'s window: the run goes on until the last one's plus `drainMs`.
   */
  readonly tenants?: readonly TenantLoad[];
  /**
   * Concurrency keys on `load`'s jobs (docs/flow-control.md): its k-th job has the key
   * `k-<k % keys>`, limit `limit`; every dispatcher has the key slots (`keySlots`), and a worker
   * runs each job its first send delivers, then reports its outcome, which frees the slot.
   */
  readonly keyed?: KeyedLoad;
  /** How long after the last due time the run goes on (to send what is late). */
  readonly drainMs: number;
  /**
   * Jobs due in the first `warmupMs` of the load count for loss, earliness and duplicates but not
   * for lateness (the first execution's cold starts), nor for the CPU utilisation.
   */
  readonly warmupMs: number;
  readonly seed: number;
}

/**
 * The worker side of a keyed load: a job is received `receive` after its send was acknowledged
 * (SQS, a long-polling worker), runs `workMs`, and its slot is freed `report` after the work ended
 * (the message deleted, the outcome sent through API Gateway to the outcomes function, its
 * UpdateItem of the key's item: the last is charged to the table).
 */
export interface KeyedLoad {
  readonly keys: number;
  readonly limit: number;
  readonly workMs: number;
  readonly receive: Latency;
  readonly report: Latency;
}

/** What the keyed load's worker saw (SimResult.keyed). */
export interface KeyedFigures {
  readonly keys: number;
  readonly keyLimit: number;
  readonly workMs: number;
  /** The most runs of one key that overlapped (the limit must hold). */
  readonly maxConcurrentPerKey: number;
  /** Jobs whose work ended. */
  readonly finished: number;
  /** From the first due time until the first run started, and until the last work ended, ms. */
  readonly firstStartMs: number;
  readonly drainMs: number;
  /** Runs started in each second from the first due time. */
  readonly startsPerSec: readonly number[];
  readonly jobsPerSec: number;
  /** keys × limit ÷ the work time. */
  readonly idealJobsPerSec: number;
  readonly throughputRatio: number;
  /** Slots still held at the run's end (0: every outcome freed its slot). */
  readonly slotsHeldAtEnd: number;
  /** The key items' requests: takes (granted or refused), releases, evictions. */
  readonly requests: { readonly take: number; readonly release: number; readonly evict: number };
  /** A slot between two jobs of its key: a run's end until the next run of its key starts, p50 / p95 ms. */
  readonly handoff: { readonly p50Ms: number; readonly p95Ms: number };
}

/** One more tenant's load: jobs due at `ratePerSec` from `dueStartMs` for `windowMs`, each written `minAheadMs`–`maxAheadMs` before. */
export interface TenantLoad {
  readonly tenant: string;
  readonly ratePerSec: number;
  readonly windowMs: number;
  readonly dueStartMs: number;
  readonly minAheadMs: number;
  readonly maxAheadMs: number;
}

export interface TenantSimFigures {
  readonly jobs: number;
  readonly delivered: number;
  readonly early: number;
  readonly duplicates: number;
  readonly lateness: { p50Ms: number; p95Ms: number; p99Ms: number; maxMs: number };
  /** Distinct jobs sent per second, from the tenant's first send to its last (what dispatch carried of it). */
  readonly sentPerSec: number;
}

export interface SimResult {
  readonly jobs: number;
  readonly delivered: number;
  readonly lost: number;
  readonly early: number;
  readonly duplicates: number;
  readonly lateness: { p50Ms: number; p95Ms: number; p99Ms: number; maxMs: number };
  /** Per tenant (`demo` for `load`): its jobs, and the lateness of those due in its own window (first send acknowledged − due). */
  readonly byTenant: Readonly<Record<string, TenantSimFigures>>;
  /** p95 lateness of the jobs due in the window's last quarter: a sustained rate keeps it ≤ 1 s too. */
  readonly tailP95Ms: number;
  readonly counters: {
    readonly throttles: Record<ThrottleKind, number>;
    readonly ingestThrottled: number;
    readonly sdkRetries: number;
    readonly lambdaThrottles: number;
    readonly coldStarts: number;
    readonly maxConcurrency: number;
    readonly mapWaits: number;
    readonly expressOverruns: number;
    readonly dispatchersPlanned: number[];
    /** Highest CPU utilisation of a dispatcher instance over the measurement window, and the longest wait for its CPU (ms). */
    readonly maxCpuUtilisation: number;
    readonly maxCpuWaitMs: number;
    readonly writeUnitsPerSec: number;
    readonly itemsReadPerJob: number;
    /** From the first execution's start to the last delivered marker, ms. */
    readonly lastMarkerMs: number;
  };
  /** The table's work: queries, items they read, item writes by kind (acquire, renew, marker...). */
  readonly table: { readonly queries: number; readonly itemsRead: number; readonly writes: Readonly<Record<string, number>> };
  /** With `keyed`: what its worker saw. */
  readonly keyed?: KeyedFigures;
  /** The limit that stopped the run, when it failed; else undefined. */
  readonly binding?: string;
  readonly pass: boolean;
  readonly virtualMs: number;
  readonly realMs: number;
}

const T0 = 1_800_000_000_000;
/** p95 lateness a sustained rate must keep (issue #16 §5). */
export const P95_LIMIT_MS = 1_000;
/** A CPU busy this share of the measurement window is saturated. */
export const CPU_SATURATED = 0.98;
/** Share of the table's requests refused by throttling above which a rate is not sustained. */
export const MAX_THROTTLED_SHARE = 0.01;

interface Instance {
  readonly cpu: Cpu;
  readonly deps: DispatchDeps;
  readonly bornAt: number;
}

/** Runs one simulation. Installs virtual timers for its duration (not re-entrant). */
export async function simulate(cfg: SimConfig): Promise<SimResult> {
  const realStart = performance.now();
  const settings = resolveSettings(cfg.settings);
  const vt = new VirtualTime(T0);
  const random = seededRandom(cfg.seed);
  const net = new SimNetwork(vt, cfg.calls, random);
  const table = new SimTable(vt, cfg.limits);
  const { load } = cfg;

  // ---- the load: jobs by due time, written ahead ----
  // The load goes on for a lookahead past the measurement window, so that the window's work (rows
  // are acquired up to the read-ahead before they are due) is all the steady load's.
  const loadMs = load.windowMs + (cfg.mode === 'aws' && !load.burst ? settings.lookaheadMs : 0);
  const loads: TenantLoad[] = [{ tenant: 'demo', ...load, windowMs: loadMs }, ...(cfg.tenants ?? [])];
  const counts = loads.map((l) => Math.max(1, Math.round((l.ratePerSec * l.windowMs) / 1000)));
  const n = counts.reduce((a, b) => a + b, 0);
  const due = new Float64Array(n);
  const shard = new Uint16Array(n);
  const writeAt = new Float64Array(n);
  /** Index into `loads` of each job. */
  const owner = new Uint8Array(n);
  for (let t = 0, i = 0; t < loads.length; t++) {
    const l = loads[t]!;
    for (let k = 0; k < counts[t]!; k++, i++) {
      owner[i] = t;
      due[i] = T0 + l.dueStartMs + Math.floor(((k + random()) * 1000) / l.ratePerSec);
      shard[i] = Math.floor(random() * settings.shardCount);
      writeAt[i] = due[i]! - (l.minAheadMs + random() * (l.maxAheadMs - l.minAheadMs));
    }
  }
  const tenantOf = (i: number) => loads[owner[i]!]!.tenant;
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => writeAt[a]! - writeAt[b]!);
  const sends = new Uint16Array(n);
  const firstSent = new Float64Array(n).fill(NaN);
  const firstAck = new Float64Array(n).fill(NaN);
  const jobId = (i: number) => `j1.${tenantOf(i)}.${shard[i]}.${due[i]}.t.${i.toString(36).padStart(16, '0')}.${'A'.repeat(22)}`;
  // ---- the keyed load's worker (cfg.keyed) ----
  const keyed = cfg.keyed;
  const keyOf = (i: number) => `k-${i % keyed!.keys}`;
  const running = new Map<string, number>();
  /** Per key, the ends of its runs whose slot no later run has taken yet (oldest first). */
  const endsOf = new Map<string, number[]>();
  const handoffs: number[] = [];
  let maxConcurrentPerKey = 0;
  let firstStart = Infinity;
  /** Runs started per second from the first due time (where the drain's time goes). */
  const startsPerSec: number[] = [];
  let finished = 0;
  let lastEnd = 0;
  const work = (i: number, ackAt: number) => {
    const k = keyed!;
    const key = keyOf(i);
    vt.at(ackAt + net.latency(k.receive), () => {
      const at = vt.now();
      firstStart = Math.min(firstStart, at);
      const sec = Math.max(0, Math.floor((at - (T0 + load.dueStartMs)) / 1000));
      startsPerSec[sec] = (startsPerSec[sec] ?? 0) + 1;
      const n = (running.get(key) ?? 0) + 1;
      running.set(key, n);
      maxConcurrentPerKey = Math.max(maxConcurrentPerKey, n);
      const ended = endsOf.get(key)?.shift();
      if (ended !== undefined) handoffs.push(at - ended);
      vt.at(at + k.workMs, () => {
        running.set(key, running.get(key)! - 1);
        endsOf.set(key, [...(endsOf.get(key) ?? []), vt.now()]);
        lastEnd = Math.max(lastEnd, vt.now());
        finished++;
        const free = () => {
          try {
            table.keyRelease(tenantOf(i), key, jobId(i));
          } catch (err) {
            if (!(err instanceof SimThrottle)) throw err;
            vt.at(vt.now() + 100, free);
          }
        };
        vt.at(vt.now() + net.latency(k.report), free);
      });
    });
  };
  const recordSend = (id: string, sentAt: number, ackAt: number) => {
    const i = parseInt(id.split('.')[5]!, 36);
    sends[i]!++;
    if (Number.isNaN(firstSent[i]!)) {
      firstSent[i] = sentAt;
      firstAck[i] = ackAt;
      if (keyed && owner[i] === 0) work(i, ackAt);
    }
  };

  // ---- Lambda ----
  const lam = cfg.lambda;
  const window = { from: T0 + load.dueStartMs + cfg.warmupMs, to: T0 + load.dueStartMs + load.windowMs };
  const localCpu = new Cpu('local process', 1, window);
  const instances: Instance[] = [];
  const warm: Instance[] = [];
  let inUse = 0;
  let maxConcurrency = 0;
  let coldStarts = 0;
  let lambdaThrottles = 0;
  /** The local process's rounds share their flow limits (per cell), as compute's do (lambdas/runtime/wiring.ts). */
  const localFlow = new ProcessFlow(() => vt.now());
  const newDeps = (cpu: Cpu): DispatchDeps => ({
    ...(cfg.mode === 'local' ? { flow: localFlow } : { flow: new ProcessFlow(() => vt.now()) }),
    store: new SimJobStore(table, net, cpu, cfg.cpu),
    sender: new SimSender(net, cpu, cfg.cpu, recordSend),
    ...(keyed ? { keySlots: new SimKeySlots(table, net, cpu, cfg.cpu) } : {}),
    tenants: new TenantRegistry(
      { getTenant: async (name) => ({ name, queueUrl: `sqs/${name}`, dlqUrl: `sqs/${name}-dlq` }), putTenant: async () => {} },
      { clock: vt },
    ),
    clock: vt,
    settings,
    // As lambdas/runtime/wiring.ts wires them (no tenant has any set: the defaults).
    controls: new ControlsCache({ getControls: async () => undefined }, { clock: vt }),
  });
  /** Invokes the dispatch function: a warm instance, or a new one after its cold start; undefined when throttled. */
  const invoke = async (): Promise<Instance | undefined> => {
    if (cfg.mode === 'local') return { cpu: localCpu, deps: newDeps(localCpu), bornAt: vt.now() };
    const w = warm.pop();
    if (w) {
      inUse++;
      maxConcurrency = Math.max(maxConcurrency, inUse);
      return w;
    }
    if (inUse >= lam.concurrency) {
      lambdaThrottles++;
      return undefined;
    }
    inUse++;
    maxConcurrency = Math.max(maxConcurrency, inUse);
    coldStarts++;
    await vt.sleep(lam.coldStartMs);
    const cpu = new Cpu(`dispatch ${instances.length}`, lam.dispatchMemoryMb / 1769, window);
    const inst = { cpu, deps: newDeps(cpu), bornAt: vt.now() };
    instances.push(inst);
    return inst;
  };
  const release = (inst: Instance) => {
    if (cfg.mode === 'local') return;
    inUse--;
    warm.push(inst);
  };
  const tickCpu = cfg.mode === 'local' ? localCpu : new Cpu('tick', lam.tickMemoryMb / 1769);
  const tickStore = new SimJobStore(table, net, tickCpu, cfg.cpu);

  // ---- Step Functions: one execution per cell per `everyMs` ----
  let mapWaits = 0;
  let expressOverruns = 0;
  const dispatchersPlanned: number[] = [];
  let executions = 0;
  const execution = async (cell: number, startMs: number) => {
    const name = `cell${cell}-${++executions}`;
    const untilMs = startMs + cfg.tick.runMs;
    await vt.sleep(cfg.transitionMs);
    await vt.sleep(tickCpu.charge(vt.now(), cfg.planUs) - vt.now());
    const plan = await planDispatchers({ store: tickStore, settings }, vt.now(), untilMs, cell);
    dispatchersPlanned.push(plan.dispatchers.length);
    // Inline Map: at most 40 iterations at once.
    const queue = [...plan.dispatchers];
    if (queue.length > 40) mapWaits += queue.length - 40;
    const worker = async () => {
      for (let groups = queue.shift(); groups; groups = queue.shift()) {
        await vt.sleep(cfg.transitionMs);
        let inst: Instance | undefined;
        // Step Functions retries a throttled Lambda task (Lambda.TooManyRequestsException) with backoff.
        for (let attempt = 0; attempt < 6 && !(inst = await invoke()); attempt++) await vt.sleep(1_000 * 2 ** attempt);
        if (!inst) continue;
        try {
          await dispatchLoop(inst.deps, { groups, owner: name, ownerStartMs: startMs, untilMs });
        } catch (err) {
          inst.deps.log?.('dispatch step failed', { error: (err as Error).message });
        } finally {
          release(inst);
        }
      }
    };
    await Promise.all(Array.from({ length: Math.min(40, plan.dispatchers.length) }, worker));
    if (vt.now() - startMs > 300_000) expressOverruns++;
  };
  const lastDue = Math.max(...loads.map((l) => l.dueStartMs + l.windowMs));
  const endAt = T0 + lastDue + cfg.drainMs;
  const cells = settings.cells;
  for (let k = 0; T0 + cfg.tick.firstAtMs + k * cfg.tick.everyMs < endAt; k++)
    for (let c = 0; c < cells; c++) {
      const start = T0 + cfg.tick.firstAtMs + k * cfg.tick.everyMs + (cfg.mode === 'aws' ? Math.floor(random() * 1_000) : 0);
      vt.at(start, () => void execution(c, start));
    }

  // ---- ingest: rows written at their time (their write units charged; a throttled put is retried a second later) ----
  let next = 0;
  let ingestThrottled = 0;
  const retry: number[] = [];
  const put = (i: number) => {
    try {
      table.putJob({
        shard: shard[i]!,
        dueMs: due[i]!,
        jobId: jobId(i),
        tenant: tenantOf(i),
        payload: '{"n":1}',
        ...(keyed && owner[i] === 0 ? { concurrency: { key: keyOf(i), limit: keyed.limit } } : {}),
      });
      if (isLateRow(due[i]!, vt.now(), settings)) table.putLatePointer({ shard: shard[i]!, dueMs: due[i]!, jobId: jobId(i) });
    } catch (err) {
      if (!(err instanceof SimThrottle)) throw err;
      ingestThrottled++;
      vt.at(vt.now() + 1_000, () => put(i));
    }
  };
  const ingest = () => {
    const now = vt.now();
    while (next < n && writeAt[order[next]!]! <= now) put(order[next++]!);
    while (retry.length) put(retry.pop()!);
    if (next < n) vt.at(now + 10, ingest);
  };
  vt.at(T0, ingest);

  // The code's own jitter (Math.random) from a second seeded source: the same run for the same seed.
  vt.install(seededRandom(cfg.seed + 0x5eed));
  let reached: number;
  try {
    reached = await vt.run(endAt);
  } finally {
    vt.uninstall();
  }

  // ---- results ----
  const late: number[] = [];
  // "Sustained": the last quarter of the window keeps up too (an overloaded run's lateness grows through the window).
  const tailFrom = window.to - (window.to - window.from) / 4;
  const tail: number[] = [];
  let delivered = 0;
  let early = 0;
  let duplicates = 0;
  const per = loads.map(() => ({ jobs: 0, delivered: 0, early: 0, duplicates: 0, late: [] as number[], first: Infinity, last: -Infinity }));
  for (let i = 0; i < n; i++) {
    const t = per[owner[i]!]!;
    t.jobs++;
    if (sends[i] === 0) continue;
    delivered++;
    t.delivered++;
    t.first = Math.min(t.first, firstSent[i]!);
    t.last = Math.max(t.last, firstSent[i]!);
    duplicates += sends[i]! - 1;
    t.duplicates += sends[i]! - 1;
    if (firstSent[i]! < due[i]!) {
      early++;
      t.early++;
    }
    const l = loads[owner[i]!]!;
    if (owner[i] === 0 ? due[i]! >= window.from : due[i]! >= T0 + l.dueStartMs) {
      if (due[i]! < T0 + l.dueStartMs + l.windowMs) t.late.push(firstAck[i]! - due[i]!);
    }
    if (owner[i] !== 0) continue; // the headline figures are `load`'s
    if (due[i]! >= window.from && due[i]! < window.to) late.push(firstAck[i]! - due[i]!);
    if (due[i]! >= tailFrom && due[i]! < window.to) tail.push(firstAck[i]! - due[i]!);
  }
  const lateness = percentiles(late);
  const byTenant = Object.fromEntries(
    loads.map((l, k) => {
      const { late: ms, first, last, ...rest } = per[k]!;
      const sentPerSec = last > first ? Math.round((rest.delivered * 1000) / (last - first)) : 0;
      return [l.tenant, { ...rest, lateness: percentiles(ms), sentPerSec }];
    }),
  );
  tail.sort((a, b) => a - b);
  const tailP95Ms = tail.length ? Math.round(tail[Math.min(tail.length - 1, Math.ceil(0.95 * tail.length) - 1)]!) : 0;
  const lost = n - delivered;
  let maxCpuUtilisation = 0;
  let maxCpuWaitMs = 0;
  const windowMs = Math.max(1, window.to - window.from);
  for (const inst of cfg.mode === 'local' ? [{ cpu: localCpu }] : instances) {
    maxCpuUtilisation = Math.max(maxCpuUtilisation, inst.cpu.windowBusyUs / 1000 / windowMs);
    maxCpuWaitMs = Math.max(maxCpuWaitMs, inst.cpu.maxWaitMs);
  }
  // A dispatcher whose CPU was busy the whole window is not keeping up, however short the window
  // (its queue grows): not sustained.
  // A table that refused more than 1 % of the writes is behind (ingest's retries pile up): over a
  // window of seconds the delay may not show yet, over a longer run it would.
  const writeRequests = Object.values(table.counters.writes).reduce((a, b) => a + b, 0);
  const refused = Object.values(table.counters.throttles).reduce((a, b) => a + b, 0);
  const throttledShare = refused / Math.max(1, writeRequests + refused);
  const pass =
    lost === 0 &&
    early === 0 &&
    lateness.p95Ms <= P95_LIMIT_MS &&
    tailP95Ms <= P95_LIMIT_MS &&
    maxCpuUtilisation < CPU_SATURATED &&
    throttledShare < MAX_THROTTLED_SHARE;
  const throttles = { ...table.counters.throttles };
  const counters = {
    throttles,
    ingestThrottled,
    sdkRetries: net.sdkRetries,
    lambdaThrottles,
    coldStarts,
    maxConcurrency,
    mapWaits,
    expressOverruns,
    dispatchersPlanned,
    maxCpuUtilisation: +maxCpuUtilisation.toFixed(3),
    maxCpuWaitMs: Math.round(maxCpuWaitMs),
    writeUnitsPerSec: Math.round((table.counters.writeUnits * 1000) / Math.max(1, reached - T0)),
    itemsReadPerJob: +(table.counters.itemsRead / Math.max(1, delivered)).toFixed(3),
    lastMarkerMs: Math.max(0, table.counters.lastMarkerAt - (T0 + cfg.tick.firstAtMs)),
  };
  const keyedFigures = (k: KeyedLoad): KeyedFigures => {
    const drainMs = Math.max(1, lastEnd - (T0 + load.dueStartMs));
    const jobsPerSec = Math.round((finished * 1000) / drainMs);
    const idealJobsPerSec = Math.round((k.keys * k.limit * 1000) / k.workMs);
    const w = table.counters.writes;
    const h = percentiles(handoffs);
    return {
      keys: k.keys,
      keyLimit: k.limit,
      workMs: k.workMs,
      maxConcurrentPerKey,
      finished,
      firstStartMs: Math.round(firstStart - (T0 + load.dueStartMs)),
      drainMs: Math.round(drainMs),
      startsPerSec: Array.from(startsPerSec, (x) => x ?? 0),
      jobsPerSec,
      idealJobsPerSec,
      throughputRatio: +(jobsPerSec / idealJobsPerSec).toFixed(3),
      slotsHeldAtEnd: table.keyHolders(),
      requests: { take: w.keyTake ?? 0, release: w.keyRelease ?? 0, evict: w.keyEvict ?? 0 },
      handoff: { p50Ms: h.p50Ms, p95Ms: h.p95Ms },
    };
  };
  return {
    jobs: n,
    delivered,
    lost,
    early,
    duplicates,
    lateness,
    byTenant,
    tailP95Ms,
    counters,
    table: {
      queries: table.counters.queries,
      itemsRead: table.counters.itemsRead,
      writes: Object.fromEntries(Object.entries(table.counters.writes).sort(([a], [b]) => a.localeCompare(b))),
    },
    ...(keyed ? { keyed: keyedFigures(keyed) } : {}),
    ...(pass ? {} : { binding: bindingOf(counters) }),
    pass,
    virtualMs: reached - T0,
    realMs: Math.round(performance.now() - realStart),
  };
}

/**
 * The limit that stopped a failed run, from the stand-ins' counters: a throttling limit when one
 * refused requests (the table's quota before a partition's: a partition's bucket is charged first,
 * so a table throttle means the partitions had room), then the Lambda concurrency quota, then a
 * dispatcher's CPU (its calls waited for it), then the Map's 40 iterations.
 */
export function bindingOf(c: SimResult['counters']): string {
  const t = c.throttles;
  const ranked: [string, number][] = [
    ['table WRU quota', t['table WRU quota'] + 0],
    ['table RRU quota', t['table RRU quota']],
    ['partition WCU', t['partition WCU']],
    ['partition RCU', t['partition RCU']],
  ];
  const top = ranked.filter(([, v]) => v > 0).sort((a, b) => b[1] - a[1])[0];
  if (top) return top[0];
  if (c.ingestThrottled > 0) return 'table writes (ingest)';
  if (c.lambdaThrottles > 0) return 'Lambda concurrency';
  if (c.maxCpuUtilisation >= CPU_SATURATED || c.maxCpuWaitMs >= 250) return 'dispatcher CPU';
  if (c.mapWaits > 0) return 'Map 40';
  if (c.expressOverruns > 0) return 'Express 5 minutes';
  return 'none of the modelled limits (latency)';
}

/** p50, p95, p99 and max of `ms` (sorted here), rounded. */
function percentiles(ms: number[]): { p50Ms: number; p95Ms: number; p99Ms: number; maxMs: number } {
  ms.sort((a, b) => a - b);
  const at = (p: number) => (ms.length ? Math.round(ms[Math.min(ms.length - 1, Math.ceil((p / 100) * ms.length) - 1)]!) : 0);
  return { p50Ms: at(50), p95Ms: at(95), p99Ms: at(99), maxMs: at(100) };
}
