import { randomUUID } from "node:crypto";
import { link, open, readFile, rename, rm, stat, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import { isProcessRunning } from "../../process/is-process-running.ts";

/** A held lock; `release()` removes it. */
export interface DownloadLock {
  release(): Promise<void>;
}

export interface AcquireDownloadLockOptions {
  /** The lock file, such as `MODEL.gguf.lock`. */
  path: string;
  signal?: AbortSignal | undefined;
  /** Called once when the lock is held by someone else and the caller starts waiting. */
  onWait?: () => void;
  /** A lock not refreshed for this long belongs to a process that died. Default 30 000. */
  staleMilliseconds?: number;
  /** How often a waiter looks again. Default 1000. */
  pollMilliseconds?: number;
}

/**
 * A lock between processes (replicas sharing a models volume) so that one of them downloads a
 * model while the others wait: the lock file is created exclusively with its holder's
 * `hostname pid`, and its holder touches it every few seconds. A lock whose holder ran on this
 * machine and is gone (a pull stopped with Ctrl-C or killed) is taken over at once; any other
 * lock left untouched for `staleMilliseconds` (a holder on another machine crashed) is taken
 * over then. Within one process, downloads of the same file are already shared.
 */
export async function acquireDownloadLock(options: AcquireDownloadLockOptions): Promise<DownloadLock> {
  const staleMilliseconds = options.staleMilliseconds ?? 30_000;
  const pollMilliseconds = options.pollMilliseconds ?? 1000;
  let waiting = false;
  for (;;) {
    options.signal?.throwIfAborted();
    try {
      const file = await open(options.path, "wx");
      try {
        await file.writeFile(`${hostname()} ${process.pid}\n`);
      } finally {
        await file.close();
      }
      const heartbeat = setInterval(
        () => {
          const now = new Date();
          utimes(options.path, now, now).catch(() => {});
        },
        Math.max(10, Math.floor(staleMilliseconds / 4)),
      );
      heartbeat.unref();
      return {
        async release() {
          clearInterval(heartbeat);
          await rm(options.path, { force: true });
        },
      };
    } catch (error) {
      if (!isAlreadyExists(error)) throw error;
    }
    const abandoned = await readAbandonedLock(options.path, staleMilliseconds);
    if (abandoned !== undefined) {
      await takeOver(options.path, abandoned);
      continue;
    }
    if (!waiting) {
      waiting = true;
      options.onWait?.();
    }
    await delay(pollMilliseconds, undefined, { signal: options.signal });
  }
}

/**
 * The text of the lock file when its holder is gone (a process of this machine that no longer
 * runs, or one that stopped touching it), else `undefined`.
 */
async function readAbandonedLock(path: string, staleMilliseconds: number): Promise<string | undefined> {
  const held = await stat(path).catch(() => undefined);
  const text = await readFile(path, "utf8").catch(() => undefined);
  if (held === undefined || text === undefined) return undefined;
  if (Date.now() - held.mtimeMs > staleMilliseconds) return text;
  const holder = parseHolder(text);
  const gone = holder !== undefined && holder.host === hostname() && !isProcessRunning(holder.pid);
  return gone ? text : undefined;
}

/**
 * Removes an abandoned lock, and only that one: it is renamed away (one waiter wins), then
 * checked. If another waiter had already replaced it with its own live lock, that one is put
 * back, so two waiters that found the same abandoned lock never both download.
 */
async function takeOver(path: string, abandonedText: string): Promise<void> {
  const moved = `${path}.${process.pid}.${randomUUID()}.stale`;
  try {
    await rename(path, moved);
  } catch (error) {
    if (isNotFound(error)) return;
    throw error;
  }
  const movedText = await readFile(moved, "utf8").catch(() => undefined);
  if (movedText !== undefined && movedText !== abandonedText) {
    // A live lock: back in place unless yet another lock was made meanwhile.
    await link(moved, path).catch(() => {});
  }
  await rm(moved, { force: true });
}

/** The `hostname pid` a holder writes; `undefined` for a file still being written or not ours. */
function parseHolder(text: string): { host: string; pid: number } | undefined {
  const match = /^(\S+) ([1-9][0-9]{0,9})\n$/.exec(text);
  if (match === null) return undefined;
  return { host: match[1] as string, pid: Number(match[2]) };
}

function isAlreadyExists(error: unknown): boolean {
  return hasCode(error, "EEXIST");
}

function isNotFound(error: unknown): boolean {
  return hasCode(error, "ENOENT");
}

function hasCode(error: unknown, code: string): boolean {
  return typeof error === "object" && error !== null && "code" in error && error.code === code;
}
