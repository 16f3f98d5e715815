import type { OutcomeReport, OutcomeResult, OutcomeSink } from '../../client/index.js';

/** One answer of a {@link scriptedSink}: an `Error` is thrown (the whole call fails), a result is the entry's answer. */
export type ScriptedAnswer = OutcomeResult | Error;

/**
 * An outcome sink (what the Worker and the Lambda wrapper report through: `DyneinClient`'s
 * `reportOutcomes`) answering each entry from `script` (`call` counts requests from 1). It records
 * every request, and pushes `report <jobId>:<outcome>,...` onto `log` when one is made, so a test
 * can order it against the handler and SQS calls.
 *
 * A fake on purpose: the answers the reporting tests need (a call that throws, `Throttled` then a
 * state, `NotDelivered` for a delivered job) are ones the local stack cannot be made to give on
 * demand.
 */
export function scriptedSink(script: (report: OutcomeReport, call: number) => ScriptedAnswer, log: string[] = []) {
  const requests: OutcomeReport[][] = [];
  const sink: OutcomeSink = {
    async reportOutcomes(_tenant, outcomes) {
      requests.push([...outcomes]);
      log.push(`report ${outcomes.map((o) => `${o.jobId}:${o.outcome}`).join(',')}`);
      const answers = outcomes.map((o) => script(o, requests.length));
      const thrown = answers.find((a): a is Error => a instanceof Error);
      if (thrown) throw thrown;
      return { results: answers.filter((a): a is OutcomeResult => !(a instanceof Error)) };
    },
  };
  return { sink, requests, log };
}

/** The route's answer for a stored outcome. */
export const stored = (o: OutcomeReport): OutcomeResult => ({ jobId: o.jobId, state: o.outcome });

/** The route's answer for an entry refused with `code` (`Throttled`, `NotDelivered`...). */
export const refused = (o: OutcomeReport, code: string): OutcomeResult => ({ jobId: o.jobId, error: { code, message: `${code} (test)` } });
