/** Which wait ran too long: the first byte of the response, or the gap between two chunks. */
export type StallKind = "first-byte" | "idle";

/** One watched upstream response. */
export interface StallWatch {
  /** Something arrived: ends the first-byte wait and restarts the idle wait. */
  touch(): void;
  /**
   * Whether the reader waits for the upstream (as it does from the start) or is busy with what
   * it read (writing it to a slow client, say). Silence counts only while the reader waits, and
   * from when it began to wait at the earliest: an upstream that the reader stopped reading
   * (backpressure) is not silent.
   */
  setWaiting(waiting: boolean): void;
  /** From now on, silence of `idleMs` (if shorter than the watchdog's) is a stall. */
  shortenIdle(idleMs: number): void;
  /** Stops watching. */
  stop(): void;
  /** The wait that ran out, once one has. */
  readonly stalled: StallKind | undefined;
}

/** Watches every upstream response of an engine for silence, with one shared timer. */
export interface StallWatchdog {
  /** Starts watching a response sent now; `onStall` is called once if it stalls. */
  watch(onStall: (kind: StallKind) => void): StallWatch;
}

/** One watched response: the watchdog's entry and the reader's handle (a class: one per request). */
class Watch implements StallWatch {
  lastActivity: number | undefined = undefined;
  waiting = true;
  /** When the silence began: when the request was sent, then at the last activity. */
  silentSince: number;
  /**
   * How long the reader was away (busy with what it read, or the request queued) since
   * `silentSince`: not the upstream's silence. Summed, so that a reader that takes a piece with
   * nothing in it (a comment) and waits again at once does not start the silence over.
   */
  awayMs = 0;
  /** When the reader went away, while it is away. */
  awaySince = 0;
  idleMs: number;
  stalled: StallKind | undefined = undefined;
  readonly onStall: (kind: StallKind) => void;
  readonly #watchdog: WatchdogState;

  constructor(watchdog: WatchdogState, onStall: (kind: StallKind) => void) {
    this.#watchdog = watchdog;
    this.onStall = onStall;
    this.silentSince = watchdog.now();
    this.idleMs = watchdog.idleMs;
  }

  touch(): void {
    const time = this.#watchdog.now();
    this.lastActivity = time;
    this.silentSince = time;
    this.awayMs = 0;
    this.awaySince = time;
  }

  shortenIdle(idleMs: number): void {
    this.idleMs = Math.min(this.idleMs, idleMs);
  }

  setWaiting(waiting: boolean): void {
    if (waiting === this.waiting) return;
    const time = this.#watchdog.now();
    if (waiting) this.awayMs += time - this.awaySince;
    else this.awaySince = time;
    this.waiting = waiting;
  }

  /** Milliseconds of the upstream's silence at `time` (the reader waiting). */
  silenceAt(time: number): number {
    return time - this.silentSince - this.awayMs;
  }

  stop(): void {
    this.#watchdog.remove(this);
  }
}

/** What the watches of one watchdog share. */
interface WatchdogState {
  now: () => number;
  idleMs: number;
  remove(watch: Watch): void;
}

/**
 * A stall is a first byte that takes longer than `firstByteMs` from sending, or a silence of
 * `idleMs` after it. One interval timer checks every watched response (a per-request timer costs
 * a timer insertion and removal per request), ticking at an eighth of the shorter timeout, at
 * most once a second: a stall is noticed at most one tick late. `touch` only stores the time.
 */
export function createStallWatchdog(options: {
  firstByteMs: number;
  idleMs: number;
  /** Milliseconds on a monotonic clock. Default `performance.now`. */
  now?: () => number;
}): StallWatchdog {
  const now = options.now ?? (() => performance.now());
  const tickMs = Math.max(1, Math.min(1000, Math.floor(Math.min(options.firstByteMs, options.idleMs) / 8)));
  const entries = new Set<Watch>();
  let timer: NodeJS.Timeout | undefined;
  let checkedAt = 0;

  const check = () => {
    const time = now();
    // A tick far later than due: the process did not run (stopped, a suspended machine, the
    // event loop blocked), nor read what came meanwhile, which waits in the sockets to be read
    // after this tick: not the upstream's silence (a process stopped for 74 s and continued
    // failed every stream as silent for 60 s, though each upstream had gone on sending).
    const lateMs = time - checkedAt - tickMs;
    checkedAt = time;
    const stopped = lateMs > tickMs ? lateMs : 0;
    for (const entry of entries) {
      if (!entry.waiting) continue;
      entry.awayMs += stopped;
      const silence = entry.silenceAt(time);
      const kind: StallKind | undefined =
        entry.lastActivity === undefined
          ? silence >= options.firstByteMs
            ? "first-byte"
            : undefined
          : silence >= entry.idleMs
            ? "idle"
            : undefined;
      if (kind === undefined) continue;
      entry.stalled = kind;
      entries.delete(entry);
      entry.onStall(kind);
    }
    if (entries.size === 0) stopTimer();
  };
  const stopTimer = () => {
    if (timer !== undefined) clearInterval(timer);
    timer = undefined;
  };
  const state: WatchdogState = {
    now,
    idleMs: options.idleMs,
    remove(watch) {
      if (entries.delete(watch) && entries.size === 0) stopTimer();
    },
  };

  return {
    watch(onStall) {
      const watch = new Watch(state, onStall);
      entries.add(watch);
      if (timer === undefined) {
        checkedAt = now();
        timer = setInterval(check, tickMs);
        timer.unref();
      }
      return watch;
    },
  };
}
