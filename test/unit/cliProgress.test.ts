import { describe, expect, it } from 'vitest';
import { formatDuration, progressLine, progressText } from '../../client/cli/progress.js';

describe('the CLI progress line', () => {
  it('says how many of how many, the rate, and the time left once a second has passed', () => {
    expect(progressText('moved', 'messages', 0, 500, 0)).toBe('moved 0/500 messages');
    expect(progressText('moved', 'messages', 120, 500, 3_000)).toBe('moved 120/500 messages, 40/s, about 10 s left');
    expect(progressText('moved', 'messages', 500, 500, 10_000)).toBe('moved 500/500 messages, 50/s');
    expect(progressText('read', 'jobs', 12_000, undefined, 4_000)).toBe('read 12,000 jobs, 3,000/s');
    expect(progressText('read', 'jobs', 3, undefined, 2_000)).toBe('read 3 jobs, 1.5/s');
    // An approximate total below what moved (SQS counts are approximate) is not shown.
    expect(progressText('moved', 'messages', 12, 10, 2_000)).toBe('moved 12 messages, 6.0/s');
  });

  it('formats the time left in seconds, minutes or hours', () => {
    expect(formatDuration(9_400)).toBe('9 s');
    expect(formatDuration(250_000)).toBe('4 min 10 s');
    expect(formatDuration(7_500_000)).toBe('2 h 5 min');
  });

  it('draws only on a terminal, and ends with one newline when it drew', () => {
    let t = 0;
    const drawn: string[] = [];
    let newlines = 0;
    const line = progressLine(
      (l) => drawn.push(l),
      () => newlines++,
      'moved',
      'messages',
      () => t,
    );
    t = 2_000;
    line.update(10, 40);
    line.end();
    line.end();
    expect([drawn, newlines]).toEqual([['moved 10/40 messages, 5.0/s, about 6 s left'], 1]);
    const silent = progressLine(undefined, () => newlines++, 'moved', 'messages');
    silent.update(1);
    silent.end();
    expect(newlines).toBe(1);
  });
});
