/**
 * A token bucket for one tenant's deliveries in one dispatch round (docs/tenant-controls.md#delivery-rate-limit).
 *
 * It refills at `ratePerSec` and holds at most `burst` tokens (a twentieth of a second's worth,
 * at least 1): over any window of T seconds it grants at most `burst + ratePerSec × T`, so a
 * second never carries more than 1.05 × the rate (or the rate + 1 below 20 per second), and
 * sends at low rates are spaced 1 / rate apart.
 *
 * @example
 * const bucket = new TokenBucket(10, Date.now());
 * const granted = bucket.take(Date.now(), rows.length); // send rows.slice(0, granted)
 * const retryAt = bucket.readyAt(Date.now());           // the others then
 */
export class TokenBucket {
  #tokens: number;
  #at: number;
  #rate: number;

  constructor(ratePerSec: number, nowMs: number) {
    this.#rate = ratePerSec;
    this.#tokens = Math.min(1, this.burst);
    this.#at = nowMs;
  }

  get burst(): number {
    return Math.max(1, this.#rate / 20);
  }

  /** Changes the rate from now on (the operator changed the limit). */
  setRate(ratePerSec: number, nowMs: number): void {
    if (ratePerSec === this.#rate) return;
    this.#refill(nowMs);
    this.#rate = ratePerSec;
    this.#tokens = Math.min(this.#tokens, this.burst);
  }

  /** Takes up to `n` whole tokens; returns how many it took. */
  take(nowMs: number, n: number): number {
    this.#refill(nowMs);
    const granted = Math.max(0, Math.min(n, Math.floor(this.#tokens)));
    this.#tokens -= granted;
    return granted;
  }

  /** When the next whole token is there (epoch ms, rounded up). */
  readyAt(nowMs: number): number {
    this.#refill(nowMs);
    return this.#tokens >= 1 ? nowMs : nowMs + Math.ceil(((1 - this.#tokens) * 1000) / this.#rate);
  }

  #refill(nowMs: number): void {
    if (nowMs > this.#at) {
      this.#tokens = Math.min(this.burst, this.#tokens + ((nowMs - this.#at) * this.#rate) / 1000);
      this.#at = nowMs;
    }
  }
}
