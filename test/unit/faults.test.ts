/**
 * DYNEIN_FAULTS (local/faults.ts): what it accepts, and one line naming the problem for what it
 * does not, through the local stack's settings too (the stack then refuses to start).
 */
import { describe, expect, it } from 'vitest';
import { faultsText, parseFaults } from '../../local/faults.js';
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
});
