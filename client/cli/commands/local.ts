/** `dynein local`: starts the local stack. */
import { noPositionals } from '../args.js';
import type { Command, Ctx } from '../command.js';
import { HELP } from '../flags.js';
import { startLocal } from '../local.js';

export const localCommand: Command = {
  brief: 'start the local stack (API, DynamoDB, SQS, Scheduler, tick, dashboard)',
  usage: '[--port <n>] [--tenants <a,b>] [--data-dir <dir>]',
  summary:
    'Start the local stack (API, DynamoDB, SQS, Scheduler, tick, dashboard) until Ctrl-C; the same as `npm start` in a\n' +
    'clone. It writes <data dir>/local.json, which the other commands read. From an installed package it needs dynalite,\n' +
    'fauxqs, aws-local-stepfunctions, @aws-sdk/client-dynamodb, @aws-sdk/client-scheduler and @aws-sdk/client-secrets-manager\n' +
    '(`npm install -D ...`: it prints the exact command when one is missing). Other settings come from the\n' +
    'environment: DYNEIN_LOOKAHEAD_MS, DYNEIN_LEASE_MS, DYNEIN_TICK_RUN_MS, DYNEIN_TICK_EVERY_MS, AWS_REGION.',
  targeted: false,
  flags: {
    port: { type: 'string', arg: '<n>', help: 'the API port (default $DYNEIN_PORT, else 8080; 0: any free port, named in local.json)' },
    tenants: { type: 'string', arg: '<a,b>', help: 'the tenants, comma-separated (default $DYNEIN_TENANTS, else demo)' },
    'data-dir': {
      type: 'string',
      arg: '<dir>',
      help: 'where local.json, keys and DynamoDB data live (default $DYNEIN_DATA_DIR, else .dynein)',
    },
    ...HELP,
  },
  run: runLocal,
};

async function runLocal({ str, rest }: Ctx): Promise<number> {
  noPositionals('local', rest);
  await startLocal({ port: str('port'), tenants: str('tenants'), dataDir: str('data-dir') });
  return 0;
}
