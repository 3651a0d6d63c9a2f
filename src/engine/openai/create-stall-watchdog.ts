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

interface Entry {
  lastActivity: number | undefined;
  waiting: boolean;
  /** When the reader last began to wait: at first, when the request was sent. */
  waitingSince: number;
  idleMs: number;
  stalled: StallKind | undefined;
  onStall: (kind: StallKind) => void;
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
  const entries = new Set<Entry>();
  let timer: NodeJS.Timeout | undefined;

  const check = () => {
    const time = now();
    for (const entry of entries) {
      if (!entry.waiting) continue;
      const silence = time - Math.max(entry.lastActivity ?? 0, entry.waitingSince);
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

  return {
    watch(onStall) {
      const entry: Entry = {
        lastActivity: undefined,
        waiting: true,
        waitingSince: now(),
        idleMs: options.idleMs,
        stalled: undefined,
        onStall,
      };
      entries.add(entry);
      if (timer === undefined) {
        timer = setInterval(check, tickMs);
        timer.unref();
      }
      return {
        touch() {
          entry.lastActivity = now();
        },
        shortenIdle(idleMs) {
          entry.idleMs = Math.min(entry.idleMs, idleMs);
        },
        setWaiting(waiting) {
          if (waiting && !entry.waiting) entry.waitingSince = now();
          entry.waiting = waiting;
        },
        stop() {
          if (entries.delete(entry) && entries.size === 0) stopTimer();
        },
        get stalled() {
          return entry.stalled;
        },
      };
    },
  };
}
