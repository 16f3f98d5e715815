/**
 * Vitest setup file: every reply the local stack's API gives an end-to-end test (through the
 * global `fetch`, which the SDK, signedFetch and the UI proxy use) must match docs/openapi.yaml.
 * Replies are checked as they arrive; after each test, and once more after the file's last hook,
 * a mismatch fails with the method, path, status, the schema errors and the body.
 *
 * Enabled through vitest.config.ts: `setupFiles: ['test/contract/replies.setup.ts']`.
 */
import { afterAll, afterEach, expect } from 'vitest';
import { checkReplies, formatViolations, isLocalStackReply } from './replyCheck.js';

/**
 * The test files whose API calls reach the real stack (the local stack): the e2e and client tests.
 * Elsewhere the local gateway runs with stub handlers whose replies are not the API's
 * (test/integration/api-body-limit.test.ts answers `{}` on every route), so those are left alone.
 */
const CHECKED_FILES = [/[\\/]test[\\/]e2e[\\/]/, /[\\/]test[\\/]client[\\/]/];

function inCheckedFile(): boolean {
  const file = expect.getState().testPath ?? '';
  return CHECKED_FILES.some((dir) => dir.test(file));
}

// A worker runs many files in turn (vitest.config.ts: `isolate: false`), each running this file
// anew: every file wraps the fetch the process started with, not the previous file's wrapper.
const UNCHECKED_FETCH = Symbol.for('dynein.tests.uncheckedFetch');
const holder = globalThis as typeof globalThis & { [UNCHECKED_FETCH]?: typeof fetch };
const unchecked = (holder[UNCHECKED_FETCH] ??= globalThis.fetch.bind(globalThis));
const check = checkReplies(unchecked, {
  select: (url, reply) => inCheckedFile() && isLocalStackReply(url, reply),
});
globalThis.fetch = check.fetch;

/** Fails the hook when replies so far did not match the document. */
async function assertRepliesMatch(): Promise<void> {
  const found = await check.settle();
  if (found.length > 0) throw new Error(formatViolations(found));
}

afterEach(assertRepliesMatch);
// Calls made in beforeAll/afterAll hooks (starting and stopping a stack) are judged here.
afterAll(assertRepliesMatch);
