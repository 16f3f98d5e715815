import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * docs/client.md's TypeScript examples are excerpts of examples/client-usage.ts, which the
 * type check covers: each block must appear there, line for line (indentation aside).
 */
const lines = (text: string) => text.split('\n').map((l) => l.trim()).filter((l) => l !== '');

describe('docs/client.md', () => {
  const doc = readFileSync('docs/client.md', 'utf8');
  const examples = lines(readFileSync('examples/client-usage.ts', 'utf8'));
  const blocks = [...doc.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => lines(m[1]!));

  it('has TypeScript examples', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(4);
  });

  it.each(blocks.map((b, i) => [i + 1, b] as const))('example %i is in examples/client-usage.ts', (_n, block) => {
    const at = examples.findIndex((_, i) => block.every((l, k) => examples[i + k] === l));
    expect(at, `not found in examples/client-usage.ts:\n${block.join('\n')}`).toBeGreaterThanOrEqual(0);
  });
});
