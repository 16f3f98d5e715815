/** Where a command prints: its output lines, its error lines, and on a terminal a progress line. */
export interface Io {
  out(line: string): void;
  err(line: string): void;
  /** Redraws the progress line (stderr, a terminal only). */
  progress?(line: string): void;
}

/** The process's stdout and stderr (a progress line only when stderr is a terminal). */
export const stdio: Io = {
  out: (l) => process.stdout.write(`${l}\n`),
  err: (l) => process.stderr.write(`${l}\n`),
  ...(process.stderr.isTTY ? { progress: (l: string) => process.stderr.write(`\r\x1b[2K${l}`) } : {}),
};
