/**
 * The dispatcher's side of shard groups at rest (docs/design-dispatch.md, "Rest"; the writers'
 * side is core/model/rest.ts). A step whose round found nothing to do intends to rest its groups
 * (a new epoch in each lease item); a later step whose round, begun at least
 * {@link REST_NOTICE_MS} after, again finds nothing (hold lanes scanned, nothing parked) rests
 * each group until its first row is due. Until then its steps renew the lease and read nothing;
 * a writer of a row due sooner brings the wake-up forward. A round that finds work wakes its
 * groups. Every step of this is a conditional write on the lease item: whatever dies wherever,
 * the worst is a group awake that could rest.
 */
import { randomBytes } from 'node:crypto';
import { type GroupRest, REST_NOTICE_MS, type ShardMarks, shardsOfGroup } from '../model/index.js';
import type { DispatchDeps } from './deps.js';
import type { RoundReport } from './roundReport.js';

/** A rest with no row to wake for: the latest time a date can hold. */
const NO_ROW_MS = 8_640_000_000_000_000;

/** What a step does with its groups' rests before its round. */
export interface RestPlan {
  /** Groups at rest past the lookahead: the round leaves their shards alone. */
  readonly asleep: number[];
  /** Groups the round reads. */
  readonly awake: number[];
  /** Of those, groups whose intent to rest has stood long enough: an idle round rests them. */
  readonly confirming: number[];
}

/**
 * Sorts a step's groups by their rests (as its lease takes read them at `nowMs`): asleep while
 * `nowMs` is before the wake-up less the lookahead, else read by the round.
 */
export function planRests(
  deps: Pick<DispatchDeps, 'settings' | 'resting' | 'restIntents'>,
  groups: readonly number[],
  rests: ReadonlyMap<number, GroupRest>,
  nowMs: number,
): RestPlan {
  const plan: RestPlan = { asleep: [], awake: [], confirming: [] };
  for (const g of groups) {
    const rest = deps.resting ? rests.get(g) : undefined;
    // Only a decided rest is slept through: a pending intent a writer woke (its wake-up set, the
    // rest never decided) may have missed a row written between the round and the intent.
    if (rest?.restingSinceMs !== undefined && rest.wakeAtMs !== undefined && nowMs < rest.wakeAtMs - deps.settings.lookaheadMs) {
      plan.asleep.push(g);
      continue;
    }
    plan.awake.push(g);
    if (!rest || rest.wakeAtMs !== undefined) continue;
    // Pending: since when this process knows of it (an intent another process wrote counts from now).
    const known = deps.restIntents?.get(g);
    if (known?.epoch !== rest.epoch) deps.restIntents?.set(g, { epoch: rest.epoch, sinceMs: nowMs });
    else if (nowMs - known.sinceMs >= REST_NOTICE_MS) plan.confirming.push(g);
  }
  return plan;
}

/**
 * After the round over `plan.awake`: an idle round that may rest (`report.restable`) rests the
 * confirming groups until their first row and intends to rest the others; a round that found
 * work (or may not rest) wakes them. Not after a lost group or an abort: the next step decides.
 */
export async function settleRests(
  deps: Pick<DispatchDeps, 'settings' | 'resting' | 'restIntents' | 'clock'>,
  owner: string,
  plan: RestPlan,
  rests: ReadonlyMap<number, GroupRest>,
  report: Pick<RoundReport, 'idle' | 'restable' | 'marks'>,
): Promise<void> {
  const { resting, restIntents, clock } = deps;
  if (!resting) return;
  const idle = report.idle && report.restable;
  await Promise.all(
    plan.awake.map(async (g) => {
      const rest = rests.get(g);
      if (!idle) {
        if (rest) await resting.wake(g, owner);
        restIntents?.delete(g);
        return;
      }
      if (rest && plan.confirming.includes(g)) {
        const wakeAt = await firstDueOfGroup(deps, g, report.marks);
        await resting.rest(g, owner, rest.epoch, wakeAt ?? NO_ROW_MS, clock.now());
        restIntents?.delete(g);
        return;
      }
      if (rest && rest.wakeAtMs === undefined) return; // pending, not long enough yet
      const epoch = randomBytes(8).toString('hex');
      if (await resting.intendRest(g, owner, epoch, clock.now())) restIntents?.set(g, { epoch, sinceMs: clock.now() });
    }),
  );
}

/** The first row of the group's shards from where the round left each (its marks). */
async function firstDueOfGroup(
  deps: Pick<DispatchDeps, 'settings' | 'resting'>,
  group: number,
  marks: ShardMarks,
): Promise<number | undefined> {
  const dues = await Promise.all(shardsOfGroup(group, deps.settings).map((s) => deps.resting!.firstDue(s, marks[s])));
  const defined = dues.filter((d): d is number => d !== undefined);
  return defined.length > 0 ? Math.min(...defined) : undefined;
}

/**
 * Every group of the step at rest: those whose wake-up (less the lookahead) is past the
 * execution's end sleep (docs/design-dispatch.md, "Sleep"): their leases given up, no dispatcher
 * runs for them until the tick plans one for the wake-up, or a writer of a row due sooner starts
 * one. Each is a conditional write on the rest the step read: a writer that moved the wake-up
 * since keeps its group awake. Returns the groups that sleep.
 */
export async function sleepGroups(
  deps: Pick<DispatchDeps, 'settings' | 'resting' | 'groupsSleep' | 'clock'>,
  owner: string,
  untilMs: number,
  groups: readonly number[],
  rests: ReadonlyMap<number, GroupRest>,
): Promise<number[]> {
  const { resting, settings, clock } = deps;
  if (!resting || !deps.groupsSleep) return [];
  const slept = await Promise.all(
    groups.map(async (g) => {
      const rest = rests.get(g);
      if (rest?.wakeAtMs === undefined || rest.restingSinceMs === undefined || rest.wakeAtMs - settings.lookaheadMs <= untilMs)
        return false;
      return resting.sleep(g, owner, rest.epoch, rest.wakeAtMs, clock.now());
    }),
  );
  return groups.filter((_, i) => slept[i]);
}
