/** One Server-Sent Event: its `event` name (`undefined` for the default) and its data lines joined. */
export interface ServerSentEvent {
  event: string | undefined;
  data: string;
}

/** An incremental parser: feed it text as it arrives, get the events that text completed. */
export interface SseParser {
  /** Parses `text` (the next piece of the stream) and returns the events it completed. */
  push(text: string): ServerSentEvent[];
  /** The event left when the stream ended without a blank line after it, if any. */
  end(): ServerSentEvent | undefined;
  /**
   * Characters held for the event not complete yet (its data lines and the unfinished line):
   * what an upstream that never ends a line or an event makes grow, for the caller to bound.
   */
  readonly pendingLength: number;
}

/**
 * Parses `text/event-stream` as the HTML standard says: lines end in `\n`, `\r\n` or `\r`; a
 * blank line dispatches the event; `data:` lines are joined with `\n`; one space after the colon
 * is dropped; comments (`:`), `id:` and `retry:` are ignored; events without data are dropped.
 * (The leading byte order mark the standard drops is dropped by the UTF-8 decoder, as the
 * standard's own decoding does: start-upstream-call.ts.)
 *
 * One field beyond the standard: llama.cpp's server sends a stream's error as `error: {json}`,
 * which a standard parser drops (the client would see a stream that ended with nothing); such a
 * line is read as `event: error` with that data, the way other servers send theirs.
 */
export function createSseParser(): SseParser {
  /**
   * The line not ended yet, in the pieces it came in: only new text is searched for line ends
   * and a long line is joined once, so a line that arrives in many pieces costs linear time.
   */
  let partial: string[] = [];
  let partialLength = 0;
  let data: string[] = [];
  /** The characters in `data`. */
  let dataLength = 0;
  let event: string | undefined;
  /** A `\r` ended the last piece: a `\n` starting the next one belongs to it. */
  let pendingCarriageReturn = false;

  const dispatch = (events: ServerSentEvent[]) => {
    if (data.length > 0) events.push({ event, data: data.length === 1 ? (data[0] ?? "") : data.join("\n") });
    data = [];
    dataLength = 0;
    event = undefined;
  };

  const readLine = (line: string, events: ServerSentEvent[]) => {
    if (line === "") {
      dispatch(events);
      return;
    }
    const colon = line.indexOf(":");
    if (colon === 0) return;
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === "data" || field === "error") {
      data.push(value);
      dataLength += value.length;
      if (field === "error") event = "error";
    } else if (field === "event") event = value;
  };

  /** The unfinished line held so far, followed by `tail`; forgets it. */
  const takeLine = (tail: string): string => {
    if (partial.length === 0) return tail;
    partial.push(tail);
    const line = partial.join("");
    partial = [];
    partialLength = 0;
    return line;
  };

  return {
    push(text) {
      const events: ServerSentEvent[] = [];
      // An empty piece (a decoder holding half a character) must not forget a pending "\r".
      if (text === "") return events;
      let start = 0;
      if (pendingCarriageReturn && text.charCodeAt(0) === 10) start = 1;
      pendingCarriageReturn = false;
      // Most streams use "\n" only: look for "\r" again only after passing the last one found.
      let carriage = text.indexOf("\r", start);
      for (;;) {
        const newline = text.indexOf("\n", start);
        if (carriage !== -1 && carriage < start) carriage = text.indexOf("\r", start);
        if (newline === -1 && carriage === -1) break;
        let end: number;
        let next: number;
        if (carriage === -1 || (newline !== -1 && newline < carriage)) {
          end = newline;
          next = newline + 1;
        } else {
          end = carriage;
          if (carriage + 1 === text.length) {
            pendingCarriageReturn = true;
            next = carriage + 1;
          } else {
            next = text.charCodeAt(carriage + 1) === 10 ? carriage + 2 : carriage + 1;
          }
        }
        readLine(takeLine(text.slice(start, end)), events);
        start = next;
      }
      if (start < text.length) {
        partial.push(start === 0 ? text : text.slice(start));
        partialLength += text.length - start;
      }
      return events;
    },
    end() {
      const events: ServerSentEvent[] = [];
      if (partialLength > 0) readLine(takeLine(""), events);
      dispatch(events);
      return events[0];
    },
    get pendingLength() {
      return partialLength + dataLength;
    },
  };
}
