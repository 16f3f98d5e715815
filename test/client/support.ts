import type { OtelApi } from '../../client/index.js';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { ReceiveMessageCommand, SendMessageBatchCommand, SendMessageCommand, type Message, type SQSClient } from '@aws-sdk/client-sqs';
import { inject } from 'vitest';
import { main } from '../../client/cli/index.js';
import { STUB_CREDENTIALS, STUB_REGION } from '../support/signedStub.js';

/** One SDK call as the client made it (command name and input), captured by a middleware: the real call still goes out. */
export interface SentCall {
  readonly command: string;
  readonly input: Record<string, any>;
  readonly at: number;
  /** The reply, once it arrived. */
  output?: Record<string, any>;
}

/** Records every command a real SQS client sends (an `initialize` middleware; nothing is mocked). */
export function recordCalls(sqs: SQSClient): SentCall[] {
  const calls: SentCall[] = [];
  sqs.middlewareStack.add(
    (next: any, context: any) => async (args: any) => {
      const call: SentCall = { command: String(context.commandName).replace(/Command$/, ''), input: args.input, at: Date.now() };
      calls.push(call);
      const result = await next(args);
      call.output = result.output;
      return result;
    },
    { step: 'initialize', name: `recordCalls-${randomUUID()}` },
  );
  return calls;
}

/** A tenant-queue message as the scheduler sends it: `{"jobId", "tenant", "runAt", "payload"}` plus the `runAt` attribute. */
export function deliveryBody(jobId: string, payload: unknown = null, runAtMs = Date.now()): { body: string; runAt: string } {
  const runAt = new Date(runAtMs).toISOString();
  return { body: JSON.stringify({ jobId, tenant: 'demo', runAt, payload }), runAt };
}

export async function sendDeliveries(
  sqs: SQSClient,
  queueUrl: string,
  jobs: readonly { jobId: string; payload?: unknown; runAtMs?: number }[],
): Promise<void> {
  for (let i = 0; i < jobs.length; i += 10) {
    const entries = jobs.slice(i, i + 10).map((j, k) => {
      const { body, runAt } = deliveryBody(j.jobId, j.payload ?? null, j.runAtMs);
      return { Id: String(k), MessageBody: body, MessageAttributes: { runAt: { DataType: 'String', StringValue: runAt } } };
    });
    const res = await sqs.send(new SendMessageBatchCommand({ QueueUrl: queueUrl, Entries: entries }));
    if (res.Failed?.length) throw new Error(`send failed: ${JSON.stringify(res.Failed)}`);
  }
}

export async function sendRaw(sqs: SQSClient, queueUrl: string, body: string): Promise<void> {
  await sqs.send(new SendMessageCommand({ QueueUrl: queueUrl, MessageBody: body }));
}

/** Receipt handles the recorded ReceiveMessage calls returned (fauxqs accepts any handle on delete: check them here). */
export function receivedHandles(calls: readonly SentCall[]): Set<string> {
  return new Set(
    calls
      .filter((c) => c.command === 'ReceiveMessage')
      .flatMap((c) => (c.output?.Messages ?? []).map((m: { ReceiptHandle: string }) => m.ReceiptHandle)),
  );
}

/** Receives (and leaves in flight for `visibility` s) every message currently visible in a queue. */
export async function receiveAll(
  sqs: SQSClient,
  queueUrl: string,
  opts: { waitMs?: number; visibility?: number } = {},
): Promise<Message[]> {
  const out: Message[] = [];
  const until = Date.now() + (opts.waitMs ?? 1_500);
  while (Date.now() < until) {
    const res = await sqs.send(
      new ReceiveMessageCommand({
        QueueUrl: queueUrl,
        MaxNumberOfMessages: 10,
        WaitTimeSeconds: 1,
        VisibilityTimeout: opts.visibility ?? 60,
        MessageAttributeNames: ['All'],
        MessageSystemAttributeNames: ['All'],
      }),
    );
    out.push(...(res.Messages ?? []));
  }
  return out;
}

