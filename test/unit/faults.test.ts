/**
 * DYNEIN_FAULTS (local/faults.ts): what it accepts, and one line naming the problem for what it
 * does not, through the local stack's settings too (the stack then refuses to start).
 */
import { describe, expect, it } from 'vitest';
import { FaultInjector, faultsText, parseFaults, type Fault, type FaultService } from '../../local/faults.js';
import { localSettings } from '../../local/settings.js';

describe('DYNEIN_FAULTS', () => {
  it('unset or empty: no faults', () => {
    expect(parseFaults(undefined)).toBeUndefined();
    expect(parseFaults('  ')).toBeUndefined();
  });

  it('a share per service, and how long a timeout holds the call', () => {
    expect(parseFaults('dynamodb=0.05,sqs=0.05')).toEqual({ rates: { dynamodb: 0.05, sqs: 0.05 }, timeoutMs: 1_000 });
    expect(parseFaults(' scheduler = 1 , dynamodb=0, timeoutMs=250 ')).toEqual({ rates: { scheduler: 1, dynamodb: 0 }, timeoutMs: 250 });
    const s = parseFaults('sqs=0.3,timeoutMs=20')!;
    expect(parseFaults(faultsText(s))).toEqual(s);
    const seeded = parseFaults('sqs=0.1,seed=4294967295')!;
    expect(seeded).toEqual({ rates: { sqs: 0.1 }, timeoutMs: 1_000, seed: 4_294_967_295 });
    expect(parseFaults(faultsText(seeded))).toEqual(seeded);
  });

  it.each([
    ['dynamo=0.05', /unknown key 'dynamo'.*dynamodb, sqs, scheduler/],
    ['dynamodb=5%', /dynamodb must be a share from 0 to 1.*'5%'/],
    ['dynamodb=1.5', /dynamodb must be a share from 0 to 1/],
    ['dynamodb=-0.1', /dynamodb must be a share from 0 to 1/],
    ['sqs=', /sqs must be a share from 0 to 1 .*, got ''$/],
    ['sqs=0.1,sqs=0.2', /'sqs' is given twice/],
    ['dynamodb', /'dynamodb' is not key=value/],
    ['dynamodb=0.1,,sqs=0.1', /'' is not key=value/],
    ['dynamodb=0.1,timeoutMs=0', /timeoutMs must be a whole number of milliseconds from 1 to 60000/],
    ['sqs=0.1,seed=1.5', /seed must be a whole number from 0 to 4294967295, got '1.5'/],
    ['sqs=0.1,seed=-1', /seed must be a whole number from 0 to 4294967295/],
    ['sqs=0.1,seed=4294967296', /seed must be a whole number from 0 to 4294967295/],
  ])('refuses %j with one line naming the problem', (text, message) => {
    let error: Error | undefined;
    try {
      parseFaults(text);
    } catch (err) {
      error = err as Error;
    }
    expect(error?.name).toBe('FaultsConfigError');
    expect(error?.message).toMatch(/^DYNEIN_FAULTS: /);
    expect(error?.message).toMatch(message);
    expect(error?.message).not.toContain('\n');
  });

  it('is a local stack setting: a bad value stops the stack with that one line', () => {
    expect(localSettings({ DYNEIN_FAULTS: 'dynamodb=0.05' }).faults).toEqual({ rates: { dynamodb: 0.05 }, timeoutMs: 1_000 });
    expect(localSettings({}).faults).toBeUndefined();
    expect(() => localSettings({ DYNEIN_FAULTS: 'dynamodb=lots' })).toThrow(
      /^invalid local stack settings: DYNEIN_FAULTS: dynamodb must be a share from 0 to 1 \(0.05 is 5 %\), got 'lots'$/,
    );
  });

  describe('with a seed', () => {
    /** Sends `calls` attempts, in that order, through one injector; the faults each service saw, by attempt number. */
    async function run(settings: string, calls: readonly FaultService[]): Promise<Record<string, string[]>> {
      const seen: Fault[] = [];
      const injector = new FaultInjector({ ...parseFaults(settings)!, timeoutMs: 1 }, { onFault: (f) => seen.push(f) });
      const clients = new Map<FaultService, (n: number) => Promise<unknown>>();
      for (const [service, clientName] of [
        ['dynamodb', 'DynamoDBClient'],
        ['sqs', 'SQSClient'],
        ['scheduler', 'SchedulerClient'],
      ] as const) {
        let handler: ((next: unknown, context: unknown) => (args: unknown) => Promise<unknown>) | undefined;
        injector.attach({ middlewareStack: { add: (mw: never) => void (handler = mw) } });
        const send = handler!(async () => ({ response: { statusCode: 200, body: undefined } }), { clientName, commandName: 'PingCommand' });
        clients.set(service, (n) => send({ n }));
      }
      const out: Record<string, string[]> = { dynamodb: [], sqs: [], scheduler: [] };
      const count: Record<string, number> = { dynamodb: 0, sqs: 0, scheduler: 0 };
      for (const service of calls) {
        const n = count[service]!;
        count[service] = n + 1;
        const before = seen.length;
        await clients.get(service)!(n).catch(() => undefined);
        if (seen.length > before) out[service]!.push(`${n}:${seen.at(-1)!.kind}${seen.at(-1)!.after ? '.after' : ''}`);
      }
      return out;
    }

    it('fails the same attempts of each service, the same way, whatever the other services did in between', async () => {
      const sqsOnly = Array.from({ length: 400 }, () => 'sqs' as const);
      const mixed = Array.from({ length: 1_200 }, (_, i) => (i % 3 === 0 ? ('sqs' as const) : ('dynamodb' as const)));
      const a = await run('dynamodb=0.2,sqs=0.2,seed=7', sqsOnly);
      const b = await run('dynamodb=0.2,sqs=0.2,seed=7', mixed);
      expect(a.sqs!.length).toBeGreaterThan(40);
      expect(a.sqs!.length).toBeLessThan(120);
      expect(b.sqs).toEqual(a.sqs);
      expect(b.dynamodb!.length).toBeGreaterThan(80);
      // Another seed, other attempts; no seed, at random.
      expect((await run('dynamodb=0.2,sqs=0.2,seed=8', sqsOnly)).sqs).not.toEqual(a.sqs);
      expect((await run('dynamodb=0.2,sqs=0.2', sqsOnly)).sqs).not.toEqual(a.sqs);
    });

    it('the seed the fault end-to-end test uses fails an SQS and a DynamoDB call among the first ten', async () => {
      const first = await run('dynamodb=0.1,sqs=0.1,seed=1', [...Array(10).fill('sqs'), ...Array(10).fill('dynamodb')]);
      expect(first.sqs!.length).toBeGreaterThan(0);
      expect(first.dynamodb!.length).toBeGreaterThan(0);
    });
  });
});
