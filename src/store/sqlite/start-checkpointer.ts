import { Worker } from "node:worker_threads";

/** Checkpoints running on a worker thread; see {@link startCheckpointer}. */
export interface Checkpointer {
  /** Stops the worker (the automatic checkpoint comes back on) and waits for it to exit. */
  stop(): Promise<void>;
}

/** What the worker (checkpoint-worker.js) tells its parent. */
type CheckpointWorkerMessage =
  | { kind: "ready" }
  | { kind: "failed"; message: string }
  | { kind: "wal-large"; frames: number }
  | { kind: "checkpointed" };

export interface CheckpointerOptions {
  /** The database file (in WAL mode). */
  file: string;
  /** Turns SQLite's automatic checkpoint on or off on the server's own connection. */
  setAutomatic: (automatic: boolean) => void;
  /** How often the worker checkpoints. Default {@link CHECKPOINT_INTERVAL_MS}. */
  intervalMs?: number;
  /**
   * Pauses the server's writes for at most `ms` (returns the function that resumes them): called
   * when the WAL holds {@link RESTART_FRAMES} pages (`restartFrames`) or more, so that the worker
   * can copy all of it and the next write starts the WAL over.
   */
  pauseWrites?: (ms: number) => () => void;
  /** Default {@link RESTART_FRAMES}. */
  restartFrames?: number;
}

/** How often the worker copies the WAL into the database file. */
export const CHECKPOINT_INTERVAL_MS = 200;
/**
 * WAL pages (4 KiB each) beyond which the server's connection checkpoints too: 32 MiB, the size
 * the WAL file is cut back to (`WAL_SIZE_LIMIT_BYTES`).
 */
export const RESTART_FRAMES = 8192;
/**
 * How long the server's writes wait at most for the worker to copy the rest of the WAL. A worker
 * that is not done by then leaves the WAL as it is; its next report tries again.
 */
export const RESTART_PAUSE_MS = 100;
/** Settles after which a server starts its checkpoint worker (see {@link createCheckpointing}). */
export const START_AFTER_WRITES = 500;

/**
 * Moves WAL checkpoints off the event loop. With SQLite's automatic checkpoint, the commit that
 * takes the WAL past 1000 pages copies them into the database file and waits for two fsyncs on
 * the committing thread: under load the server's event loop stalled for several milliseconds
 * about twice a second (measured here: 21 us of wall time per usage row at 17 rows per commit
 * against 12 without checkpoints; 123 against 79 us at one row per commit).
 *
 * Once the worker (checkpoint-worker.js) runs a passive checkpoint every `intervalMs` on its own
 * connection, `setAutomatic(false)` turns the automatic checkpoint off. Should the worker fail or
 * exit, `setAutomatic(true)` turns it back on, so that the WAL never grows without bound. The
 * worker does not keep the process alive.
 *
 * SQLite starts the WAL over from its beginning only when a write finds every page of it copied.
 * The worker's checkpoint copies what the WAL held when it began, while the server keeps writing:
 * under sustained writes it never catches up, and the WAL grew by the whole of what was written
 * (1.2 GB in 15 s of settles, measured). So when the WAL has grown past `restartFrames` pages,
 * the worker says so, the server's batched writes pause (`pauseWrites`, at most
 * {@link RESTART_PAUSE_MS}; its event loop goes on) while the worker copies the rest, and the next
 * write starts the WAL over (and cuts the file back to `journal_size_limit`). A checkpoint on the
 * server's own connection would do the same, with the copying and a disk flush on its event loop.
 */