export async function waitUntil(pred: () => boolean, timeoutMs: number, what = 'condition'): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!pred()) {
    if (Date.now() > until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** A deterministic `random` that returns `values` in turn (and repeats the last one). */
export function sequence(values: readonly number[]): () => number {
  let i = 0;
  return () => values[Math.min(i++, values.length - 1)]!;
}

/** What a run of the CLI printed, and its exit code. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * The CLI the system tests' global setup bundled from this checkout's sources (test/support/testBuild.ts),
 * for a command that finds nothing beside its own file; otherwise `bin/dynein.js`. `dynein ui` serves
 * the page built beside the CLI and `dynein local` starts the stack beside it: those run as installed.
 */
export function cliEntry(args: readonly string[]): string {
  if (args[0] === 'ui' || args[0] === 'local') return 'bin/dynein.js';
  return inject('testBuild')?.cli ?? 'bin/dynein.js';
}

/** Runs the `dynein` CLI as a user does (its own process), with `env` over this process's environment. */
export function runCli(args: readonly string[], env: Record<string, string | undefined> = {}): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliEntry(args), ...args], {
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.once('error', reject);
    child.once('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * A data directory whose local.json points the CLI at a signed API stub (`endpoint`), with one
 * tenant signed with the stub's credentials; no SQS behind it.
 */
export function stubDataDir(prefix: string, endpoint: string, tenant: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  writeFileSync(
    join(dir, 'local.json'),
    JSON.stringify({
      endpoint,
      region: STUB_REGION,
      sqsEndpoint: 'http://127.0.0.1:9',
      tenants: { [tenant]: { ...STUB_CREDENTIALS, queueUrl: 'http://127.0.0.1:9/q', dlqUrl: 'http://127.0.0.1:9/dlq' } },
    }),
  );
  return dir;
}

/** `dynein <argv>` in process: its exit code, and its output and error lines. */
export async function runMain(argv: readonly string[]): Promise<{ code: number; out: string[]; err: string[] }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main([...argv], { out: (l) => out.push(...l.split('\n')), err: (l) => err.push(l) }, {});
  return { code, out, err };
}

/**
 * The bash completion `dynein completion bash` printed (`script`), written into `dataDir` and
 * sourced: what it offers after the words typed, as bash would.
 */
export function bashOffers(script: string, dataDir: string): (...typed: string[]) => string[] {
  const file = join(dataDir, 'dynein.bash');
  writeFileSync(file, `${script}\n`);
  return (...typed) =>
    execFileSync('bash', [
      '-c',
      `source '${file}'; COMP_WORDS=(dynein ${typed.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${typed.length}; _dynein; printf '%s\\n' "\${COMPREPLY[@]}"`,
    ])
      .toString()
      .split('\n')
      .filter(Boolean);
}

/** An `@opentelemetry/api` stand-in that records the spans started (with their errors) and which one is active. */
export function fakeOtel() {
  const spans: {
    name: string;
    kind?: number;
    parent?: unknown;
    root?: boolean;
    links?: unknown;
    attempt?: unknown;
    ended: boolean;
    error?: string;
  }[] = [];
  let active: string | undefined;
  const api: OtelApi = {
    ROOT_CONTEXT: {},
    createTraceState: (raw) => raw,
    trace: {
      getTracer: () => ({
        startSpan: (name, options, context) => {
          const rec: (typeof spans)[number] = {
            name,
            kind: options?.kind,
            parent: (context as { span?: unknown }).span,
            root: options?.root,
            links: options?.links,
            attempt: options?.attributes?.['dynein.attempt'],
            ended: false,
          };
          spans.push(rec);
          return {
            recordException: () => undefined,
            setStatus: (status: { code: number; message?: string }) => void (rec.error = status.message),
            end: () => void (rec.ended = true),
            name,
          };
        },
      }),
      setSpanContext: (_context, spanContext) => ({ span: spanContext }),
      setSpan: (_context, span) => ({ active: (span as { name?: string }).name }),
    },
    context: {
      with: (context, fn) => {
        active = (context as { active?: string }).active;
        try {
          return fn();
        } finally {
          active = undefined;
        }
      },
    },
  };
  return { api, spans, active: () => active };
}
