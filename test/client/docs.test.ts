import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * docs/client.md's TypeScript examples are excerpts of examples/client-usage.ts, which the
 * type check covers: each block must appear there, line for line (indentation aside).
 */
const lines = (text: string) => text.split('\n').map((l) => l.trim()).filter((l) => l !== '');

const examples = ['examples/client-usage.ts', 'examples/cdk-usage.ts'].map((f) => lines(readFileSync(f, 'utf8')));
const found = (block: string[]) => examples.some((ex) => ex.some((_, i) => block.every((l, k) => ex[i + k] === l)));

describe.each([
  ['docs/client.md', 4],
  ['README.md', 4],
])('%s', (file, atLeast) => {
  const doc = readFileSync(file, 'utf8');
  const blocks = [...doc.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => lines(m[1]!));

  it('has TypeScript examples', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(atLeast);
  });

  it.each(blocks.map((b, i) => [i + 1, b] as const))('example %i is in examples/', (_n, block) => {
    expect(found(block), `not found in examples/*.ts:\n${block.join('\n')}`).toBe(true);
  });
});
