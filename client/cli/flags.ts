/** The flags many commands share. */
import type { Flag } from './command.js';

export const HELP: Record<string, Flag> = { help: { type: 'boolean', short: 'h', help: "print this command's usage" } };
export const JSON_OUT: Record<string, Flag> = { json: { type: 'boolean', help: 'print the reply as one JSON line' } };
export const TENANT: Record<string, Flag> = {
  tenant: { type: 'string', short: 't', arg: '<name>', help: 'the tenant (required; default $DYNEIN_TENANT)' },
};
/** Where the scheduler is: the local stack (default) or the API on AWS. */
export const WHERE: Record<string, Flag> = {
  'data-dir': { type: 'string', arg: '<dir>', help: "the local stack's data directory (default $DYNEIN_DATA_DIR, else .dynein)" },
  endpoint: {
    type: 'string',
    arg: '<url>',
    help: 'the API on AWS instead of the local stack (default $DYNEIN_ENDPOINT); credentials from the AWS default chain',
  },
  stack: {
    type: 'string',
    arg: '<name>',
    help: "or the scheduler's CloudFormation stack: the endpoint and the tenant's queues from its outputs",
  },
  profile: { type: 'string', arg: '<name>', help: 'with --endpoint: the AWS profile for credentials (default $DYNEIN_PROFILE)' },
  region: {
    type: 'string',
    arg: '<region>',
    help: 'with --endpoint: the region (default $DYNEIN_REGION, else $AWS_REGION, else from the URL)',
  },
};
/** The environment variables that stand in for flags not given: the same for every command. */
export const FLAG_ENV: Readonly<Record<string, string>> = {
  tenant: 'DYNEIN_TENANT',
  endpoint: 'DYNEIN_ENDPOINT',
  region: 'DYNEIN_REGION',
  profile: 'DYNEIN_PROFILE',
};
export const QUEUES: Record<string, Flag> = {
  'queue-url': {
    type: 'string',
    arg: '<url>',
    help: "the tenant's queue (default from the local stack or --stack; required with --endpoint)",
  },
  'dlq-url': { type: 'string', arg: '<url>', help: "the tenant's dead-letter queue (default from the local stack or --stack)" },
};

export const VERSION: Record<string, Flag> = { version: { type: 'boolean', help: 'print the version of dynein-serverless' } };
