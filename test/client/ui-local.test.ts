import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { ReceiveMessageCommand, SendMessageCommand, SQSClient } from '@aws-sdk/client-sqs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signedFetch, startLocalStack, type LocalJson } from '../support/localStack.js';

/**
 * `dynein ui` and the local dashboard against the real local stack (`npm start`), in headless
 * Chromium: the CLI finds the stack's keys in local.json and signs for the page; the dashboard's
 * counters are current while a dispatch step is still running.
 */
const CHROMIUM = process.env.DYNEIN_CHROMIUM ?? '/usr/bin/chromium';

// The callbacks below run in Chromium; the project compiles without the DOM library.
interface DomElement {
  textContent: string | null;
  className: string;
  value: string;
  nextElementSibling: DomElement | null;
}
declare const document: {
  querySelector(selector: string): DomElement | null;
  querySelectorAll(selector: string): Iterable<DomElement> & ArrayLike<DomElement>;
};

let stack: Awaited<ReturnType<typeof startLocalStack>>;
let local: LocalJson;
let cli: ChildProcess;
let uiUrl: string;
let browser: Browser;

const field = (page: Page, name: string) =>
  page.evaluate((n) => {
    for (const dt of Array.from(document.querySelectorAll('#detail-fields dt')))
      if (dt.textContent === n) return dt.nextElementSibling?.textContent;
    return undefined;
  }, name);

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}: the job browser's tests need it. Install it with ` +
        '`apt-get update && apt-get install -y chromium` (Debian/Ubuntu; .ci/run does this), or set DYNEIN_CHROMIUM to its path.',
    );
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta', DYNEIN_TICK_RUN_MS: '90000' });
  local = await stack.waitForLocalJson();
  cli = spawn(process.execPath, ['bin/dynein.js', 'ui', '--port', '0', '--data-dir', stack.dataDir, '--tenant', 'alpha'], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  uiUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`dynein ui printed no URL: ${out}`)), 30_000);
    const read = (d: Buffer) => {
      out += d;
      const m = /the job browser is at (http:\/\/127\.0\.0\.1:\d+\/[A-Za-z0-9_-]{32}\/) /.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    };
    cli.stdout!.on('data', read);
    cli.stderr!.on('data', read);
    cli.once('exit', (code) => reject(new Error(`dynein ui exited (${code}): ${out}`)));
  });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
}, 90_000);

afterAll(async () => {
  await browser?.close();
  if (cli && cli.exitCode === null) {
    const exited = new Promise((r) => cli.once('exit', r));
    cli.kill('SIGINT');
    await exited;
  }
  await stack?.stop();
});

const schedule = async (tenant: string, runAt: string) => {
  const res = await signedFetch(
    local.endpoint,
    local.tenants[tenant]!,
    'POST',
    `/v1/tenants/${tenant}/jobs`,
    JSON.stringify({ payload: { n: 1 }, runAt }),
  );
  expect(res.status).toBe(201);
  return res.json.jobId as string;
};

