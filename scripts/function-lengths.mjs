#!/usr/bin/env node
/**
 * The longest functions of a source tree, measured on its syntax tree (every function, method,
 * constructor, accessor and arrow function; lines from its first to its last). `npm run lint`
 * runs it with `--check` to hold core/ to its limit: no function over 150 lines, and any over 100
 * saying why in the comment above it ("longer than 100 lines because ...").
 *
 * Usage: node scripts/function-lengths.mjs [dir=core] [--over=N] [--check]
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
  const all = functionLengths(dir);
  if (process.argv.includes('--check')) {
    const bad = all.filter((f) => f.lines > 150 || (f.lines > 100 && !f.explained));
    for (const f of bad)
      console.error(
        `${f.file}:${f.line} ${f.name} is ${f.lines} lines: split it (at most 150; over 100 its comment says "longer than 100 lines because ...")`,
      );
    if (bad.length > 0) process.exit(1);
    console.log(
      `function lengths: ${all.length} functions in ${dir}/, the longest ${all[0]?.lines ?? 0} lines (${all[0]?.file}:${all[0]?.line})`,
    );
  } else
    for (const f of all.filter((f) => f.lines > over))
      console.log(`${String(f.lines).padStart(4)}  ${f.file}:${f.line} ${f.name}${f.explained ? ' (says why)' : ''}`);
}
