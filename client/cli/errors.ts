import { DyneinApiError } from '../errors.js';

/** A mistake in the command line: exit code 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'UsageError';
  }
}

/** An error as one line: API errors with their code, status and request id. */
export function oneLine(err: unknown): string {
  let text: string;
  if (err instanceof DyneinApiError)
    text = `${err.code} (HTTP ${err.status}): ${err.message}${err.requestId ? ` [request ${err.requestId}]` : ''}`;
  else text = (err as Error)?.message ?? String(err);
  return text.replace(/\s*\n\s*/g, '; ');
}
