/** Characters a terminal draws two columns wide: East Asian wide and fullwidth forms. */
const WIDE =
  /[\u1100-\u115f\u2e80-\u303e\u3041-\u33ff\u3400-\u4dbf\u4e00-\u9fff\ua000-\ua4cf\uac00-\ud7a3\uf900-\ufaff\ufe30-\ufe4f\uff00-\uff60\uffe0-\uffe6\u{20000}-\u{3fffd}]/u;

/** Emoji drawn as pictures (two columns), a text character made one by U+FE0F included. */
const EMOJI = /\p{Emoji_Presentation}|\uFE0F/u;

/** Marks and format characters that take no column of their own (accents, zero-width joiners). */
const ZERO_WIDTH = /^[\p{Mn}\p{Me}\p{Cf}]+$/u;

/** Made on first use: an `Intl.Segmenter` costs 2.6 MB of RSS, and a server loads this module. */
let graphemes: Intl.Segmenter | undefined;

/**
 * How many columns a terminal takes to draw `text`: each user-perceived character (grapheme)
 * counts 2 when it is wide (CJK, Hangul, fullwidth forms, emoji), 0 when it is only marks or
 * format characters, else 1. ASCII text is its length, without segmenting.
 */
export function displayWidth(text: string): number {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: ASCII, controls included, is one column per unit.
  if (/^[\u0000-\u007f]*$/.test(text)) return text.length;
  let width = 0;
  graphemes ??= new Intl.Segmenter(undefined, { granularity: "grapheme" });
  for (const { segment } of graphemes.segment(text)) {
    if (WIDE.test(segment) || EMOJI.test(segment)) width += 2;
    else if (!ZERO_WIDTH.test(segment)) width += 1;
  }
  return width;
}
