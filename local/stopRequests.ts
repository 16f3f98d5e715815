/**
 * Stop requests for a process of the local stack that its parent forked: SIGTERM, the parent going
 * away (the IPC channel closes, even on a SIGKILL of the parent) and, with no parent there, Ctrl-C
 * (under `npm start` Ctrl-C reaches the whole process group; the parent orders the stop, compute
 * first, which still talks to the queues). Installed first thing, so that a parent that dies
 * during start-up never leaves an orphan holding the data directory: until `onStop` names the
 * stop, a request just exits.
 */
export function stopRequests(): { onStop(stop: () => void | Promise<void>): void; request(): void } {
  let stop: () => void | Promise<void> = () => process.exit(0);
  const request = () => void stop();
  process.on('SIGTERM', request);
  process.on('disconnect', request);
  process.on('SIGINT', () => {
    if (!process.connected) request();
  });
  if (process.send && !process.connected) process.exit(0);
  return {
    request,
    onStop(fn) {
      stop = fn;
      if (process.send && !process.connected) request(); // the parent went away during start-up
    },
  };
}
