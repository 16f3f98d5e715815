import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The docs cannot go stale where a test can see them: docs/architecture.md's folder map names
 * exactly the repository's source folders and core/'s feature folders, each core folder described
 * by the doc comment its index.ts opens with; and every relative link of README.md and docs/*.md
 * reaches a file that exists (and, into a Markdown file, a heading that exists).
 */
const ARCHITECTURE = 'docs/architecture.md';

/** Top-level folders that hold no source: the docs themselves, and whatever .gitignore lists. */
const ignoredTopLevel = new Set([
  'docs',
  ...readFileSync('.gitignore', 'utf8')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => /^[\w.-]+\/$/.test(l))
    .map((l) => l.slice(0, -1)),
]);

const subfolders = (dir: string) =>
  readdirSync(dir, { withFileTypes: true })
    .filter((e) => e.isDirectory() && !e.name.startsWith('.') && e.name !== 'node_modules')
    .map((e) => e.name)
    .sort();

const topLevelFolders = subfolders('.').filter((f) => !ignoredTopLevel.has(f));

const coreFolders = (function walk(dir: string): string[] {
  return subfolders(dir).flatMap((f) => [`${dir}/${f}`, ...walk(`${dir}/${f}`)]);
})('core');

/** The text of the first `/** ... *\/` comment of a file, its lines joined by single spaces. */
function firstDocComment(file: string): string | undefined {
  const m = /\/\*\*([\s\S]*?)\*\//.exec(readFileSync(file, 'utf8'));
  if (!m) return undefined;
  return m[1]!
    .split('\n')
    .map((l) => l.replace(/^\s*\*?\s?/, '').trim())
    .filter((l) => l !== '')
    .join(' ');
}

/** Lines outside fenced code blocks. */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split('\n').filter((l) => {
    if (/^\s*(```|~~~)/.test(l)) {
      fenced = !fenced;
      return false;
    }
    return !fenced;
  });
}

/** The folder map: the rows `| \`folder/\` | description |` of the section "## Folder map". */
function folderMap(): { rows: [string, string][]; found: boolean } {
  const lines = existsSync(ARCHITECTURE) ? proseLines(readFileSync(ARCHITECTURE, 'utf8')) : [];
  const start = lines.findIndex((l) => /^## Folder map\s*$/.test(l));
  if (start < 0) return { rows: [], found: false };
  const end = lines.findIndex((l, i) => i > start && /^## /.test(l));
  const rows: [string, string][] = [];
  for (const l of lines.slice(start + 1, end < 0 ? undefined : end)) {
    const row = /^\|\s*`([^`]+?)\/?`\s*\|\s*(.*?)\s*\|\s*$/.exec(l);
    if (row) rows.push([row[1]!, row[2]!]);
  }
  return { rows, found: true };
}

describe(`${ARCHITECTURE}: the folder map`, () => {
  const { rows, found } = folderMap();
  const map = new Map(rows);

  it('has a "## Folder map" section, each folder in it once', () => {
    expect(found, `${ARCHITECTURE} has no "## Folder map" section`).toBe(true);
    expect(rows.map(([f]) => f).filter((f, i, all) => all.indexOf(f) !== i)).toEqual([]);
  });

  it('finds the folders it checks', () => {
    expect(topLevelFolders).toEqual(expect.arrayContaining(['core', 'adapters', 'lambdas', 'lib', 'client', 'local', 'test']));
    expect(coreFolders).toEqual(expect.arrayContaining(['core/model', 'core/dispatch', 'core/recurring/expression']));
  });

  it('names every top-level source folder and every folder under core/, and no other', () => {
    const expected = [...topLevelFolders, ...coreFolders].sort();
    expect([...map.keys()].sort()).toEqual(expected);
  });

  it.each(coreFolders)('describes %s as its index.ts does', (folder) => {
    const index = join(folder, 'index.ts');
    expect(existsSync(index), `${index} is missing: each core folder is entered through its index.ts`).toBe(true);
    const comment = firstDocComment(index);
    expect(comment, `${index} opens with no /** ... */ comment`).toBeDefined();
    expect(map.get(folder), `the folder map's line for ${folder}/ (${ARCHITECTURE}) must be ${index}'s first doc comment`).toBe(comment);
  });

  it('has the data-flow diagram', () => {
    const doc = readFileSync(ARCHITECTURE, 'utf8');
    for (const part of ['submit', 'inbound', 'ingest', 'table', 'dispatch', 'tenant queue']) expect(doc).toContain(part);
  });
});

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
function slug(heading: string): string {
  return heading
    .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** Every anchor a Markdown file has: its headings' slugs, repeats numbered as GitHub numbers them. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const l of proseLines(readFileSync(file, 'utf8'))) {
    const h = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(l);
    if (!h) continue;
    const base = slug(h[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

const markdownFiles = [
  'README.md',
  ...readdirSync('docs')
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

/** The relative links of a Markdown file (outside code): `[text](target)` and `![alt](target)`. */
function relativeLinks(file: string): string[] {
  const links: string[] = [];
  for (const l of proseLines(readFileSync(file, 'utf8'))) {
    const prose = l.replace(/`[^`]*`/g, '');
    for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
      const target = m[1]!;
      if (!/^[a-z][a-z0-9+.-]*:/i.test(target)) links.push(target);
    }
  }
  return links;
}

describe.each(markdownFiles)('%s: relative links', (file) => {
  const links = relativeLinks(file);

  it.each(links.length > 0 ? links : ['(none)'])('%s resolves', (link) => {
    if (link === '(none)') return;
    const [path = '', anchor] = link.split('#', 2);
    const target = path === '' ? file : normalize(join(dirname(file), decodeURIComponent(path)));
    expect(existsSync(target), `${file} links to ${link}: ${target} does not exist`).toBe(true);
    if (anchor !== undefined && anchor !== '' && target.endsWith('.md') && statSync(target).isFile()) {
      expect([...anchors(target)], `${file} links to ${link}: ${target} has no heading with that anchor`).toContain(anchor);
    }
  });
});

describe('README.md: the front door', () => {
  const readme = readFileSync('README.md', 'utf8');

  it('links every page of docs/ from its Documentation list', () => {
    const section = readme.split(/^## Documentation\s*$/m)[1]?.split(/^## /m)[0] ?? '';
    const listed = [...section.matchAll(/^- \[[^\]]*\]\(docs\/([^)#]+)\)/gm)].map((m) => m[1]);
    const pages = readdirSync('docs').filter((f) => f.endsWith('.md') || f.endsWith('.yaml'));
    expect([...listed].sort()).toEqual(pages.sort());
  });

  it('stays under 250 lines', () => {
    expect(readme.split('\n').length).toBeLessThan(250);
  });
});
