import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { createServer, request } from 'node:http';
import type { AddressInfo } from 'node:net';
import puppeteer, { type Browser, type Dialog, type Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import type * as Client from '../../client/index.js';
import type * as PageTypes from '../../client/ui/browser/apiTypes.js';
import { startUiServer, type UiServer } from '../../client/ui/server.js';
import { verifySigV4 } from '../../local/sigv4.js';
import { STUB_CREDENTIALS, STUB_REGION } from './scheduleStub.js';
import { startUiStub, stubJob, T0, type StubDeadLetter, type UiStub } from './uiStub.js';

/**
 * The job browser (`dynein ui`) in a real browser: headless Chromium from Debian's packages
 * (`apt-get install -y chromium`), driven by puppeteer-core, against the UI server proxying to an
 * in-test API stub that checks SigV4. No Chromium fails the test, with how to install it.
 */
// The callbacks below run in Chromium (puppeteer serializes them); the project compiles without
// the DOM library, so these are the few DOM shapes they use.
interface DomElement {
  textContent: string | null;
  className: string;
  hidden: boolean;
  value: string;
  disabled: boolean;
  checked: boolean;
  id: string;
  nextElementSibling: DomElement | null;
  querySelectorAll(selector: string): Iterable<DomElement> & ArrayLike<DomElement>;
  reset(): void;
  click(): void;
}
type HTMLElement = DomElement;
type HTMLButtonElement = DomElement;
type HTMLInputElement = DomElement;
type HTMLSelectElement = DomElement;
type HTMLFormElement = DomElement;
declare const document: {
  activeElement: DomElement | null;
  querySelector(selector: string): DomElement | null;
  querySelectorAll(selector: string): Iterable<DomElement> & ArrayLike<DomElement>;
};

const CHROMIUM = process.env.DYNEIN_CHROMIUM ?? '/usr/bin/chromium';

let browser: Browser;
let stub: UiStub;
let api: EditRoutes;
let ui: UiServer;
let page: Page;

/** The list's rows: job, run at, state, delivered at, schedule (the key and tags columns apart: {@link tagsColumn}, the last). */
const rows = () =>
  page.$$eval('#jobs tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent).slice(0, 5)));
const tagsColumn = () => page.$$eval('#jobs tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')].at(-1)?.textContent));
const text = (sel: string) => page.$eval(sel, (e) => e.textContent ?? '');
/**
 * Clicks `sel`, which opens a confirm() dialog, and answers it: the dialog is awaited before it is
 * answered and the click after (a handler registered beside a click could meet the next dialog
 * on a slow machine, and a click that opened one does not end before it is answered). Its message.
 */
async function confirmClick(sel: string, answer: 'accept' | 'dismiss'): Promise<string> {
  const opened = new Promise<Dialog>((resolve) => page.once('dialog', resolve));
  const clicked = page.click(sel);
  const dialog = await opened;
  await (answer === 'accept' ? dialog.accept() : dialog.dismiss());
  await clicked;
  return dialog.message();
}

/** Waits for `sel`'s text to match; a timeout says what the text was. */
const waitText = async (sel: string, pattern: RegExp, timeout = 5_000) => {
  try {
    await page.waitForFunction(
      (s, p) => new RegExp(p).test(document.querySelector(s)?.textContent ?? ''),
      { timeout },
      sel,
      pattern.source,
    );
  } catch (err) {
    const now = await page.$eval(sel, (e) => e.textContent ?? '').catch(() => '(no such element)');
    throw new Error(`${sel} never matched ${pattern} within ${timeout} ms: it says "${now}" (${(err as Error).message})`);
  }
};
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest('hex');
const EDITOR = 'arn:aws:iam::000000000000:user/dynein-alpha';

interface EditRoutes {
  readonly endpoint: string;
  /** The tenant's audit trail, newest first, as `GET .../dlq/audit` pages it. */
  readonly audit: PageTypes.DeadLetterAuditEntry[];
  /** Handles whose edit is refused with 409 NotADelivery. */
  readonly notDeliveries: Set<string>;
  close(): Promise<void>;
}

/**
 * The edit routes in front of the UI stub: `POST .../dlq/edit` and `GET .../dlq/audit` answered
 * here as the API does (docs/dead-letters.md, Edit and retry), SigV4 checked, each request recorded
 * in `stub.requests` with its body as received; every other request forwarded to the stub as it came
 * (its Host too, so the stub's own SigV4 check passes). An edit takes the message out of
 * `stub.dlq`, unless its handle is in `stub.failDeletes` (answered `sentNotDeleted`).
 */
async function startEditRoutes(under: UiStub): Promise<EditRoutes> {
  const audit: PageTypes.DeadLetterAuditEntry[] = [];
  const notDeliveries = new Set<string>();
  const target = new URL(under.endpoint);
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req as AsyncIterable<Buffer>) chunks.push(chunk);
    const raw = Buffer.concat(chunks);
    const url = req.url!;
    const [path = '', query = ''] = url.split('?');
    const route = /^\/v1\/tenants\/alpha\/dlq\/(edit|audit)$/.exec(path)?.[1];
    if (!route) {
      const forwarded = request({ host: target.hostname, port: target.port, method: req.method, path: url, headers: req.headers }, (r) => {
        res.writeHead(r.statusCode!, r.headers);
        r.pipe(res);
      });
      forwarded.on('error', (err) => res.destroy(err));
      return void forwarded.end(raw);
    }
    under.requests.push({ method: req.method!, url, body: raw.toString('utf8') });
    const reply = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const error = (status: number, code: string, message: string) => reply(status, { error: { code, message } });
    const verified = verifySigV4(
      { method: req.method!, path, query, headers: req.headers, body: raw },
      {
        secretOf: (id) => (id === STUB_CREDENTIALS.accessKeyId ? STUB_CREDENTIALS.secretAccessKey : undefined),
        now: Date.now(),
        region: STUB_REGION,
      },
    );
    if (!verified.ok) return reply(403, { message: verified.message });
    if (route === 'audit' && req.method === 'GET') {
      const limit = Number(new URLSearchParams(query).get('limit') ?? 50);
      return reply(200, { edits: audit.slice(0, limit), ...(audit.length > limit ? { cursor: 'next-page' } : {}) });
    }
    if (route !== 'edit' || req.method !== 'POST') return reply(404, { message: 'Not Found' });
    const body = raw.toString('utf8');
    const { handle } = JSON.parse(body) as { handle: string };
    const payload = /^\{"handle":"[^"]*","payload":([\s\S]*)\}$/.exec(body)?.[1];
    const message = under.dlq.find((d) => d.handle === handle);
    if (payload === undefined) return error(400, 'ValidationError', 'the body is {"handle": "<handle>", "payload": <the new payload>}');
    if (!message) return error(404, 'DeadLetterNotFound', 'the dead letter is no longer in the DLQ');
    if (notDeliveries.has(handle))
      return error(
        409,
        'NotADelivery',
        "the message is not a Dynein delivery of tenant 'alpha', so it has no payload to edit: redrive or delete it instead; nothing was changed",
      );
    const old = /,"payload":([\s\S]*)\}$/.exec(message.body)![1]!;
    const entry = {
      at: new Date().toISOString(),
      jobId: message.jobId,
      by: EDITOR,
      oldPayloadSha256: sha256(old),
      newPayloadSha256: sha256(payload),
      messageId: message.messageId,
    };
    audit.unshift(entry);
    const stuck = under.failDeletes.has(handle);
    if (!stuck) under.dlq.splice(under.dlq.indexOf(message), 1);
    const { at, by: _by, messageId: _m, ...rest } = entry;
    return reply(200, { ...rest, editedAt: at, ...(stuck ? { sentNotDeleted: true } : {}) });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    audit,
    notDeliveries,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      }),
  };
}

