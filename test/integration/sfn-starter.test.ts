import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StepFunctionsStarter } from '../../adapters/sfnDispatchStarter.js';

/**
 * The writers' start of a sleeping cell's tick (docs/design-dispatch.md#sleep): the real
 * `@aws-sdk/client-sfn` against a stand-in of the Step Functions endpoint (awsJson1_0, which no
 * emulator here speaks) that records each request and answers as the service does.
 */
const requests: { target: string | undefined; body: { stateMachineArn: string; name: string; input: string } }[] = [];
let failNext = 0;
const server = createServer((req: IncomingMessage, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    requests.push({ target: req.headers['x-amz-target'] as string | undefined, body: JSON.parse(body) });
    if (failNext > 0) {
      failNext--;
      res.writeHead(400, { 'content-type': 'application/x-amz-json-1.0' });
      res.end(JSON.stringify({ __type: 'com.amazonaws.states#StateMachineDoesNotExist', message: 'State Machine Does Not Exist' }));
      return;
    }
    res.writeHead(200, { 'content-type': 'application/x-amz-json-1.0' });
    res.end(JSON.stringify({ executionArn: 'arn:aws:states:us-east-1:123456789012:execution:tick:x', startDate: 1_700_000_000 }));
  });
});
let endpoint = '';
beforeAll(async () => {
  process.env.AWS_REGION = 'us-east-1';
  process.env.AWS_ACCESS_KEY_ID = 'test';
  process.env.AWS_SECRET_ACCESS_KEY = 'test';
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((r) => server.close(() => r())));

const ARNS = ['arn:aws:states:us-east-1:123456789012:stateMachine:TickC0', 'arn:aws:states:us-east-1:123456789012:stateMachine:TickC1'];

describe('StepFunctionsStarter', () => {
  it("starts the cell's tick state machine with a unique wake-* name and an empty input", async () => {
    requests.length = 0;
    const starter = new StepFunctionsStarter(ARNS, endpoint);
    await starter.start(1);
    await starter.start(1);
    expect(requests.map((r) => r.target)).toEqual(['AWSStepFunctions.StartExecution', 'AWSStepFunctions.StartExecution']);
    expect(requests.map((r) => r.body.stateMachineArn)).toEqual([ARNS[1], ARNS[1]]);
    expect(requests[0]!.body.name).toMatch(/^wake-\d+-[0-9a-f]{8}$/);
    expect(requests[0]!.body.name).not.toBe(requests[1]!.body.name);
    expect(requests[0]!.body.input).toBe('{}');
  });

  it('a cell with no state machine is a RangeError, and a refused start is thrown to the writer (which logs it)', async () => {
    const starter = new StepFunctionsStarter(ARNS, endpoint);
    await expect(starter.start(2)).rejects.toThrow(/no tick state machine for cell 2 \(2 configured\)/);
    failNext = 1;
    await expect(starter.start(0)).rejects.toThrow(/State Machine Does Not Exist/);
    requests.length = 0;
    await starter.start(0); // the client is kept: the next start goes through
    expect(requests.map((r) => r.body.stateMachineArn)).toEqual([ARNS[0]]);
  });
});
