import { randomUUID } from "node:crypto";
import { link, open, readFile, readlink, rename, rm, stat, utimes } from "node:fs/promises";
import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import { isProcessRunning } from "../../process/is-process-running.ts";

/** A held lock. */
export interface DownloadLock {
  /** Whether the lock file still names this holder (nobody took it over). */
  isHeld(): Promise<boolean>;
  /** Removes the lock file if it still names this holder; a lock taken over is left to its new holder. */
  release(): Promise<void>;
}

export interface AcquireDownloadLockOptions {
  /** The lock file, such as `MODEL.gguf.lock`. */
  path: string;
  signal?: AbortSignal | undefined;
  /** Called once when the lock is held by someone else and the caller starts waiting. */
  onWait?: () => void;
  /**
   * A lock of another machine not refreshed for this long belongs to a process that died.
   * Default 30 000.
   */
  staleMilliseconds?: number;
  /** How often a waiter looks again. Default 1000. */
  pollMilliseconds?: number;
}

/**
 * A lock between processes (replicas sharing a models volume) so that one of them downloads a
 * model while the others wait: the lock file is created exclusively with its holder's
 * `hostname pid start token namespace` (`start` tells the process from a later one given the same
 * id; `token` tells this holder from any other; `namespace`, its PID namespace, tells containers
 * apart that share a hostname, whose process ids mean nothing to each other: a compose `run` of a
 * service, replicas on the host's network), and its holder touches it every few seconds. A lock
 * of a process of this machine (and PID namespace) is taken over as soon as that process is gone (a pull stopped
 * with Ctrl-C or killed, or a restarted container whose new process got the same id), and never
 * while it runs, however long it has not touched the lock (a pull paused with Ctrl-Z or
 * `docker pause`). The processes of another machine cannot be looked up from here: such a lock is
 * taken over when left untouched for `staleMilliseconds` (its holder crashed). Within one process,
 * downloads of the same file are already shared.
 */
export async function acquireDownloadLock(options: AcquireDownloadLockOptions): Promise<DownloadLock> {
  const staleMilliseconds = options.staleMilliseconds ?? 30_000;
  const pollMilliseconds = options.pollMilliseconds ?? 1000;
  const [start, namespace] = await Promise.all([readProcessStart(process.pid), readPidNamespace()]);
  let waiting = false;
  for (;;) {
    options.signal?.throwIfAborted();
    const text = `${hostname()} ${process.pid} ${start ?? "-"} ${randomUUID()} ${namespace ?? "-"}\n`;
    try {
      const file = await open(options.path, "wx");
      try {
        await file.writeFile(text);
      } finally {
        await file.close();
      }
      return holdLock(options.path, text, staleMilliseconds);
    } catch (error) {
      if (!isAlreadyExists(error)) throw error;
    }
    const abandoned = await readAbandonedLock(options.path, staleMilliseconds, namespace);
    if (abandoned !== undefined) {
      await removeLock(options.path, abandoned);
      continue;
    }
    if (!waiting) {
      waiting = true;
      options.onWait?.();
    }
    await delay(pollMilliseconds, undefined, { signal: options.signal });
  }
}

/** The lock just created with `text`, touched every few seconds until released. */
function holdLock(path: string, text: string, staleMilliseconds: number): DownloadLock {
  const heartbeat = setInterval(
    () => {
      const now = new Date();
      utimes(path, now, now).catch(() => {});
    },
    Math.max(10, Math.floor(staleMilliseconds / 4)),
  );
  heartbeat.unref();
  return {
    isHeld: async () => (await readFile(path, "utf8").catch(() => undefined)) === text,
    async release() {
      clearInterval(heartbeat);
      await removeLock(path, text);
    },
  };
}

/**
 * The text of the lock file when its holder is gone, else `undefined`: a holder of this machine
 * is gone when its process no longer runs, one of another machine (or a file not in the holder
 * format) when it stopped touching the lock.
 */
