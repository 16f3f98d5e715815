#!/usr/bin/env node
// The `dynein` CLI (client/cli.ts), run through tsx so that it works from a checkout without a build.
import { register } from 'tsx/esm/api';

process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';
register();
const { main } = await import('../client/cli.ts');
process.exitCode = await main(process.argv.slice(2));
