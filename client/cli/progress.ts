/**
 * The progress line of the CLI's long commands (`batch`, `jobs --all`, `redrive`): how many so far,
 * of how many when known, the rate and, with a total, the time left. Drawn only on a terminal
 * (the `Io.progress` of client/cli/output.ts), so piped output stays what the command prints.
 */
export interface ProgressLine {
  /** Redraws the line: `done` so far, of `total` when known. */
  update(done: number, total?: number): void;
  /** Ends the line (a newline on the terminal) once something was drawn. */
  end(): void;
}

const count = (n: number) => n.toLocaleString('en-US');

/** `9 s`, `4 min 10 s`, `2 h 5 min`. */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min ${s % 60} s`;
  return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
}

/** The text of the line, for `done` units after `elapsedMs`. */
export function progressText(verb: string, unit: string, done: number, total: number | undefined, elapsedMs: number): string {
  const rate = elapsedMs > 0 ? (done * 1000) / elapsedMs : 0;
  const of = total !== undefined && total >= done ? `/${count(total)}` : '';
  const parts = [`${verb} ${count(done)}${of} ${unit}`];
  if (elapsedMs >= 1000 && done > 0) parts.push(`${rate >= 10 ? count(Math.round(rate)) : rate.toFixed(1)}/s`);
  if (of && rate > 0 && done < total!) parts.push(`about ${formatDuration(((total! - done) / rate) * 1000)} left`);
  return parts.join(', ');
}

/** A progress line drawn through `draw` (none when the output is not a terminal). */
export function progressLine(
  draw: ((line: string) => void) | undefined,
  newline: () => void,
  verb: string,
  unit: string,
  now: () => number = Date.now,
): ProgressLine {
  const started = now();
  let drawn = false;
  return {
    update(done, total) {
      if (!draw) return;
      draw(progressText(verb, unit, done, total, now() - started));
      drawn = true;
    },
    end() {
      if (drawn) newline();
      drawn = false;
    },
  };
}
