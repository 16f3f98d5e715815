/** DYNEIN_CELLS in the local stack's settings: default 1, 1 to 20, dividing the shard groups. */
import { describe, expect, it } from 'vitest';
import { readConfig } from '../../lambdas/runtime/config.js';
import { localSettings } from '../../local/settings.js';

describe('DYNEIN_CELLS', () => {
  it('defaults to one cell and accepts a divisor of the groups', () => {
    expect(localSettings({}).cells).toBe(1);
    expect(localSettings({ DYNEIN_CELLS: '4' }).cells).toBe(4);
    expect(localSettings({ DYNEIN_CELLS: '3', DYNEIN_GROUPS: '6' }).cells).toBe(3);
    // compute's functions read the same variable into their settings
    const env = { DYNEIN_TABLE: 't', DYNEIN_ID_KEY: Buffer.alloc(32).toString('base64'), DYNEIN_CELLS: '2' };
    expect(readConfig(env).settings.cells).toBe(2);
    expect(readConfig({ ...env, DYNEIN_CELLS: undefined }).settings.cells).toBe(1);
  });

  it('refuses a cell count out of range or not dividing the groups, naming the variable', () => {
    for (const bad of ['0', '21', 'two']) expect(() => localSettings({ DYNEIN_CELLS: bad })).toThrow(/DYNEIN_CELLS must be a whole number/);
    expect(() => localSettings({ DYNEIN_CELLS: '3' })).toThrow(/DYNEIN_CELLS \(3\) must divide the shard groups/);
    expect(() => readConfig({ DYNEIN_TABLE: 't', DYNEIN_ID_KEY: Buffer.alloc(32).toString('base64'), DYNEIN_CELLS: '3' })).toThrow(
      /groupCount \(8\) must be a multiple of cells \(3\)/,
    );
  });
});
