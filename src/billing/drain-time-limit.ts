import { DrainSettleTimeoutError } from "./drain-settle-timeout-error.ts";

/**
 * The time limit a shutdown puts on settle attempts (see `BillingAdmission.beginClosing`): none
 * before it begins; from then on, each attempt waits for the store at most `limitMs`, counted
 * from the start of the shutdown for those already under way, where its charge is then in the
 * journal: one the journal could not take waits for the store (giving up on it would lose it).
 */
export class DrainTimeLimit {
  readonly #limitMs: number;
  /** Of each attempt under way: starts its limit. */
  readonly #attempts = new Set<() => void>();
  #begun = false;

  constructor(limitMs: number) {
    this.#limitMs = limitMs;
  }

  get begun(): boolean {
    return this.#begun;
  }

  /** The shutdown began: the limit runs for every attempt under way and every later one. */
  begin(): void {
    if (this.#begun) return;
    this.#begun = true;
    for (const start of this.#attempts) start();
  }

  /**
   * `attempt`, or a {@link DrainSettleTimeoutError} once the limit passed, where `kept()` (the
   * charge is in the journal, written there by `kept` itself for a whole answer not yet sent)
   * when it passes; else the attempt is waited for. The attempt is not cancelled (a statement
   * sent cannot be taken back): `onLateSuccess` is told when it succeeds after its limit.
   */
  async limit<T>(attempt: Promise<T>, kept: () => boolean, onLateSuccess: () => void): Promise<T> {
    const { promise: timedOut, reject } = Promise.withResolvers<never>();
    const limitMs = this.#limitMs;
    let timer: NodeJS.Timeout | undefined;
    const start = () => {
      timer ??= setTimeout(() => {
        if (kept()) reject(new DrainSettleTimeoutError(limitMs));
      }, limitMs);
    };
    this.#attempts.add(start);
    if (this.#begun) start();
    try {
      return await Promise.race([attempt, timedOut]);
    } catch (error) {
      if (error instanceof DrainSettleTimeoutError) attempt.then(onLateSuccess, () => {});
      throw error;
    } finally {
      clearTimeout(timer);
      this.#attempts.delete(start);
    }
  }
}
