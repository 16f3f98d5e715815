#!/usr/bin/env node
// The `dynein` CLI. Installed from npm, it runs the built CLI (dist/client/cli/index.js) on plain node.
// In a clone of the repository (client/cli/index.ts is there; the package does not ship it), it runs
// the source through tsx, so it needs no build and never runs a stale one.
import { existsSync } from 'node:fs';

const source = new URL('../client/cli/index.ts', import.meta.url);
let cli;
if (existsSync(source)) {
  const { register } = await import('tsx/esm/api');
  register();
  cli = await import(source.href);
} else {
  cli = await import('../dist/client/cli/index.js');
}
process.exitCode = await cli.main(process.argv.slice(2));