export async function startCheckpointer(options: CheckpointerOptions): Promise<Checkpointer> {
  const worker = new Worker(new URL("./checkpoint-worker.js", import.meta.url), {
    workerData: {
      file: options.file,
      intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS,
      restartFrames: options.restartFrames ?? RESTART_FRAMES,
    },
  });
  worker.unref();
  // Listened for from the start: a worker that failed may have exited long before `stop`.
  const exited = new Promise<void>((resolve) => worker.once("exit", () => resolve()));
  let stopping = false;
  let automatic = true;
  /** Set while the server's writes wait for the worker's checkpoint. */
  let resumeWrites: (() => void) | undefined;
  const resume = () => {
    resumeWrites?.();
    resumeWrites = undefined;
  };
  const fallBack = () => {
    resume();
    if (automatic) return;
    automatic = true;
    options.setAutomatic(true);
  };
  const ready = new Promise<boolean>((resolve) => {
    worker.on("message", (message: CheckpointWorkerMessage) => {
      if (message.kind === "wal-large") {
        if (resumeWrites !== undefined || options.pauseWrites === undefined) return;
        resumeWrites = options.pauseWrites(RESTART_PAUSE_MS);
        worker.postMessage("checkpoint");
        return;
      }
      if (message.kind === "checkpointed") {
        resume();
        return;
      }
      resolve(message.kind === "ready");
      if (message.kind === "failed") fallBack();
    });
    worker.on("error", () => {
      resolve(false);
      fallBack();
    });
    worker.on("exit", () => {
      resolve(false);
      if (!stopping) fallBack();
    });
  });
  if (await ready) {
    automatic = false;
    options.setAutomatic(false);
  }
  return {
    async stop() {
      if (stopping) return;
      stopping = true;
      fallBack();
      // Unreferenced, the worker would let a process that waits for nothing else exit first.
      worker.ref();
      worker.postMessage("stop");
      await exited;
    },
  };
}

/** How long a checkpoint worker waits without a write before it stops (see createCheckpointing). */
export const STOP_WHEN_IDLE_MS = 60_000;

/** A server's checkpoints: SQLite's own until the writes are sustained, then a worker's. */
export interface Checkpointing {
  /** Counts one settle; the worker starts at the {@link START_AFTER_WRITES}th. */
  noteWrite(): void;
  /** Stops the worker, if it started. */
  stop(): Promise<void>;
}

/**
 * Starts {@link startCheckpointer} only once the server has settled `startAfterWrites` requests,
 * and stops it once a whole `stopWhenIdleMs` went by without a write (counting starts over): a
 * worker thread costs about 21 MB of RSS, which an idle server (and a test's) does without. An
 * idle server that had served kept it for good, and sat above SPEC section 10's 150 MB.
 */
export function createCheckpointing(
  options: CheckpointerOptions & { startAfterWrites?: number; stopWhenIdleMs?: number },
): Checkpointing {
  const threshold = options.startAfterWrites ?? START_AFTER_WRITES;
  const idleMs = options.stopWhenIdleMs ?? STOP_WHEN_IDLE_MS;
  let writes = 0;
  let started: Promise<Checkpointer | undefined> | undefined;
  /** A worker being stopped for idleness: the next one starts once it has gone. */
  let stopping: Promise<void> = Promise.resolve();
  let stopped = false;
  let wroteSinceCheck = false;
  let idleCheck: NodeJS.Timeout | undefined;
  const stopWhenIdle = () => {
    if (wroteSinceCheck) {
      wroteSinceCheck = false;
      return;
    }
    clearInterval(idleCheck);
    const running = started;
    started = undefined;
    writes = 0;
    stopping = (async () => {
      await (await running)?.stop();
    })().catch(() => {
      // Its stop fell back to SQLite's own checkpoints first; nothing more to do.
    });
  };
  return {
    noteWrite() {
      wroteSinceCheck = true;
      if (started !== undefined || stopped) return;
      writes += 1;
      if (writes < threshold) return;
      started = stopping.then(() => startCheckpointer(options)).catch(() => undefined);
      idleCheck = setInterval(stopWhenIdle, idleMs);
      idleCheck.unref();
    },
    async stop() {
      stopped = true;
      clearInterval(idleCheck);
      await stopping;
      await (await started)?.stop();
    },
  };
}
