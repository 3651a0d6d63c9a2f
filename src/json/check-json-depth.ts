/**
 * The deepest nesting of arrays and objects a request body may have. A chat request needs a
 * handful of levels, and a JSON Schema in it at most 64 (convert-chat-request.ts refuses deeper
 * ones); JSON.parse itself would take millions, and a body of nested brackets under the size
 * limit cost 225 MB of heap and seconds of a blocked event loop per request (a few at once ran
 * the server out of memory), in fields the server then ignores.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * The most arrays and objects a request body may hold in all. Parsed, each takes about 90 bytes
 * of heap where its text may take two (`{},`): a 7.4 MB body of empty objects in a field the
 * server ignores held 240 MB while its request ran, thirty times what the body budget counts
 * (body-budget.ts), and eight of them at once ran a 1 GB heap out of memory. A chat request holds
 * far fewer: a schema's entries are bounded at 20,000 a request, a message takes one or two.
 */
export const MAX_JSON_CONTAINERS = 250_000;

/**
 * Whether `text` nests arrays and objects deeper than `maxDepth`, read with JSON's rules for
 * strings (brackets inside them do not count) in one pass and no allocation, before parsing.
 * Malformed text is left to the parser to refuse.
 */
export function exceedsJsonDepth(text: string, maxDepth = MAX_JSON_DEPTH): boolean {
  return checkJsonShape(text, { maxDepth }) === "too deep";
}

/**
 * What `text` holds past the bounds, read as {@link exceedsJsonDepth} reads it: arrays and objects
 * nested deeper than `maxDepth` (`too deep`), or more of them than `maxContainers` (`too many`);
 * `undefined` within both.
 */
export function checkJsonShape(
  text: string,
  bounds: { maxDepth?: number; maxContainers?: number } = {},
): "too deep" | "too many" | undefined {
  const maxDepth = bounds.maxDepth ?? MAX_JSON_DEPTH;
  const maxContainers = bounds.maxContainers ?? Number.POSITIVE_INFINITY;
  let depth = 0;
  let containers = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 0x5c) index++;
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) inString = true;
    else if (code === 0x5b || code === 0x7b) {
      depth++;
      if (depth > maxDepth) return "too deep";
      containers++;
      if (containers > maxContainers) return "too many";
    } else if (code === 0x5d || code === 0x7d) depth--;
  }
  return undefined;
}
