/**
 * The deepest nesting of arrays and objects a request body may have. A chat request needs a
 * handful of levels, and a JSON Schema in it at most 64 (convert-chat-request.ts refuses deeper
 * ones); JSON.parse itself would take millions, and a body of nested brackets under the size
 * limit cost 225 MB of heap and seconds of a blocked event loop per request (a few at once ran
 * the server out of memory), in fields the server then ignores.
 */
export const MAX_JSON_DEPTH = 128;

/**
 * Whether `text` nests arrays and objects deeper than `maxDepth`, read with JSON's rules for
 * strings (brackets inside them do not count) in one pass and no allocation, before parsing.
 * Malformed text is left to the parser to refuse.
 */
export function exceedsJsonDepth(text: string, maxDepth = MAX_JSON_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const code = text.charCodeAt(index);
    if (inString) {
      if (code === 0x5c) index++;
      else if (code === 0x22) inString = false;
    } else if (code === 0x22) inString = true;
    else if (code === 0x5b || code === 0x7b) {
      depth++;
      if (depth > maxDepth) return true;
    } else if (code === 0x5d || code === 0x7d) depth--;
  }
  return false;
}
