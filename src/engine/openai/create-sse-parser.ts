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
  /** The event's first data line; later ones (rare) go to `#moreData`: no array per event. */
  #firstData: string | undefined;
  #moreData: string[] | undefined;
  /** The characters in the data lines. */
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
    // Likewise the next ":", which ends a line's field name.
    let colon = text.indexOf(":", start);
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
      if (this.#partial.length === 0) {
        if (colon !== -1 && colon < start) colon = text.indexOf(":", start);
        this.#readLine(text, start, end, colon, events);
      } else {
        const line = this.#takeLine(text.slice(start, end));
        this.#readLine(line, 0, line.length, line.indexOf(":"), events);
      }
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
    if (this.#partialLength > 0) {
      const line = this.#takeLine("");
      this.#readLine(line, 0, line.length, line.indexOf(":"), events);
    }
    this.#dispatch(events);
    return events[0];
  }

  #dispatch(events: ServerSentEvent[]): void {
    const first = this.#firstData;
    if (first !== undefined) {
      const more = this.#moreData;
      events.push({ event: this.#event, data: more === undefined ? first : [first, ...more].join("\n") });
    }
    this.#firstData = undefined;
    this.#moreData = undefined;
    this.#dataLength = 0;
    this.#event = undefined;
  }

  /**
   * Reads the line `text[start, end)`, `colon` the first ":" at or after `start` (-1: none): sliced
   * once, for its value, and not at all for its field.
   */
  #readLine(text: string, start: number, end: number, colon: number, events: ServerSentEvent[]): void {
    if (start === end) {
      this.#dispatch(events);
      return;
    }
    if (colon === start) return;
    const fieldEnd = colon === -1 || colon >= end ? end : colon;
    let valueStart = fieldEnd === end ? end : fieldEnd + 1;
    if (valueStart < end && text.charCodeAt(valueStart) === 32) valueStart++;
    const fieldLength = fieldEnd - start;
    const isData = fieldLength === 4 && text.startsWith("data", start);
    const isError = !isData && fieldLength === 5 && text.startsWith("error", start);
    if (isData || isError) {
      const value = text.slice(valueStart, end);
      if (this.#firstData === undefined) this.#firstData = value;
      else if (this.#moreData === undefined) this.#moreData = [value];
      else this.#moreData.push(value);
      this.#dataLength += value.length;
      if (isError) this.#event = "error";
    } else if (fieldLength === 5 && text.startsWith("event", start))
      this.#event = text.slice(valueStart, end);
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