/** A Dynein delivery in the DLQ, its payload the text `payload` as it was submitted. */
function deadDelivery(i: number, payload: string): StubDeadLetter {
  const runAt = new Date(T0).toISOString();
  return {
    handle: `h-${i}`,
    messageId: `m-${i}`,
    jobId: `alpha-dead-${i}`,
    runAt,
    receiveCount: 5,
    sentAt: runAt,
    firstReceivedAt: runAt,
    attributes: { runAt, dyneinError: `handler threw: bad payload ${i}` },
    body: `{"jobId":"alpha-dead-${i}","tenant":"alpha","runAt":"${runAt}","payload":${payload}}`,
  };
}

beforeAll(async () => {
  if (!existsSync(CHROMIUM))
    throw new Error(
      `Chromium is not installed at ${CHROMIUM}: the job browser's tests need it. Install it with ` +
        '`apt-get update && apt-get install -y chromium` (Debian/Ubuntu; .ci/run does this), or set DYNEIN_CHROMIUM to its path.',
    );
  stub = await startUiStub();
  // Jobs 40 and 41 (and the delivered 100) carry a tag, for the tag filter and the cancel by tag.
  for (let i = 0; i < 60; i++) stub.jobs.push(stubJob('alpha', i, 'SCHEDULED', i === 40 || i === 41 ? { tags: ['order-42', 'eu'] } : {}));
  stub.jobs.push(
    stubJob('alpha', 100, 'QUEUED', { deliveredAt: new Date(T0 + 100 * 60_000 + 12).toISOString(), tags: ['order-42'] }),
    stubJob('alpha', 101, 'QUEUED', { deliveredAt: new Date(T0 + 101 * 60_000 + 9).toISOString(), schedule: 'nightly-report' }),
    stubJob('alpha', 102, 'SCHEDULED', {
      timeline: [
        { at: '2029-12-31T23:00:00.000Z', event: 'SCHEDULED' },
        { at: '2029-12-31T23:00:00.450Z', event: 'INGESTED' },
      ],
    }),
    stubJob('beta', 1),
  );
  for (let i = 0; i < 13; i++)
    stub.dlq.push({
      handle: `h-${i}`,
      messageId: `m-${i}`,
      jobId: `alpha-dead-${i}`,
      runAt: new Date(T0 - 3_600_000).toISOString(),
      receiveCount: 5,
      sentAt: new Date(T0 - 3_600_000 + 400).toISOString(),
      firstReceivedAt: new Date(T0 - 3_600_000 + 500 + i).toISOString(),
      attributes: { runAt: new Date(T0 - 3_600_000).toISOString(), dyneinError: `handler threw: boom ${i}` },
      body: JSON.stringify({ jobId: `alpha-dead-${i}`, payload: { n: i } }),
    });
  api = await startEditRoutes(stub);
  ui = await startUiServer({
    endpoint: api.endpoint,
    region: STUB_REGION,
    credentialsFor: (t) => (t === 'alpha' || t === 'beta' ? STUB_CREDENTIALS : undefined),
    tenants: ['alpha', 'beta'],
    tenant: 'alpha',
    local: true,
    refreshMs: 500,
  });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1400, height: 900 });
});

afterAll(async () => {
  await browser?.close();
  await ui?.close();
  await api?.close();
  await stub?.close();
});

