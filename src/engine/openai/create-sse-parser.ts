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
  return new EventStreamParser();
}

/** A class, not a closure: one per upstream answer, and a getter in an object literal costs a runtime call. */
class EventStreamParser implements SseParser {
  /**
   * The line not ended yet, in the pieces it came in: only new text is searched for line ends
   * and a long line is joined once, so a line that arrives in many pieces costs linear time.
   */
  #partial: string[] = [];
  #partialLength = 0;
  #data: string[] = [];
  /** The characters in `#data`. */
  #dataLength = 0;
  #event: string | undefined;
  /** A `\r` ended the last piece: a `\n` starting the next one belongs to it. */
  #pendingCarriageReturn = false;

  get pendingLength(): number {
    return this.#partialLength + this.#dataLength;
  }

  push(text: string): ServerSentEvent[] {
    const events: ServerSentEvent[] = [];
    // An empty piece (a decoder holding half a character) must not forget a pending "\r".
    if (text === "") return events;
    let start = 0;
    if (this.#pendingCarriageReturn && text.charCodeAt(0) === 10) start = 1;
    this.#pendingCarriageReturn = false;
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
          this.#pendingCarriageReturn = true;
          next = carriage + 1;
        } else {
          next = text.charCodeAt(carriage + 1) === 10 ? carriage + 2 : carriage + 1;
        }
      }
      this.#readLine(this.#takeLine(text.slice(start, end)), events);
      start = next;
    }
    if (start < text.length) {
      this.#partial.push(start === 0 ? text : text.slice(start));
      this.#partialLength += text.length - start;
    }
    return events;
  }

  end(): ServerSentEvent | undefined {
    const events: ServerSentEvent[] = [];
    if (this.#partialLength > 0) this.#readLine(this.#takeLine(""), events);
    this.#dispatch(events);
    return events[0];
  }

  #dispatch(events: ServerSentEvent[]): void {
    const data = this.#data;
    if (data.length > 0)
      events.push({ event: this.#event, data: data.length === 1 ? (data[0] ?? "") : data.join("\n") });
    this.#data = [];
    this.#dataLength = 0;
    this.#event = undefined;
  }

  #readLine(line: string, events: ServerSentEvent[]): void {
    if (line === "") {
      this.#dispatch(events);
      return;
    }
    const colon = line.indexOf(":");
    if (colon === 0) return;
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === "data" || field === "error") {
      this.#data.push(value);
      this.#dataLength += value.length;
      if (field === "error") this.#event = "error";
    } else if (field === "event") this.#event = value;
  }

  /** The unfinished line held so far, followed by `tail`; forgets it. */
  #takeLine(tail: string): string {
    if (this.#partial.length === 0) return tail;
    this.#partial.push(tail);
    const line = this.#partial.join("");
    this.#partial = [];
    this.#partialLength = 0;
    return line;
  }
}
