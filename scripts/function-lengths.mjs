#!/usr/bin/env node
/**
 * The longest functions of a source tree, measured on its syntax tree (every function, method,
 * constructor, accessor and arrow function; lines from its first to its last). `npm run check`
 * (and test/cdk/boundaries.test.ts) use it to hold core/ to its limit: no function over 150
 * lines, and any over 100 saying why in the comment above it ("longer than 100 lines because").
 *
 * Usage: node scripts/function-lengths.mjs [dir=core] [--over=N]
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import ts from 'typescript';

/** Every function of the `.ts` files under `dir`: file, name, first line, lines, and whether its comment says why it is long. */
export function functionLengths(dir) {
  const out = [];
  for (const file of readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'))) {
    const path = join(dir, file);
    const text = readFileSync(path, 'utf8');
    const source = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
    const visit = (node) => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const end = source.getLineAndCharacterOfPosition(node.end).line;
        const comments = ts.getLeadingCommentRanges(text, node.getFullStart()) ?? [];
        const doc = comments.map((c) => text.slice(c.pos, c.end)).join('\n');
        out.push({
          file: path,
          name: nameOf(node),
          line: start + 1,
          lines: end - start + 1,
          explained: /longer than 100 lines because/i.test(doc),
        });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return out.sort((a, b) => b.lines - a.lines);
}

function nameOf(node) {
  if (node.name && ts.isIdentifier(node.name)) return node.name.text;
  if (node.name && ts.isPrivateIdentifier(node.name)) return node.name.text;
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  return '(anonymous)';
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const dir = process.argv.slice(2).find((a) => !a.startsWith('--')) ?? 'core';
  const over = Number(process.argv.find((a) => a.startsWith('--over='))?.slice(7) ?? 60);
  for (const f of functionLengths(dir).filter((f) => f.lines > over))
    console.log(`${String(f.lines).padStart(4)}  ${f.file}:${f.line} ${f.name}${f.explained ? ' (says why)' : ''}`);
}