describe('the job browser in Chromium', () => {
  it('loads the first page of the tenant’s jobs, soonest first', async () => {
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(ui.url);
    await page.waitForSelector('#jobs tbody tr');
    const shown = await rows();
    expect(shown).toHaveLength(25);
    expect(shown[0]).toEqual(['alpha-job-000', '2030-01-01T00:00:00.000Z', 'SCHEDULED', '', '']);
    expect(shown[24]![0]).toBe('alpha-job-024');
    expect(await text('#page')).toBe('Page 1');
    expect(await page.$eval('#prev', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    expect(await text('#live')).toMatch(/^live/);
    expect(await page.$eval('#tenant', (s) => (s as HTMLSelectElement).value)).toBe('alpha');
    expect(await text('#where')).toContain(api.endpoint);
    expect(errors).toEqual([]);
    // Signed by the server: the stub checked SigV4 on every call.
    expect(stub.requests.some((r) => r.url.startsWith('/v1/tenants/alpha/jobs?') && r.url.includes('limit=25'))).toBe(true);
  });

  it('pages forward with the cursor and back, pausing live refresh off the first page', async () => {
    await page.click('#next');
    await waitText('#page', /^Page 2$/);
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'alpha-job-025');
    expect((await rows()).map((r) => r[0])).toEqual(Array.from({ length: 25 }, (_, i) => `alpha-job-${String(25 + i).padStart(3, '0')}`));
    expect(await text('#live')).toMatch(/paused on page 2/);
    const before = stub.requests.length;
    await new Promise((r) => setTimeout(r, 1_200));
    expect(stub.requests.length).toBe(before); // no polling while paged back
    await page.click('#next');
    await waitText('#page', /^Page 3$/);
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'alpha-job-050');
    expect((await rows()).map((r) => r[0])).toEqual([
      ...Array.from({ length: 10 }, (_, i) => `alpha-job-${String(50 + i).padStart(3, '0')}`),
      'alpha-job-100',
      'alpha-job-101',
      'alpha-job-102',
    ]);
    expect(await page.$eval('#next', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    await page.click('#prev');
    await waitText('#page', /^Page 2$/);
    await page.click('#prev');
    await waitText('#page', /^Page 1$/);
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'alpha-job-000');
    expect(await text('#live')).toMatch(/^live/);
  });

  it('refreshes live: a job scheduled meanwhile appears within the refresh interval', async () => {
    stub.jobs.push({ jobId: 'alpha-early', tenant: 'alpha', runAt: new Date(T0 - 60_000).toISOString(), state: 'SCHEDULED' });
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'alpha-early', { timeout: 3_000 });
    // Paused by the user: nothing changes.
    await page.click('#pause');
    expect(await text('#live')).toBe('paused');
    stub.jobs.pop();
    await new Promise((r) => setTimeout(r, 1_200));
    expect((await rows())[0]![0]).toBe('alpha-early');
    await page.click('#pause');
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'alpha-job-000', { timeout: 3_000 });
  });

  it('filters by state and time window', async () => {
    await page.select('#filters select[name=state]', 'QUEUED');
    await page.click('#filters button[type=submit]');
    await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 2);
    expect(await rows()).toEqual([
      ['alpha-job-100', '2030-01-01T01:40:00.000Z', 'QUEUED', '2030-01-01T01:40:00.012Z', ''],
      ['alpha-job-101', '2030-01-01T01:41:00.000Z', 'QUEUED', '2030-01-01T01:41:00.009Z', 'nightly-report'],
    ]);
    const listed = stub.requests.filter((r) => r.url.includes('state=QUEUED'));
    expect(listed.length).toBeGreaterThan(0);

    await page.select('#filters select[name=state]', '');
    // The window's inputs are in the browser's local time (the test's TZ); the API gets RFC 3339.
    const local = (ms: number) => {
      const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60_000);
      return d.toISOString().slice(0, 19);
    };
    await page.$eval('#filters input[name=from]', (e, v) => ((e as HTMLInputElement).value = v), local(T0 + 10 * 60_000));
    await page.$eval('#filters input[name=to]', (e, v) => ((e as HTMLInputElement).value = v), local(T0 + 12 * 60_000));
    await page.select('#filters select[name=order]', 'desc');
    await page.click('#filters button[type=submit]');
    await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 3);
    expect((await rows()).map((r) => r[0])).toEqual(['alpha-job-012', 'alpha-job-011', 'alpha-job-010']);
    const last = stub.requests.filter((r) => r.url.startsWith('/v1/tenants/alpha/jobs?')).at(-1)!;
    const q = new URL(last.url, 'http://x').searchParams;
    expect(q.get('from')).toBe('2030-01-01T00:10:00.000Z');
    expect(q.get('to')).toBe('2030-01-01T00:12:00.000Z');
    expect(q.get('order')).toBe('desc');

    // Back to everything.
    await page.$eval('#filters', (f) => (f as HTMLFormElement).reset());
    await page.click('#filters button[type=submit]');
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'alpha-job-000');
  });

  it('filters by tag, and cancels every pending job with the tag once confirmed', async () => {
    await page.$eval('#filters input[name=tag]', (e) => ((e as HTMLInputElement).value = 'order-42'));
    await page.click('#filters button[type=submit]');
    await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 3);
    expect((await rows()).map((r) => [r[0], r[2]])).toEqual([
      ['alpha-job-040', 'SCHEDULED'],
      ['alpha-job-041', 'SCHEDULED'],
      ['alpha-job-100', 'QUEUED'],
    ]);
    expect(await tagsColumn()).toEqual(['order-42, eu', 'order-42, eu', 'order-42']);
    expect(stub.requests.some((r) => r.url.startsWith('/v1/tenants/alpha/jobs?') && r.url.includes('tag=order-42'))).toBe(true);

    // Declined: nothing sent. Accepted: POST .../jobs/cancel, its operation followed to DONE, the list read again.
    await confirmClick('#cancel-tag', 'dismiss');
    await new Promise((r) => setTimeout(r, 300));
    expect(stub.requests.some((r) => r.url === '/v1/tenants/alpha/jobs/cancel')).toBe(false);
    expect(await confirmClick('#cancel-tag', 'accept')).toContain('tagged "order-42"');
    await waitText('#jobs-msg', /Cancelled by tag "order-42": matched 2, cancelled 2, already queued 0, not cancellable 0\./, 15_000); // polled every 500 ms: slow on a busy machine
    const sent = stub.requests.find((r) => r.url === '/v1/tenants/alpha/jobs/cancel')!;
    expect([sent.method, JSON.parse(sent.body)]).toEqual(['POST', { tag: 'order-42' }]);
    expect(stub.requests.some((r) => r.method === 'GET' && r.url.startsWith('/v1/tenants/alpha/operations/op1.'))).toBe(true);
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td:nth-child(3)')?.textContent === 'CANCELLED');
    expect((await rows()).map((r) => r[2])).toEqual(['CANCELLED', 'CANCELLED', 'QUEUED']);
    // The list read again keeps the outcome shown.
    expect(await text('#jobs-msg')).toMatch(/^Cancelled by tag "order-42"/);

    // Without a tag, the button says what it needs and sends nothing.
    await page.$eval('#filters', (f) => (f as HTMLFormElement).reset());
    const before = stub.requests.length;
    await page.click('#cancel-tag');
    await waitText('#jobs-msg', /Enter a tag first/);
    expect(stub.requests.slice(before).some((r) => r.url.endsWith('/jobs/cancel'))).toBe(false);
    await page.click('#filters button[type=submit]');
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'alpha-job-000');
  });

  it('shows a job with its timeline, and cancels it', async () => {
    await page.click('#next');
    await waitText('#page', /^Page 2$/);
    await page.click('#next');
    await page.waitForSelector('tr[data-job-id="alpha-job-102"]');
    await page.click('tr[data-job-id="alpha-job-102"]');
    await waitText('#detail-timeline', /INGESTED/);
    expect(await page.$eval('#detail', (e) => (e as HTMLElement).hidden)).toBe(false);
    const fields = await page.$$eval('#detail-fields dt', (dts) => dts.map((dt) => [dt.textContent, dt.nextElementSibling?.textContent]));
    expect(fields).toContainEqual(['jobId', 'alpha-job-102']);
    expect(fields).toContainEqual(['state', 'SCHEDULED']);
    expect(await page.$$eval('#detail-timeline li', (lis) => lis.map((li) => li.textContent))).toEqual([
      '2029-12-31T23:00:00.000Z SCHEDULED',
      '2029-12-31T23:00:00.450Z INGESTED',
    ]);
    await page.click('#cancel');
    await waitText('#detail-msg', /Cancelled alpha-job-102/);
    await page.waitForFunction(() =>
      [...document.querySelectorAll('#detail-fields dt')].some(
        (dt) => dt.textContent === 'state' && dt.nextElementSibling?.textContent === 'CANCELLED',
      ),
    );
    expect(stub.jobs.find((j) => j.jobId === 'alpha-job-102')!.state).toBe('CANCELLED');
    expect(stub.requests.some((r) => r.method === 'DELETE' && r.url === '/v1/tenants/alpha/jobs/alpha-job-102')).toBe(true);
    expect(await page.$eval('#cancel', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    // Paged back, the list is not live: it was reloaded once after the cancel.
    await page.waitForFunction(() =>
      [...document.querySelectorAll('tr[data-job-id="alpha-job-102"] td')].some((td) => td.textContent === 'CANCELLED'),
    );

    // Too late: a delivered job's cancel shows the API's error.
    await page.click('tr[data-job-id="alpha-job-100"]');
    await page.waitForFunction(() => document.querySelector('#detail-fields dd')?.textContent === 'alpha-job-100');
    expect(await page.$eval('#cancel', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    await page.$eval('#cancel', (b) => ((b as HTMLButtonElement).disabled = false));
    await page.click('#cancel');
    await waitText('#detail-msg', /Not cancelled: AlreadyQueued: .*\(HTTP 409\)/);

    // A keyed job running (101, given a key for this step): its worker can be asked to stop it, once.
    const keyed = stub.jobs.find((j) => j.jobId === 'alpha-job-101')!;
    keyed.concurrencyKey = 'customer-7';
    try {
      // Clicked in the page (the list may be redrawn between finding the row and a mouse click).
      await page.waitForSelector('tr[data-job-id="alpha-job-101"]');
      await page.$eval('tr[data-job-id="alpha-job-101"]', (tr) => (tr as HTMLElement).click());
      await page.waitForFunction(() => document.querySelector('#detail-fields dd')?.textContent === 'alpha-job-101');
      expect(await page.$eval('#cancel', (b) => [(b as HTMLButtonElement).disabled, b.textContent])).toEqual([false, 'Ask to stop']);
      await page.click('#cancel');
      await waitText('#detail-msg', /Asked the worker running alpha-job-101 to stop it \(CANCEL_REQUESTED\)/);
      await page.waitForFunction(() => (document.querySelector('#cancel') as HTMLButtonElement).disabled);
      expect(stub.requests.some((r) => r.method === 'DELETE' && r.url === '/v1/tenants/alpha/jobs/alpha-job-101')).toBe(true);
    } finally {
      delete keyed.concurrencyKey;
      delete keyed.cancelRequested;
    }
    await page.click('#prev');
    await waitText('#page', /^Page 2$/);
    await page.click('#prev');
    await waitText('#page', /^Page 1$/);
  });

  it('draws a workflow as a graph with each job’s state; a job clicked opens in the Jobs tab', async () => {
    stub.workflows.set('wf1.alpha.1.demo', {
      workflowId: 'wf1.alpha.1.demo',
      tenant: 'alpha',
      state: 'RUNNING',
      createdAt: new Date(T0).toISOString(),
      jobs: [
        { key: 'extract', jobId: 'alpha-job-100', state: 'SUCCEEDED', runAt: new Date(T0).toISOString() },
        { key: 'transform', jobId: 'alpha-job-101', state: 'QUEUED', after: ['extract'], runAt: new Date(T0).toISOString() },
        { key: 'load-eu', jobId: 'alpha-job-003', state: 'WAITING', after: ['transform'] },
        { key: 'load-us', jobId: 'alpha-job-004', state: 'CANCELLED', after: ['transform'], message: 'cancelled (DELETE of the job)' },
        { key: 'report', jobId: 'alpha-job-005', state: 'WAITING', after: ['load-eu', 'load-us'] },
      ],
    });
    await page.click('nav button[data-tab=workflows]');
    await page.type('#open-workflow input[name=workflowId]', 'wf1.alpha.1.unknown');
    await page.click('#open-workflow button[type=submit]');
    await waitText('#workflow-msg', /WorkflowNotFound|no such workflow/);
    await page.$eval('#open-workflow input[name=workflowId]', (e) => ((e as HTMLInputElement).value = ''));
    await page.type('#open-workflow input[name=workflowId]', 'wf1.alpha.1.demo');
    await page.click('#open-workflow button[type=submit]');
    await page.waitForSelector('svg.workflow g.job');
    await waitText('#workflow-head', /wf1\.alpha\.1\.demo\s+RUNNING/);
    const boxes = await page.$$eval('svg.workflow g.job', (gs) =>
      gs.map((g) => [g.getAttribute('data-key'), g.getAttribute('data-state'), g.getAttribute('transform')]),
    );
    // Columns by depth: extract, transform, the two loads, report.
    const column = (t: string | null) => Number(/translate\(([\d.]+),/.exec(t ?? '')?.[1]);
    expect(boxes.map(([k, s]) => [k, s])).toEqual([
      ['extract', 'SUCCEEDED'],
      ['transform', 'QUEUED'],
      ['load-eu', 'WAITING'],
      ['load-us', 'CANCELLED'],
      ['report', 'WAITING'],
    ]);
    const [x0, x1, x2, x3, x4] = boxes.map(([, , t]) => column(t));
    expect(x0! < x1! && x1! < x2! && x2 === x3 && x3! < x4!).toBe(true);
    const edges = await page.$$eval('svg.workflow line.edge', (ls) =>
      ls.map((l) => `${l.getAttribute('data-from')}→${l.getAttribute('data-to')}`),
    );
    expect(edges.sort()).toEqual(['extract→transform', 'load-eu→report', 'load-us→report', 'transform→load-eu', 'transform→load-us']);
    // The live refresh redraws only what changed: the box stays the one clicked.
    const before = await page.$('svg.workflow g.job[data-key=transform]');
    await new Promise((r) => setTimeout(r, 1_200)); // two refreshes
    expect(await before!.evaluate((g) => g.isConnected)).toBe(true);
    await page.click('svg.workflow g.job[data-key=transform]');
    await waitText('#detail-fields', /alpha-job-101/);
    expect(await page.$eval('#tab-jobs', (e) => (e as HTMLElement).hidden)).toBe(false);
  });

  it('lists recurring schedules with their next runs', async () => {
    await page.click('nav button[data-tab=schedules]');
    await page.waitForSelector('#schedules tbody tr');
    const shown = await page.$$eval('#schedules tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
    );
    expect(shown).toEqual([
      [
        'nightly-report',
        'ENABLED',
        'cron(0 2 * * ? *)',
        'Europe/Paris',
        '2030-01-02T01:00:00.000Z  2030-01-03T01:00:00.000Z  2030-01-04T01:00:00.000Z  …',
      ],
      ['paused-sync', 'DISABLED', 'rate(5 minutes)', 'UTC', 'paused'],
    ]);
  });

  it('shows the dead-letter queue; redrives some, deletes some, then redrives all', async () => {
    await page.click('nav button[data-tab=dlq]');
    await page.waitForFunction(() => document.querySelectorAll('#dlq tbody tr').length === 10);
    const shown = await page.$$eval('#dlq tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].slice(1).map((td) => td.textContent)),
    );
    expect(shown[0]).toEqual([
      'alpha-dead-0',
      '5',
      '2029-12-31T23:00:00.500Z',
      'handler threw: boom 0',
      '{"jobId":"alpha-dead-0","payload":{"n":0}}',
      'Edit',
    ]);
    expect(await text('#dlq-depth')).toBe('about 13 messages in the queue; showing 10 (redrive or delete them to see more)');
    expect(await page.$eval('#redrive-selected', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    expect(await page.$eval('#delete-selected', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    await page.click('#dlq tbody tr[data-handle="h-1"] input');
    await waitText('#redrive-selected', /Redrive selected \(1\)/);
    await page.click('#redrive-selected');
    await waitText('#dlq-msg', /^Redrove 1 message to the queue\.$/);
    expect(stub.redriven.map((d) => d.handle)).toEqual(['h-1']);
    expect(JSON.parse(stub.requests.filter((r) => r.url === '/v1/tenants/alpha/dlq/redrive')[0]!.body)).toEqual({ handles: ['h-1'] });
    // The list is read again after a redrive: its first row was alpha-dead-0 before it too, so the
    // depth is what shows the new read (a busy machine shows the old one for a while).
    await waitText('#dlq-depth', /^about 12 messages/);
    expect(await page.$$eval('#dlq tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-handle')))).not.toContain('h-1');
    expect(await page.$eval('#dlq tbody tr td:nth-child(2)', (td) => td.textContent)).toBe('alpha-dead-0');

    // Delete asks first.
    await page.click('#dlq tbody tr[data-handle="h-2"] input');
    await page.click('#dlq tbody tr[data-handle="h-3"] input');
    await waitText('#delete-selected', /Delete selected \(2\)/);
    const asked = await confirmClick('#delete-selected', 'accept');
    await waitText('#dlq-msg', /^Deleted 2 messages\.$/);
    expect(asked).toBe('Delete 2 messages from the dead-letter queue? They are gone for good.');
    expect(JSON.parse(stub.requests.find((r) => r.url === '/v1/tenants/alpha/dlq/delete')!.body)).toEqual({ handles: ['h-2', 'h-3'] });
    expect(stub.dlq).toHaveLength(10);
    await page.waitForFunction(() => document.querySelector('#dlq-depth')?.textContent === '');

    await page.click('#redrive-all');
    await waitText('#dlq-msg', /^Redrove 10 messages to the queue\.$/);
    await page.waitForFunction(() => document.querySelectorAll('#dlq tbody tr').length === 0);
    expect(JSON.parse(stub.requests.filter((r) => r.url === '/v1/tenants/alpha/dlq/redrive').at(-1)!.body)).toEqual({ all: true });
    expect(await page.$eval('#redrive-all', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    expect(stub.dlq).toEqual([]);
  });

  it('keeps a message sent but not deleted selected, with the advice to delete it and not redrive it again', async () => {
    for (const i of [20, 21])
      stub.dlq.push({
        handle: `h-${i}`,
        messageId: `m-${i}`,
        jobId: `alpha-dead-${i}`,
        runAt: new Date(T0).toISOString(),
        receiveCount: 5,
        sentAt: new Date(T0).toISOString(),
        firstReceivedAt: new Date(T0).toISOString(),
        attributes: { runAt: new Date(T0).toISOString() },
        body: JSON.stringify({ jobId: `alpha-dead-${i}` }),
      });
    stub.failDeletes.add('h-20');
    await page.click('nav button[data-tab=jobs]');
    await page.click('nav button[data-tab=dlq]');
    await page.waitForFunction(() => document.querySelectorAll('#dlq tbody tr').length === 2);
    await page.click('#dlq tbody tr[data-handle="h-20"] input');
    await page.click('#dlq tbody tr[data-handle="h-21"] input');
    await page.click('#redrive-selected');
    await waitText('#dlq-msg', /^Redrove 1 message to the queue; 1 sent to the queue but still in the DLQ/);
    expect(await text('#dlq-msg')).toMatch(/delete them \(they stay selected\), do not redrive them again or they are delivered twice\.$/);
    expect(await page.$eval('#dlq-msg', (e) => e.className)).toBe('msg err');
    await page.waitForFunction(() => document.querySelectorAll('#dlq tbody tr').length === 1);
    await waitText('#delete-selected', /Delete selected \(1\)/);
    // Back on the queue already: another edit would deliver it twice.
    expect(await page.$eval('#dlq tbody tr[data-handle="h-20"] button.edit', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    stub.failDeletes.clear();
    await confirmClick('#delete-selected', 'accept');
    await waitText('#dlq-msg', /^Deleted 1 message\.$/);
    expect(JSON.parse(stub.requests.filter((r) => r.url === '/v1/tenants/alpha/dlq/delete').at(-1)!.body)).toEqual({ handles: ['h-20'] });
    expect(stub.dlq).toEqual([]);
  });

  it('edits a dead letter’s payload: the text typed sent byte for byte, the list read again; refusals shown, nothing sent for invalid JSON', async () => {
    // The payload as it was submitted, spacing and all, a member named payload inside it.
    const submitted = '{"n": 1.0, "tags": ["a", "b"], "inner": {"payload": 2}}';
    stub.dlq.push(deadDelivery(30, submitted), deadDelivery(31, '{"n":1}'), deadDelivery(32, '[1,2]'));
    // A message someone else sent to the queue: no payload to edit.
    stub.dlq.push({ ...deadDelivery(33, 'null'), jobId: '', body: 'not a delivery' });
    const edits = () => stub.requests.filter((r) => r.url === '/v1/tenants/alpha/dlq/edit');
    await page.click('nav button[data-tab=jobs]');
    await page.click('nav button[data-tab=dlq]');
    await page.waitForFunction(() => document.querySelectorAll('#dlq tbody tr').length === 4);
    expect(await page.$$eval('#dlq tbody tr', (trs) => trs.map((tr) => tr.querySelectorAll('button.edit').length))).toEqual([1, 1, 1, 0]);

    // The editor opens on the payload's text as the body holds it (not parsed and written again).
    await page.click('#dlq tbody tr[data-handle="h-30"] button.edit');
    await page.waitForFunction(() => document.querySelector('#dlq-edit')?.hidden === false);
    expect(await page.$eval('#dlq-edit-payload', (e) => (e as HTMLInputElement).value)).toBe(submitted);
    expect(await text('#dlq-edit-job')).toBe('alpha-dead-30');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('dlq-edit-payload');

    // Not JSON: said on one line, nothing sent.
    await page.$eval('#dlq-edit-payload', (e) => ((e as HTMLInputElement).value = ''));
    await page.type('#dlq-edit-payload', '{ "n" : 1.50 ');
    await page.click('#dlq-edit-save');
    await waitText('#dlq-edit-msg', /^Not JSON, nothing sent: [^\n]+$/);
    expect(await page.$eval('#dlq-edit-msg', (e) => e.className)).toBe('msg err');
    expect(edits()).toEqual([]);

    // JSON with odd spacing and a trailing zero, blanks around it: sent as typed, trimmed.
    await page.$eval('#dlq-edit-payload', (e) => ((e as HTMLInputElement).value = ''));
    await page.type('#dlq-edit-payload', '  { "n" : 1.50 }\n ');
    await page.click('#dlq-edit-save');
    await waitText('#dlq-msg', /^Edited alpha-dead-30: put back on the queue with the new payload\.$/);
    expect(edits().map((r) => [r.method, r.body])).toEqual([['POST', '{"handle":"h-30","payload":{ "n" : 1.50 }}']]);
    expect(api.audit[0]).toMatchObject({
      jobId: 'alpha-dead-30',
      oldPayloadSha256: sha256(submitted),
      newPayloadSha256: sha256('{ "n" : 1.50 }'),
    });
    // The list read again: the message gone.
    await page.waitForFunction(() => document.querySelectorAll('#dlq tbody tr').length === 3);
    expect(await page.$$eval('#dlq tbody tr', (trs) => trs.map((tr) => tr.getAttribute('data-handle')))).toEqual(['h-31', 'h-32', 'h-33']);
    expect(await page.$eval('#dlq-edit', (e) => (e as HTMLElement).hidden)).toBe(true);
    expect(await page.$eval('#dlq-msg', (e) => e.className)).toBe('msg ok');

    // Refused by the API: its error in the editor, which stays open; the prefilled text sent as it is.
    api.notDeliveries.add('h-31');
    await page.click('#dlq tbody tr[data-handle="h-31"] button.edit');
    await page.waitForFunction(() => document.querySelector('#dlq-edit-job')?.textContent === 'alpha-dead-31');
    await page.click('#dlq-edit-save');
    await waitText('#dlq-edit-msg', /^Not edited: NotADelivery: the message is not a Dynein delivery of tenant 'alpha'.* \(HTTP 409\)$/);
    expect(edits().at(-1)!.body).toBe('{"handle":"h-31","payload":{"n":1}}');
    expect(await page.$eval('#dlq-edit', (e) => (e as HTMLElement).hidden)).toBe(false);
    await page.click('#dlq-edit-cancel');
    expect(await page.$eval('#dlq-edit', (e) => (e as HTMLElement).hidden)).toBe(true);

    // Sent but not deleted: in both, so kept selected for Delete, its Edit disabled.
    stub.failDeletes.add('h-32');
    await page.click('#dlq tbody tr[data-handle="h-32"] button.edit');
    await page.waitForFunction(() => document.querySelector('#dlq-edit-job')?.textContent === 'alpha-dead-32');
    await page.click('#dlq-edit-save');
    await waitText(
      '#dlq-msg',
      /^Edited alpha-dead-32: sent to the queue with the new payload, but still in the DLQ \(its delete failed\): delete it/,
    );
    expect(await text('#dlq-msg')).toMatch(/do not edit or redrive it again or it is delivered twice\.$/);
    expect(await page.$eval('#dlq-msg', (e) => e.className)).toBe('msg err');
    await waitText('#delete-selected', /Delete selected \(1\)/);
    expect(await page.$eval('#dlq tbody tr[data-handle="h-32"] input', (b) => (b as HTMLInputElement).checked)).toBe(true);
    expect(await page.$eval('#dlq tbody tr[data-handle="h-32"] button.edit', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
    stub.failDeletes.clear();
    stub.dlq.splice(0);
  });

  it('lists the tenant’s edits, newest first, with a note when older ones are not shown', async () => {
    // Older edits than the test's two: 22 in all, a page of 20.
    for (let i = 0; i < 20; i++)
      api.audit.push({
        at: new Date(T0 - (i + 1) * 60_000).toISOString(),
        jobId: `alpha-old-${i}`,
        by: 'arn:aws:iam::111122223333:user/ops',
        oldPayloadSha256: sha256(`old ${i}`),
        newPayloadSha256: sha256(`new ${i}`),
        messageId: `m-old-${i}`,
      });
    expect(await page.$eval('#dlq-edits', (e) => (e as HTMLElement).hidden)).toBe(true);
    await page.click('#dlq-edits-show');
    await page.waitForFunction(() => document.querySelectorAll('#dlq-edits tbody tr').length === 20);
    const shown = await page.$$eval('#dlq-edits tbody tr', (trs) =>
      trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)),
    );
    const short = (text: string) => sha256(text).slice(0, 12);
    expect(shown[0]).toEqual([api.audit[0]!.at, 'alpha-dead-32', EDITOR, `${short('[1,2]')} → ${short('[1,2]')}`]);
    expect(shown[1]).toEqual([
      api.audit[1]!.at,
      'alpha-dead-30',
      EDITOR,
      `${short('{"n": 1.0, "tags": ["a", "b"], "inner": {"payload": 2}}')} → ${short('{ "n" : 1.50 }')}`,
    ]);
    expect(shown[19]![1]).toBe('alpha-old-17');
    expect(await page.$eval('#dlq-edits-more', (e) => (e as HTMLElement).hidden)).toBe(false);
    expect(await text('#dlq-edits-show')).toBe('Hide edits');
    expect(await page.$eval('#dlq-edits-show', (e) => e.getAttribute('aria-expanded'))).toBe('true');
    expect(stub.requests.filter((r) => r.url.startsWith('/v1/tenants/alpha/dlq/audit')).map((r) => r.url)).toEqual([
      '/v1/tenants/alpha/dlq/audit?limit=20',
    ]);
    await page.click('#dlq-edits-show');
    expect(await page.$eval('#dlq-edits', (e) => (e as HTMLElement).hidden)).toBe(true);
  });

  it('shows an EDITED event of a job’s timeline with who edited it and the payloads’ short hashes', async () => {
    const [before, after] = [sha256('{"n":1}'), sha256('{"n":2}')];
    stub.jobs.push(
      stubJob('alpha', 900, 'QUEUED', {
        timeline: [
          { at: '2030-01-01T15:00:00.000Z', event: 'DEAD', attempt: 5, error: 'bad payload' },
          { at: '2030-01-01T15:05:00.000Z', event: 'EDITED', by: EDITOR, oldPayloadSha256: before, newPayloadSha256: after },
        ],
      }),
    );
    try {
      await page.click('nav button[data-tab=jobs]');
      await page.type('#open input[name=jobId]', 'alpha-job-900');
      await page.click('#open button[type=submit]');
      await waitText('#detail-timeline', /EDITED/);
      expect(await page.$$eval('#detail-timeline li div', (ds) => ds.map((d) => [d.textContent, d.getAttribute('title')]))).toEqual([
        ['attempt 5, error bad payload', null],
        [`by ${EDITOR}, payload ${before.slice(0, 12)} → ${after.slice(0, 12)}`, `payload SHA-256 ${before} → ${after}`],
      ]);
    } finally {
      stub.jobs.pop();
      await page.$eval('#open input[name=jobId]', (e) => ((e as HTMLInputElement).value = ''));
      await page.click('#detail-close');
    }
  });

  it('draws the job’s trace as a waterfall from the local stack’s spans: its own and its workflow’s, not a sibling’s', async () => {
    const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
    const span = (name: string, startMs: number, endMs: number, attributes: Record<string, string | number>) => ({
      traceId,
      spanId: `${name.length}`.padStart(16, 'a'),
      name,
      kind: 1,
      startMs: T0 + startMs,
      endMs: T0 + endMs,
      attributes,
    });
    stub.traces.set(traceId, [
      span('dynein.dispatch', 5_000, 5_003, { 'dynein.job_id': 'alpha-job-901', 'dynein.lateness_ms': 21 }),
      span('dynein.submit', 0, 4, { 'dynein.workflow_id': 'wf1.alpha.1.x' }),
      span('dynein.ingest', 31, 43, { 'dynein.job_id': 'alpha-job-901' }),
      span('dynein.dispatch', 6_000, 6_002, { 'dynein.job_id': 'alpha-job-902' }),
    ]);
    stub.jobs.push(stubJob('alpha', 901, 'QUEUED', { traceId }), stubJob('alpha', 903, 'QUEUED', { traceId: 'f'.repeat(32) }));
    try {
      await page.click('nav button[data-tab=jobs]');
      await page.type('#open input[name=jobId]', 'alpha-job-901');
      await page.click('#open button[type=submit]');
      await page.waitForSelector('#detail-trace .wf');
      const cells = await page.$$eval('#detail-trace .wf > span', (ss) => ss.map((x) => x.textContent));
      expect(cells).toEqual(['dynein.submit', '4 ms', 'dynein.ingest', '12 ms', 'dynein.dispatch', '3 ms · late 21 ms']);
      expect(await page.$eval('#detail-trace .mono', (e) => e.textContent)).toBe(traceId);
      // The bars sit on one axis: the dispatch 5 s in, near the right end.
      const lefts = await page.$$eval('#detail-trace .wf .span', (bars) =>
        bars.map((b) => Number.parseFloat(b.getAttribute('style')!.slice(5))),
      );
      expect(lefts[0]).toBe(0);
      expect(lefts[2]).toBeGreaterThan(99);
      expect(stub.requests.some((r) => r.url === `/local/traces/${traceId}`)).toBe(true);

      // A trace none of whose spans is kept: its id, and why there is no waterfall.
      await page.$eval('#open input[name=jobId]', (e) => ((e as HTMLInputElement).value = ''));
      await page.type('#open input[name=jobId]', 'alpha-job-903');
      await page.click('#open button[type=submit]');
      await waitText('#detail-trace', /No span of this trace is kept/);
    } finally {
      stub.jobs.splice(-2, 2);
      stub.traces.clear();
      await page.$eval('#open input[name=jobId]', (e) => ((e as HTMLInputElement).value = ''));
      await page.click('#detail-close');
    }
  });

  it('opens only at the URL with the run’s token, and the page calls the API below it', async () => {
    const bare = await browser.newPage();
    try {
      const res = await bare.goto(`${new URL(ui.url).origin}/`);
      expect(res!.status()).toBe(403);
      expect(await bare.content()).toContain('with its token');
    } finally {
      await bare.close();
    }
    const calls: string[] = [];
    const p = await browser.newPage();
    p.on('request', (r) => {
      if (r.url().startsWith(new URL(ui.url).origin)) calls.push(new URL(r.url()).pathname);
    });
    try {
      await p.goto(ui.url);
      await p.waitForSelector('#jobs tbody tr');
      expect(calls.some((c) => c.startsWith(`/${ui.token}/api/v1/tenants/alpha/jobs`))).toBe(true);
      expect(calls.filter((c) => !c.startsWith(`/${ui.token}/`) && c !== '/favicon.ico')).toEqual([]);
    } finally {
      await p.close();
    }
  });

  it('switches tenant', async () => {
    await page.click('nav button[data-tab=jobs]');
    await page.select('#tenant', 'beta');
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'beta-job-001');
    expect(await rows()).toHaveLength(1);
    await page.select('#tenant', 'alpha');
    await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'alpha-job-000');
  });

  it('says "not available on this deployment" when the listing and DLQ routes are not deployed', async () => {
    const old = await startUiStub({ listing: false, dlq: false });
    const oldUi = await startUiServer({
      endpoint: old.endpoint,
      region: STUB_REGION,
      credentialsFor: () => STUB_CREDENTIALS,
      tenants: [],
      tenant: 'alpha',
      local: false,
    });
    const p = await browser.newPage();
    try {
      await p.goto(oldUi.url);
      await p.waitForFunction(() => /not available on this deployment/.test(document.querySelector('#jobs-msg')?.textContent ?? ''));
      expect(await p.$eval('#jobs-msg', (e) => e.className)).toBe('msg info');
      expect(await p.$eval('#tenant', (e) => (e as HTMLInputElement).value)).toBe('alpha');
      await p.click('nav button[data-tab=dlq]');
      await p.waitForFunction(() =>
        /Dead letters are not available on this deployment/.test(document.querySelector('#dlq-msg')?.textContent ?? ''),
      );
      expect(await p.$eval('#redrive-all', (b) => (b as HTMLButtonElement).disabled)).toBe(true);
      await p.click('#dlq-edits-show');
      await p.waitForFunction(() =>
        /edits are not available on this deployment/.test(document.querySelector('#dlq-edits-msg')?.textContent ?? ''),
      );
      await p.click('nav button[data-tab=schedules]');
      await p.waitForSelector('#schedules tbody tr');
    } finally {
      await p.close();
      await oldUi.close();
      await old.close();
    }
  });

  it('filters by concurrency key (with the other filters), shows each job’s key, and cancels every pending job with the key once confirmed', async () => {
    const keyed = [
      stubJob('alpha', 200, 'SCHEDULED', { concurrencyKey: 'customer-7', concurrencyLimit: 2 }),
      stubJob('alpha', 201, 'SCHEDULED', { concurrencyKey: 'customer-7', concurrencyLimit: 2, tags: ['eu'] }),
      stubJob('alpha', 202, 'QUEUED', {
        concurrencyKey: 'customer-7',
        concurrencyLimit: 2,
        deliveredAt: new Date(T0 + 202 * 60_000 + 5).toISOString(),
      }),
      stubJob('alpha', 203, 'SCHEDULED', { concurrencyKey: 'customer-8', concurrencyLimit: 1 }),
    ];
    stub.jobs.push(...keyed);
    const keyColumn = () => page.$$eval('#jobs tbody tr', (trs) => trs.map((tr) => [...tr.querySelectorAll('td')][5]?.textContent));
    const listed = () =>
      stub.requests.filter((r) => r.url.startsWith('/v1/tenants/alpha/jobs?')).map((r) => new URL(r.url, 'http://x').searchParams);
    try {
      await page.click('nav button[data-tab=jobs]');
      await page.$eval('#filters input[name=key]', (e) => ((e as HTMLInputElement).value = 'customer-7'));
      await page.click('#filters button[type=submit]');
      await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 3);
      expect((await rows()).map((r) => [r[0], r[2]])).toEqual([
        ['alpha-job-200', 'SCHEDULED'],
        ['alpha-job-201', 'SCHEDULED'],
        ['alpha-job-202', 'QUEUED'],
      ]);
      expect(await keyColumn()).toEqual(['customer-7 (limit 2)', 'customer-7 (limit 2)', 'customer-7 (limit 2)']);
      expect(await tagsColumn()).toEqual(['', 'eu', '']);
      expect(listed().at(-1)!.get('concurrencyKey')).toBe('customer-7');

      // With another filter: both sent, both applied.
      await page.select('#filters select[name=state]', 'SCHEDULED');
      await page.click('#filters button[type=submit]');
      await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 2);
      expect((await rows()).map((r) => r[0])).toEqual(['alpha-job-200', 'alpha-job-201']);
      const both = listed().at(-1)!;
      expect([both.get('concurrencyKey'), both.get('state')]).toEqual(['customer-7', 'SCHEDULED']);
      await page.select('#filters select[name=state]', '');
      await page.click('#filters button[type=submit]');
      await page.waitForFunction(() => document.querySelectorAll('#jobs tbody tr').length === 3);

      // Declined: nothing sent. Accepted: POST .../jobs/cancel by key, its operation followed to DONE, the list read again.
      const cancels = () => stub.requests.filter((r) => r.url === '/v1/tenants/alpha/jobs/cancel');
      const before = cancels().length;
      await confirmClick('#cancel-key', 'dismiss');
      await new Promise((r) => setTimeout(r, 300));
      expect(cancels()).toHaveLength(before);
      expect(await confirmClick('#cancel-key', 'accept')).toContain('with concurrency key "customer-7"');
      await waitText('#jobs-msg', /Cancelled by key "customer-7": matched 2, cancelled 2, already queued 0, not cancellable 0\./, 15_000); // polled every 500 ms: slow on a busy machine
      expect(cancels()).toHaveLength(before + 1);
      const sent = cancels().at(-1)!;
      expect([sent.method, JSON.parse(sent.body)]).toEqual(['POST', { concurrencyKey: 'customer-7' }]);
      await page.waitForFunction(() => document.querySelector('#jobs tbody tr td:nth-child(3)')?.textContent === 'CANCELLED');
      expect((await rows()).map((r) => r[2])).toEqual(['CANCELLED', 'CANCELLED', 'QUEUED']);
      expect(await text('#jobs-msg')).toMatch(/^Cancelled by key "customer-7"/);
      expect(keyed[3]!.state).toBe('SCHEDULED'); // another key's job is left alone

      // Without a key, the button says what it needs and sends nothing.
      await page.$eval('#filters', (f) => (f as HTMLFormElement).reset());
      await page.click('#cancel-key');
      await waitText('#jobs-msg', /Enter a concurrency key first/);
      expect(cancels()).toHaveLength(before + 1);
    } finally {
      for (const j of keyed) stub.jobs.splice(stub.jobs.indexOf(j), 1);
      await page.$eval('#filters', (f) => (f as HTMLFormElement).reset());
      await page.click('#filters button[type=submit]');
      await page.waitForFunction(() => document.querySelector('#jobs tbody tr td')?.textContent === 'alpha-job-000');
    }
  });
});

describe('the job browser server', () => {
  it('serves the page’s script bundled from client/ui/browser/ into one classic script', async () => {
    const res = await fetch(`${ui.url}app.js`);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    const js = await res.text();
    expect(js).toMatch(/^"use strict";\n\(\(\) => \{\n/); // esbuild's iife: nothing leaks into the page's globals
    expect(js).toContain('// client/ui/browser/main.ts');
    expect(js).not.toMatch(/^\s*(import|export)\b/m); // a bundle: no module left to load
    // The same script on every request (bundled once).
    expect(await (await fetch(`${ui.url}app.js`)).text()).toBe(js);
  });

  it('reads the API’s replies as client.ts types them (checked by tsc: the page’s types mirror those of client.ts)', () => {
    expectTypeOf<Client.JobStatus>().toExtend<PageTypes.JobStatus>();
    expectTypeOf<Client.Workflow>().toExtend<PageTypes.Workflow>();
    expectTypeOf<Client.TimelineEvent>().toExtend<PageTypes.TimelineEvent>();
    expectTypeOf<Client.ListedJob>().toExtend<PageTypes.ListedJob>();
    expectTypeOf<Client.JobPage>().toExtend<PageTypes.JobPage>();
    expectTypeOf<Client.Schedule>().toExtend<PageTypes.Schedule>();
    expectTypeOf<Client.SchedulePage>().toExtend<PageTypes.SchedulePage>();
    expectTypeOf<Client.DeadLetter>().toExtend<PageTypes.DeadLetter>();
    expectTypeOf<Client.DeadLetterPage>().toExtend<PageTypes.DeadLetterPage>();
    expectTypeOf<Client.DeadLetterRedrive>().toExtend<PageTypes.DeadLetterRedrive>();
    expectTypeOf<Client.DeadLettersDeleted>().toExtend<PageTypes.DeadLettersDeleted>();
    expectTypeOf<Client.DeadLetterEdit>().toExtend<PageTypes.DeadLetterEdit>();
    expectTypeOf<Client.DeadLetterAuditPage>().toExtend<PageTypes.DeadLetterAuditPage>();
    expectTypeOf<Client.CancelJobsStarted>().toExtend<PageTypes.CancelJobsStarted>();
    expectTypeOf<Client.Operation>().toExtend<PageTypes.Operation>();
  });

  it('never gives the page a secret, and proxies only with its token and header, from this machine, to tenant routes', async () => {
    const html = await (await fetch(ui.url)).text();
    const js = await (await fetch(`${ui.url}app.js`)).text();
    const config = await (await fetch(`${ui.url}ui/config`)).text();
    for (const served of [html, js, config]) {
      expect(served).not.toContain(STUB_CREDENTIALS.secretAccessKey);
      expect(served).not.toContain(STUB_CREDENTIALS.accessKeyId);
    }
    expect(html).not.toMatch(/https?:\/\/(?!127\.0\.0\.1)/); // nothing from a CDN
    expect((await fetch(`${ui.url}api/v1/tenants/alpha/jobs`)).status).toBe(403);
    // Without the token (what another user of the machine could try): 403.
    expect((await fetch(`${new URL(ui.url).origin}/api/v1/tenants/alpha/jobs`, { headers: { 'x-dynein-ui': '1' } })).status).toBe(403);
    const ok = await fetch(`${ui.url}api/v1/tenants/alpha/jobs/alpha-job-000`, { headers: { 'x-dynein-ui': '1' } });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { jobId: string }).jobId).toBe('alpha-job-000');
    const other = await fetch(`${ui.url}api/v1/tenants/gamma/jobs`, { headers: { 'x-dynein-ui': '1' } });
    expect(other.status).toBe(403);
    expect(((await other.json()) as { error: { message: string } }).error.message).toMatch(/no credentials for tenant 'gamma'/);
    expect((await fetch(`${ui.url}api/v1/admin`, { headers: { 'x-dynein-ui': '1' } })).status).toBe(404);
    // DNS rebinding: a page of another site that resolved its name to 127.0.0.1.
    const rebinding = await new Promise<number>((resolve, reject) =>
      request(`${ui.url}ui/config`, { headers: { host: 'evil.example:80' } }, (res) => {
        res.resume();
        resolve(res.statusCode!);
      })
        .on('error', reject)
        .end(),
    );
    expect(rebinding).toBe(403);
  });
});
