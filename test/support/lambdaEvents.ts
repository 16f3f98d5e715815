import { createHash } from 'node:crypto';
import type {
  APIGatewayEventRequestContextIAMAuthorizer,
  APIGatewayEventRequestContextV2,
  APIGatewayProxyEventV2,
  APIGatewayProxyEventV2WithIAMAuthorizer,
  Context,
  SQSRecord,
  SQSRecordAttributes,
} from 'aws-lambda';

/**
 * What Lambda hands a handler, built whole and typed: a test states the fields it cares about and
 * gets sensible values for the rest, so no fake is cast to `Context`, `APIGatewayProxyEventV2` or
 * `SQSRecord` (ESLint forbids `as unknown as` in test/).
 */

const REGION = 'us-east-1';
const ACCOUNT = '000000000000';

/** A Lambda invocation's context: function `test`, 60 s left, the deprecated callbacks refused. */
export function lambdaContext(overrides: Partial<Context> = {}): Context {
  const functionName = overrides.functionName ?? 'test';
  const refused = (name: string) => () => {
    throw new Error(`context.${name}() is the pre-async Lambda callback API; handlers return their result`);
  };
  return {
    callbackWaitsForEmptyEventLoop: true,
    functionName,
    functionVersion: '$LATEST',
    invokedFunctionArn: `arn:aws:lambda:${REGION}:${ACCOUNT}:function:${functionName}`,
    memoryLimitInMB: '256',
    awsRequestId: 'req-1',
    logGroupName: `/aws/lambda/${functionName}`,
    logStreamName: '2027/01/01/[$LATEST]00000000000000000000000000000000',
    getRemainingTimeInMillis: () => 60_000,
    done: refused('done'),
    fail: refused('fail'),
    succeed: refused('succeed'),
    ...overrides,
  };
}

/** The request an HTTP API route delivers (payload format 2.0). */
export interface HttpApiRequest {
  readonly method: string;
  /** The path as requested, without the query string. */
  readonly path: string;
  readonly body?: string;
  readonly pathParameters?: Record<string, string>;
  readonly queryStringParameters?: Record<string, string>;
  /** @default `${method} ${path}` */
  readonly routeKey?: string;
  /** @default content-type application/json */
  readonly headers?: Record<string, string>;
}

function requestContextOf(r: HttpApiRequest, routeKey: string): APIGatewayEventRequestContextV2 {
  const now = Date.now();
  return {
    accountId: ACCOUNT,
    apiId: 'api',
    domainName: `api.execute-api.${REGION}.amazonaws.com`,
    domainPrefix: 'api',
    http: { method: r.method, path: r.path, protocol: 'HTTP/1.1', sourceIp: '127.0.0.1', userAgent: 'vitest' },
    requestId: `req-${Math.random().toString(36).slice(2)}`,
    routeKey,
    stage: '$default',
    time: new Date(now).toISOString(),
    timeEpoch: now,
  };
}

/** An API Gateway HTTP API v2 event, as a route without an authorizer delivers it. */
export function httpApiEvent(r: HttpApiRequest): APIGatewayProxyEventV2 {
  const routeKey = r.routeKey ?? `${r.method} ${r.path}`;
  return {
    version: '2.0',
    routeKey,
    rawPath: r.path,
    rawQueryString: r.queryStringParameters ? new URLSearchParams(r.queryStringParameters).toString() : '',
    headers: r.headers ?? { 'content-type': 'application/json' },
    ...(r.queryStringParameters ? { queryStringParameters: r.queryStringParameters } : {}),
    requestContext: requestContextOf(r, routeKey),
    ...(r.pathParameters ? { pathParameters: r.pathParameters } : {}),
    ...(r.body !== undefined ? { body: r.body } : {}),
    isBase64Encoded: false,
  };
}

/** The caller an IAM-authorized route names (`requestContext.authorizer.iam`). */
export type IamCaller = Partial<APIGatewayEventRequestContextIAMAuthorizer['iam']>;

/**
 * An HTTP API v2 event from a route with IAM authorization: API Gateway puts the signing
 * principal in `requestContext.authorizer.iam` (the admin API reads `userArn`, else `accessKey`).
 */
export function httpApiEventWithIam(r: HttpApiRequest & { readonly iam: IamCaller }): APIGatewayProxyEventV2WithIAMAuthorizer {
  const { iam, ...request } = r;
  const event = httpApiEvent(request);
  return {
    ...event,
    requestContext: {
      ...event.requestContext,
      authorizer: {
        iam: {
          accessKey: 'AKIDTEST',
          accountId: ACCOUNT,
          callerId: 'AROATEST:test',
          cognitoIdentity: null,
          principalOrgId: 'o-test',
          userArn: `arn:aws:iam::${ACCOUNT}:role/test`,
          userId: 'AROATEST:test',
          ...iam,
        },
      },
    },
  };
}

/** One SQS message as the event source mapping hands it to a handler. */
export interface SqsMessage {
  readonly body: string;
  readonly messageId?: string;
  readonly receiptHandle?: string;
  /** Merged over a first receive's attributes (`ApproximateReceiveCount` '1', sent now). */
  readonly attributes?: Partial<SQSRecordAttributes>;
  readonly messageAttributes?: SQSRecord['messageAttributes'];
  /** @default a queue named `test` */
  readonly eventSourceARN?: string;
}

/** A complete `SQSRecord` for `m`. */
export function sqsRecordFor(m: SqsMessage): SQSRecord {
  const now = String(Date.now());
  const messageId = m.messageId ?? `msg-${Math.random().toString(36).slice(2)}`;
  return {
    messageId,
    receiptHandle: m.receiptHandle ?? `rh-${messageId}`,
    body: m.body,
    attributes: {
      ApproximateReceiveCount: '1',
      SentTimestamp: now,
      SenderId: 'AIDATEST',
      ApproximateFirstReceiveTimestamp: now,
      ...m.attributes,
    },
    messageAttributes: m.messageAttributes ?? {},
    md5OfBody: createHash('md5').update(m.body).digest('hex'),
    eventSource: 'aws:sqs',
    eventSourceARN: m.eventSourceARN ?? `arn:aws:sqs:${REGION}:${ACCOUNT}:test`,
    awsRegion: REGION,
  };
}
