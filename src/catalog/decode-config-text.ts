/**
 * The text of a config file's bytes, which must be UTF-8 (a UTF-8 byte-order mark is dropped).
 * Read as UTF-8 with replacement characters, a Latin-1 `id: "café"` became the model `caf\uFFFD`
 * at start and on every reload, and a UTF-16 file a "must be a YAML mapping" message quoting
 * garbage: the file is refused instead, naming the line and byte that are not UTF-8, and UTF-16
 * by name. Never quotes the file's text, which may hold keys.
 */

export type DecodedConfigText = { ok: true; text: string } | { ok: false; problem: string };

const SAVE_AS_UTF8 = "save it as UTF-8 (in most editors: Save As, Encoding: UTF-8)";

export function decodeConfigText(bytes: Uint8Array): DecodedConfigText {
  const utf16 = nameUtf16(bytes);
  if (utf16 !== undefined) {
    return { ok: false, problem: `is ${utf16}, not UTF-8; ${SAVE_AS_UTF8}` };
  }
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    const offset = findInvalidUtf8(bytes);
    const where =
      offset === undefined
        ? "it holds bytes that are not UTF-8"
        : `line ${lineOfOffset(bytes, offset)} holds the byte 0x${bytes[offset]!.toString(16).toUpperCase().padStart(2, "0")} (byte offset ${offset} in the file), which is not UTF-8 there`;
    return {
      ok: false,
      problem: `is not UTF-8: ${where}. Was it saved as Latin-1 or Windows-1252? ${capitalize(SAVE_AS_UTF8)}`,
    };
  }
  const nul = text.indexOf("\0");
  if (nul !== -1) {
    // UTF-16 without a byte-order mark decodes as UTF-8 with a NUL beside every ASCII character;
    // YAML allows no NUL anywhere.
    return {
      ok: false,
      problem: `holds a NUL character on line ${countLines(text, nul)}, which YAML does not allow: if it was saved as UTF-16 (without a byte-order mark), ${SAVE_AS_UTF8}`,
    };
  }
  return { ok: true, text };
}

/** "UTF-16 (little-endian, ...)" when the file starts with a UTF-16 or UTF-32 byte-order mark. */
function nameUtf16(bytes: Uint8Array): string | undefined {
  const [first, second, third, fourth] = bytes;
  if (first === 0xff && second === 0xfe) {
    return third === 0 && fourth === 0
      ? "UTF-32 (it starts with the byte-order mark FF FE 00 00)"
      : "UTF-16 (little-endian: it starts with the byte-order mark FF FE)";
  }
  if (first === 0xfe && second === 0xff)
    return "UTF-16 (big-endian: it starts with the byte-order mark FE FF)";
  if (first === 0 && second === 0 && third === 0xfe && fourth === 0xff) {
    return "UTF-32 (it starts with the byte-order mark 00 00 FE FF)";
  }
  return undefined;
}

/**
 * The offset of the first byte that starts no valid UTF-8 sequence (a Latin-1 `é`, 0xE9, followed
 * by no continuation bytes; overlong forms, surrogates and code points past U+10FFFF, which
 * TextDecoder refuses too), or `undefined` when there is none.
 */
function findInvalidUtf8(bytes: Uint8Array): number | undefined {
  let index = 0;
  while (index < bytes.length) {
    const lead = bytes[index]!;
    if (lead < 0x80) {
      index += 1;
      continue;
    }
    const following =
      lead >= 0xc2 && lead <= 0xdf
        ? 1
        : lead >= 0xe0 && lead <= 0xef
          ? 2
          : lead >= 0xf0 && lead <= 0xf4
            ? 3
            : 0;
    if (following === 0) return index;
    const low = lead === 0xe0 ? 0xa0 : lead === 0xf0 ? 0x90 : 0x80;
    const high = lead === 0xed ? 0x9f : lead === 0xf4 ? 0x8f : 0xbf;
    for (let step = 1; step <= following; step++) {
      const byte = bytes[index + step];
      if (byte === undefined) return index;
      const [min, max] = step === 1 ? [low, high] : [0x80, 0xbf];
      if (byte < min || byte > max) return index;
    }
    index += following + 1;
  }
  return undefined;
}

function lineOfOffset(bytes: Uint8Array, offset: number): number {
  let line = 1;
  for (let index = 0; index < offset; index++) if (bytes[index] === 0x0a) line += 1;
  return line;
}

function countLines(text: string, end: number): number {
  let line = 1;
  for (let index = text.indexOf("\n"); index !== -1 && index < end; index = text.indexOf("\n", index + 1))
    line += 1;
  return line;
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
