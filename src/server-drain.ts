import type { IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { FastifyInstance } from "fastify";
import type { Logger } from "pino";
import type { InFlightRequests } from "./api/in-flight-requests.ts";
import type { FlushingResponses } from "./api/keep-flushing-responses.ts";
import { DRAIN_SETTLE_TIMEOUT_MS } from "./billing/billing-admission-options.ts";
import type { SettleEventLog } from "./billing/log-settle-events.ts";
import type { BillingAdmission } from "./billing/reserve-and-settle.ts";
import type { Cluster } from "./cluster/connect-cluster.ts";
import type { Store } from "./store/store.ts";

/**
 * How long a shutdown waits for running requests before it cuts them. With the cut streams'
 * flush and the settling after it, a shutdown ends within `docker stop`'s default 10 s: with a
 * 10 s grace the SIGKILL came first, and the streams it cut were never charged.
 */
export const DEFAULT_SHUTDOWN_GRACE_MS = 8_000;

/** How long `docker stop` (and `docker compose stop` without `stop_grace_period`) waits before SIGKILL. */
export const DOCKER_STOP_TIMEOUT_MS = 10_000;

/** How long cut requests have to send their last bytes before every connection is closed. */
export const CUT_STREAMS_FLUSH_MS = 1_000;

/**
 * How long a shutdown waits for the store, and then for the replica id's claim, to close. A
 * database that hangs (paused, partitioned) answers nothing: the pool's close waits for the
 * statements still out (each up to its 30 s timeout) and the claim's unlock for its own, and the
 * orchestrator's SIGKILL came first. By then every charge is settled or in the journal
 * (`BillingAdmission.beginClosing`); a statement still out that commits later is found settled
 * when the next start records the journal, and the claim's lock goes with the connection.
 */
export const STORE_CLOSE_WAIT_MS = 2_000;

/**
 * About how long a connection whose response ends during a shutdown stays open (Node adds its
 * keep-alive buffer, a second): a request its client sent meanwhile still gets its 503 in the
 * contract's shape, and then the connection closes, so the shutdown ends when its requests do
 * rather than when the grace period does.
 */
const DRAIN_KEEP_ALIVE_MS = 1_000;

/** How long a drain waits for a store that does not answer (tests shorten them). */
export interface DrainStoreWaits {
  /** A settle attempt: {@link DRAIN_SETTLE_TIMEOUT_MS}. */
  settleMs: number;
  /** The store's close, then the replica id claim's: {@link STORE_CLOSE_WAIT_MS}. */
  storeCloseMs: number;
}

const DEFAULT_STORE_WAITS: DrainStoreWaits = {
  settleMs: DRAIN_SETTLE_TIMEOUT_MS,
  storeCloseMs: STORE_CLOSE_WAIT_MS,
};

/**
 * A drain that ended with charges the store did not take (kept in the journal, or lost): its
 * message says which and where, in full; unlike a failure of the code, it has no stack to show.
 */
export class ChargesNotRecordedError extends Error {}

/** A server's way out: `RunningServer`'s `shutdown` and `close`, and whether one began. */
export interface ServerDrain {
  /** See `RunningServer.shutdown`: the first call drains; later ones return the same promise. */
  shutdown(options?: { graceMs?: number }): Promise<void>;
  /** See `RunningServer.close`: cuts a drain under way at once, or drains with no grace. */
  close(): Promise<void>;
  /** True once a shutdown began (a reload then does nothing). */
  isShuttingDown(): boolean;
}

/**
 * The shutdown of a started server, kept apart from its start. It takes what it stops, and
 * closes them in this order: the app (no new requests; running ones get their grace, then are
 * cut), the requests still settling, the admission (a last try for refused settlements), the
 * cluster, the store, and last the replica id's claim.
 */
export function createServerDrain(parts: {
  app: FastifyInstance;
  inFlight: InFlightRequests;
  admission: Pick<BillingAdmission, "close" | "beginClosing">;
  cluster: Pick<Cluster, "close">;
  store: Pick<Store, "close">;
  replicaClaim: { close(): Promise<void> } | undefined;
  settleEvents: SettleEventLog;
  logger: Logger;
  storeWaits?: DrainStoreWaits;
  /** The answers still being sent to their clients (keep-flushing-responses.ts). */
  flushing?: FlushingResponses;
}): ServerDrain {
  const { app, inFlight, admission, cluster, store, replicaClaim, settleEvents, logger } = parts;
  const unused = trackUnusedConnections(app);
  const { settleMs, storeCloseMs: storeCloseWaitMs } = parts.storeWaits ?? DEFAULT_STORE_WAITS;
  // After the cut, how long connections whose requests are still in flight are left open: time
  // for a settle attempt and the answer written after it to be flushed.
  const settledAnswerWaitMs = settleMs + CUT_STREAMS_FLUSH_MS;
  let stopped: Promise<void> | undefined;
  async function drain(graceMs: number): Promise<void> {
    const began = performance.now();
    // For the drain's last line: what it had to wait for, and what it gave up waiting for.
    const requestsRunning = inFlight.size;
    let requestsCut = 0;
    /** Answers whose connection the last pass closed while they were still being sent. */
    let answersCutWhileSending = 0;
    inFlight.beginClosing();
    // From now on every streamed charge is in the journal before the store is asked (a whole
    // answer's once its settle is given up on, just before it is sent), and a store that hangs is
    // waited for a few seconds at most: a SIGKILL at any point loses none.
    admission.beginClosing();
    // Node reads it as each response ends; connections idle already are closed by `app.close()`.
    app.server.keepAliveTimeout = Math.min(app.server.keepAliveTimeout, DRAIN_KEEP_ALIVE_MS);
    let closeConnections: NodeJS.Timeout | undefined;
    let cutDone = false;
    const cutRequests = () => {
      if (cutDone) return;
      cutDone = true;
      clearTimeout(cut);
      requestsCut = inFlight.size;
      inFlight.abortAll();
      // The cut streams end with their error event at once; then no connection may hold the
      // shutdown open, such as one on which a client (a load balancer's pre-connect) never
      // sent a request: those go. One whose request is still settling stays until it is
      // settled and answered (a non-streamed answer is written after its settle: a connection
      // closed under it was charged an answer it never got), then every one goes, a flush
      // later; and every one goes once a settle's time limit has passed in any case: a stream
      // whose client stopped reading waits in its write (up to the minute's stall timeout)
      // before it ends and is settled, and held the shutdown that long, its charge not even in
      // the journal for a SIGKILL meanwhile to find.
      closeConnections = setTimeout(() => {
        app.server.closeIdleConnections();
        let closed = false;
        const closeAll = () => {
          if (closed) return;
          closed = true;
          clearTimeout(closeConnections);
          answersCutWhileSending = logAnswersCut(parts.flushing, logger);
          app.server.closeAllConnections();
        };
        closeConnections = setTimeout(closeAll, settledAnswerWaitMs);
        void inFlight.whenIdle().then(() => {
          if (closed) return;
          clearTimeout(closeConnections);
          closeConnections = setTimeout(closeAll, CUT_STREAMS_FLUSH_MS);
        });
      }, CUT_STREAMS_FLUSH_MS);
    };
    const cut = setTimeout(cutRequests, graceMs);
    // A close asked for during the drain (a crash while shutting down) ends the grace at once.
    cutNow = cutRequests;
    try {
      const closing = app.close();
      // No longer listening: a connection that has not brought a request (a load balancer's
      // pre-connect, a head still arriving) goes now. Node's close leaves it open, and it held the
      // drain's end until the last pass, 9 s and more after the signal with nothing running,
      // past the 10 s `docker stop` gives.
      for (const socket of unused) socket.destroy();
      await closing;
      // The connections are closed; the requests they carried may still be settling.
      await inFlight.whenIdle();
    } finally {
      // Over: a close from now on has nothing to cut (and must not arm the connections' timer).
      cutNow = undefined;
      clearTimeout(cut);
      clearTimeout(closeConnections);
      // Settlements the store refused so far get a last try while it is still open.
      await admission.close();
      // After the app closed: settling the last requests still corrects their token buckets.
      await cluster.close();
      try {
        await closeWithin(store.close(), "the store", logger, storeCloseWaitMs);
      } finally {
        // Last: the id stays this server's until every request it served is settled.
        if (replicaClaim !== undefined)
          await closeWithin(replicaClaim.close(), "the replica id's claim", logger, storeCloseWaitMs);
      }
    }
    // The line that says the drain is over (`shutting down` said it began), and how it went.
    const { unrecordedCharges, keptCharges } = settleEvents;
    const summary = {
      ms: Math.round(performance.now() - began),
      graceMs,
      requestsRunning,
      requestsCut,
      ...(answersCutWhileSending > 0 ? { answersCutWhileSending } : {}),
      ...(unrecordedCharges > 0 ? { unrecordedCharges } : {}),
      ...(keptCharges > 0 ? { keptCharges } : {}),
    };
    if (unrecordedCharges + keptCharges > 0)
      logger.warn(summary, "shut down; some charges were not recorded");
    else logger.info(summary, "shut down");
    // Stopped all the same, but not cleanly: a supervisor sees a failure, not exit code 0.
    const failure = settleEvents.describeShutdownFailure();
    if (failure !== undefined) throw new ChargesNotRecordedError(failure);
  }
  function shutdown(shutdownOptions: { graceMs?: number } = {}): Promise<void> {
    stopped ??= drain(shutdownOptions.graceMs ?? DEFAULT_SHUTDOWN_GRACE_MS);
    return stopped;
  }
  /** Cuts the running requests of a drain under way at once (see `close`). */
  let cutNow: (() => void) | undefined;
  return {
    shutdown,
    close: () => {
      // A drain under way (a SIGTERM's, with its grace) is not waited out: its requests are cut
      // now, and charged, as a close's would be.
      cutNow?.();
      return shutdown({ graceMs: 0 });
    },
    isShuttingDown: () => stopped !== undefined,
  };
}

/**
 * The server's connections that have not brought a request yet, kept up to date from now on:
 * each leaves the set with its first request (a request's head read whole) or its close.
 */
function trackUnusedConnections(app: FastifyInstance): ReadonlySet<Socket> {
  const unused = new Set<Socket>();
  app.server.on("connection", (socket: Socket) => {
    unused.add(socket);
    socket.once("close", () => unused.delete(socket));
  });
  app.server.on("request", (request: IncomingMessage) => {
    unused.delete(request.socket);
  });
  return unused;
}

/**
 * Logs each answer the drain's last pass is about to cut while it is still being sent (a slow
 * client reading megabytes): it was charged for all that was generated (a whole answer in full,
 * as it was settled before it was sent; a stream for what its engine produced), and its client
 * gets part of it. Regression: nothing said so (the drain's line said `requestsCut: 0` for a
 * whole answer), so no one could make it good. Answers how many.
 */
function logAnswersCut(flushing: FlushingResponses | undefined, logger: Logger): number {
  const sending = flushing?.sending() ?? [];
  for (const { requestId, unsentBytes } of sending) {
    logger.warn(
      { reqId: requestId, unsentBytes },
      "the shutdown closed a connection while its answer was still being sent (a slow client): the client got part of what it was charged for; credit the account if that is owed (the request's usage row has the cost)",
    );
  }
  return sending.length;
}

/**
 * Waits for `closing` at most `waitMs` ({@link STORE_CLOSE_WAIT_MS}); a failure is the caller's,
 * a close that takes longer is logged and left to go on (the process exits after the drain).
 */
async function closeWithin(
  closing: Promise<void>,
  what: string,
  logger: Logger,
  waitMs: number,
): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<"timed out">((resolve) => {
    timer = setTimeout(() => resolve("timed out"), waitMs);
  });
  try {
    if ((await Promise.race([closing, timedOut])) === "timed out") {
      closing.catch(() => {});
      logger.warn(
        { waitedMs: waitMs },
        `${what} did not close in time (a database that does not answer); not waiting for it`,
      );
    }
  } finally {
    clearTimeout(timer);
  }
}
