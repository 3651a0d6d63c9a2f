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
}

/**
 * Parses `text/event-stream` as the HTML standard says: lines end in `\n`, `\r\n` or `\r`; a
 * blank line dispatches the event; `data:` lines are joined with `\n`; one space after the colon
 * is dropped; comments (`:`), `id:` and `retry:` are ignored; events without data are dropped.
 */
export function createSseParser(): SseParser {
  let buffer = "";
  let data: string[] = [];
  let event: string | undefined;
  /** A `\r` ended the last piece: a `\n` starting the next one belongs to it. */
  let pendingCarriageReturn = false;

  const dispatch = (events: ServerSentEvent[]) => {
    if (data.length > 0) events.push({ event, data: data.length === 1 ? (data[0] ?? "") : data.join("\n") });
    data = [];
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
    if (field === "data") data.push(value);
    else if (field === "event") event = value;
  };

  return {
    push(text) {
      const events: ServerSentEvent[] = [];
      let chunk = text;
      if (pendingCarriageReturn && chunk.charCodeAt(0) === 10) chunk = chunk.slice(1);
      pendingCarriageReturn = false;
      buffer += chunk;
      let start = 0;
      // Most streams use "\n" only: look for "\r" again only after passing the last one found.
      let carriage = buffer.indexOf("\r");
      for (;;) {
        const newline = buffer.indexOf("\n", start);
        if (carriage !== -1 && carriage < start) carriage = buffer.indexOf("\r", start);
        if (newline === -1 && carriage === -1) break;
        let end: number;
        let next: number;
        if (carriage === -1 || (newline !== -1 && newline < carriage)) {
          end = newline;
          next = newline + 1;
        } else {
          end = carriage;
          if (carriage + 1 === buffer.length) {
            pendingCarriageReturn = true;
            next = carriage + 1;
          } else {
            next = buffer.charCodeAt(carriage + 1) === 10 ? carriage + 2 : carriage + 1;
          }
        }
        readLine(buffer.slice(start, end), events);
        start = next;
      }
      buffer = start === 0 ? buffer : buffer.slice(start);
      return events;
    },
    end() {
      const events: ServerSentEvent[] = [];
      if (buffer !== "") readLine(buffer, events);
      buffer = "";
      dispatch(events);
      return events[0];
    },
  };
}
