/**
 * AWS list prices, us-east-1, that the benchmark turns requests into dollars with.
 *
 * These are the published on-demand prices as known when this table was written. The machine that
 * runs the benchmark has no internet access, so they were NOT re-read from the pages below on
 * `checked`: each is an assumption dated by `checked`, with the page to verify it on and, where a
 * price changed recently, since when it holds. Update `checked` when you verify them.
 */
export interface Price {
  /** US dollars per `per` units of `unit`. */
  readonly usd: number;
  readonly per: number;
  readonly unit: string;
  readonly source: string;
  /** When this price was last confirmed against `source` (ISO date); see the file's note. */
  readonly checked: string;
  readonly note?: string;
}

export const PRICE_REGION = 'us-east-1';
/** Date of this table: published prices as known then, assumed unchanged since (not re-read online). */
export const PRICES_CHECKED = '2026-11-22';

const checked = PRICES_CHECKED;

export const PRICES = {
  dynamodbWrite: {
    usd: 0.625,
    per: 1e6,
    unit: 'write request unit (on-demand; 1 KB of item, the larger of old and new for updates and deletes)',
    source: 'https://aws.amazon.com/dynamodb/pricing/on-demand/',
    checked,
    note: 'on-demand prices halved on 2024-11-01 (was $1.25)',
  },
  dynamodbRead: {
    usd: 0.125,
    per: 1e6,
    unit: 'read request unit (on-demand; 4 KB strongly consistent, eventually consistent = 0.5)',
    source: 'https://aws.amazon.com/dynamodb/pricing/on-demand/',
    checked,
    note: 'on-demand prices halved on 2024-11-01 (was $0.25)',
  },
  dynamodbProvisionedWcuHour: {
    usd: 0.00065,
    per: 1,
    unit: 'write capacity unit-hour (provisioned; one 1 KB write a second for an hour, standard table class)',
    source: 'https://aws.amazon.com/dynamodb/pricing/provisioned/',
    checked,
    note: 'billed for the capacity provisioned, used or not; auto scaling keeps consumption near its target utilisation; reserved capacity (1 or 3 years) lowers it further (not modelled)',
  },
  dynamodbProvisionedRcuHour: {
    usd: 0.00013,
    per: 1,
    unit: 'read capacity unit-hour (provisioned; one 4 KB strongly consistent read a second, or two eventually consistent, for an hour)',
    source: 'https://aws.amazon.com/dynamodb/pricing/provisioned/',
    checked,
    note: 'billed for the capacity provisioned, used or not',
  },
  sqsRequest: {
    usd: 0.4,
    per: 1e6,
    unit: 'SQS standard request (each 64 KB chunk of payload is one request)',
    source: 'https://aws.amazon.com/sqs/pricing/',
    checked,
    note: 'after the free tier of 1 million requests a month (ignored here)',
  },
  lambdaRequest: {
    usd: 0.2,
    per: 1e6,
    unit: 'Lambda invocation',
    source: 'https://aws.amazon.com/lambda/pricing/',
    checked,
  },
  lambdaArmGbSecond: {
    usd: 0.0000133334,
    per: 1,
    unit: 'Lambda GB-second, arm64 (first 7.5 billion GB-s a month), billed per 1 ms',
    source: 'https://aws.amazon.com/lambda/pricing/',
    checked,
  },
  httpApiRequest: {
    usd: 1.0,
    per: 1e6,
    unit: 'API Gateway HTTP API request (each 512 KB is one request; first 300 million a month)',
    source: 'https://aws.amazon.com/api-gateway/pricing/',
    checked,
  },
  stepFunctionsExpressRequest: {
    usd: 1.0,
    per: 1e6,
    unit: 'Step Functions Express execution',
    source: 'https://aws.amazon.com/step-functions/pricing/',
    checked,
  },
  stepFunctionsExpressGbSecond: {
    usd: 0.00001667,
    per: 1,
    unit: 'Step Functions Express GB-second (first 1,000 h GB a month; 64 MB minimum, 100 ms increments)',
    source: 'https://aws.amazon.com/step-functions/pricing/',
    checked,
  },
  eventBridgeSchedulerInvocation: {
    usd: 1.0,
    per: 1e6,
    unit: 'EventBridge Scheduler invocation (each 64 KB of payload is one; after 14 million free a month, ignored here)',
    source: 'https://aws.amazon.com/eventbridge/pricing/',
    checked,
    note: "the price list's usage type <region>-ScheduledInvocation ('$0 for the first 14 million scheduled invocations', then $1.00 per million in us-east-1; some regions more, e.g. $1.25 in Tokyo); prices one-time schedules (the peer) and each firing of a recurring schedule's clock (once per occurrence, or every 5 minutes for a schedule running more often; the SQS SendMessage it makes is billed by SQS)",
  },
  eventBridgeScheduledRule: {
    usd: 0,
    per: 1e6,
    unit: 'EventBridge scheduled rule delivery to a target (Step Functions)',
    source: 'https://aws.amazon.com/eventbridge/pricing/',
    checked,
    note: 'scheduled (rate/cron) rules deliver to AWS targets at no charge',
  },
} as const satisfies Record<string, Price>;

export type PriceTable = { readonly [K in keyof typeof PRICES]: Price };

/** Dollars for `units` of a price. */
export const dollars = (p: Price, units: number): number => (p.usd / p.per) * units;