describe('dynein ui against the local stack', () => {
  it('opens a job by id, shows it and cancels it, signed with the tenant key from local.json', async () => {
    const runAt = new Date(Date.now() + 120_000).toISOString();
    const jobId = await schedule('alpha', runAt);
    const page = await browser.newPage();
    try {
      await page.goto(uiUrl);
      await page.waitForFunction(() => (document.querySelector('#where')?.textContent ?? '').startsWith('local stack'));
      expect(await page.$$eval('#tenant option', (os) => os.map((o) => o.textContent))).toEqual(['alpha', 'beta']);
      // The listing shows the job once ingest has stored it (live refresh every 2 s).
      await page.waitForFunction(
        (id) => Array.from(document.querySelectorAll('#jobs tbody tr')).some((tr) => (tr.textContent ?? '').includes(id)),
        { timeout: 15_000 },
        jobId,
      );
      await page.type('#open input[name=jobId]', jobId);
      await page.click('#open button');
      await page.waitForFunction((id) => document.querySelector('#detail-fields dd')?.textContent === id, {}, jobId);
      // UNKNOWN until ingest has written it (a moment), then SCHEDULED: the open job refreshes live.
      await page.waitForFunction(
        () => {
          for (const dt of Array.from(document.querySelectorAll('#detail-fields dt')))
            if (dt.textContent === 'state') return dt.nextElementSibling?.textContent === 'SCHEDULED';
          return false;
        },
        { timeout: 10_000 },
      );
      expect(await field(page, 'runAt')).toBe(runAt);
      await page.click('#cancel');
      await page.waitForFunction(() => /Cancelled/.test(document.querySelector('#detail-msg')?.textContent ?? ''));
      await page.waitForFunction(() => {
        for (const dt of Array.from(document.querySelectorAll('#detail-fields dt')))
          if (dt.textContent === 'state') return dt.nextElementSibling?.textContent === 'CANCELLED';
        return false;
      });
      const api = await signedFetch(local.endpoint, local.tenants.alpha!, 'GET', `/v1/tenants/alpha/jobs/${jobId}`);
      expect(api.json.state).toBe('CANCELLED');

      // Another tenant's job is not this tenant's: the API answers, the page shows its error.
      const betaJob = await schedule('beta', runAt);
      await page.$eval('#open input[name=jobId]', (e) => (e.value = ''));
      await page.type('#open input[name=jobId]', betaJob);
      await page.click('#open button');
      await page.waitForFunction(() => /HTTP 4\d\d/.test(document.querySelector('#detail-msg')?.textContent ?? ''));

      await page.click('nav button[data-tab=schedules]');
      await page.waitForFunction(() => /no recurring schedules/.test(document.querySelector('#schedules-msg')?.textContent ?? ''));
    } finally {
      await page.close();
    }
  });

  it('shows the tenant’s dead letters and redrives one to its queue through the dlq routes', async () => {
    const alpha = local.tenants.alpha!;
    const sqs = new SQSClient({
      endpoint: local.sqsEndpoint,
      region: local.region,
      credentials: { accessKeyId: 'x', secretAccessKey: 'x' },
    });
    const runAt = '2030-01-01T00:00:00.000Z';
    const page = await browser.newPage();
    try {
      for (const i of [1, 2])
        await sqs.send(
          new SendMessageCommand({
            QueueUrl: alpha.dlqUrl,
            MessageBody: JSON.stringify({ jobId: `dead-${i}`, tenant: 'alpha', runAt, payload: { i } }),
            MessageAttributes: { runAt: { DataType: 'String', StringValue: runAt } },
          }),
        );
      await page.goto(uiUrl);
      await page.waitForSelector('#tenant');
      await page.click('nav button[data-tab=dlq]');
      await page.waitForFunction(() => document.querySelectorAll('#dlq tbody tr').length === 2, { timeout: 10_000 });
      const ids = await page.$$eval('#dlq tbody tr td:nth-child(2)', (tds) => tds.map((td) => td.textContent).sort());
      expect(ids).toEqual(['dead-1', 'dead-2']);
      const first = await page.$eval('#dlq tbody tr td:nth-child(2)', (td) => td.textContent);
      await page.click('#dlq tbody tr input[type=checkbox]');
      await page.click('#redrive-selected');
      await page.waitForFunction(() => /^Redrove 1 message to the queue/.test(document.querySelector('#dlq-msg')?.textContent ?? ''));
      await page.waitForFunction(() => document.querySelectorAll('#dlq tbody tr').length === 1);
      const moved = await sqs.send(new ReceiveMessageCommand({ QueueUrl: alpha.queueUrl, MaxNumberOfMessages: 10, WaitTimeSeconds: 2 }));
      expect((moved.Messages ?? []).map((m) => JSON.parse(m.Body!).jobId)).toContain(first);
    } finally {
      await page.close();
      sqs.destroy();
    }
  });

  it('the local dashboard shows dispatches as they happen, cancels once per job, and says what requests per job count', async () => {
    const page = await browser.newPage();
    try {
      await page.goto(`${local.endpoint}/`);
      await page.waitForFunction(() => /\d/.test(document.querySelector('#updated')?.textContent ?? ''));
      const card = (label: string) =>
        page.evaluate((l) => {
          for (const c of Array.from(document.querySelectorAll('.card'))) {
            const text = c.textContent ?? '';
            if (text.startsWith(l)) return Number(text.slice(l.length).replace(/[^\d]/g, ''));
          }
          return NaN;
        }, label);
      const before = await card('dispatched');
      // Due past the lookahead: through the table, sent by a dispatch step that then runs on for its
      // whole execution (DYNEIN_TICK_RUN_MS, 90 s): the card must not wait for the step to end.
      // Jobs keep falling due every second for 30 s after them, so the round stays busy (it ends
      // only once nothing is due within the lookahead).
      const dueAt = Date.now() + 8_000;
      await Promise.all([
        ...Array.from({ length: 10 }, () => schedule('alpha', new Date(dueAt).toISOString())),
        ...Array.from({ length: 30 }, (_, i) => schedule('beta', new Date(dueAt + 1_000 * (i + 1)).toISOString())),
      ]);
      const cancelled = await schedule('alpha', new Date(Date.now() + 120_000).toISOString());
      for (let i = 0; i < 2; i++)
        expect((await signedFetch(local.endpoint, local.tenants.alpha!, 'DELETE', `/v1/tenants/alpha/jobs/${cancelled}`)).status).toBe(200);
      await page.waitForFunction(
        (n) => {
          for (const c of Array.from(document.querySelectorAll('.card')))
            if ((c.textContent ?? '').startsWith('dispatched')) return Number((c.textContent ?? '').replace(/[^\d]/g, '')) >= n;
          return false;
        },
        { timeout: 20_000, polling: 100 },
        before + 10,
      );
      // Within a few seconds of the due time, while the step is still sending the stream.
      expect(Date.now() - dueAt).toBeLessThan(5_000);
      expect(await card('cancelled jobs')).toBeGreaterThanOrEqual(1);
      const metrics = (await (await fetch(`${local.endpoint}/local/metrics`)).json()) as {
        jobs: { cancelled: number; cancelRequests: number };
      };
      expect(metrics.jobs.cancelRequests - metrics.jobs.cancelled).toBeGreaterThanOrEqual(1); // the repeat is a request, not a job
      expect(await page.$eval('#req-what', (e) => e.textContent)).toMatch(/divided by the jobs delivered to their queues/);
      expect(await page.$eval('#cancels', (e) => e.textContent)).toMatch(/cancel requests? answered 200/);
    } finally {
      await page.close();
    }
  });
});