async function readAbandonedLock(
  path: string,
  staleMilliseconds: number,
  namespace: string | undefined,
): Promise<string | undefined> {
  const held = await stat(path).catch(() => undefined);
  const text = await readFile(path, "utf8").catch(() => undefined);
  if (held === undefined || text === undefined) return undefined;
  const holder = parseHolder(text);
  // A lock of an older version names no namespace: taken for this one's, as that version did.
  const local =
    holder !== undefined &&
    holder.host === hostname() &&
    (holder.namespace === undefined || holder.namespace === (namespace ?? "-"));
  if (holder !== undefined && local) {
    return (await isHolderGone(holder)) ? text : undefined;
  }
  return Date.now() - held.mtimeMs > staleMilliseconds ? text : undefined;
}

/**
 * Whether the process of a holder of this machine has ended. A process that runs under its id
 * but started at another time than the holder is a later one that got the same id.
 */
async function isHolderGone(holder: Holder): Promise<boolean> {
  if (!isProcessRunning(holder.pid)) return true;
  if (holder.start === undefined) return false;
  const start = await readProcessStart(holder.pid);
  return start !== undefined && start !== holder.start;
}

/**
 * Removes the lock file if it holds `text`, and only then: it is renamed away (one remover
 * wins), then checked. If it was another lock meanwhile (a live lock that replaced an abandoned
 * one, or the lock of a holder that took over this one), that one is put back, so two waiters
 * that found the same abandoned lock never both download, and a holder never removes a lock it
 * lost.
 */
async function removeLock(path: string, text: string): Promise<void> {
  const moved = `${path}.${process.pid}.${randomUUID()}.stale`;
  try {
    await rename(path, moved);
  } catch (error) {
    if (isNotFound(error)) return;
    throw error;
  }
  const movedText = await readFile(moved, "utf8").catch(() => undefined);
  if (movedText !== undefined && movedText !== text) {
    // Another lock: back in place unless yet another lock was made meanwhile.
    await link(moved, path).catch(() => {});
  }
  await rm(moved, { force: true });
}

/**
 * Who holds a lock; `start` is `undefined` when it is not known (a lock of an older version), and
 * `namespace` when the lock is of a version that did not write it.
 */
interface Holder {
  host: string;
  pid: number;
  start: string | undefined;
  namespace: string | undefined;
}

/** The holder a lock names; `undefined` for a file still being written or not ours. */
function parseHolder(text: string): Holder | undefined {
  const match = /^(\S+) ([1-9][0-9]{0,9})(?: (\S+) \S+(?: (\S+))?)?\n$/.exec(text);
  if (match === null) return undefined;
  const start = match[3] === undefined || match[3] === "-" ? undefined : match[3];
  return { host: match[1] as string, pid: Number(match[2]), start, namespace: match[4] };
}

/** This process's PID namespace (`pid:[4026531836]`); `undefined` where it cannot be read (not Linux). */
async function readPidNamespace(): Promise<string | undefined> {
  return await readlink("/proc/self/ns/pid").catch(() => undefined);
}

/**
 * When a process of this machine started, as `BOOT-ID/TICKS` (Linux `/proc`); `undefined` where
 * that cannot be read (another system, a process hidden from this user). The boot id keeps a
 * process of an earlier boot, with the same id and start tick, from passing for a later one.
 */
async function readProcessStart(pid: number): Promise<string | undefined> {
  const [stat, bootId] = await Promise.all([
    readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined),
    readFile("/proc/sys/kernel/random/boot_id", "utf8").catch(() => undefined),
  ]);
  if (stat === undefined || bootId === undefined) return undefined;
  // Field 22, counted after the command name, which may hold spaces and parentheses.
  const ticks = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
  return ticks === undefined || !/^\d+$/.test(ticks) ? undefined : `${bootId.trim()}/${ticks}`;
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
