/**
 * Cells (docs/capacity.md, "Cells") and the capacity props of issue #16: one tick state machine and
 * rule per cell (cell 0 keeps the ids of a deployment before cells), every cell watched by the
 * dashboard and the TickFailures alarms; dispatcher memory, ingest maximum concurrency and the
 * Map's failure handling as validated props.
 */
import { Stack } from 'aws-cdk-lib';
import { Template } from 'aws-cdk-lib/assertions';
import { describe, expect, it } from 'vitest';
import { DyneinScheduler, type DyneinSchedulerProps } from '../../lib/dyneinScheduler.js';
import { fastApp, idOf, render, type Json } from './support.js';

let n = 0;
function synth(props: DyneinSchedulerProps = {}): { s: DyneinScheduler; t: Template } {
  const stack = new Stack(fastApp(), `Cells${n++}`);
  const s = new DyneinScheduler(stack, 'Dynein', props);
  return { s, t: Template.fromStack(stack) };
}
type Res = { Type: string; Properties: Record<string, Json> };
const ofType = (t: Template, type: string) =>
  Object.entries(t.toJSON().Resources as Record<string, Res>).filter(([, r]) => r.Type === type);
const envOf = (t: Template, s: DyneinScheduler, fn: 'tick' | 'dispatch' | 'submit') =>
  ((t.toJSON().Resources as Record<string, Res>)[idOf(s.functions[fn])]!.Properties.Environment as { Variables: Record<string, string> })
    .Variables;

describe('cells', () => {
  it('one cell (the default) synthesizes one state machine and rule, with the ids of a deployment before cells', () => {
    const { s, t } = synth();
    const machines = ofType(t, 'AWS::StepFunctions::StateMachine');
    expect(machines).toHaveLength(1);
    expect(ofType(t, 'AWS::Events::Rule').filter(([id]) => id.includes('TickSchedule'))).toHaveLength(1);
    expect(s.stateMachines).toEqual([s.stateMachine]);
    expect(s.tickRules).toEqual([s.tickRule]);
    // Same construct paths as before cells, so the same logical ids: a deployed stack updates in place.
    expect(s.stateMachine.node.path).toBe(`${Stack.of(s).node.path}/Dynein/TickStateMachine`);
    expect(s.tickRule.node.path).toBe(`${Stack.of(s).node.path}/Dynein/TickSchedule`);
    expect(machines[0]![1].Properties.DefinitionSubstitutions).toMatchObject({ Cell: '0' });
    expect(envOf(t, s, 'tick')).not.toHaveProperty('DYNEIN_CELLS');
  });

  it('each cell gets its own state machine (same definition, its cell substituted) and rule every minute', () => {
    const { s, t } = synth({ cells: 4, groupCount: 8 });
    const base = synth();
    expect(idOf(s.stateMachine)).toBe(idOf(base.s.stateMachine));
    expect(idOf(s.tickRule)).toBe(idOf(base.s.tickRule));
    const machines = ofType(t, 'AWS::StepFunctions::StateMachine');
    expect(machines).toHaveLength(4);
    expect(s.stateMachines).toHaveLength(4);
    const resources = t.toJSON().Resources as Record<string, Res>;
    const definitions = new Set<string>();
    s.stateMachines.forEach((m, cell) => {
      const props = resources[idOf(m)]!.Properties;
      expect(props.DefinitionSubstitutions).toMatchObject({ Cell: String(cell) });
      definitions.add(render(props.DefinitionString));
      const def = JSON.parse(render(props.DefinitionString)) as { States: { Plan: { Parameters: Record<string, unknown> } } };
      expect(def.States.Plan.Parameters.cell).toBe('${Cell}');
      // Its own rule, every minute, targeting it.
      const rule = resources[idOf(s.tickRules[cell]!)]!.Properties;
      expect(rule.ScheduleExpression).toBe('rate(1 minute)');
      expect((rule.Targets as { Arn: Json }[])[0]!.Arn).toEqual({ Ref: idOf(m) });
    });
    expect(definitions.size).toBe(1);
    for (const fn of ['tick', 'dispatch', 'submit'] as const) expect(envOf(t, s, fn).DYNEIN_CELLS).toBe('4');
  });

  it('the dashboard and the TickFailures alarms cover every cell (five cells per alarm)', () => {
    for (const cells of [1, 4, 10]) {
      const { s, t } = synth({ cells, groupCount: 2 * cells, shardCount: 64 });
      const alarms = ofType(t, 'AWS::CloudWatch::Alarm').filter(([id]) => /TickFailures/.test(id));
      expect(alarms, `${cells} cells`).toHaveLength(Math.ceil(cells / 5));
      const alarmText = alarms.map(([, a]) => JSON.stringify(a.Properties.Metrics)).join('\n');
      const dashboard = JSON.stringify(ofType(t, 'AWS::CloudWatch::Dashboard')[0]![1].Properties.DashboardBody);
      for (const m of s.stateMachines) {
        expect(alarmText).toContain(`"Ref":"${idOf(m)}"`);
        expect(dashboard).toContain(`"Ref":"${idOf(m)}"`);
      }
      for (const [, a] of alarms) {
        const metrics = a.Properties.Metrics as { Id: string; Expression?: string; MetricStat?: unknown }[];
        expect(metrics.filter((x) => x.MetricStat).length).toBeLessThanOrEqual(10);
      }
    }
  });

  it('rejects cells out of 1..20 and a groupCount that is not a multiple of cells, naming the prop', () => {
    for (const cells of [0, 21, 1.5]) expect(() => synth({ cells }), String(cells)).toThrow(/^- cells must be an integer from 1 to 20/m);
    expect(() => synth({ cells: 3, groupCount: 8 })).toThrow(/groupCount \(8\) must be a multiple of cells \(3\)/);
    // groupCount is the total over the cells: at most 40 per cell.
    expect(() => synth({ cells: 2, groupCount: 82, shardCount: 128 })).toThrow(/groupCount must be an integer from 1 to 80/);
    expect(() => synth({ cells: 2, groupCount: 80, shardCount: 128 })).not.toThrow();
    expect(() => synth({ cells: 20, groupCount: 20 })).not.toThrow();
  });
});

