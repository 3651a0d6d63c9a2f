import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";

/**
 * How long a client may leave what was sent to it unread before it counts as gone (nginx's
 * `send_timeout` is the same minute). A client that stops reading a stream would otherwise hold
 * its request, and a local model's sequence or an upstream connection, for as long as its socket
 * stays open.
 */
export const CLIENT_STALL_TIMEOUT_MS = 60_000;

/**
 * Writes to a response that may be closed by the client at any time, honouring backpressure:
 * resolves when the data is handed to the socket, and returns false once the client is gone.
 * A client that reads nothing for `stallTimeoutMs` while data waits for it is disconnected: its
 * connection is closed. What it reads counts, not only a `drain`: with megabytes of socket
 * buffers, a client reading steadily but slowly (16 KiB/s) never let the socket drain within the
 * minute, and was cut as if it read nothing (regression), as nginx's `send_timeout` would not. A
 * pipelined response queued behind an earlier one on its connection has no socket yet, and its
 * data waits for that one, not for the client: the time counts from when it gets the connection
 * (the stall timer used to run from the first write, and a stream queued behind one longer than
 * a minute was destroyed while still queued, then flushed cut short on a connection left open).
 */
export async function writeToClient(
  response: ServerResponse,
  data: string,
  stallTimeoutMs: number = CLIENT_STALL_TIMEOUT_MS,
): Promise<boolean> {
  if (response.destroyed || response.writableEnded) return false;
  if (data === "") return true;
  if (response.write(data)) return true;
  // Both listeners go once either event comes: a long stream to a slow client waits many times.
  await new Promise<void>((resolve) => {
    const reads = watchClientReads(response, stallTimeoutMs);
    const done = () => {
      reads.stop();
      response.off("drain", done);
      response.off("close", done);
      resolve();
    };
    response.on("drain", done);
    response.on("close", done);
  });
  return !response.destroyed;
}

/**
 * Watches a response that has been ended (a whole JSON answer) until the client has taken it: a
 * client that reads nothing of it for `stallTimeoutMs` is disconnected, as a stream's is by
 * {@link writeToClient}. Without this an unread answer held its memory (megabytes, for a long
 * answer) and its connection for as long as the client liked, and so did a request pipelined
 * behind it on that connection (a stream, its reservation and its upstream call): a queued
 * response's own stall only counts once it has the connection. The time counts from when the
 * response has the connection and starts again whenever the client has read some of it; an
 * answer the socket took whole (the common case) costs no listener and no timer.
 */
export function closeIfLeftUnread(
  response: ServerResponse,
  stallTimeoutMs: number = CLIENT_STALL_TIMEOUT_MS,
): void {
  if (response.writableFinished || response.destroyed) return;
  const socket = response.socket;
  if (socket !== null && socket.writableLength === 0) return;
  const reads = watchClientReads(response, stallTimeoutMs);
  const done = () => {
    reads.stop();
    response.off("finish", done);
    response.off("close", done);
  };
  response.on("finish", done);
  response.on("close", done);
}

/**
 * Ends an event stream and watches its tail as {@link closeIfLeftUnread} watches a whole answer:
 * each write of a stream returns once Node's buffer takes it, so a stream can end with its last
 * kilobytes (below the buffer's high-water mark) still waiting behind a client that stopped
 * reading, and no write left to time the wait. Such a connection, its file descriptor and its
 * megabytes of kernel buffers were held until the client went away (a review kept two for as
 * long as it watched, with a minute's stall timeout); Node's keep-alive timer never starts for a
 * response that has not finished.
 */
export function endEventStream(
  response: ServerResponse,
  stallTimeoutMs: number = CLIENT_STALL_TIMEOUT_MS,
): void {
  response.end();
  closeIfLeftUnread(response, stallTimeoutMs);
}

/**
 * Watches a response that is piped from a stream (the usage CSV export) until it is done: a
 * client that reads nothing for `stallTimeoutMs` while bytes wait for it is disconnected, as a
 * stream's is by {@link writeToClient}. A pipe only pauses at the high-water mark and waits for
 * `drain`, so a client that stopped reading held its connection, the export's page and its
 * reader for as long as its socket stayed open. Checked once a period: bytes waiting and none
 * taken since the last check (within two periods of the stall); none waiting (the store still
 * reading a page) is no stall.
 */
export function closeWhenStalled(
  response: ServerResponse,
  stallTimeoutMs: number = CLIENT_STALL_TIMEOUT_MS,
): void {
  if (response.destroyed || response.writableFinished) return;
  let unsent = 0;
  const check = setInterval(() => {
    const socket = response.socket;
    if (socket === null) return;
    const queued = unsentBytes(socket) + response.writableLength;
    if (queued > 0 && queued === unsent) socket.destroy();
    unsent = queued;
  }, stallTimeoutMs);
  check.unref();
  response.once("close", () => clearInterval(check));
}

/**
 * Watches what `response`'s client takes of the bytes queued for it, from when the response has
 * its connection (a pipelined one waits for the response before it): a client that took none of
 * them for `stallTimeoutMs` is disconnected (its connection destroyed); any byte taken starts the
 * time again. What the client has read shows in the bytes the socket still holds, as Node's own
 * socket timeout reads them, looked at {@link CHECKS_PER_STALL} times a period: the time counts
 * from the last look that saw them change, so the cut comes a quarter of a period at most after
 * the stall's end. (Looked at once a period, the first look came as a write was refused, while the
 * kernel still took bytes: the next saw a change, and a client that read nothing was cut after
 * two periods, two minutes.) Call `stop` once nothing waits for the client any more.
 */
function watchClientReads(response: ServerResponse, stallTimeoutMs: number): { stop(): void } {
  let timer: NodeJS.Timeout | undefined;
  let unsent = -1;
  let changedAt = 0;
  const period = stallTimeoutMs / CHECKS_PER_STALL;
  const check = () => {
    const connection = response.socket;
    if (connection === null) return;
    const queued = unsentBytes(connection);
    const now = performance.now();
    if (queued !== unsent) {
      unsent = queued;
      changedAt = now;
    } else if (now - changedAt >= stallTimeoutMs) {
      connection.destroy();
      return;
    }
    timer = setTimeout(check, Math.min(period, changedAt + stallTimeoutMs - now));
  };
  if (response.socket !== null) check();
  else response.once("socket", check);
  return {
    stop() {
      clearTimeout(timer);
      response.off("socket", check);
    },
  };
}

/** How many times a stall's period {@link watchClientReads} looks at what its client took. */
const CHECKS_PER_STALL = 4;

/** The bytes `socket` has not handed to the kernel yet. */
export function unsentBytes(socket: Socket): number {
  return (
    (socket as { _handle?: { writeQueueSize?: number } | null })._handle?.writeQueueSize ??
    socket.writableLength
  );
}
