import { spawn, type ChildProcess } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ReceiveMessageCommand, SendMessageCommand } from '@aws-sdk/client-sqs';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DyneinClient, UnrecoverableError, Worker } from '../../client/index.js';
import { signedFetch, startLocalStack, type LocalJson, localSqs } from '../support/localStack.js';
import { waitUntil } from './support.js';

/**
 * `dynein ui` and the local dashboard against the real local stack (the local stack), in headless
 * Chromium: the CLI finds the stack's keys in local.json and signs for the page; the dashboard's
 * counters are current while a dispatch step is still running. The README's picture of the job
 * browser is taken here, of real jobs: `DYNEIN_SCREENSHOT=1` writes it to docs/img/job-browser.png.
 */
const CHROMIUM = process.env.DYNEIN_CHROMIUM ?? '/usr/bin/chromium';
const SCREENSHOT = 'docs/img/job-browser.png';
/**
 * How long a wait for the page may take: the local stack answers in milliseconds, but beside the
 * rest of the suite on two cores a peek or a live refresh has taken over 10 s (CI, 2026-11-27).
 */
const LOADED = 30_000;

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
  // billing keeps job history (docs/history.md): its delivered jobs show their outcomes and timelines.
  stack = await startLocalStack({ DYNEIN_TENANTS: 'alpha,beta,billing', DYNEIN_HISTORY: 'billing', DYNEIN_TICK_RUN_MS: '90000' });
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

/** A client of `tenant` with its key from local.json, as its team's code would hold one. */
const clientOf = (tenant: string) =>
  new DyneinClient({
    endpoint: local.endpoint,
    region: local.region,
    credentials: { accessKeyId: local.tenants[tenant]!.accessKeyId, secretAccessKey: local.tenants[tenant]!.secretAccessKey },
  });

/**
 * A morning of the billing team's jobs, made the way their code makes them: jobs delivered a few
 * seconds from now and handled by a real Worker that reports outcomes (succeeded; failed once and
 * then succeeded; failed for good), jobs due later, one cancelled, and a recurring schedule whose
 * first occurrence is delivered with no outcome yet. Resolves the id of the job retried once.
 */
