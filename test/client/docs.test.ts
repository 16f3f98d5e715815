import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

/**
 * The TypeScript examples of README.md, docs/client.md and docs/tracing.md are excerpts of examples/*.ts, which the
 * type check covers (and CI compiles as a consumer of the packed tarball): each block must appear
 * in one of them, line for line (indentation aside).
 */
const lines = (text: string) =>
  text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '');

const exampleFiles = readdirSync('examples').filter((f) => f.endsWith('.ts'));
const examples = exampleFiles.map((f) => lines(readFileSync(`examples/${f}`, 'utf8')));
const found = (block: string[]) => examples.some((ex) => ex.some((_, i) => block.every((l, k) => ex[i + k] === l)));

describe.each([
  ['docs/client.md', 4],
  ['README.md', 4],
  ['docs/tracing.md', 2],
])('%s', (file, atLeast) => {
  const doc = readFileSync(file, 'utf8');
  const blocks = [...doc.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => lines(m[1]!));

  it('has TypeScript examples', () => {
    expect(exampleFiles).toContain('client-usage.ts');
    expect(blocks.length).toBeGreaterThanOrEqual(atLeast);
  });

  it.each(blocks.map((b, i) => [i + 1, b] as const))('example %i is in examples/', (_n, block) => {
    expect(found(block), `not found in examples/*.ts:\n${block.join('\n')}`).toBe(true);
  });
});
