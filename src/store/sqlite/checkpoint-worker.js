// @ts-check
/**
 * The worker thread of `startCheckpointer` (start-checkpointer.ts): on a connection of its own,
 * copies the WAL's pages into the database file every `intervalMs` with a passive checkpoint
 * (which never waits for, nor blocks, the server's reads and writes), until told to stop. When
 * the WAL holds `restartFrames` pages or more after a checkpoint, it tells the parent
 * (`wal-large`), which pauses its writes and asks for one more checkpoint (`checkpoint`): that
 * one copies the whole WAL, so that the server's next write starts it over (start-checkpointer.ts).
 *
 * Plain JavaScript, checked by tsc (`checkJs`): a worker that loads a .ts file starts Node's type
 * stripping again in its own thread, 17 MB more RSS than this file's 21 MB.
 */
import { DatabaseSync } from "node:sqlite";
import { parentPort, workerData } from "node:worker_threads";

/** @type {{ file: string; intervalMs: number; restartFrames: number }} */
const { file, intervalMs, restartFrames } = workerData;
const port = parentPort;
if (port === null) throw new Error("checkpoint-worker.js runs as a worker thread");

/** @type {DatabaseSync | undefined} */
let database;
/** @type {NodeJS.Timeout | undefined} */
let timer;
/** @type {(() => number) | undefined} */
let checkpoint;

function close() {
  clearInterval(timer);
  timer = undefined;
  if (database?.isOpen === true) database.close();
}

/** Tells the parent why, and ends the worker. @param {unknown} error */
function fail(error) {
  close();
  port?.postMessage({ kind: "failed", message: error instanceof Error ? error.message : String(error) });
  port?.close();
}

try {
  database = new DatabaseSync(file);
  const statement = database.prepare("PRAGMA wal_checkpoint(PASSIVE)");
  /** Checkpoints; returns the pages the WAL holds. */
  const run = () => {
    const result = /** @type {{ log: number | bigint } | undefined} */ (statement.get());
    return Number(result?.log ?? 0);
  };
  checkpoint = run;
  timer = setInterval(() => {
    try {
      const frames = run();
      if (frames >= restartFrames) port.postMessage({ kind: "wal-large", frames });
    } catch (error) {
      fail(error);
    }
  }, intervalMs);
  port.postMessage({ kind: "ready" });
} catch (error) {
  fail(error);
}

port.on("message", (message) => {
  if (message === "checkpoint") {
    try {
      checkpoint?.();
      port.postMessage({ kind: "checkpointed" });
    } catch (error) {
      fail(error);
    }
    return;
  }
  if (message !== "stop") return;
  close();
  port.close();
});