async function billingMorning(): Promise<string> {
  const billing = clientOf('billing');
  const soon = new Date(Date.now() + 6_000); // past the 5 s lookahead: through the table, with a delivered marker
  const delivered = await Promise.all(
    [
      { task: 'send-invoice', invoiceId: 'INV-1041' },
      { task: 'charge-card', invoiceId: 'INV-1042' },
      { task: 'sync-crm', accountId: 7 },
      { task: 'refund', invoiceId: 'INV-0999' },
    ].map((payload) => billing.schedule('billing', { payload, runAt: soon })),
  );
  const [, retried, , refused] = delivered.map((j) => j.jobId);
  const later = (minutes: number) => new Date(Date.now() + minutes * 60_000);
  for (const [minutes, payload] of [
    [12, { task: 'send-reminder', invoiceId: 'INV-1043' }],
    [47, { task: 'charge-card', invoiceId: 'INV-1044' }],
    [180, { task: 'close-books', period: 'day' }],
    [1_440, { task: 'send-statement', accountId: 7 }],
  ] as const)
    await billing.schedule('billing', { payload, runAt: later(minutes) });
  const dropped = await billing.schedule('billing', { payload: { task: 'send-reminder', invoiceId: 'INV-1040' }, runAt: later(30) });
  await billing.cancel('billing', dropped.jobId);
  await billing.putSchedule('billing', 'nightly-invoices', { expression: 'cron(0 2 * * ? *)', timezone: 'Europe/Paris' });

  const sqs = localSqs(local);
  const attempts = new Map<string, number>();
  const worker = new Worker({
    queueUrl: local.tenants.billing!.queueUrl,
    deadLetterQueueUrl: local.tenants.billing!.dlqUrl,
    sqs,
    client: billing,
    handleSignals: false,
    waitTimeSeconds: 1,
    backoff: { baseMs: 500, capMs: 500 },
    handler: async (job) => {
      const attempt = (attempts.get(job.jobId) ?? 0) + 1;
      attempts.set(job.jobId, attempt);
      await new Promise((r) => setTimeout(r, 40 + 30 * attempt)); // a handler takes some time
      if (job.jobId === retried && attempt === 1) throw new Error('card processor timed out');
      if (job.jobId === refused) throw new UnrecoverableError('invoice INV-0999 was refunded already');
      return job.jobId === retried ? { chargeId: 'ch_3PqL81' } : { ok: true };
    },
  });
  const running = worker.run();
  try {
    await waitUntil(() => delivered.every((j) => attempts.has(j.jobId)) && attempts.get(retried!) === 2, 30_000, 'the jobs handled');
  } finally {
    await worker.stop(); // reports the outcomes still batched
    await running;
    sqs.destroy();
  }
  // Delivered once no worker runs: listed DELIVERED, no outcome yet. A rate() runs first at creation.
  await billing.putSchedule('billing', 'sync-ledger', { expression: 'rate(15 minutes)' });
  for (const until = Date.now() + 20_000; ; await new Promise((r) => setTimeout(r, 200))) {
    const { jobs } = await billing.listJobs('billing', { schedule: 'sync-ledger', state: 'DELIVERED' });
    if (jobs.length > 0) break;
    if (Date.now() > until) throw new Error('the first occurrence of sync-ledger was not delivered');
  }
  return retried!;
}

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
      expect(await page.$$eval('#tenant option', (os) => os.map((o) => o.textContent))).toEqual(['alpha', 'beta', 'billing']);
      // The listing shows the job once ingest has stored it (live refresh every 2 s).
      await page.waitForFunction(
        (id) => Array.from(document.querySelectorAll('#jobs tbody tr')).some((tr) => (tr.textContent ?? '').includes(id)),
        { timeout: LOADED },
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
        { timeout: LOADED },
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
    const sqs = localSqs(local);
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
      // The tab peeks at once, then every 10 s: on a timeout, say what the page showed.
      await page
        .waitForFunction(() => document.querySelectorAll('#dlq tbody tr').length === 2, { timeout: LOADED })
        .catch(async (err: Error) => {
          const shown = await page.evaluate(() => ({
            rows: document.querySelectorAll('#dlq tbody tr').length,
            message: document.querySelector('#dlq-msg')?.textContent,
            depth: document.querySelector('#dlq-depth')?.textContent,
          }));
          throw new Error(`${err.message}; the Dead letters tab showed ${JSON.stringify(shown)}`);
        });
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
        { timeout: LOADED, polling: 100 },
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

  it('shows a tenant’s real jobs and a retried job’s timeline: the picture of the README (DYNEIN_SCREENSHOT=1)', async () => {
    const retried = await billingMorning();
    const status = await clientOf('billing').get('billing', retried);
    expect(status.timeline?.map((e) => e.event)).toEqual(['SCHEDULED', 'DELIVERED', 'FAILED', 'SUCCEEDED']);
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    try {
      // Wide enough for a real job id (about 60 characters) beside the open job.
      await page.setViewport({ width: 1740, height: 760 });
      await page.goto(uiUrl);
      await page.waitForSelector('#tenant');
      await page.select('#tenant', 'billing');
      await page.waitForSelector(`tr[data-job-id="${retried}"]`, { timeout: LOADED });
      await page.click(`tr[data-job-id="${retried}"]`);
      await page.waitForFunction(() => document.querySelectorAll('#detail-timeline li').length === 4, { timeout: LOADED });
      await page.mouse.move(0, 0); // no row under the pointer (hover colour)

      const states = await page.$$eval('#jobs tbody tr td:nth-child(3)', (tds) => tds.map((td) => td.textContent));
      for (const s of ['SUCCEEDED', 'DEAD', 'DELIVERED', 'SCHEDULED', 'CANCELLED']) expect(states).toContain(s);
      expect(states.length).toBeGreaterThanOrEqual(10);
      expect(await page.$$eval('#jobs tbody td:nth-child(5)', (tds) => tds.map((td) => td.textContent))).toContain('sync-ledger');
      expect(await page.$eval('#jobs-msg', (e) => e.textContent)).toBe('');
      expect(await page.$eval('#detail-msg', (e) => e.textContent)).toBe('');
      expect(await field(page, 'state')).toBe('SUCCEEDED');
      const events = await page.$$eval('#detail-timeline li b', (bs) => bs.map((b) => b.textContent));
      expect(events).toEqual(['SCHEDULED', 'DELIVERED', 'FAILED', 'SUCCEEDED']);
      const details = await page.$$eval('#detail-timeline li div', (divs) => divs.map((d) => d.textContent));
      expect(details).toEqual([
        expect.stringMatching(/^attempt 1, durationMs \d+, error card processor timed out$/),
        expect.stringMatching(/^attempt 2, durationMs \d+, result \{"chargeId":"ch_3PqL81"\}$/),
      ]);
      expect(errors).toEqual([]);

      // Always taken (a page that renders nothing fails here too); kept in the repo on request only.
      const shot = join(mkdtempSync(join(tmpdir(), 'dynein-ui-')), 'job-browser.png');
      await page.screenshot({ path: shot });
      expect(readFileSync(shot).subarray(1, 4).toString()).toBe('PNG');
      if (process.env.DYNEIN_SCREENSHOT === '1') copyFileSync(shot, SCREENSHOT);
    } finally {
      await page.close();
    }
  }, 90_000);
});