describe('capacity props', () => {
  it('dispatcherMemorySize sets the dispatch function memory (default 1,024 MB)', () => {
    const mem = (s: DyneinScheduler, t: Template) =>
      (t.toJSON().Resources as Record<string, Res>)[idOf(s.functions.dispatch)]!.Properties.MemorySize;
    const d = synth();
    expect(mem(d.s, d.t)).toBe(1024);
    const big = synth({ dispatcherMemorySize: 2048 });
    expect(mem(big.s, big.t)).toBe(2048);
    for (const bad of [127, 10_241, 1000.5]) expect(() => synth({ dispatcherMemorySize: bad })).toThrow(/^- dispatcherMemorySize must be/m);
  });

  it('ingestMaxConcurrency sets the SQS event source maximum concurrency (none by default)', () => {
    const scaling = (t: Template) => ofType(t, 'AWS::Lambda::EventSourceMapping')[0]![1].Properties.ScalingConfig;
    expect(scaling(synth().t)).toBeUndefined();
    expect(scaling(synth({ ingestMaxConcurrency: 50 }).t)).toEqual({ MaximumConcurrency: 50 });
    for (const bad of [1, 1001, 2.5]) expect(() => synth({ ingestMaxConcurrency: bad })).toThrow(/^- ingestMaxConcurrency must be/m);
  });

  it('dispatchMaxConsecutiveFailures sets when a dispatcher of the Map gives up (default 4)', () => {
    const giveUp = (s: DyneinScheduler, t: Template) => {
      const def = JSON.parse(render((t.toJSON().Resources as Record<string, Res>)[idOf(s.stateMachine)]!.Properties.DefinitionString)) as {
        States: { Groups: { ItemProcessor: { States: Record<string, { Choices?: { NumericGreaterThanEquals?: number }[] }> } } };
      };
      return def.States.Groups.ItemProcessor.States.TooManyErrors!.Choices![0]!.NumericGreaterThanEquals;
    };
    const d = synth();
    expect(giveUp(d.s, d.t)).toBe(4);
    const six = synth({ dispatchMaxConsecutiveFailures: 6, cells: 2 });
    expect(six.s.stateMachines.length).toBe(2);
    expect(giveUp(six.s, six.t)).toBe(6);
    for (const bad of [0, 11, 2.5])
      expect(() => synth({ dispatchMaxConsecutiveFailures: bad })).toThrow(/^- dispatchMaxConsecutiveFailures must be/m);
  });

  it('lists every bad capacity prop in one error', () => {
    expect(() => synth({ cells: 0, dispatcherMemorySize: 1, ingestMaxConcurrency: 0, dispatchMaxConsecutiveFailures: 0 })).toThrow(
      /cells[\s\S]*dispatcherMemorySize[\s\S]*ingestMaxConcurrency[\s\S]*dispatchMaxConsecutiveFailures/,
    );
  });
});
